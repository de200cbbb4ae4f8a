package b2bua

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/route"
)

// Presented is what the B-leg INVITE to one carrier carries of a call's
// numbers and identity, as the engine writes it (Config.Present): a dry
// run's view of the carrier.
type Presented struct {
	RequestURI string // its Request-URI: the shaped number, tech prefix first, at the carrier's host
	To         string // its To, without tag
	From       string // its From, without tag: anonymous under CLIR
	// PAssertedIdentity and Privacy are the values of the headers sipedge
	// writes; "" when it writes none.
	PAssertedIdentity string
	Privacy           string
	// CallerID is the calling number presented (before CLIR hides it);
	// Restricted says the presentation is restricted (CLIR).
	CallerID   string
	Restricted bool
	// NumberPolicy names the number policy that shaped the numbers; ""
	// none.
	NumberPolicy string
	// Headers are the route's headers as written, "Name: value", in the
	// order written.
	Headers []string
	// Warnings are what a call to the carrier would log: an unknown
	// number_policy or caller_id_presentation, a route header refused.
	Warnings []string
}

// Present returns what the engine writes on the B-leg INVITE of a call
// whose numbers are caller and callee (as its trunk gave them:
// Trunk.Number) to route r dialled at d, by the same steps as a call's
// (shape, addressB, appendIdentity, the route's headers in order). A dry
// run knows no caller's INVITE: no display name, no Privacy of the
// caller's own. Any goroutine may call it; it allocates.
func (cfg *Config) Present(caller, callee []byte, r *route.Route, d *carrier.Dial) Presented {
	var p Presented
	policy, name, known := cfg.numberPolicy(r)
	if policy != nil {
		p.NumberPolicy = name
	}
	if !known {
		p.Warnings = append(p.Warnings, fmt.Sprintf("unknown number_policy %q: the number is not shaped", name))
	}
	var id identity
	cfg.shapeNumbers(&id, caller, callee, r, policy)
	if r != nil {
		restricted, known := presentation(r.CallerIDPresentation)
		if !known {
			p.Warnings = append(p.Warnings, fmt.Sprintf("unknown caller_id_presentation %q: treated as restricted", r.CallerIDPresentation))
		}
		id.anon = restricted
	}
	p.CallerID, p.Restricted = string(id.caller), id.anon
	var l leg
	l.peer = d.Peer
	addressB(&l, &id, r, d.URI, nil, cfg.Local.For(d.Peer.Transport), false)
	p.RequestURI, p.To, p.From = string(l.target), string(l.remoteURI), string(l.localURI)
	for _, line := range strings.Split(string(cfg.appendIdentity(nil, &id, d.Peer.Transport)), "\r\n") {
		if v, ok := strings.CutPrefix(line, "P-Asserted-Identity: "); ok {
			p.PAssertedIdentity = v
		} else if v, ok := strings.CutPrefix(line, "Privacy: "); ok {
			p.Privacy = v
		}
	}
	if r != nil {
		for _, name := range slices.Sorted(maps.Keys(r.Headers)) { // appendRouteHeaders' order
			value := r.Headers[name]
			if _, refused := routeHeader(name, value); refused != "" {
				p.Warnings = append(p.Warnings, refused+": "+name)
				continue
			}
			p.Headers = append(p.Headers, name+": "+value)
		}
	}
	return p
}
