//go:build !race

package bench

import (
	"testing"
	"time"
)

// A call in steady state allocates nothing: answered and hung up, with a
// failover (the first carrier's 503, logged and recorded with its phrase),
// and journalled (its record handed to Env.Journal as it is answered).
// The warm-up fills the engine's slabs, pools and the timer list, and
// grows the transactions' stored messages to their largest.
func TestCallAllocs(t *testing.T) {
	for _, o := range []rigOptions{{}, {failover: true}, {journal: true}} {
		o.maxDuration = 3 * time.Hour
		r := newRig(t, o)
		for range 16 * r.period {
			r.call()
			r.tick()
		}
		if n := testing.AllocsPerRun(int(2*r.period), func() {
			r.call()
			r.tick()
		}); n != 0 {
			t.Errorf("%+v: %v allocations per call, want 0", o, n)
		}
		r.check(int(r.n))
		if o.journal && (r.journal.answered != int(r.n) || r.journal.ended != int(r.n)) {
			t.Errorf("journal heard %d answered and %d ended of %d calls", r.journal.answered, r.journal.ended, r.n)
		}
	}
}
