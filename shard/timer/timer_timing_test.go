package timer

import (
	"math/rand/v2"
	"testing"
	"time"
)

const benchPending = 1_000_000

// delays spread over 0..64s, like a mix of SIP transaction and dialog timers.
func benchDelays() []time.Duration {
	rng := rand.New(rand.NewPCG(1, 1))
	d := make([]time.Duration, 1<<16)
	for i := range d {
		d[i] = time.Duration(rng.Int64N(int64(64 * time.Second)))
	}
	return d
}

// BenchmarkTimerWheel measures one Start+Stop pair with 1M timers pending.
func BenchmarkTimerWheel(b *testing.B) {
	delays := benchDelays()
	w := New(Config{Capacity: benchPending + 1}, func(Payload) {})
	for i := range benchPending {
		w.Start(delays[i&(len(delays)-1)], Payload{Arg: uint64(i)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := w.Start(delays[i&(len(delays)-1)], Payload{Kind: 1, Arg: uint64(i)})
		if !w.Stop(h) {
			b.Fatal("Stop failed")
		}
	}
}

// BenchmarkAdvance measures one tick of Advance with 1M timers pending, each
// re-armed when it fires.
func BenchmarkAdvance(b *testing.B) {
	delays := benchDelays()
	var w *Wheel
	fires := 0
	w = New(Config{Capacity: benchPending}, func(p Payload) {
		fires++
		w.Start(delays[p.Arg&(uint64(len(delays))-1)]+time.Millisecond, Payload{Arg: p.Arg + 1})
	})
	for i := range benchPending {
		w.Start(delays[i&(len(delays)-1)], Payload{Arg: uint64(i)})
	}
	now := w.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now += w.Tick()
		w.Advance(now)
	}
	b.ReportMetric(float64(fires)/float64(b.N), "fires/op")
}
