package server

import (
	"log/slog"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// The release frees memory once the tables' stored bytes fell to half their
// highest since the last release, and by 4 MiB at least, or to nothing
// after holding 4 MiB since they last held nothing: after a peak, once per
// halving as a load declines and when it is gone, never while they grow or
// hold steady, nor for small loads.
func TestMemoryReleaseAfterPeak(t *testing.T) {
	var stored int64
	freed := 0
	m := newMemoryRelease(func() int64 { return stored }, slog.New(slog.DiscardHandler), metrics.NewSet())
	m.free = func() { freed++ }
	f := func(mb int64, wantFreed int) {
		t.Helper()
		stored = mb << 20
		m.check()
		if freed != wantFreed || m.count.Get() != uint64(wantFreed) {
			t.Fatalf("stored %d MiB: %d releases (%d counted), want %d", mb, freed, m.count.Get(), wantFreed)
		}
	}
	f(10, 0)
	f(150, 0) // a peak
	f(150, 0)
	f(100, 0)
	f(76, 0) // 74 MiB under the peak: not half
	f(75, 1) // half: released, 75 the new mark
	f(75, 1)
	f(40, 1)
	f(37, 2)
	f(200, 2) // another peak
	f(101, 2)
	f(100, 3)
	f(6, 4)
	f(3, 4) // half, but 3 MiB only
	f(0, 5) // nothing left of the peak: idle
	f(0, 5)
	f(3, 5)
	f(0, 5) // nothing left of 3 MiB: too little to matter
	f(3, 5)
	f(2, 5)
	f(5, 5)
	f(0, 6) // 5 MiB since it last held nothing: idle again
}
