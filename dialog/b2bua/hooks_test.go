package b2bua

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/route"
)

// hookRig is a rig routing to carrier-a then carrier-b, its log and its
// metrics kept for the test to read.
func hookRig(t *testing.T) (*rig, *bytes.Buffer, *metrics.Set) {
	set := metrics.NewSet()
	r := newRig(t, func(c *Config) { c.Metrics = set })
	r.routes = []route.Route{routeA, routeB}
	var logs bytes.Buffer
	r.e.env.Log = slog.New(slog.NewTextHandler(&logs, nil))
	return r, &logs, set
}

// checkPanicked checks the hook's panic was logged with the call and
// counted once.
func checkPanicked(t *testing.T, logs *bytes.Buffer, set *metrics.Set, hook, callID string) {
	t.Helper()
	var out bytes.Buffer
	set.WritePrometheus(&out)
	if want := `sipedge_policy_panics_total{shard="0",hook="` + hook + `"} 1`; !strings.Contains(out.String(), want) {
		t.Errorf("no %s in\n%s", want, out.String())
	}
	l := logs.String()
	if !strings.Contains(l, "level=ERROR msg=\"policy hook panicked") || !strings.Contains(l, "hook="+hook+" call_id="+callID+" panic=boom") ||
		!strings.Contains(l, "stack=") {
		t.Errorf("the panic is not logged with its hook, call and stack:\n%s", l)
	}
}

// A panicking OnInvite: the call gets 500 and no carrier hears of it; the
// next call, whose OnInvite returns, is routed as the policy says.
func TestHookPanicOnInvite(t *testing.T) {
	r, logs, set := hookRig(t)
	r.e.env.Policy.OnInvite = func(q *route.Request, d *route.Decision) {
		d.Routes = nil // half done: sipedge's answer owes it nothing
		if string(q.CallID) == "a-call-1" {
			panic("boom")
		}
		d.Routes = []route.Route{routeB}
	}
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 500 Server Internal Error")
	r.expect(carrierA)
	checkPanicked(t, logs, set, "OnInvite", "a-call-1")
	if s := r.summary(); s.FinalCode != 500 || len(s.Attempts) != 0 {
		t.Errorf("CDR %d %+v, want 500 with no attempt", s.FinalCode, s.Attempts)
	}

	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
}

// A panicking OnFailure: the caller gets what it would have without the
// hook, the carrier's own 486.
func TestHookPanicOnFailure(t *testing.T) {
	r, logs, set := hookRig(t)
	r.routes = []route.Route{routeA}
	r.e.env.Policy.OnFailure = func(*Call, int, string) FailureAction { panic("boom") }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 486, "Busy Here", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 486 Busy Here")
	checkPanicked(t, logs, set, "OnFailure", "a-call-1")
}

// Panicking notifications: the failover goes on past OnRouteFailure, and
// the call OnAnswer hears of is answered.
func TestHookPanicNotifications(t *testing.T) {
	r, logs, set := hookRig(t)
	r.e.env.Policy.OnRouteFailure = func(*Call, *route.Route, route.Attempt) { panic("boom") }
	r.e.env.Policy.OnAnswer = func(*Call, *route.Route) { panic("boom") }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	checkPanicked(t, logs, set, "OnRouteFailure", "a-call-1")
	checkPanicked(t, logs, set, "OnAnswer", "a-call-1")
}
