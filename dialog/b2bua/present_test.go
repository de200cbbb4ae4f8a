package b2bua

import (
	"slices"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// Present says what the engine writes on the B-leg INVITE: for each route,
// a call is placed through the engine and its INVITE to the carrier read
// back; Present's Request-URI, To, From (but the caller's display name,
// which a dry run does not know), P-Asserted-Identity, Privacy and route
// headers must be the INVITE's.
func TestPresentIsWhatTheEngineSends(t *testing.T) {
	f := func(r route.Route, assert bool, wantWarnings ...string) {
		t.Helper()
		mod := func(c *Config) { c.AssertIdentity = assert }
		rg, m := shapedInviteWith(t, r, mod, "")
		d := reserveDial(t, &r)
		p := rg.e.cfg.Present([]byte("+13105550199"), []byte("12025550123"), &r, &d)

		var to, from parser.Address
		if err := m.To(&to); err != nil {
			t.Fatal(err)
		}
		if err := m.From(&from); err != nil {
			t.Fatal(err)
		}
		sent := map[string]string{
			"ruri": string(m.RequestURI()), "to": "<" + string(to.URI) + ">",
			"from": strings.TrimPrefix(strings.TrimSuffix(hdr(m, parser.HeaderFrom), ";tag="+string(from.Tag)), `"Alice" `),
			"pai":  hdr(m, parser.HeaderPAssertedIdentity), "privacy": hdr(m, parser.HeaderPrivacy),
		}
		got := map[string]string{"ruri": p.RequestURI, "to": p.To, "from": p.From, "pai": p.PAssertedIdentity, "privacy": p.Privacy}
		for k := range sent {
			if got[k] != sent[k] {
				t.Errorf("%+v: %s %q, the engine sent %q", r, k, got[k], sent[k])
			}
		}
		var headers []string
		for i := range m.NumHeaders() {
			h := m.HeaderAt(i)
			if _, ok := r.Headers[string(h.Name)]; ok && !identityHeaders.Has(h.Kind) { // the PAI is sipedge's
				headers = append(headers, string(h.Name)+": "+string(h.Value))
			}
		}
		if !slices.Equal(p.Headers, headers) {
			t.Errorf("%+v: headers %q, the engine sent %q", r, p.Headers, headers)
		}
		if !slices.Equal(p.Warnings, wantWarnings) {
			t.Errorf("%+v: warnings %q, want %q", r, p.Warnings, wantWarnings)
		}
	}
	a := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a"}
	with := func(mod func(*route.Route)) route.Route { r := a; mod(&r); return r }
	f(a, true)
	f(a, false)
	f(with(func(r *route.Route) { r.TechPrefix, r.NumberPolicy = "#31#", "e164" }), true)
	f(with(func(r *route.Route) { r.NumberPolicy = "national" }), true)
	f(with(func(r *route.Route) { r.NumberPolicy = "nope" }), true, `unknown number_policy "nope": the number is not shaped`)
	f(with(func(r *route.Route) { r.CallerID, r.CallerIDPresentation = "+14155550100", "restricted" }), true)
	f(with(func(r *route.Route) { r.CallerIDPresentation = "secret" }), true, `unknown caller_id_presentation "secret": treated as restricted`)
	f(with(func(r *route.Route) { r.RURI = "sip:+442071234567;npdi@carrier.example:5080;user=phone" }), true)
	f(with(func(r *route.Route) {
		r.Headers = map[string]string{"X-Account": "42", "X-Route-Tag": "gold", "P-Asserted-Identity": "<sip:x@y>"}
	}), true, "route header refused: identity goes through caller_id and caller_id_presentation: P-Asserted-Identity")
}

// reserveDial is the dial the rig's carrier plane makes of r.
func reserveDial(t *testing.T, r *route.Route) carrier.Dial {
	t.Helper()
	var d carrier.Dial
	if reason := enginerig.NewCarriers().Gateway(r, &d); reason != "" {
		t.Fatal(reason)
	}
	return d
}
