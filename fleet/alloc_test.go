//go:build !race

package fleet

import "testing"

// TestChannelAllocs: the shard's Take and Release allocate nothing, also
// refused and near the cap (where they wake the grant loop).
func TestChannelAllocs(t *testing.T) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(t, err)
	defer f.Close()
	c := f.Channel("k", 1)
	c.low.Store(1) // every take wakes the loop, as near a Redis grant's cap
	if n := testing.AllocsPerRun(1000, func() {
		if !c.Take() {
			t.Fatal("refused")
		}
		if c.Take() {
			t.Fatal("over the cap")
		}
		c.Release()
	}); n != 0 {
		t.Fatalf("%v allocations per Take/Take/Release", n)
	}
}

// TestJournalAllocs: a shard's Answered and Ended allocate nothing once the
// queue has grown (the journal's goroutine hands its capacity back).
func TestJournalAllocs(t *testing.T) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(t, err)
	defer f.Close()
	j := f.Journal()
	j.on = true // no goroutine takes the queue: the test does
	c := testCall(1)
	var id uint64
	run := func() {
		if !j.Answered(id, c) {
			t.Fatal("refused")
		}
		j.Ended(id)
		id++
	}
	for range 2000 { // grow the queue
		run()
	}
	j.pending = journalQueue{ops: j.pending.ops[:0], calls: j.pending.calls[:0]}
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Fatalf("%v allocations per Answered and Ended", n)
	}
}
