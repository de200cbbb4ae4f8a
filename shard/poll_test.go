package shard

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
)

// Datagrams that keep coming put the loop into polling (batch intervals
// counted); with BatchInterval 0 it never polls. Either way every request
// is answered. With two shards, those owned by the other shard too: they
// are handed over while the receiving loop polls and the owner may be
// polling as well, which only the rings run every interval deliver,
// without wakes. One shard has a P to spare (GOMAXPROCS 2 or more) and
// sleeps in nanosleep; two may not, and sleep in time.Sleep.
func TestPollingUnderLoad(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testPolling(t, shards) })
	}
}

func testPolling(t *testing.T, shards int) {
	f := func(interval time.Duration, wantPolls bool) {
		t.Helper()
		set := metrics.NewSet()
		r := &responder{byShard: make(map[int]int)}
		port := freePort(t)
		runServer(t, Config{Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port)), Shards: shards,
			BatchInterval: interval}, r.handler, set)
		c := dialUDP(t, port)
		local := c.LocalAddr().(*net.UDPAddr).Port
		if err := c.SetReadBuffer(4 << 20); err != nil { // the replies wait until all is sent
			t.Fatal(err)
		}
		const bursts, size = 50, 4
		for b := range bursts { // a burst a millisecond: busy for any interval from 0.5 ms
			for i := range size {
				id := fmt.Sprintf("poll-%d-%d", b, i)
				if _, err := c.Write([]byte(options(id, id, "UDP", local))); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Millisecond)
		}
		got := make(map[string]bool)
		for range bursts * size {
			_, id, _ := strings.Cut(readUDP(t, c), "Call-ID: ")
			id, _, _ = strings.Cut(id, "\r\n")
			got[id] = true
		}
		if len(got) != bursts*size {
			t.Fatalf("interval %v: %d distinct requests answered, want %d", interval, len(got), bursts*size)
		}
		if r.wrong.Load() != 0 {
			t.Fatalf("interval %v: %d messages handled by a shard that does not own them", interval, r.wrong.Load())
		}
		if polls := metricSum(set, "sipedge_shard_batch_intervals_total"); (polls > 0) != wantPolls {
			t.Fatalf("interval %v: %v batch intervals, want some: %v", interval, polls, wantPolls)
		}
	}
	f(2*time.Millisecond, true)
	f(0, false)
}

// metricSum adds up the samples of a metric over its labels.
func metricSum(set *metrics.Set, name string) float64 {
	var b bytes.Buffer
	set.WritePrometheus(&b)
	sum := 0.0
	for _, line := range strings.Split(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			var x float64
			fmt.Sscan(v, &x)
			sum += x
		}
	}
	return sum
}

// The interval a polling loop sleeps doubles while intervals bring fewer
// messages than a read batch, up to BatchIntervalMax, halves while they
// bring more than four, down to BatchInterval, and stays put in between;
// with BatchIntervalMax at or below BatchInterval it is fixed.
func TestBatchIntervalAdapts(t *testing.T) {
	const ms = time.Millisecond
	f := func(base, most time.Duration, brought []uint64, want []time.Duration) {
		t.Helper()
		sh := &Shard{srv: &Server{cfg: Config{BatchInterval: base, BatchIntervalMax: most}}}
		var got []time.Duration
		for _, n := range brought {
			every := sh.interval()
			got = append(got, every)
			sh.adapt(every, n)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("base %v, max %v, brought %v: intervals %v, want %v", base, most, brought, got, want)
		}
	}
	// 1,000 calls/s: some 7 messages a millisecond.
	f(ms, 4*ms, []uint64{7, 14, 28, 28, 28}, []time.Duration{ms, 2 * ms, 4 * ms, 4 * ms, 4 * ms})
	// Heavier load brings it down, and back up when the load eases.
	f(ms, 4*ms, []uint64{7, 14, 28, 280, 140, 70, 70, 10, 20}, []time.Duration{ms, 2 * ms, 4 * ms, 4 * ms, 2 * ms, ms, ms, ms, 2 * ms})
	// Never below the base, however heavy.
	f(ms, 4*ms, []uint64{500, 500}, []time.Duration{ms, ms})
	// A maximum at or below the base, or 0: fixed.
	f(2*ms, ms, []uint64{1, 1, 1}, []time.Duration{2 * ms, 2 * ms, 2 * ms})
	f(ms, 0, []uint64{1, 1}, []time.Duration{ms, ms})
	// A maximum that is not a power of two times the base is reached.
	f(ms, 3*ms, []uint64{1, 1, 1, 1}, []time.Duration{ms, 2 * ms, 3 * ms, 3 * ms})
}
