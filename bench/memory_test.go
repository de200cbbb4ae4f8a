// The race runtime's shadow memory grows with the heap and is not given
// back: RSS under -race says nothing about sipedge's.

//go:build !race

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/txn"
)

// Memory after a burst: does it come back? One shard's engine takes 40,000
// calls at 1,000 calls/s (its transaction tables reach the peak of a
// longer burst: Timer J/L/M hold them 32 s), then idles a minute on the
// fake clock, and the heap and RSS are read after a collection, in four
// ways, each in a process of its own (RSS is the process's):
//
//	keep        the transaction slots keep their buffers (txn.Config.IdleRelease
//	            negative, as before the trim), then debug.FreeOSMemory
//	trim        the slots give them back (the default), a collection, 5 s for
//	            the runtime's background scavenger
//	trim+limit  as trim, under a GOMEMLIMIT set from the table's budget
//	            (twice txn.DefaultMaxStoredBytes, the most it holds, plus
//	            64 MiB), 5 s
//	trim+free   as trim, then debug.FreeOSMemory: what sipedge does once its
//	            tables gave memory back (the server's memory release)
//
// The test asserts the last: the heap in use within 20 MiB of the start,
// and RSS within twice the start's (and 32 MiB, a test binary starting
// small); it logs the four.
//
//	go test -run MemoryReturns -v ./bench/
func TestMemoryReturnsAfterBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("a 40,000-call burst in four processes: a minute of CPU")
	}
	if mode := os.Getenv(burstModeEnv); mode != "" {
		burst(t, mode)
		return
	}
	modes := []string{"keep", "trim", "trim+limit", "trim+free"}
	got := map[string]burstFigures{}
	for _, mode := range modes {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMemoryReturnsAfterBurst$", "-test.v")
		cmd.Env = append(os.Environ(), burstModeEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		f, ok := parseFigures(string(out))
		if !ok {
			t.Fatalf("%s: no figures in\n%s", mode, out)
		}
		got[mode] = f
	}
	t.Logf("%-11s %12s %12s %12s %10s %10s %10s", "mode", "heap start", "heap peak", "heap idle", "rss start", "rss peak", "rss idle")
	for _, mode := range modes {
		f := got[mode]
		t.Logf("%-11s %9.1f MB %9.1f MB %9.1f MB %7.1f MB %7.1f MB %7.1f MB", mode,
			mb(f.heapStart), mb(f.heapPeak), mb(f.heapIdle), mb(f.rssStart), mb(f.rssPeak), mb(f.rssIdle))
	}
	f := got["trim+free"]
	// The peak is some 50 MiB since transactions past sending shed their
	// messages (txn's shed.go); 30 MiB is still a peak to come back from.
	if f.heapPeak < f.heapStart+30<<20 {
		t.Fatalf("the burst took the heap from %.1f to %.1f MB only: no peak to come back from", mb(f.heapStart), mb(f.heapPeak))
	}
	if f.heapIdle > f.heapStart+20<<20 {
		t.Errorf("heap in use %.1f MB after the burst and a minute idle, %.1f MB at the start: want within 20 MiB", mb(f.heapIdle), mb(f.heapStart))
	}
	if f.rssIdle > max(2*f.rssStart, 32<<20) {
		t.Errorf("RSS %.1f MB after the burst and a minute idle, %.1f MB at the start: want within twice that (32 MiB at least)", mb(f.rssIdle), mb(f.rssStart))
	}
}

const burstModeEnv = "SIPEDGE_BURST_MODE"

type burstFigures struct{ heapStart, heapPeak, heapIdle, rssStart, rssPeak, rssIdle uint64 }

func mb(n uint64) float64 { return float64(n) / (1 << 20) }

// burst runs the burst in this process the way mode says and prints its
// figures for the parent.
func burst(t *testing.T, mode string) {
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	runtime.GC()
	var f burstFigures
	f.heapStart, f.rssStart = heap(), rss(t)
	if mode == "trim+limit" {
		debug.SetMemoryLimit(2*txn.DefaultMaxStoredBytes + 64<<20)
	}
	r := newRig(t, rigOptions{trusted: true, trim: mode != "keep", period: 1 << 62})
	for i := range 40_000 {
		r.call()
		if i%100 == 99 {
			r.Advance(100 * time.Millisecond) // 1,000 calls/s
		}
	}
	f.heapPeak, f.rssPeak = heap(), rss(t)
	r.Advance(time.Minute)
	r.Clock.Release()
	if r.e.Transactions() != 0 || r.e.Calls() != 0 {
		t.Fatalf("idle with %d transactions and %d calls", r.e.Transactions(), r.e.Calls())
	}
	runtime.GC()
	switch mode {
	case "keep", "trim+free":
		debug.FreeOSMemory()
	default:
		time.Sleep(5 * time.Second) // the background scavenger's turn
	}
	f.heapIdle, f.rssIdle = heap(), rss(t)
	r.check(40_000)
	runtime.KeepAlive(r)
	fmt.Printf("burst figures: %d %d %d %d %d %d\n", f.heapStart, f.heapPeak, f.heapIdle, f.rssStart, f.rssPeak, f.rssIdle)
}

func parseFigures(out string) (burstFigures, bool) {
	_, line, ok := strings.Cut(out, "burst figures: ")
	if !ok {
		return burstFigures{}, false
	}
	line, _, _ = strings.Cut(line, "\n")
	var n [6]uint64
	fs := strings.Fields(line)
	if len(fs) != len(n) {
		return burstFigures{}, false
	}
	for i, s := range fs {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return burstFigures{}, false
		}
		n[i] = v
	}
	return burstFigures{n[0], n[1], n[2], n[3], n[4], n[5]}, true
}

// rss returns the process's resident set, from /proc/self/statm.
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	fs := strings.Fields(string(b))
	if len(fs) < 2 {
		t.Fatalf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseUint(fs[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * uint64(os.Getpagesize())
}
