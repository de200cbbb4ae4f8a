package b2bua

import (
	"testing"

	"github.com/sipedge/sipedge/route"
)

// oneCarrier is a rig routing every call to carrier-a alone.
func oneCarrier(t *testing.T) *rig {
	r := newRig(t, nil)
	r.routes = []route.Route{routeA}
	return r
}

// OnFailure's Code replaces the sequence's: carrier-a's own 486 (which the
// caller would get, phrase and all) becomes the policy's 480.
func TestOnFailureRejectsWithItsCode(t *testing.T) {
	r := oneCarrier(t)
	var got []int
	r.e.env.Policy.OnFailure = func(_ *Call, code int, _ string) FailureAction {
		got = append(got, code)
		return FailureAction{Code: 480, Reason: "Try Later"}
	}
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 486, "Busy Here", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 480 Try Later")
	if len(got) != 1 || got[0] != 486 {
		t.Fatalf("OnFailure saw %v, want [486]", got)
	}
	if s := r.summary(); s.FinalCode != 480 || string(s.FinalReason) != "Try Later" {
		t.Fatalf("final %d %q", s.FinalCode, s.FinalReason)
	}
}

// A code that is not a failure is ignored: the caller gets the sequence's.
func TestOnFailureIgnoresNonFailureCode(t *testing.T) {
	r := oneCarrier(t)
	r.e.env.Policy.OnFailure = func(*Call, int, string) FailureAction { return FailureAction{Code: 200} }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 486, "Busy Here", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 486 Busy Here")
}

// OnFailure's Routes are tried next, with the first attempts kept for the
// CDR; when those fail too OnFailure does not run again (it would loop a
// call for ever on a policy that always routes), and the caller gets the
// new carriers' failure.
func TestOnFailureRoutesAgainOnce(t *testing.T) {
	r := oneCarrier(t)
	runs := 0
	r.e.env.Policy.OnFailure = func(*Call, int, string) FailureAction {
		runs++
		return FailureAction{Routes: []route.Route{routeB}}
	}
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 486, "Busy Here", ""))
	r.take(carrierB)
	r.expect(caller, "SIP/2.0 486 Busy Here")
	if runs != 1 {
		t.Fatalf("OnFailure ran %d times, want 1", runs)
	}
	s := r.summary()
	if len(s.Attempts) != 2 || s.Attempts[0].CarrierID != "carrier-a" || s.Attempts[1].CarrierID != "carrier-b" {
		t.Fatalf("attempts %+v, want carrier-a then carrier-b", s.Attempts)
	}
}
