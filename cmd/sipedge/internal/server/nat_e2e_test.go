package server

import (
	"strings"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// trunks[].nat end to end: a caller whose Contact and Record-Route name
// private addresses it cannot be reached at gets the carrier's BYE at the
// address its INVITE came from, its Request-URI still the Contact. Without
// nat the BYE follows the route set (RFC 3261 12.2.1.1), to an address
// where nobody listens, and the caller hears nothing.
func TestE2ETrunkNAT(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, nat := range []bool{true, false} {
		name := "nat"
		if !nat {
			name = "no nat"
		}
		t.Run(name, func(t *testing.T) {
			trunk := `  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"], nat: true }`
			if !nat {
				trunk = `  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }`
			}
			r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA), trunks: trunk})
			c := &lcrCall{r: r, u: newUAC(r.caller, dialed)}
			inv := strings.Replace(c.fix(c.u.invite()), "Contact: "+c.u.contact(), "Contact: <sip:alice@127.0.0.3:9>", 1)
			inv = strings.Replace(inv, "<sip:rr.caller.example.org;lr>", "<sip:127.0.0.3:9;lr>", 1)
			r.caller.send(inv)
			r.caller.expect("SIP/2.0 100 Trying", waitMsg)
			binv := c.invite(r.a, dialed)
			c.answer(r.a, binv)
			r.a.send(uasRequest(t, r.a, binv, "BYE", 1))
			r.a.expect("SIP/2.0 200 OK", waitMsg)
			if !nat {
				r.caller.expectNothing(quiet)
				return
			}
			bye := r.caller.expect("BYE sip:alice@127.0.0.3:9 SIP/2.0", waitMsg)
			if got := hdr(bye, parser.HeaderRoute); got != "<sip:127.0.0.3:9;lr>" {
				t.Errorf("BYE Route %q, want the caller's route set", got)
			}
			r.caller.send(c.u.answer(bye, 200, "OK"))
			if n := r.metricWith("sipedge_requests_to_caller_total", `next_hop="nat"`); n != 1 {
				t.Errorf(`sipedge_requests_to_caller_total{next_hop="nat"} %v, want 1`, n)
			}
			checkCDR(t, r.cdrOf(c.u.callID), 200, "callee")
		})
	}
}
