package server

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// The memory release gives the operating system back what the transaction
// tables free after a peak. The tables give their idle slots' buffers to
// the garbage collector after txn.Config.IdleRelease, but an idle process
// allocates too little for a collection to run (the runtime forces one
// every two minutes), and the runtime returns freed pages slowly: after a
// burst of 40,000 calls at 1,000 calls/s and a minute idle, the heap in use
// was back to 4 MB from 137 MB, and RSS still 151 MB (bench/memory_test.go).
// A GOMEMLIMIT does not help below its limit, and one low enough to (say a
// budget-derived 192 MiB for one shard) changed nothing in the same run.
// debug.FreeOSMemory, a collection and every free page back, brought RSS
// to 14 MB. So every memoryReleaseCheck the release sums the tables'
// stored bytes, and once they hold half their highest since the last
// release or less, memoryReleaseMin less at least, or nothing at all after
// holding memoryReleaseMin since they last did (the node is idle: what a
// peak left, calls and the like, has no other moment), it calls
// debug.FreeOSMemory: after peaks, a few times as a load declines (each
// halving), never under a steady one, and at most once a check. It logs
// each release and counts it in sipedge_memory_releases_total.
const (
	memoryReleaseCheck = 5 * time.Second
	memoryReleaseMin   = 4 << 20
)

// memoryRelease is the goroutine that releases; stop ends it.
type memoryRelease struct {
	stored func() int64 // the tables' stored bytes, summed
	free   func()       // debug.FreeOSMemory; tests count calls instead
	log    *slog.Logger
	count  *metrics.Counter
	high   int64 // stored, highest since the last release
	full   int64 // stored, highest since the tables were last empty
	done   chan struct{}
	wg     sync.WaitGroup
}

func newMemoryRelease(stored func() int64, log *slog.Logger, set *metrics.Set) *memoryRelease {
	return &memoryRelease{stored: stored, free: debug.FreeOSMemory, log: log,
		count: set.NewCounter("sipedge_memory_releases_total"), done: make(chan struct{})}
}

// start runs the checks in a goroutine of their own.
func (m *memoryRelease) start() {
	m.wg.Add(1)
	go m.run()
}

func (m *memoryRelease) run() {
	defer m.wg.Done()
	t := time.NewTicker(memoryReleaseCheck)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
			m.check()
		}
	}
}

// check releases when the tables' stored bytes fell to half their
// highest since the last release, by memoryReleaseMin at least, or to
// nothing after holding memoryReleaseMin since they last held nothing.
func (m *memoryRelease) check() {
	stored := m.stored()
	m.high, m.full = max(m.high, stored), max(m.full, stored)
	fell := m.high - stored
	halved := fell >= memoryReleaseMin && fell >= m.high/2
	drained := stored == 0 && m.full >= memoryReleaseMin
	if stored == 0 {
		m.full = 0
	}
	if !halved && !drained {
		return
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	m.free()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	m.count.Inc()
	m.log.Info("memory returned to the operating system after a peak", "txn_stored_bytes_peak", m.high,
		"txn_stored_bytes", stored, "heap_inuse_before", before.HeapInuse, "heap_inuse_after", after.HeapInuse,
		"released", after.HeapReleased-min(before.HeapReleased, after.HeapReleased), "took", time.Since(start))
	m.high = stored
}

// stop ends the goroutine and waits for it.
func (m *memoryRelease) stop() {
	close(m.done)
	m.wg.Wait()
}
