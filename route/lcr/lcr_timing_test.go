package lcr

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/route"
)

// BenchmarkDecisionCacheHit is the shard's hit path: build the key into a
// reused buffer, read the in-process tier. Goal: 0 allocs, under 100 ns.
func BenchmarkDecisionCacheHit(b *testing.B) {
	api := newAPIServer(b, nil)
	r, err := New(Options{APIURL: api.URL, Metrics: metrics.NewSet(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	// One decision from the API, then 10,000 more numbers put straight into
	// the tier so that its maps are not trivially small.
	req := testRequest("+12025550123")
	ch := make(chan Decision, 1)
	r.Lookup(req, func(d Decision) { ch <- d })
	d := <-ch
	for i := range 10_000 {
		r.local.put(fmt.Sprintf("cust-trunks:+1303555%04d", i), d, math.MaxInt64, 0)
	}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf = r.AppendKey(buf[:0], req.Source.TrunkGroup, req.DialedNumber, req.Attributes)
		if _, ok := r.LookupCached(buf); !ok {
			b.Fatal("miss")
		}
	}
}

// BenchmarkDecisionCacheHitParallel: every core reading the tier at once.
func BenchmarkDecisionCacheHitParallel(b *testing.B) {
	api := newAPIServer(b, nil)
	r, err := New(Options{APIURL: api.URL, Metrics: metrics.NewSet(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ch := make(chan Decision, 1)
	for i := range 64 {
		r.Lookup(testRequest(fmt.Sprintf("+1202555%04d", i)), func(d Decision) { ch <- d })
		<-ch
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		keys := make([][]byte, 64)
		for i := range keys {
			keys[i] = r.AppendKey(nil, "cust-trunks", fmt.Sprintf("+1202555%04d", i), nil)
		}
		i := 0
		for pb.Next() {
			if _, ok := r.LookupCached(keys[i%64]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}

// BenchmarkStaticLookup: longest-prefix match in a 10,000-prefix table.
func BenchmarkStaticLookup(b *testing.B) {
	entries := make([]StaticEntry, 0, 10_001)
	entries = append(entries, StaticEntry{Prefix: "", Routes: []route.Route{{CarrierID: "d", GatewayGroup: "d"}}})
	for i := range 10_000 {
		entries = append(entries, StaticEntry{Prefix: fmt.Sprintf("1%d", 2000+i), Routes: []route.Route{
			{CarrierID: "b", GatewayGroup: "b", Rate: 0.02}, {CarrierID: "a", GatewayGroup: "a", Rate: 0.01}}})
	}
	tab, err := NewStaticTable(entries)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if routes, _ := tab.Lookup("+12025550123"); len(routes) != 2 {
			b.Fatal("no match")
		}
	}
}
