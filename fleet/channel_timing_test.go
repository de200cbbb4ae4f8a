package fleet

import "testing"

// BenchmarkChannelTake: a shard taking a channel and giving it back.
func BenchmarkChannelTake(b *testing.B) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(b, err)
	defer f.Close()
	c := f.Channel("k", 1000)
	b.ReportAllocs()
	for b.Loop() {
		if !c.Take() {
			b.Fatal("refused")
		}
		c.Release()
	}
}

// BenchmarkChannelTakeParallel: every core's shard taking channels of one
// carrier at once (the counters' cache line is shared).
func BenchmarkChannelTakeParallel(b *testing.B) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(b, err)
	defer f.Close()
	c := f.Channel("k", 1<<30)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !c.Take() {
				b.Fatal("refused")
			}
			c.Release()
		}
	})
}

// BenchmarkAtomicAddPair is the floor BenchmarkChannelTake stands on: the
// two atomic additions of a Take and a Release, alone.
func BenchmarkAtomicAddPair(b *testing.B) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(b, err)
	defer f.Close()
	c := f.Channel("k", 1000)
	for b.Loop() {
		c.use.Add(takeOne)
		c.use.Add(releaseOne)
	}
}
