package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkWireCallFlow makes complete calls through sipedge on the wire:
// the server as a program embeds it (gnet's event loops, the shards, the
// parser, transactions, the B2BUA engine and the CDR writer), on loopback
// UDP or TCP, between an in-process caller and carrier written for load
// (loadPeers: batched reads and writes, one goroutine, nothing per call).
// One op is one call, seven messages on each leg (INVITE, 100, 180, 200,
// ACK, BYE, 200), with every message of it counted at the peers.
//
// Sub-benchmarks: the transport, the shards (1, and 2: one per core of a
// small box), and how calls are placed: window=W keeps W calls in flight
// (a new call as one ends), rate=R places R calls a second (the load SIPp
// puts on in bench/sipp/run.sh). window=256 is the box's capacity. With
// window=32 the calls wait on each other: a polling shard lengthens its
// batch interval while intervals bring few messages (shard/poll.go), and
// 32 calls bring few, so calls/s there is bound by the interval's latency
// (about 2,200 over UDP), not the CPU.
//
// Each sub-benchmark starts one sipedge, with T1 100 ms (wireOptions:
// loopbackT1), and warms it up with 8 s of a harder load (wireRig.warm),
// past the 6.4 s its transactions outlive their calls: the runs that
// follow (b.N grows run by run) measure the steady state, where the
// transaction tables reuse their slots, not their growth. It reports:
//   - calls/s: calls ended per second of the run;
//   - cpu-us/call: sipedge's CPU time per call. The peers run in the same
//     process, each on its own locked OS thread, so sipedge's share is the
//     process's CPU time (CLOCK_PROCESS_CPUTIME_ID) less the peers'
//     thread's (its thread CPU clock, threadCPU), over the measured calls.
//     The Go runtime's own threads (sysmon, GC workers) count as sipedge's:
//     the peers allocate nothing, so the work is sipedge's;
//   - allocs/call: heap allocations per call, the whole process's, which
//     are sipedge's for the same reason (allocs/op is the same figure
//     rounded down);
//   - sleeps/call: how often one of sipedge's threads blocked and had to
//     be woken, per call (voluntary context switches: the process's, from
//     getrusage, less the peers' thread's). Each costs a trip through the
//     kernel's and Go's schedulers; the figure is far steadier than CPU
//     time on a shared machine;
//   - retrans/call: messages that came twice, because sipedge
//     retransmitted (a peer slower than T1) or answered a repeat.
//
// Use a fixed count: the default benchtime runs each sub-benchmark three
// times after its 8 s warm-up, and the rate=1000 ones take a second per
// thousand calls:
//
//	go test -run '^$' -bench WireCallFlow -benchtime 10000x -count 5 ./bench/
func BenchmarkWireCallFlow(b *testing.B) {
	const warmup = 8 * time.Second
	var rigs wireRigs
	b.Cleanup(rigs.stop)
	for _, tcp := range []bool{false, true} {
		for _, shards := range []int{1, 2} {
			for _, load := range []wireLoad{{window: 32}, {window: 256}, {rate: 1000}} {
				if tcp && load.rate > 0 {
					continue // the paced load is SIPp's check, over UDP
				}
				transport := map[bool]string{false: "udp", true: "tcp"}[tcp]
				name := fmt.Sprintf("%s/shards=%d/%s", transport, shards, load)
				b.Run(name, func(b *testing.B) {
					defer peersP()()
					r := rigs.get(b, name, wireOptions{tcp: tcp, shards: shards, loopbackT1: true}, load, warmup)
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					mallocs, cpu, peers := ms.Mallocs, processCPU(), threadCPU(r.peers.tid)
					sleeps := processSleeps() - threadSleeps(r.peers.tid)
					start := time.Now()
					b.ReportAllocs()
					b.ResetTimer()
					var dups uint64
					if load.rate > 0 {
						dups = r.paced(b, uint64(b.N), load.rate)
					} else {
						dups = r.calls(b, uint64(b.N), load.window)
					}
					b.StopTimer()
					elapsed := time.Since(start)
					sipedge := processCPU() - cpu - (threadCPU(r.peers.tid) - peers)
					sleeps = processSleeps() - threadSleeps(r.peers.tid) - sleeps
					runtime.ReadMemStats(&ms)
					n := float64(b.N)
					b.ReportMetric(n/elapsed.Seconds(), "calls/s")
					b.ReportMetric(float64(sipedge.Microseconds())/n, "cpu-us/call")
					b.ReportMetric(float64(ms.Mallocs-mallocs)/n, "allocs/call")
					b.ReportMetric(float64(sleeps)/n, "sleeps/call")
					b.ReportMetric(float64(dups)/n, "retrans/call")
				})
			}
		}
	}
}

// wireLoad is how BenchmarkWireCallFlow places calls.
type wireLoad struct {
	window int     // calls in flight
	rate   float64 // calls a second, when not 0
}

func (l wireLoad) String() string {
	if l.rate > 0 {
		return fmt.Sprintf("rate=%g", l.rate)
	}
	return fmt.Sprintf("window=%d", l.window)
}

// wireRigs keeps the rig of the sub-benchmark running across its runs, so
// that sipedge starts and warms up once; the next sub-benchmark's stops
// it. Sub-benchmarks run one after another.
type wireRigs struct {
	name string
	rig  *wireRig
}

func (w *wireRigs) get(b *testing.B, name string, o wireOptions, load wireLoad, warmup time.Duration) *wireRig {
	b.Helper()
	if w.rig != nil && w.name == name {
		return w.rig
	}
	w.stop()
	w.name, w.rig = name, startWire(b, o)
	w.rig.warm(b, load, warmup)
	return w.rig
}

func (w *wireRigs) stop() {
	if w.rig != nil {
		w.rig.stop(nil) // a failed run showed sipedge's log already
		w.rig.remove()
		w.rig = nil
	}
}
