//go:build !race

package ratelimit

import (
	"testing"
	"time"
)

const raceEnabled = false

// TestLocalAllocs: an in-process decision allocates nothing, on the fast
// path, with AIMD lowering the rate, and through Limiter.ReserveAsync.
func TestLocalAllocs(t *testing.T) {
	var now time.Duration
	l, err := New(Options{Now: func() time.Duration { return now }})
	if err != nil {
		t.Fatal(err)
	}
	k, err := l.Register("a", Limit{Rate: 1000, Burst: 4, MaxWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string, fn func()) {
		t.Helper()
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Fatalf("%s: %v allocs per decision, want 0", name, n)
		}
	}
	f("Local.Reserve", func() { now += time.Millisecond; l.local.Reserve(k, now) })
	f("Local.Reserve over", func() { l.local.Reserve(k, 0) })
	f("Limiter.ReserveAsync", func() { now += time.Millisecond; l.ReserveAsync(k, nil) })
	l.Backoff(k)
	f("Local.Reserve after Backoff", func() { now += time.Millisecond; l.local.Reserve(k, now) })
	f("Limiter.Rate", func() { l.Rate(k) })
}
