package server

import (
	"fmt"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// gateway.groups[].follow_redirects end to end: carrier-a's group has two
// members, the first tier's answers 302 naming the second, and the call
// goes there in the same attempt (RFC 3261 8.1.3.4), its Request-URI the
// Contact. Without the key, the same 302 reaches the caller as 480.
func TestE2EFollowRedirect(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, follow := range []bool{true, false} {
		t.Run(fmt.Sprint("follow_redirects=", follow), func(t *testing.T) {
			r := newCarrierPair(t, "member-1", "member-2")
			e := r.e2e
			e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d", "tcp://127.0.0.1:%[1]d"]
admin: { listen: "127.0.0.1:0" }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - name: carrier-a
      follow_redirects: %[5]v
      destinations:
        - { uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d", priority: 0 }
        - { uri: "sip:127.0.0.1:%[3]d", address: "127.0.0.1:%[3]d", priority: 1 }
lcr:
  static_routes: [{ prefix: "", routes: [{ carrier_id: carrier-a, gateway_group: carrier-a }] }]
cdr: { file: %[4]q }
`, e.port, r.a.addr().Port(), r.b.addr().Port(), e.cdrPath, follow), r.logs)
			e.caller = newUDPPeer(t, "caller", "127.0.0.1", e.sip)
			e.caller.forbid(carrierSecrets...)

			c := r.call(dialed, "")
			binv := c.invite(r.a, dialed)
			contact := fmt.Sprintf("sip:+%s@%s;user=phone", dialed, r.b.addr())
			b := parser.AppendResponse(nil, binv, 302, "Moved Temporarily", []byte("btag9"))
			r.a.send(string(parser.AppendBody(append(b, "Contact: <"+contact+">\r\n"...), "", nil)))
			r.a.expect("ACK "+string(binv.RequestURI())+" SIP/2.0", waitMsg)
			if !follow {
				c.final(480)
				r.b.expectNothing(quiet)
				if rec := e.cdrOf(c.u.callID); rec["final_code"] != 480.0 {
					t.Errorf("CDR %v", rec)
				}
				return
			}
			inv2 := r.b.expect("INVITE "+contact+" SIP/2.0", waitMsg)
			c1, c2 := cseqOf(t, binv), cseqOf(t, inv2)
			if hdr(inv2, parser.HeaderCallID) != hdr(binv, parser.HeaderCallID) || c2.Num != c1.Num+1 {
				t.Fatalf("the redirected INVITE is not the next request of the B-leg dialog:\n%s", inv2.Bytes())
			}
			c.answer(r.b, inv2)
			c.bye(r.b)
			e.waitMetric("sipedge_carrier_redirects_followed_total", 1)
			if rec := e.cdrOf(c.u.callID); rec["final_code"] != 200.0 || rec["carrier_id"] != "carrier-a" {
				t.Errorf("CDR %v", rec)
			}
		})
	}
}
