package b2bua

import (
	"strings"
	"testing"

	"github.com/sipedge/sipedge/parser"
)

// The 200 to a CANCEL carries the To tag of the responses to the INVITE
// it cancels (RFC 3261 9.2): the 180's and the 487's; with no provisional
// yet but the 100, the tag the 487 then carries; after the INVITE's final
// response (a CANCEL crossing it), that response's.
func TestCancelToTag(t *testing.T) {
	r := newRig(t, nil)
	inv := callerInvite("1", "a-call-1", "15551234")
	binv := r.startCall()
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	ring := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
	r.recv(caller, cancelOf(inv))
	got := r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	if tagOf(t, got[0], parser.HeaderTo) != ring || tagOf(t, got[1], parser.HeaderTo) != ring {
		t.Errorf("180 To tag %q; the 200 to CANCEL %q, the 487 %q: want one", ring,
			tagOf(t, got[0], parser.HeaderTo), tagOf(t, got[1], parser.HeaderTo))
	}

	r = newRig(t, nil)
	r.startCall()
	r.recv(caller, cancelOf(inv))
	got = r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	if a, b := tagOf(t, got[0], parser.HeaderTo), tagOf(t, got[1], parser.HeaderTo); a != b || a == "" {
		t.Errorf("no provisional: the 200 to CANCEL has To tag %q, the 487 %q", a, b)
	}

	r = newRig(t, nil)
	binv = r.startCall()
	r.recv(carrierA, carrierResponse(binv, 486, "Busy Here", ""))
	r.take(carrierA)
	busy := tagOf(t, r.expect(caller, "SIP/2.0 486 Busy Here")[0], parser.HeaderTo)
	r.recv(caller, cancelOf(inv))
	if got := tagOf(t, r.expect(caller, "SIP/2.0 200 OK")[0], parser.HeaderTo); got != busy {
		t.Errorf("a CANCEL crossing the 486 (tag %q) gets tag %q", busy, got)
	}
}

// OPTIONS outside a dialog is answered with what sipedge does (RFC 3261
// 11.2): Allow with the methods it handles, not REFER, which it refuses;
// Accept with the SDP it relays; Supported with its option tags.
func TestOptionsCapabilities(t *testing.T) {
	r := newRig(t, nil)
	opt := strings.Replace(strings.Replace(inDialogFromCaller("OPTIONS", "o1", 1, "x", ""), ";tag=x", "", 1),
		"Contact: <sip:alice@caller.example.org:5061>\r\n", "", 1)
	r.recv(caller, opt)
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	for _, m := range []string{"INVITE", "ACK", "CANCEL", "BYE", "OPTIONS", "UPDATE", "INFO", "PRACK"} {
		if !ok.HasOptionTag(parser.HeaderAllow, m) {
			t.Errorf("Allow lacks %s: %q", m, ok.Get(parser.HeaderAllow))
		}
	}
	if ok.HasOptionTag(parser.HeaderAllow, "REFER") {
		t.Errorf("Allow lists REFER, which sipedge refuses: %q", ok.Get(parser.HeaderAllow))
	}
	if hdr(ok, parser.HeaderAccept) != "application/sdp" {
		t.Errorf("Accept %q", hdr(ok, parser.HeaderAccept))
	}
	for _, tag := range OptionTags() {
		if !ok.HasOptionTag(parser.HeaderSupported, tag) {
			t.Errorf("Supported lacks %s: %q", tag, ok.Get(parser.HeaderSupported))
		}
	}
	if n := strings.Count(string(ok.Bytes()), "Supported:"); n != 1 {
		t.Errorf("%d Supported headers", n)
	}
}
