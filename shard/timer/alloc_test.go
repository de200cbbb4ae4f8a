//go:build !race

package timer

import (
	"testing"
	"time"
)

func TestStartStopNoAlloc(t *testing.T) {
	w := New(Config{}, func(Payload) {})
	for i := range 10000 {
		w.Start(time.Duration(i)*time.Millisecond, Payload{Arg: uint64(i)})
	}
	w.Stop(w.Start(time.Second, Payload{})) // one free slot to reuse
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		h := w.Start(time.Duration(i)*time.Millisecond, Payload{Kind: 1, Arg: uint64(i)})
		if !w.Stop(h) {
			t.Fatal("Stop failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("Start+Stop allocates %v per run", allocs)
	}
}

func TestAdvanceNoAlloc(t *testing.T) {
	const tick = time.Millisecond
	var w *Wheel
	fires := 0
	// Every timer re-arms itself, so the pending count is steady.
	w = New(Config{Tick: tick, Slots: 64}, func(p Payload) {
		fires++
		w.Start(time.Duration(1+p.Arg%200)*tick, p)
	})
	for i := range 5000 {
		w.Start(time.Duration(1+i%200)*tick, Payload{Arg: uint64(i)})
	}
	var now time.Duration
	for range 1000 { // warm up: several revolutions and full cycles
		now += tick
		w.Advance(now)
	}
	fires = 0
	allocs := testing.AllocsPerRun(1000, func() {
		now += tick
		w.Advance(now)
	})
	if allocs != 0 {
		t.Fatalf("Advance allocates %v per run", allocs)
	}
	if fires < 1000 {
		t.Fatalf("only %d fires measured", fires)
	}
}
