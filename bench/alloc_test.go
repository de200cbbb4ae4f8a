//go:build !race

package bench

import (
	"testing"
	"time"

	"github.com/sipedge/sipedge/quality"
)

// A call in steady state allocates nothing: answered and hung up, with a
// failover (the first carrier's 503, logged and recorded with its phrase),
// and journalled (its record handed to Env.Journal as it is answered).
// The warm-up fills the engine's slabs, pools and the timer list, and
// grows the transactions' stored messages to their largest.
//
// So do the failover calls through the server's carrier plane, with quality
// statistics (demote mode) and with every call's routes reordered. The
// quality reader, which runs off the shards and allocates its snapshot
// once per sampling interval, runs here every 1,024 calls: its share is
// under one allocation a call, which AllocsPerRun rounds down;
// carrier.TestQualityShardAllocs holds the shard's own path to none.
func TestCallAllocs(t *testing.T) {
	for _, o := range []rigOptions{
		{},
		{failover: true},
		{journal: true},
		{failover: true, plane: true},
		{failover: true, plane: true, quality: quality.ModeDemote},
		{failover: true, plane: true, quality: quality.ModeDemote, reorder: true},
	} {
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
