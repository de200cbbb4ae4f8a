package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// trunkCalls is the name of the trunk's calls_total series of a result.
func trunkCalls(trunk, result string) string {
	return fmt.Sprintf(`sipedge_trunk_calls_total{trunk=%q,result=%q}`, trunk, result)
}

// A YAML trunk's calls are counted as they end, by result: one answered,
// one busy (failed), one the caller cancelled; its live calls gauge is 1
// during a call and 0 after.
func TestTrunkMetricsResults(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	live := `sipedge_trunk_calls{trunk="local"}`
	e.waitMetric(live, 0)
	e.waitMetric(trunkCalls("local", "answered"), 0) // made at start, not at the first call

	c := e.answered()
	e.waitMetric(live, 1)
	c.byeFromCaller(11)
	e.waitMetric(live, 0)
	e.waitMetric(trunkCalls("local", "answered"), 1)

	busy := e.start()
	e.carrier.send(uasResponse(e.carrier, busy.binv, 486, "Busy Here", ""))
	e.carrier.expect("ACK sip:", waitMsg)
	e.caller.send(busy.u.ackFailure(e.caller.expect("SIP/2.0 486 Busy Here", waitMsg)))
	e.waitMetric(trunkCalls("local", "failed"), 1)

	cancelled := e.start()
	cancelled.provisional(180, "Ringing", "")
	e.caller.send(cancelled.u.cancel())
	e.caller.expect("SIP/2.0 200 OK", waitMsg)
	e.caller.send(cancelled.u.ackFailure(e.caller.expect("SIP/2.0 487 Request Terminated", waitMsg)))
	bc := e.carrier.expect("CANCEL ", waitMsg)
	e.carrier.send(uasResponse(e.carrier, bc, 200, "OK", ""))
	e.carrier.send(uasResponse(e.carrier, cancelled.binv, 487, "Request Terminated", ""))
	e.carrier.expect("ACK sip:", waitMsg)
	e.waitMetric(trunkCalls("local", "cancelled"), 1)

	e.waitMetric(live, 0)
	e.waitMetric(trunkCalls("local", "answered"), 1)
	e.waitMetric(trunkCalls("local", "failed"), 1)
	e.waitMetric(`sipedge_trunk_refused_total{trunk="local",reason="cps"}`, 0)
	e.waitMetric(`sipedge_trunk_refused_total{trunk="local",reason="concurrent"}`, 0)
}

// A trunk added at run time gets its metrics: an INVITE over its cps is
// counted as refused for "cps"; replaced by a version with
// max_concurrent_calls 1, whose count the first version's call in
// progress still takes, the next INVITE is refused for "concurrent".
func TestTrunkMetricsRefusedRuntime(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	e.newCallerOn("127.0.0.2")
	if code, body := e.adminDo("POST", "/v1/trunks", `{"name":"acme","sources":["127.0.0.2"],"limits":{"cps":1,"burst":1}}`); code != http.StatusCreated {
		t.Fatalf("POST /v1/trunks: %d %s", code, body)
	}
	cps, concurrent := `sipedge_trunk_refused_total{trunk="acme",reason="cps"}`, `sipedge_trunk_refused_total{trunk="acme",reason="concurrent"}`
	live := `sipedge_trunk_calls{trunk="acme"}`
	e.waitMetric(cps, 0)

	first := e.start() // the limit's one call of this second
	// Ringing at once: sipedge stops retransmitting its INVITE (RFC 3261
	// 17.1.1.2), which, on a loaded machine, would reach the carrier among
	// what the test expects there.
	first.provisional(180, "Ringing", "")
	e.waitMetric(live, 1)
	e.refused()
	e.waitMetric(cps, 1)
	e.waitMetric(concurrent, 0)

	if code, body := e.adminDo("POST", "/v1/trunks", `{"name":"acme","sources":["127.0.0.2"],"limits":{"max_concurrent_calls":1}}`); code != http.StatusOK {
		t.Fatalf("POST /v1/trunks (replace): %d %s", code, body)
	}
	e.refused()
	e.waitMetric(concurrent, 1)
	e.waitMetric(cps, 1)

	first.answer()
	first.byeFromCaller(11)
	e.waitMetric(live, 0)
	e.waitMetric(trunkCalls("acme", "answered"), 1)
	e.waitMetric(trunkCalls("acme", "failed"), 0) // the refused INVITEs were no calls
}

// refused sends a new call's INVITE, which sipedge refuses with 503 before
// routing.
func (e *e2e) refused() {
	e.t.Helper()
	u := newUAC(e.caller, dialed)
	e.caller.send(u.invite())
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	m := e.caller.expect("SIP/2.0 503", waitMsg)
	e.caller.send(u.ackFailure(m))
	e.carrier.expectNothing(100 * time.Millisecond)
}
