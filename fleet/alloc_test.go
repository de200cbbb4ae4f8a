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
