package quality

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
)

// TestConcurrentShards: shards record while the reader merges and the
// control plane disables, enables and reads the status; every attempt is
// counted once. Run with -race, it checks the hand-over of buckets.
func TestConcurrentShards(t *testing.T) {
	const shards, perShard = 4, 20_000
	m := newTestMonitor(t, Config{Mode: ModeSort, Prefixes: []string{"", "44"}, SamplingIntervalSecs: 1, HistorySpanSecs: 3600},
		Options{Shards: shards})
	var clock atomic.Int64 // the latest time any shard has seen
	advance := func(now time.Duration) {
		for {
			c := clock.Load()
			if int64(now) <= c || clock.CompareAndSwap(c, int64(now)) {
				return
			}
		}
	}
	var shardsDone sync.WaitGroup
	stop := make(chan struct{})
	var others sync.WaitGroup
	for s := range shards {
		shardsDone.Go(func() {
			c := m.Collector(s)
			p := m.Prefix("+447700900123")
			routes := []route.Route{{CarrierID: "a"}, {CarrierID: "b"}, {CarrierID: "c"}}
			dst := make([]route.Route, 0, 3)
			o := Outcome{Gateway: fmt.Sprint("gw", s), Dialed: true, PDD: time.Second, Setup: 2 * time.Second}
			for i := range perShard {
				now := time.Duration(i) * 100 * time.Microsecond // 2 s in all
				advance(now)
				o.Carrier, o.Status = routes[i%3].CarrierID, []int{200, 486, 503}[i%3]
				c.Record(now, p, &o)
				if i%100 == 0 {
					c.RecordEnd(now, p, o.Carrier, o.Gateway, time.Minute)
				}
				dst = m.Reorder(dst, routes, p)
				m.Disabled(p, "a")
			}
			c.Tick(3 * time.Second)
		})
	}
	others.Go(func() { // the reader
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.Update(time.Duration(clock.Load()))
		}
	})
	others.Go(func() { // the control plane
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = m.Disable(Target{Carrier: "a"})
			_ = m.Status()
			_, _ = m.Enable(Target{Carrier: "a"})
		}
	})
	shardsDone.Wait()
	close(stop)
	others.Wait()
	m.Update(3 * time.Second)
	st := m.Status()
	var attempts, acd uint64
	for _, e := range st.Carriers {
		attempts += e.Attempts
		acd += e.ACD.Samples
	}
	var gateways uint64
	for _, e := range st.Gateways {
		gateways += e.Attempts
	}
	if attempts != shards*perShard || gateways != shards*perShard || acd != shards*perShard/100 {
		t.Fatalf("%d attempts by carrier, %d by gateway, %d ACD samples; want %d, %d, %d",
			attempts, gateways, acd, shards*perShard, shards*perShard, shards*perShard/100)
	}
	if len(st.Carriers) != 3 || len(st.Gateways) != shards || m.late.Get() != 0 {
		t.Fatalf("%d carriers, %d gateways, %d late buckets", len(st.Carriers), len(st.Gateways), m.late.Get())
	}
}

// TestReorderKeepsRoutes: the decision's routes are never modified, and a
// reordered copy carries every field.
func TestReorderKeepsRoutes(t *testing.T) {
	m := newTestMonitor(t, Config{Mode: ModeDemote}, Options{})
	c := m.Collector(0)
	for range 30 {
		c.Record(time.Second, 0, &Outcome{Carrier: "bad", Status: 503, Dialed: true})
	}
	c.Tick(5 * time.Second)
	m.Update(5 * time.Second)
	routes := []route.Route{
		{CarrierID: "bad", GatewayGroup: "g1", Rate: 0.01, Headers: map[string]string{"X-A": "1"}},
		{CarrierID: "good", GatewayGroup: "g2", Rate: 0.02},
	}
	orig := []route.Route{routes[0], routes[1]}
	got := m.Reorder(nil, routes, 0)
	if routes[0].CarrierID != "bad" || routes[1].CarrierID != "good" || orig[0].GatewayGroup != routes[0].GatewayGroup {
		t.Fatalf("Reorder modified the decision: %+v", routes)
	}
	if len(got) != 2 || got[0].GatewayGroup != "g2" || got[1].GatewayGroup != "g1" || got[1].Headers["X-A"] != "1" || got[1].Rate != 0.01 {
		t.Fatalf("Reorder = %+v", got)
	}
	// Off: whatever the scores, the decision itself.
	off := newTestMonitor(t, Config{}, Options{})
	if got := off.Reorder(nil, routes, 0); &got[0] != &routes[0] {
		t.Fatal("mode off reordered")
	}
}

// TestLongDecision: decisions longer than the stack's keys still sort.
func TestLongDecision(t *testing.T) {
	m := newTestMonitor(t, Config{Mode: ModeSort}, Options{})
	c := m.Collector(0)
	for range 30 {
		c.Record(time.Second, 0, &Outcome{Carrier: "c0", Status: 503, Dialed: true})
	}
	c.Tick(5 * time.Second)
	m.Update(5 * time.Second)
	routes := make([]route.Route, maxStackRoutes+10)
	for i := range routes {
		routes[i].CarrierID = fmt.Sprint("c", i)
	}
	got := m.Reorder(nil, routes, 0)
	if len(got) != len(routes) || got[0].CarrierID != "c1" || got[len(got)-1].CarrierID != "c0" || got[len(got)-2].CarrierID != fmt.Sprint("c", len(routes)-1) {
		t.Fatalf("Reorder of %d routes: first %s, last %s", len(routes), got[0].CarrierID, got[len(got)-1].CarrierID)
	}
}

// TestStart: an owner whose shards' clock comes later starts the reader
// with Start; a second Start starts no second one.
func TestStart(t *testing.T) {
	testtier.RequiresWallClock(t)
	events := make(chan Event, 2)
	m := newTestMonitor(t, Config{SamplingIntervalSecs: 1}, Options{OnEvent: func(ev Event) { events <- ev }})
	start := time.Now()
	clock := func() time.Duration { return time.Since(start) }
	c := m.Collector(0)
	for range 30 {
		c.Record(clock(), 0, &Outcome{Carrier: "a", Status: 503, Dialed: true})
	}
	m.Start(clock)
	m.Start(clock)
	time.Sleep(time.Until(start.Add(time.Second)))
	c.Tick(clock())
	select {
	case ev := <-events:
		if ev.Carrier != "a" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event: %+v", m.Status())
	}
	select {
	case ev := <-events:
		t.Fatalf("a second event, from a second reader: %+v", ev)
	case <-time.After(1500 * time.Millisecond):
	}
}

// TestScores: what a routing API is told of a prefix: every carrier with
// figures there (a perfect one at 0) or a disable, by name.
func TestScores(t *testing.T) {
	m := newTestMonitor(t, Config{Mode: ModeDemote, Prefixes: []string{"", "44"}}, Options{})
	c := m.Collector(0)
	p := m.Prefix("+447700900123")
	for range 30 {
		c.Record(time.Second, p, &Outcome{Carrier: "bad", Status: 503, Dialed: true})
		c.Record(time.Second, p, &Outcome{Carrier: "good", Status: 200, Dialed: true})
		c.Record(time.Second, 0, &Outcome{Carrier: "elsewhere", Status: 200, Dialed: true})
	}
	c.Tick(10 * time.Second)
	m.Update(10 * time.Second)
	prefix44 := "44"
	for _, tg := range []Target{{Carrier: "good", Prefix: &prefix44}, {Carrier: "gone"}} {
		if err := m.Disable(tg); err != nil {
			t.Fatal(err)
		}
	}
	got := m.Scores(nil, p)
	want := []CarrierScore{{Carrier: "bad", Score: 20, Demoted: true}, {Carrier: "gone", Disabled: true},
		{Carrier: "good", Disabled: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Scores:\n got %+v\nwant %+v", got, want)
	}
	if got := m.Scores(nil, NoPrefix); len(got) != 0 {
		t.Fatalf("no prefix: %+v", got)
	}
}

// TestReader: with Options.Clock, the reader goroutine updates the figures
// after each sampling interval by itself.
func TestReader(t *testing.T) {
	testtier.RequiresWallClock(t)
	start := time.Now()
	clock := func() time.Duration { return time.Since(start) }
	events := make(chan Event, 1)
	m := newTestMonitor(t, Config{SamplingIntervalSecs: 1}, Options{Clock: clock, OnEvent: func(ev Event) { events <- ev }})
	c := m.Collector(0)
	for range 30 {
		c.Record(clock(), 0, &Outcome{Carrier: "a", Status: 503, Dialed: true})
	}
	// A shard ticks far more often than this; once is enough here.
	time.Sleep(time.Until(start.Add(time.Second)))
	c.Tick(clock())
	select {
	case ev := <-events:
		if ev.Carrier != "a" || ev.Score != 20 {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event: %+v", m.Status())
	}
	if st := m.Status(); st.Updated.IsZero() || len(st.Carriers) != 1 || st.Carriers[0].Attempts != 30 {
		t.Fatalf("status %+v", st)
	}
}
