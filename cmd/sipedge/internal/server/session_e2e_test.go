package server

import (
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// b2bua.session_timer end to end (RFC 4028). In uphold the carrier's
// INVITE asks for sipedge's own session timer, and the caller, which
// supports timers, gets its leg's in the 200 with itself as the refresher.
// In relay (the default) a caller asking for less than Min-SE gets 422.
func TestE2ESessionTimer(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Run("uphold", func(t *testing.T) {
		r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA), b2bua: "session_timer: { mode: uphold, interval_secs: 600, min_se: 120 }"})
		c := r.call(dialed, "Session-Expires: 900\r\n")
		binv := c.invite(r.a, dialed)
		if hdr(binv, parser.HeaderSessionExpires) != "600" || hdr(binv, parser.HeaderMinSE) != "120" || !binv.HasOptionTag(parser.HeaderSupported, "timer") {
			t.Fatalf("the carrier's INVITE does not ask for sipedge's session timer:\n%s", binv.Bytes())
		}
		respond(r.a, binv, 200, "OK", carrierSDP)
		ok := r.caller.expect("SIP/2.0 200 OK", waitMsg)
		if hdr(ok, parser.HeaderSessionExpires) != "600;refresher=uac" || !ok.HasOptionTag(parser.HeaderRequire, "timer") {
			t.Fatalf("the caller's 200 (RFC 4028 9):\n%s", ok.Bytes())
		}
		c.u.toTag, c.u.target = tagOf(t, ok, parser.HeaderTo), contactURI(t, ok)
		r.caller.send(c.fix(c.u.request("ACK", 10, "")))
		r.a.expect("ACK sip:gw@carrier.example.net:5070", waitMsg)
		c.bye(r.a)
	})
	t.Run("relay 422", func(t *testing.T) {
		r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA)})
		c := r.call(dialed, "Session-Expires: 60\r\n")
		m := c.final(422)
		if hdr(m, parser.HeaderMinSE) != "90" {
			t.Fatalf("422 without Min-SE: 90:\n%s", m.Bytes())
		}
		r.a.expectNothing(quiet)
	})
}
