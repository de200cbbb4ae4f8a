package b2bua

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// AppendCalls lists each live call in the state it is in: routing (its
// decision pending), dialing, ringing, answered; with its trunk, carrier
// and wall times. An ended call is not listed.
func TestAppendCalls(t *testing.T) {
	r := newRig(t, nil)
	r.routes = []route.Route{routeA}
	r.answerCall() // a-call-1, answered at the rig's 1 s
	r.advance(time.Second)
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0") // dialing
	r.recv(caller, callerInvite("3", "a-call-3", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv3 := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponseTagged(binv3, 180, "Ringing", "", "ring3"))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.pending = true
	r.recv(caller, callerInvite("4", "a-call-4", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")

	got := r.e.AppendCalls(nil)
	slices.SortFunc(got, func(a, b CallInfo) int { return strings.Compare(a.ACallID, b.ACallID) })
	at := func(d time.Duration) time.Time { return enginerig.Epoch.Add(d) }
	want := []CallInfo{
		{ACallID: "a-call-1", Trunk: "local", Carrier: "carrier-a", State: CallAnswered, Start: at(time.Second), Answer: at(time.Second)},
		{ACallID: "a-call-2", Trunk: "local", Carrier: "carrier-a", State: CallDialing, Start: at(2 * time.Second)},
		{ACallID: "a-call-3", Trunk: "local", Carrier: "carrier-a", State: CallRinging, Start: at(2 * time.Second)},
		{ACallID: "a-call-4", Trunk: "local", State: CallRouting, Start: at(2 * time.Second)},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AppendCalls:\n%+v\nwant\n%+v", got, want)
	}
	if !r.e.EndCall([]byte("a-call-2"), r.Clock.Now) || len(r.e.AppendCalls(nil)) != 3 {
		t.Fatal("an ended call is still listed")
	}
}

// EndCall ends a call at an operator's request, as EndAll does at the end
// of a drain: answered, a BYE on both legs; ringing, a CANCEL to the
// carrier and 503 to the caller. Its CDR says "admin". A Call-ID that
// names no call, or a B-leg's, ends nothing.
func TestEndCall(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		r := newRig(t, nil)
		binv, _ := r.answerCall()
		if r.e.EndCall([]byte(hdr(binv, parser.HeaderCallID)), r.Clock.Now) || r.e.EndCall([]byte("a-call-9"), r.Clock.Now) {
			t.Fatal("EndCall ended a call by its B-leg's Call-ID, or one that does not exist")
		}
		if !r.e.EndCall([]byte("a-call-1"), r.Clock.Now) {
			t.Fatal("EndCall did not find a-call-1")
		}
		r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
		r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
		if s := r.summary(); s.HangupSide != cdr.HangupAdmin || s.FinalCode != 200 {
			t.Errorf("CDR hung up by %q with %d, want admin and 200", s.HangupSide, s.FinalCode)
		}
	})
	t.Run("ringing", func(t *testing.T) {
		r := newRig(t, nil)
		binv := r.startCall()
		r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
		r.expect(caller, "SIP/2.0 180 Ringing")
		if !r.e.EndCall([]byte("a-call-1"), r.Clock.Now) {
			t.Fatal("EndCall did not find a-call-1")
		}
		r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
		r.expect(caller, "SIP/2.0 503 Service Unavailable")
		if s := r.summary(); s.HangupSide != cdr.HangupAdmin || s.FinalCode != 503 {
			t.Errorf("CDR hung up by %q with %d, want admin and 503", s.HangupSide, s.FinalCode)
		}
	})
}
