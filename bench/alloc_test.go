//go:build !race

package bench

import (
	"testing"
	"time"
)

// A call in steady state allocates nothing: answered and hung up, and with a
// failover (the first carrier's 503, logged and recorded with its phrase).
// The warm-up fills the engine's slabs, pools and the timer list, and
// grows the transactions' stored messages to their largest.
func TestCallAllocs(t *testing.T) {
	for _, failover := range []bool{false, true} {
		r := newRig(t, rigOptions{maxDuration: 3 * time.Hour, failover: failover})
		for range 16 * r.period {
			r.call()
			r.tick()
		}
		if n := testing.AllocsPerRun(int(2*r.period), func() {
			r.call()
			r.tick()
		}); n != 0 {
			t.Errorf("failover %v: %v allocations per call, want 0", failover, n)
		}
		r.check(int(r.n))
	}
}
