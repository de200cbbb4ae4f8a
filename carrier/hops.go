package carrier

import (
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// hop is a next hop as a route writes it, read once: where its INVITE
// goes, or why it cannot go anywhere.
type hop struct {
	peer   transport.Peer
	uri    string // "sip:IP:port" and its transport (transport.Kind.URIParam)
	reason string // not "": undialable (route.ReasonUnresolvable)
}

// parseHop reads a next hop, "sip:[user@]host[:port][;params]" or
// "host[:port]", with parser.ParseURI. The host must be an IP literal:
// there is no DNS on a shard, and a name is skipped as unresolvable, as is
// port 0 (nothing listens there) and a sips: URI (no TLS to honour it
// with). A served transport parameter (";transport=tcp") selects its
// transport, any other is UDP (transport.URIDefault); the port defaults to
// the transport's (RFC 3261 19.1.2).
func parseHop(dest string) hop {
	undialable := hop{reason: route.ReasonUnresolvable}
	s := dest
	if !hasScheme(s) {
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
			s = "[" + s + "]" // an IPv6 address alone
		}
		s = "sip:" + s
	}
	b := []byte(s)
	var u parser.URI
	if parser.ParseURI(b, &u) != nil || u.Scheme != parser.SchemeSIP {
		return undialable
	}
	host := string(u.Host)
	if len(host) > 1 && host[0] == '[' {
		host = host[1 : len(host)-1]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return undialable
	}
	// Port is 0 both when absent and when written ":0": u.Host is a view
	// into b, and what follows it tells them apart.
	end := cap(b) - cap(u.Host) + len(u.Host)
	port := uint16(u.Port)
	if end < len(b) && b[end] == ':' && port == 0 {
		return undialable
	}
	k, ok := transport.FromURIParam(u.Param("transport"))
	if !ok || !k.Served() {
		k = transport.URIDefault
	}
	if port == 0 {
		port = k.DefaultPort()
	}
	h := hop{peer: transport.Peer{Addr: netip.AddrPortFrom(a.Unmap(), port), Transport: k}}
	h.uri = "sip:" + h.peer.Addr.String() + k.URIParam()
	return h
}

// hasScheme reports whether s starts with "sip:" or "sips:", in any case.
func hasScheme(s string) bool {
	return len(s) >= 4 && strings.EqualFold(s[:4], "sip:") || len(s) >= 5 && strings.EqualFold(s[:5], "sips:")
}

// HopAddr returns the address of a next hop as a route writes it
// (next_hop, or a ruri's host), false when it is not one a call can be
// sent to: for the flood guard's exemptions.
func HopAddr(dest string) (netip.Addr, bool) {
	h := parseHop(dest)
	return h.peer.Addr.Addr(), h.reason == ""
}

// maxHopCache bounds a shard's cache of parsed next hops; past it the
// cache starts over.
const maxHopCache = 1024

// dialledHops holds the addresses of the next hops calls were sent to
// whose route named no gateway group the plane knows: the API's next_hop
// and ruri routes. Their carriers answer and send in-dialog requests from
// there, so the flood guard must not ban them (a carrier is never banned);
// static routes' hops are exempt from the start. Read lock-free by every
// loop for every message from a source that is not otherwise exempt;
// replaced whole, under mu, when a new hop is dialled, which is rare. The
// API names them, so they are bounded.
type dialledHops struct {
	set  atomic.Pointer[map[netip.Addr]struct{}]
	mu   sync.Mutex
	full bool // guarded by mu: maxDialledHops reached, warned once
}

// maxDialledHops bounds dialledHops; past it, further hops are subject to
// the flood guard like any source, with a warning.
const maxDialledHops = 10000

// has reports whether a call was sent to a.
func (h *dialledHops) has(a netip.Addr) bool {
	m := h.set.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[a.Unmap()]
	return ok
}

// add records a call sent to a.
func (h *dialledHops) add(a netip.Addr, log *slog.Logger) {
	a = a.Unmap()
	if h.has(a) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.set.Load()
	var n map[netip.Addr]struct{}
	if old != nil {
		if _, ok := (*old)[a]; ok {
			return
		}
		if len(*old) >= maxDialledHops {
			if !h.full {
				h.full = true
				log.Warn("too many distinct next hops dialled: new ones are no longer exempt from the flood guard",
					"max", maxDialledHops, "addr", a.String())
			}
			return
		}
		n = make(map[netip.Addr]struct{}, len(*old)+1)
		for k := range *old {
			n[k] = struct{}{}
		}
	} else {
		n = make(map[netip.Addr]struct{}, 1)
	}
	n[a] = struct{}{}
	h.set.Store(&n)
}
