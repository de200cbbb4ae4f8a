package quality

import (
	"fmt"
	"testing"
	"time"

	"github.com/sipedge/sipedge/route"
)

// BenchmarkRecordOutcome records one attempt's outcome on a shard: the
// carrier's and the gateway's tallies, over 10 prefixes x 20 carriers x 3
// gateways already seen, the clock advancing 10 µs an attempt (a rotation
// every 500,000, its buckets handed back as the reader would). Goal: 0
// allocs, under 50 ns.
func BenchmarkRecordOutcome(b *testing.B) {
	prefixes := []string{""}
	for i := range 9 {
		prefixes = append(prefixes, fmt.Sprint(44+i))
	}
	m := newTestMonitor(b, Config{Prefixes: prefixes}, Options{})
	c := m.Collector(0)
	statuses := []int{200, 486, 503, 480, 200, 404, 200}
	var outcomes []Outcome
	var ps []Prefix
	for pi := range prefixes {
		for ci := range 20 {
			for g := range 3 {
				outcomes = append(outcomes, Outcome{
					Carrier: fmt.Sprintf("carrier-%02d", ci),
					Gateway: fmt.Sprintf("sip:gw%d@carrier-%02d.example.net", g, ci),
					Status:  statuses[(pi+ci+g)%len(statuses)],
					Dialed:  true,
					PDD:     1800 * time.Millisecond,
					Setup:   7 * time.Second,
				})
				ps = append(ps, m.Prefix(prefixes[pi]+"7700900123"))
			}
		}
	}
	for i := range outcomes {
		c.Record(0, ps[i], &outcomes[i])
	}
	now := time.Duration(0)
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now += 10 * time.Microsecond
		if now >= c.end {
			recycle(c)
		}
		c.Record(now, ps[i], &outcomes[i])
		if i++; i == len(outcomes) {
			i = 0
		}
	}
}

// BenchmarkMapLookup is the baseline for BenchmarkRecordOutcome in the
// same run, on a machine whose speed drifts: one lookup in a Go map of the
// same 600 gateway names, the least a Record through a gateway does.
func BenchmarkMapLookup(b *testing.B) {
	names := map[string]int32{}
	var keys []string
	for ci := range 20 {
		for g := range 3 {
			k := fmt.Sprintf("sip:gw%d@carrier-%02d.example.net", g, ci)
			names[k] = int32(len(keys))
			keys = append(keys, k)
		}
	}
	i, sum := 0, 0
	for b.Loop() {
		sum += int(names[keys[i]])
		if i++; i == len(keys) {
			i = 0
		}
	}
	if sum < 0 {
		b.Fatal(sum)
	}
}

// BenchmarkReorder is the call path's read of the scores: Prefix, Reorder
// of a five-carrier decision in demote mode, and Disabled for the first
// carrier. moved: the first carrier is demoted, so the routes are copied
// into a reused buffer in the new order; kept: the demoted carrier is
// already last, so the decision itself comes back. Goal: 0 allocs.
func BenchmarkReorder(b *testing.B) {
	m := newTestMonitor(b, Config{Mode: ModeDemote, Prefixes: []string{"", "44"}}, Options{})
	c := m.Collector(0)
	p := m.Prefix("+447700900123")
	for range 30 {
		c.Record(time.Second, p, &Outcome{Carrier: "c1", Status: 503, Dialed: true})
	}
	c.Tick(10 * time.Second)
	m.Update(10 * time.Second)
	f := func(name string, routes []route.Route) {
		b.Run(name, func(b *testing.B) {
			dst := make([]route.Route, 0, 8)
			b.ReportAllocs()
			for b.Loop() {
				p := m.Prefix("+447700900123")
				dst = m.Reorder(dst, routes, p)
				if m.Disabled(p, dst[0].CarrierID) || dst[4].CarrierID != "c1" {
					b.Fatal("wrong order")
				}
			}
		})
	}
	f("moved", []route.Route{{CarrierID: "c1"}, {CarrierID: "c2"}, {CarrierID: "c3"}, {CarrierID: "c4"}, {CarrierID: "c5"}})
	f("kept", []route.Route{{CarrierID: "c2"}, {CarrierID: "c3"}, {CarrierID: "c4"}, {CarrierID: "c5"}, {CarrierID: "c1"}})
}

// BenchmarkUpdate is one sampling interval of the reader: 4 shards record
// an attempt for each of 1,000 pairs (10 prefixes x 100 carriers, no
// gateways) and seal their buckets, then Update merges them, expires the
// interval leaving the full 360-interval window, scores every pair and
// publishes. Off the call path.
func BenchmarkUpdate(b *testing.B) {
	prefixes := []string{""}
	for i := range 9 {
		prefixes = append(prefixes, fmt.Sprint(44+i))
	}
	m := newTestMonitor(b, Config{Prefixes: prefixes}, Options{Shards: 4})
	carriers := make([]string, 100)
	for i := range carriers {
		carriers[i] = fmt.Sprint("carrier-", i)
	}
	now := time.Duration(0)
	step := func() {
		for s := range 4 {
			c := m.Collector(s)
			for pi := range prefixes {
				p := Prefix(pi)
				for ci := range 100 {
					if (ci+s)%4 == 0 {
						c.Record(now, p, &Outcome{Carrier: carriers[ci], Status: 200, Dialed: true, Setup: time.Second})
					}
				}
			}
			c.Tick(now + m.interval)
		}
		now += m.interval
		m.Update(now)
	}
	for range m.span + 1 {
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(len(m.entries)), "pairs")
}
