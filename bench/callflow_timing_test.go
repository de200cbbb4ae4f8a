package bench

import (
	"runtime"
	"testing"
	"time"

	"github.com/sipedge/sipedge/quality"
)

// BenchmarkCallFlow makes complete calls through one shard's engine: per
// op, one call of seven messages on each leg (see rig.answer and
// rig.hangup), the peers' built from templates, parsed and validated as the
// shard does. The peers are load generators: they parse what they answer
// or read from (the B-leg INVITE, the BYE, the caller's 200) and check the
// first line of the rest; the tests in callflow_test.go make the same calls
// with every message sipedge sends parsed, validated and checked for
// topology leaks. The clock advances past the transactions' timers every
// 1024 calls. allocs/op is allocations per call; the goals are 0 and at
// least 100,000 calls/s on one core.
func BenchmarkCallFlow(b *testing.B) {
	benchmarkCallFlow(b, rigOptions{maxDuration: 3 * time.Hour})
}

// BenchmarkCallFlowHooks is BenchmarkCallFlow with a routing policy whose
// hooks do nothing: what running a policy's hooks (OnInvite and OnAnswer
// here), each guarded against a panic, costs a call.
func BenchmarkCallFlowHooks(b *testing.B) {
	benchmarkCallFlow(b, rigOptions{maxDuration: 3 * time.Hour, hooks: true})
}

// BenchmarkCallFlowFailover is BenchmarkCallFlow with a failover in every
// call: the first carrier answers 503 (ACKed by the transaction layer) and
// a fresh B-leg goes to the second, which answers. The goal is at least
// 60,000 calls/s on one core.
func BenchmarkCallFlowFailover(b *testing.B) {
	benchmarkCallFlow(b, rigOptions{maxDuration: 3 * time.Hour, failover: true})
}

// BenchmarkCallFlowFailoverPlane is BenchmarkCallFlowFailover through the
// server's carrier plane (rigOptions.plane) rather than the call core's
// own: the baseline of BenchmarkCallFlowFailoverQuality.
func BenchmarkCallFlowFailoverPlane(b *testing.B) {
	benchmarkCallFlow(b, rigOptions{maxDuration: 3 * time.Hour, failover: true, plane: true})
}

// BenchmarkCallFlowFailoverQuality is BenchmarkCallFlowFailoverPlane with
// quality statistics in demote mode: each attempt recorded, the collector
// ticked after each call, the reader run every 1,024 calls, each decision
// checked for carriers to move (none moves: the failing carrier is
// judged on nothing, the answering one is last already).
func BenchmarkCallFlowFailoverQuality(b *testing.B) {
	benchmarkCallFlow(b, rigOptions{maxDuration: 3 * time.Hour, failover: true, plane: true, quality: quality.ModeDemote})
}

// BenchmarkCallFlowFailoverReordered is BenchmarkCallFlowFailoverQuality
// with the answering carrier listed first and demoted (rigOptions.reorder):
// every call's routes are reordered into the call's own buffer.
func BenchmarkCallFlowFailoverReordered(b *testing.B) {
	benchmarkCallFlow(b, rigOptions{maxDuration: 3 * time.Hour, failover: true, plane: true, quality: quality.ModeDemote, reorder: true})
}

// benchmarkCallFlow makes calls through a rig built with o, warmed up
// first, and reports calls/s.
func benchmarkCallFlow(b *testing.B, o rigOptions) {
	r := newRig(b, o)
	for range 4 * r.period { // warm up: slabs, maps, queues, the timer list
		r.call()
		r.tick()
	}
	b.ReportAllocs()
	for b.Loop() {
		r.call()
		r.tick()
	}
	r.check(int(r.n))
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkConcurrentCalls holds a million confirmed calls (answered and
// ACKed, not hung up) in one engine and reports the heap each one holds,
// HeapAlloc after GC with the calls minus before, per call; the goal is
// under 2 KiB. The calls are set up 1024 at a time with the clock advanced
// past the transactions' timers in between, as a shard taking calls over
// time would see them: what is measured is the calls, not transactions
// long ended. There is no maximum duration, whose timer would sit in the
// shard's wheel, not the engine, and the peers' messages skip Validate,
// which changes nothing but the time. One run sets up all the calls
// whatever b.N, and takes tens of seconds:
//
//	go test -run '^$' -bench ConcurrentCalls -benchtime 1x ./bench/
func BenchmarkConcurrentCalls(b *testing.B) {
	const calls = 1_000_000
	r := newRig(b, rigOptions{trusted: true})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	start := time.Now()
	for range calls {
		r.answer()
		r.tick()
	}
	r.Advance(idle)
	setup := time.Since(start)
	r.Clock.Release()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.check(0)
	if r.e.Calls() != calls || r.e.Transactions() != 0 {
		b.Fatalf("%d calls (want %d), %d transactions", r.e.Calls(), calls, r.e.Transactions())
	}
	b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(before))/calls, "bytes/call")
	b.ReportMetric(float64(setup.Nanoseconds())/calls, "ns/answer")
	runtime.KeepAlive(r)
}
