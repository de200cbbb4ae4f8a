package ratelimit

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// BenchmarkGCRALocal: in-process decisions from all CPUs, over 64 keys
// (carriers) and over one key (worst-case contention). Like a shard, which
// reads the clock once per batch of events, each goroutine reads it every 32
// decisions; clock=time.Since reads it every decision. The baseline is the
// obvious implementation: a mutex over a map of string keys.
func BenchmarkGCRALocal(b *testing.B) {
	// Every decision takes a slot (the CAS path): no Over within the run.
	lim := Limit{Rate: 1e6, MaxWait: time.Hour}
	run := func(b *testing.B, nkeys int, clockEvery int, decide func(i int, now time.Duration)) {
		start := time.Now()
		var seq atomic.Uint32
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 7
			var now time.Duration
			for pb.Next() {
				if i%clockEvery == 0 {
					now = time.Since(start)
				}
				decide(i%nkeys, now)
				i++
			}
		})
	}
	local := func(b *testing.B, nkeys int) (*Local, []Key) {
		l, err := NewLocal(Options{})
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]Key, nkeys)
		for i := range keys {
			if keys[i], err = l.Register("carrier-"+strconv.Itoa(i), lim); err != nil {
				b.Fatal(err)
			}
		}
		return l, keys
	}
	for _, nkeys := range []int{64, 1} {
		b.Run("keys="+strconv.Itoa(nkeys), func(b *testing.B) {
			l, keys := local(b, nkeys)
			run(b, nkeys, 32, func(i int, now time.Duration) { l.Reserve(keys[i], now) })
		})
	}
	b.Run("keys=64/clock=time.Since", func(b *testing.B) {
		l, keys := local(b, 64)
		run(b, 64, 1, func(i int, now time.Duration) { l.Reserve(keys[i], now) })
	})
	b.Run("keys=64/baseline=mutex-map", func(b *testing.B) {
		p, _ := lim.params()
		var mu sync.Mutex
		tats := make(map[string]int64)
		names := make([]string, 64)
		for i := range names {
			names[i] = "carrier-" + strconv.Itoa(i)
		}
		run(b, 64, 32, func(i int, now time.Duration) {
			mu.Lock()
			tat := max(tats[names[i]], int64(now))
			if tat-int64(now) <= p.maxWait {
				tats[names[i]] = tat + p.interval
			}
			mu.Unlock()
		})
	})
}

// BenchmarkGCRARedis: 64 concurrent callers deciding through a real local
// redis-server; the decisions queued while a script call is in flight go
// in the next call (group commit). Reports decisions/s, the p99 latency of
// a decision, the fractions that fell back to the failure mode and that
// were decided locally from an earlier reply (held), and the decisions per
// script call (round trip). The deadline is 1 s here, not the
// production 20 ms: on a loaded machine a 20 ms deadline opens the breaker
// and the benchmark would time the fallback; p99 says whether 20 ms holds.
//
//	script         64 keys with room to spare: every decision goes to Redis
//	batch=16       4 keys with demand above their rate: blocks of 16 slots
//	flood          4 full keys: Over is known locally between round trips
//	baseline=ping  the same 64 callers sending PING through the same client
func BenchmarkGCRARedis(b *testing.B) {
	const callers = 64
	srv := redistest.Start(b)
	bench := func(b *testing.B, n *node, nkeys int, lim Limit, decide func(k Key) Source) {
		keys := make([]Key, nkeys)
		for i := range keys {
			keys[i] = n.register(b, "carrier-"+strconv.Itoa(i), lim)
		}
		b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		var mu sync.Mutex
		var hists []*latencies
		var fallbacks, held, seq atomic.Int64
		trips0 := n.metric(b, "sipedge_ratelimit_redis_round_trips_total")
		sent0 := n.metric(b, "sipedge_ratelimit_redis_calls_total")
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			h := new(latencies)
			mu.Lock()
			hists = append(hists, h)
			mu.Unlock()
			i := int(seq.Add(1))
			var nheld int64
			defer func() { held.Add(nheld) }()
			for pb.Next() {
				t0 := time.Now()
				src := decide(keys[i%len(keys)])
				h.add(time.Since(t0))
				if src == SourceHeld {
					nheld++ // not a shared atomic: flood is all held
				}
				if src != SourceRedis && src != SourceHeld {
					fallbacks.Add(1)
				}
				i++
			}
		})
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
		b.ReportMetric(percentile(hists, 0.99), "p99-µs")
		b.ReportMetric(float64(fallbacks.Load())/float64(b.N), "fallbacks/op")
		b.ReportMetric(float64(held.Load())/float64(b.N), "held/op")
		if trips := n.metric(b, "sipedge_ratelimit_redis_round_trips_total") - trips0; trips > 0 {
			sent := n.metric(b, "sipedge_ratelimit_redis_calls_total") - sent0
			b.ReportMetric(sent/trips, "decisions/trip")
		}
	}
	reserve := func(n *node) func(Key) Source {
		return func(k Key) Source {
			d, _ := n.Reserve(context.Background(), k)
			return d.Source
		}
	}
	o := Options{Config: Config{DeadlineMS: 1000}}
	// One node per sub-benchmark, kept across its b.N rounds.
	script := newNode(b, srv.URL(), o)
	b.Run("script", func(b *testing.B) {
		bench(b, script, 64, Limit{Rate: 1e5, MaxWait: time.Second}, reserve(script))
	})
	ob := o
	ob.Batch = 16
	batch := newNode(b, srv.URL(), ob)
	b.Run("batch=16", func(b *testing.B) {
		bench(b, batch, 4, Limit{Rate: 1e5, MaxWait: time.Hour}, reserve(batch))
	})
	flood := newNode(b, srv.URL(), o)
	b.Run("flood", func(b *testing.B) {
		bench(b, flood, 4, Limit{Rate: 100, MaxWait: 100 * time.Millisecond}, reserve(flood))
	})
	ping := newNode(b, srv.URL(), o)
	b.Run("baseline=ping", func(b *testing.B) {
		c := ping.Redis().client.Load().Client
		bench(b, ping, 1, Limit{Rate: 1}, func(Key) Source {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Do(ctx, c.B().Ping().Build()).Error()
			cancel()
			if err != nil {
				return SourceOpen
			}
			return SourceRedis
		})
	})
}

// latencies is a histogram of 10 µs buckets up to 100 ms.
type latencies [10001]uint32

func (h *latencies) add(d time.Duration) {
	h[min(int(d/(10*time.Microsecond)), len(h)-1)]++
}

// percentile returns the q quantile of the merged histograms, in µs.
func percentile(hists []*latencies, q float64) float64 {
	var all latencies
	var total uint64
	for _, h := range hists {
		for i, c := range h {
			all[i] += c
			total += uint64(c)
		}
	}
	want := uint64(q * float64(total))
	var seen uint64
	for i, c := range all {
		if seen += uint64(c); seen > want {
			return float64((i + 1) * 10)
		}
	}
	return float64(len(all) * 10)
}
