//go:build !race

package journal

import (
	"testing"

	"github.com/sipedge/sipedge/dialog/cdr"
)

// What a shard does, Answered and Ended, allocates nothing once the queue
// has grown to its high-water mark.
func TestShardSideAllocs(t *testing.T) {
	j := bare(1 << 10)
	rec := &cdr.Record{}
	for i := range 64 {
		j.Answered(uint64(i), rec)
		j.Ended(uint64(i))
	}
	j.queue = j.queue[:0]
	if n := testing.AllocsPerRun(1000, func() {
		j.Answered(7, rec)
		j.Ended(7)
		j.queue = j.queue[:0] // what the goroutine's drain does, by hand
	}); n != 0 {
		t.Errorf("%v allocations per Answered and Ended, want 0", n)
	}
}
