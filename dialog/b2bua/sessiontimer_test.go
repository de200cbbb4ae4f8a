package b2bua

import (
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
)

// withHeaders adds header lines before a message's Content-Length.
func withHeaders(msg string, lines ...string) string {
	extra := ""
	for _, l := range lines {
		extra += l + "\r\n"
	}
	return strings.Replace(msg, "Content-Length", extra+"Content-Length", 1)
}

// sessionRig is a rig with Session-Expires and Min-SE in its header policy
// (as by default in the binary's configuration), in uphold when asked.
func sessionRig(t *testing.T, uphold bool) *rig {
	return newRig(t, func(c *Config) {
		c.HeaderAllow = append(c.HeaderAllow, "Session-Expires", "Min-SE")
		c.SessionTimer.Uphold = uphold
	})
}

// answerWith runs a call whose caller's INVITE has the header lines inv
// and the carrier's 200 the lines ok; it returns the carrier's INVITE, the
// caller's 200 and its To tag, ACKed.
func (r *rig) answerWith(inv, ok []string) (binv, aOK *parser.Message, aTag string) {
	r.t.Helper()
	r.recv(caller, withHeaders(callerInvite("1", "a-call-1", "15551234"), inv...))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv = r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, withHeaders(carrierResponse(binv, 200, "OK", sdp), ok...))
	aOK = r.expect(caller, "SIP/2.0 200 OK")[0]
	aTag = tagOf(r.t, aOK, parser.HeaderTo)
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	return binv, aOK, aTag
}

// In relay, the carrier's 2xx with refresher=uac reaches the caller with
// the Require: timer RFC 4028 9 asks for; with refresher=uas, without.
func TestRelayRequireTimer(t *testing.T) {
	r := sessionRig(t, false)
	binv, ok, _ := r.answerWith([]string{"Supported: timer", "Session-Expires: 1800"}, []string{"Session-Expires: 1800;refresher=uac"})
	if hdr(binv, parser.HeaderSessionExpires) != "1800" {
		t.Errorf("the caller's Session-Expires did not reach the carrier:\n%s", binv.Bytes())
	}
	if hdr(ok, parser.HeaderSessionExpires) != "1800;refresher=uac" || !ok.HasOptionTag(parser.HeaderRequire, "timer") {
		t.Errorf("the caller's 200 (RFC 4028 9: Require: timer with refresher=uac):\n%s", ok.Bytes())
	}
	r = sessionRig(t, false)
	_, ok, _ = r.answerWith([]string{"Supported: timer", "Session-Expires: 1800"}, []string{"Session-Expires: 1800;refresher=uas"})
	if ok.Get(parser.HeaderRequire) != nil {
		t.Errorf("Require with refresher=uas:\n%s", ok.Bytes())
	}
}

// In relay, a relayed re-INVITE's 2xx with refresher=uac gets Require:
// timer too, whichever side refreshes (RFC 4028 9).
func TestRelayRequireTimerReinvite(t *testing.T) {
	r := sessionRig(t, false)
	_, _, aTag := r.answerWith([]string{"Supported: timer"}, nil)
	r.recv(caller, withHeaders(inDialogFromCaller("INVITE", "re1", 11, aTag, sdp), "Session-Expires: 900;refresher=uac"))
	r.expect(caller, "SIP/2.0 100 Trying")
	re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, withHeaders(carrierResponse(re, 200, "OK", sdp), "Session-Expires: 900;refresher=uac"))
	if ok := r.expect(caller, "SIP/2.0 200 OK")[0]; !ok.HasOptionTag(parser.HeaderRequire, "timer") {
		t.Errorf("re-INVITE 200 without Require: timer:\n%s", ok.Bytes())
	}
}

// A request asking for a session interval below Min-SE gets 422 with
// sipedge's Min-SE (RFC 4028 9, 6), before any routing: the initial INVITE
// and a re-INVITE; 90 s is the RFC's floor and the default.
func TestSessionIntervalTooSmall(t *testing.T) {
	for _, tc := range []struct {
		minSE      time.Duration
		se, wantMS string
	}{{0, "60", "90"}, {300 * time.Second, "200", "300"}, {0, "89;refresher=uac", "90"}} {
		r := newRig(t, func(c *Config) { c.SessionTimer.MinSE = tc.minSE })
		r.recv(caller, withHeaders(callerInvite("1", "a-call-1", "15551234"), "Session-Expires: "+tc.se))
		got := r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 422 Session Interval Too Small")[1]
		if hdr(got, parser.HeaderMinSE) != tc.wantMS {
			t.Errorf("Session-Expires %s: Min-SE %q, want %s", tc.se, hdr(got, parser.HeaderMinSE), tc.wantMS)
		}
		r.expect(carrierA)
	}
	r := newRig(t, nil)
	r.recv(caller, withHeaders(callerInvite("1", "a-call-1", "15551234"), "Session-Expires: 90"))
	r.take(caller)
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0") // 90 is enough
	r.recv(caller, withHeaders(callerInvite("2", "a-call-2", "15551234"), "Session-Expires: soon"))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 400 Bad Session-Expires")

	r = newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, withHeaders(inDialogFromCaller("UPDATE", "u1", 11, aTag, ""), "Session-Expires: 30"))
	r.expect(caller, "SIP/2.0 422 Session Interval Too Small")
	r.expect(carrierA)
}

// A carrier's 422 reaches the caller with its Min-SE (RFC 4028 6), even
// when the header policy leaves Min-SE out.
func TestRelayed422KeepsMinSE(t *testing.T) {
	for _, allow := range [][]string{{"Min-SE"}, nil} {
		r := newRig(t, func(c *Config) { c.HeaderAllow = allow })
		inv := r.startCall()
		r.recv(carrierA, withHeaders(carrierResponse(inv, 422, "Session Interval Too Small", ""), "Min-SE: 1200"))
		r.take(carrierA)
		if got := r.expect(caller, "SIP/2.0 422 Session Interval Too Small")[0]; hdr(got, parser.HeaderMinSE) != "1200" {
			t.Errorf("allow %q: the caller's 422 has Min-SE %q:\n%s", allow, hdr(got, parser.HeaderMinSE), got.Bytes())
		}
	}
}

// In uphold, sipedge asks the carrier for its own session timer, and
// refreshes each leg whose peer does not do timers at half the interval
// (RFC 4028 10): a re-INVITE offering the session description it last
// sent that peer when the peer does not allow UPDATE, ACKed; the callee's
// timer with refresher=uac is sipedge's to refresh too.
func TestUpholdRefreshes(t *testing.T) {
	r := sessionRig(t, true)
	binv, ok, _ := r.answerWith(nil, []string{"Session-Expires: 1800;refresher=uac"})
	if hdr(binv, parser.HeaderSessionExpires) != "1800" || hdr(binv, parser.HeaderMinSE) != "90" || !binv.HasOptionTag(parser.HeaderSupported, "timer") {
		t.Fatalf("the carrier's INVITE does not ask for sipedge's session timer (RFC 4028 7.1):\n%s", binv.Bytes())
	}
	if hdr(ok, parser.HeaderSessionExpires) != "1800;refresher=uas" || ok.Get(parser.HeaderRequire) != nil {
		t.Fatalf("the caller's 200 (no timer support: sipedge refreshes, RFC 4028 9):\n%s", ok.Bytes())
	}
	r.advance(899 * time.Second)
	r.expect(caller)
	r.expect(carrierA)
	r.advance(time.Second)
	reA := r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	reB := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if string(reA.Body()) != sdp || string(reB.Body()) != sdp || hdr(reA, parser.HeaderSessionExpires) != "1800;refresher=uac" {
		t.Fatalf("refreshes:\n%s\n%s", reA.Bytes(), reB.Bytes())
	}
	r.recv(caller, callerResponse(reA, 200, "OK"))
	r.expect(caller, "ACK sip:alice@caller.example.org:5061 SIP/2.0")
	r.recv(carrierA, withHeaders(carrierResponse(reB, 200, "OK", sdp), "Session-Expires: 1800;refresher=uac"))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	if n := r.e.m.sessionRefreshes.Get(); n != 2 {
		t.Errorf("sipedge_session_refreshes_total %d", n)
	}
	r.advance(899 * time.Second)
	r.expect(caller)
	r.advance(time.Second)
	r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")
	r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// A peer that allows UPDATE is refreshed with an UPDATE without a body
// (RFC 3311, RFC 4028 10); one answering it 405 gets a re-INVITE.
func TestUpholdRefreshUpdate(t *testing.T) {
	r := sessionRig(t, true)
	r.answerWith([]string{"Allow: INVITE, ACK, BYE, UPDATE"}, []string{"Allow: INVITE, ACK, BYE", "Session-Expires: 1800;refresher=uac"})
	r.advance(900 * time.Second)
	up := r.expect(caller, "UPDATE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	if len(up.Body()) != 0 {
		t.Errorf("UPDATE refresh with a body:\n%s", up.Bytes())
	}
	r.take(carrierA) // a re-INVITE: the carrier does not allow UPDATE
	r.recv(caller, callerResponse(up, 405, "Method Not Allowed"))
	r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")
}

// A caller that does timers refreshes its leg itself (refresher=uac,
// Require: timer, RFC 4028 9); when its refreshes stop, the call ends with
// a BYE on both legs at the session's expiry (RFC 4028 10: min(32 s, a
// third of the interval) before it), and the CDR says why.
func TestUpholdCallerStopsRefreshing(t *testing.T) {
	r := sessionRig(t, true)
	_, ok, aTag := r.answerWith([]string{"Supported: timer", "Session-Expires: 600"}, []string{"Session-Expires: 1800;refresher=uas"})
	if hdr(ok, parser.HeaderSessionExpires) != "600;refresher=uac" || !ok.HasOptionTag(parser.HeaderRequire, "timer") {
		t.Fatalf("the caller's 200:\n%s", ok.Bytes())
	}
	// A refresh from the caller at 300 s is relayed and refreshes both legs.
	r.advance(300 * time.Second)
	r.recv(caller, withHeaders(inDialogFromCaller("UPDATE", "u1", 11, aTag, ""), "Session-Expires: 600;refresher=uac"))
	up := r.expect(carrierA, "UPDATE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if hdr(up, parser.HeaderSessionExpires) != "1800;refresher=uas" {
		t.Errorf("the relayed UPDATE carries the carrier's leg's timer, want 1800;refresher=uas:\n%s", up.Bytes())
	}
	r.recv(carrierA, carrierResponse(up, 200, "OK", ""))
	if got := r.expect(caller, "SIP/2.0 200 OK")[0]; hdr(got, parser.HeaderSessionExpires) != "600;refresher=uac" {
		t.Errorf("the caller's 200 to its UPDATE:\n%s", got.Bytes())
	}
	r.advance(567 * time.Second) // 300 + 600 - 32 - 1
	r.expect(caller)
	r.expect(carrierA)
	r.advance(time.Second)
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	s := r.summary()
	if s.HangupSide.String() != "system" || s.EndReason != "session_expired" {
		t.Errorf("CDR hangup_side %q end_reason %q", s.HangupSide, s.EndReason)
	}
	if n := r.e.m.sessionsExpired.Get(); n != 1 {
		t.Errorf("sipedge_sessions_expired_total %d", n)
	}
}

// sipedge's refresh answered 481 (or unanswered) says the session is gone:
// the call ends on both legs (RFC 4028 10).
func TestUpholdRefreshRefused(t *testing.T) {
	for _, answer := range []bool{true, false} {
		r := sessionRig(t, true)
		r.answerWith(nil, nil) // neither side does timers: sipedge refreshes both legs
		r.advance(900 * time.Second)
		r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")
		re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
		if answer {
			r.recv(carrierA, carrierResponse(re, 481, "Call/Transaction Does Not Exist", ""))
		} else {
			r.advance(40 * time.Second) // Timer B
		}
		got := r.take(caller)
		if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "BYE sip:alice@caller.example.org:5061 SIP/2.0") {
			t.Fatalf("answered %v: no BYE to the caller: %q", answer, got)
		}
		if s := r.summary(); s.EndReason != "session_expired" || s.HangupSide.String() != "system" {
			t.Errorf("answered %v: CDR end_reason %q hangup_side %q", answer, s.EndReason, s.HangupSide)
		}
	}
}

// While sipedge's re-INVITE refreshes a leg, a re-INVITE from either side
// meets 491 (RFC 3261 14.1); an UPDATE goes through.
func TestUpholdRefreshGlare(t *testing.T) {
	r := sessionRig(t, true)
	_, _, aTag := r.answerWith(nil, []string{"Session-Expires: 1800;refresher=uas"})
	r.advance(900 * time.Second)
	r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")
	r.expect(carrierA)
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 491 Request Pending")
	r.recv(caller, inDialogFromCaller("UPDATE", "u1", 12, aTag, ""))
	r.expect(carrierA, "UPDATE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// In uphold, the carrier's 422 is answered as RFC 4028 7.4 asks: the
// INVITE again, next CSeq, asking for its Min-SE; a second 422 reaches the
// caller with its Min-SE.
func TestUphold422Retry(t *testing.T) {
	r := sessionRig(t, true)
	inv := r.startCall()
	r.recv(carrierA, withHeaders(carrierResponse(inv, 422, "Session Interval Too Small", ""), "Min-SE: 3600"))
	got := r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller)
	c1, _ := inv.CSeq()
	c2, _ := got[1].CSeq()
	if hdr(got[1], parser.HeaderSessionExpires) != "3600" || hdr(got[1], parser.HeaderMinSE) != "3600" ||
		c2.Num != c1.Num+1 || hdr(got[1], parser.HeaderCallID) != hdr(inv, parser.HeaderCallID) {
		t.Fatalf("the INVITE after the 422 (RFC 4028 7.4):\n%s", got[1].Bytes())
	}
	r.recv(carrierA, withHeaders(carrierResponse(got[1], 422, "Session Interval Too Small", ""), "Min-SE: 7200"))
	r.take(carrierA)
	if m := r.expect(caller, "SIP/2.0 422 Session Interval Too Small")[0]; hdr(m, parser.HeaderMinSE) != "7200" {
		t.Errorf("the caller's 422:\n%s", m.Bytes())
	}
}
