//go:build !race

package quality

import (
	"fmt"
	"testing"
	"time"

	"github.com/sipedge/sipedge/route"
)

// TestRecordAllocs: recording on a shard does not allocate once the pair
// has been seen, across rotations too once the reader hands buckets back.
func TestRecordAllocs(t *testing.T) {
	m := newTestMonitor(t, Config{Prefixes: []string{"", "44"}}, Options{})
	c := m.Collector(0)
	p := m.Prefix("+447700900123")
	o := Outcome{Carrier: "carrier-a", Gateway: "sip:gw1@192.0.2.1", Status: 200, Dialed: true, PDD: time.Second, Setup: 3 * time.Second}
	now := time.Second
	c.Record(now, p, &o)
	if n := testing.AllocsPerRun(1000, func() { c.Record(now, p, &o) }); n != 0 {
		t.Errorf("Record: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() { c.RecordEnd(now, p, "carrier-a", "sip:gw1@192.0.2.1", time.Minute) }); n != 0 {
		t.Errorf("RecordEnd: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() { c.Tick(now) }); n != 0 {
		t.Errorf("Tick: %v allocs", n)
	}
	// A new interval each run: the bucket sealed, a spare one taken.
	for range 3 {
		now += m.interval
		c.Record(now, p, &o)
		recycle(c)
	}
	n := testing.AllocsPerRun(1000, func() {
		now += m.interval
		c.Record(now, p, &o)
		recycle(c)
	})
	if n != 0 {
		t.Errorf("Record across a rotation: %v allocs", n)
	}
}

// TestReadAllocs: the shards' reads of the scores and disables do not
// allocate, nor does Reorder when nothing moves or dst is large enough.
func TestReadAllocs(t *testing.T) {
	m := newTestMonitor(t, Config{Mode: ModeDemote, Prefixes: []string{"", "44"}}, Options{})
	c := m.Collector(0)
	p := m.Prefix("+447700900123")
	for i := range 30 {
		c.Record(time.Second, p, &Outcome{Carrier: "bad", Status: 503, Dialed: true})
		c.Record(time.Second, p, &Outcome{Carrier: fmt.Sprint("good", i%3), Status: 200, Dialed: true})
	}
	c.Tick(10 * time.Second)
	m.Update(10 * time.Second)
	if err := m.Disable(Target{Carrier: "off"}); err != nil {
		t.Fatal(err)
	}
	if m.Score(p, "bad") == 0 || !m.Disabled(p, "off") {
		t.Fatal("setup: no score or no disable")
	}
	same := []route.Route{{CarrierID: "good0"}, {CarrierID: "good1"}, {CarrierID: "bad"}}
	moved := []route.Route{{CarrierID: "bad"}, {CarrierID: "good0"}, {CarrierID: "good1"}}
	dst := make([]route.Route, 0, 8)
	long := []byte("+4477009001234567890123456789012345678901234567890") // past a conversion's stack buffer
	checks := map[string]func(){
		"Prefix":            func() { m.Prefix("+447700900123") },
		"PrefixBytes":       func() { m.PrefixBytes(long) },
		"Disabled":          func() { m.Disabled(p, "good0") },
		"Disabled (yes)":    func() { m.Disabled(p, "off") },
		"Score":             func() { m.Score(p, "bad") },
		"Reorder (same)":    func() { m.Reorder(dst, same, p) },
		"Reorder (changed)": func() { dst = m.Reorder(dst, moved, p) },
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs", name, n)
		}
	}
	if dst[0].CarrierID != "good0" || dst[2].CarrierID != "bad" {
		t.Errorf("Reorder: %v", dst)
	}
}
