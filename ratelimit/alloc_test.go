//go:build !race

package ratelimit

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
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

// TestRedisAllocs: a Redis decision allocates nothing of its own: what a
// script call allocates (its context, rueidis' command and reply) is
// shared by the decisions of its group.
func TestRedisAllocs(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	k := n.register(t, "a", Limit{Rate: 1e6, MaxWait: time.Hour})
	ctx := context.Background()
	for range 100 {
		n.Reserve(ctx, k)
	}
	perCall := testing.AllocsPerRun(200, func() { n.Reserve(ctx, k) }) // a call per decision
	const callers, each = 64, 300
	run := func() (mallocs, calls float64) {
		calls0 := n.metric(t, "sipedge_ratelimit_redis_round_trips_total")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m0 := ms.Mallocs
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range each {
					if d, _ := n.Reserve(ctx, k); d.Source != SourceRedis {
						t.Errorf("%+v", d)
					}
				}
			})
		}
		wg.Wait()
		runtime.ReadMemStats(&ms)
		return float64(ms.Mallocs - m0), n.metric(t, "sipedge_ratelimit_redis_round_trips_total") - calls0
	}
	run() // warm the pools up
	mallocs, calls := run()
	// Slack for the goroutines and the pools, which a GC empties.
	if budget := calls*(perCall+1) + 1000; mallocs > budget {
		t.Fatalf("%v allocations for %d decisions in %v calls (%v per call alone): more than the calls'", mallocs, callers*each, calls, perCall)
	}
	t.Logf("%.2f allocations per decision, %.1f decisions per call, %v allocations per call alone", mallocs/(callers*each), callers*each/calls, perCall)
}
