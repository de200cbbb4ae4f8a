package server

import (
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
)

// A carrier with one channel takes one call at a time: a second call while
// the first is up skips it undialled (calls_limited), and here, with no
// other carrier, gets sipedge's 503; once the first call ends the carrier
// takes calls again. sipedge_gateway_calls shows the channel in use.
func TestE2ECarrierChannelLimit(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{group: "max_concurrent_calls: 1"})
	c := e.answered()
	if n := e.metric(`sipedge_gateway_calls{group="carrier-a"}`); n != 1 {
		t.Fatalf("sipedge_gateway_calls %v during the call, want 1", n)
	}

	u := newUAC(e.caller, dialed)
	e.caller.send(u.invite())
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	refused := e.caller.expect("SIP/2.0 503 Service Unavailable", waitMsg)
	e.caller.send(u.ackFailure(refused))
	e.carrier.expectNothing(quiet) // not dialled

	c.byeFromCaller(11)
	e.waitMetric(`sipedge_gateway_calls{group="carrier-a"}`, 0) // the call ends on its shard just after the BYE's 200
	c3 := e.answered()
	c3.byeFromCaller(11)

	r := e.cdrOf(u.callID)
	if code, _ := r["final_code"].(float64); code != 503 {
		t.Fatalf("refused call's CDR %v", r)
	}
	checkAttempts(t, r, wantAttempt{carrier: "carrier-a", status: 503, dialed: false, reason: route.ReasonCallsLimited})
	checkCDR(t, e.cdrOf(c3.u.callID), 200, "caller")
}
