package b2bua

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// Responses to the caller go where RFC 3261 18.2.2 says: to the source
// address at the Via's sent-by port, or at the source port when the Via
// asks for rport (RFC 3581 4), and so do the 2xx's retransmissions. A
// caller sending from an ephemeral port listens on the port its Via names.
func TestRepliesGoWhereTheViaSays(t *testing.T) {
	ephemeral := netip.MustParseAddrPort("192.0.2.10:40000") // the Via names :5061 (caller)
	cases := []struct {
		name, rport string
		want, not   netip.AddrPort
	}{
		{"sent-by port", "", caller, ephemeral},
		{"rport", ";rport", ephemeral, caller},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			inv := strings.Replace(callerInvite("1", "a-call-1", "15551234"),
				"branch=z9hG4bKCALLER1", "branch=z9hG4bKCALLER1"+tc.rport, 1)
			r.recv(ephemeral, inv)
			r.expect(tc.want, "SIP/2.0 100 Trying")
			binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
			r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
			r.expect(tc.want, "SIP/2.0 180 Ringing")
			r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
			r.expect(tc.want, "SIP/2.0 200 OK")
			r.advance(600 * time.Millisecond) // T1: the 2xx again (RFC 3261 13.3.1.4)
			r.expect(tc.want, "SIP/2.0 200 OK")
			r.expect(tc.not)
		})
	}
}

// The Router sees the dialled number in E.164 when the trunk has a number
// policy (docs/design/lcr.md 2.7, the number before the lookup), and so does
// the carrier; the Router also gets the caller's To URI, and the INVITE's
// real source port, not the reply port of its Via.
func TestRouteRequest(t *testing.T) {
	r := newRig(t, func(c *Config) {
		c.Trunks[0].Normalize = &NumberPolicy{CountryCode: "44", NationalPrefix: "0"}
	})
	inner := r.e.env.Router
	var got route.Request
	var dialed, to string
	r.e.env.Router = routerFunc(func(q *route.Request) route.Decision {
		got, dialed, to = *q, string(q.Dialed), string(q.To)
		return inner.Route(q)
	})
	ephemeral := netip.MustParseAddrPort("192.0.2.10:40000")
	r.recv(ephemeral, callerInvite("1", "a-call-1", "02071234567"))
	r.expect(caller, "SIP/2.0 100 Trying") // the Via's port
	if dialed != "+442071234567" {
		t.Errorf("dialled %q, want +442071234567", dialed)
	}
	if to != "sip:02071234567@203.0.113.1" {
		t.Errorf("To %q", to)
	}
	if got.Source.Addr != ephemeral {
		t.Errorf("source %v, want %v", got.Source.Addr, ephemeral)
	}
	// The carrier gets the number in the form routing used (its route has
	// no number policy of its own).
	r.expect(carrierA, "INVITE sip:+442071234567@198.51.100.20:5070 SIP/2.0")
}

// A trunk with ForceRPort (a PBX behind NAT that does not ask for rport)
// is answered at the source port of its requests, as Kamailio's
// force_rport does: responses, 2xx retransmissions and the BYE.
func TestForceRPort(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Trunks[0].ForceRPort = true })
	nat := netip.MustParseAddrPort("192.0.2.10:40000") // the Via says :5061, no rport
	r.recv(nat, callerInvite("1", "a-call-1", "15551234"))
	r.expect(nat, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	aTag := tagOf(t, r.expect(nat, "SIP/2.0 200 OK")[0], parser.HeaderTo)
	r.advance(600 * time.Millisecond)
	r.expect(nat, "SIP/2.0 200 OK")
	r.recv(nat, ackFromCaller(aTag))
	r.take(carrierA) // the ACK
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 1))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.expect(nat, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	r.expect(caller) // nothing to the Via's port
}
