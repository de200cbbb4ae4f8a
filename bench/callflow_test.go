package bench

import (
	"testing"
	"time"

	"github.com/sipedge/sipedge/quality"
)

// TestCallFlow proves the benchmark's rig does real work: every call it
// makes is answered, ends with the caller's BYE and leaves nothing behind,
// and its transactions end with their timers.
func TestCallFlow(t *testing.T) {
	const calls = 100
	r := newRig(t, rigOptions{strict: true, maxDuration: 3 * time.Hour, period: 25})
	for range calls {
		r.call()
		r.tick()
		if r.n%r.period == 0 && (r.e.Transactions() != 0 || r.Clock.Pending() != 0) {
			t.Fatalf("after call %d and %v: %d transactions, %d timers pending",
				r.n, idle, r.e.Transactions(), r.Clock.Pending())
		}
	}
	r.check(calls)
	if r.e.Calls() != 0 {
		t.Fatalf("%d calls left", r.e.Calls())
	}
	if r.Clock.Fired == 0 {
		t.Fatal("no timer fired")
	}
}

// TestHeldCalls checks the rig of BenchmarkConcurrentCalls: answered calls
// stay, their transactions end.
func TestHeldCalls(t *testing.T) {
	const calls = 100
	r := newRig(t, rigOptions{strict: true, period: 40})
	for range calls {
		r.answer()
		r.tick()
	}
	r.Advance(idle)
	r.check(0)
	if r.e.Calls() != calls || r.e.Transactions() != 0 || r.Clock.Pending() != 0 {
		t.Fatalf("%d calls (want %d), %d transactions, %d timers pending",
			r.e.Calls(), calls, r.e.Transactions(), r.Clock.Pending())
	}
}

// TestCallFlowFailover checks the failover rigs: every call burns the
// first carrier with a 503 and is answered by the second, through the call
// core's carrier plane or the server's, with quality statistics or
// without, its routes reordered or not.
func TestCallFlowFailover(t *testing.T) {
	const calls = 50
	for _, o := range []rigOptions{
		{},
		{plane: true},
		{plane: true, quality: quality.ModeDemote},
		{plane: true, quality: quality.ModeDemote, reorder: true},
	} {
		o.strict, o.maxDuration, o.period, o.failover = true, 3*time.Hour, 25, true
		r := newRig(t, o)
		for range calls {
			r.call()
			r.tick()
		}
		r.check(calls)
		if r.e.Calls() != 0 || r.e.Transactions() != 0 {
			t.Fatalf("%+v: %d calls, %d transactions left", o, r.e.Calls(), r.e.Transactions())
		}
		if o.quality != "" {
			// carrier-a's calls last 0 s: demoted, last in either order.
			st := r.monitor.Status()
			if len(st.Carriers) != 2 || st.Carriers[0].Attempts == 0 || st.Carriers[1].Attempts == 0 ||
				!st.Carriers[0].Demoted || st.Carriers[1].Demoted {
				t.Fatalf("%+v: quality %+v", o, st.Carriers)
			}
		}
	}
}
