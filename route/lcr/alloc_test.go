//go:build !race

package lcr

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
)

// TestLookupCachedAllocs: the shard's hit path does not allocate.
func TestLookupCachedAllocs(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL, KeyAttributes: []string{"customer"}})
	req := testRequest("+12025550123")
	req.Attributes = map[string]string{"customer": "acme"}
	r.lookup(t, req)
	buf := make([]byte, 0, 128)
	var d Decision
	var ok bool
	n := testing.AllocsPerRun(1000, func() {
		buf = r.AppendKey(buf[:0], req.Source.TrunkGroup, req.DialedNumber, req.Attributes)
		d, ok = r.LookupCached(buf)
	})
	if n != 0 || !ok || d.TTL != time.Minute {
		t.Fatalf("%v allocs per hit (ok %v)", n, ok)
	}
	// A Lookup that hits the in-process tier does not allocate either.
	done := func(Decision) {}
	if n := testing.AllocsPerRun(1000, func() { r.Lookup(req, done) }); n != 0 {
		t.Fatalf("%v allocs per Lookup hit", n)
	}
}

func TestStaticLookupAllocs(t *testing.T) {
	tab := testTable(t)
	n := testing.AllocsPerRun(1000, func() {
		if _, ok := tab.Lookup("+447700900123"); !ok {
			t.Fatal("no match")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocs per static lookup", n)
	}
}

// A call whose decision is in the in-process cache is routed without an
// allocation, its trunk's attributes in the key included: it runs on the
// shard for every call.
func TestRouteCacheHitAllocs(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	res := newTestResolver(t, Options{APIURL: api.URL, KeyAttributes: []string{"customer", "tier"}})
	attrs := map[string]string{"customer": "acme", "region": "eu"}
	req := testRequest("+12025550123")
	req.Attributes = attrs
	res.lookup(t, req) // priming
	rt := NewRouter(res.Resolver, nil, func(uint64, route.Decision) { t.Error("a cache hit was posted") })
	q := &route.Request{TrunkGroup: req.Source.TrunkGroup, Attributes: attrs, Dialed: []byte("+12025550123")}
	if d := rt.Route(q); d.Pending || len(d.Routes) == 0 {
		t.Fatalf("not a cache hit: %+v", d)
	}
	if n := testing.AllocsPerRun(1000, func() { rt.Route(q) }); n != 0 {
		t.Errorf("%v allocations per cached route, want 0", n)
	}
}

// A call routed by the static table is routed without an allocation: the
// table is behind an atomic pointer the admin API replaces.
func TestRouteStaticAllocs(t *testing.T) {
	table, err := NewStaticTable([]StaticEntry{{Prefix: "1", Routes: []route.Route{{CarrierID: "a", GatewayGroup: "a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var static atomic.Pointer[StaticTable]
	static.Store(table)
	rt := NewRouter(nil, &static, nil)
	q := &route.Request{Dialed: []byte("+12025550123")}
	if d := rt.Route(q); len(d.Routes) != 1 || d.Source != route.SourceStatic {
		t.Fatalf("not a static decision: %+v", d)
	}
	if n := testing.AllocsPerRun(1000, func() { rt.Route(q) }); n != 0 {
		t.Errorf("%v allocations per static route, want 0", n)
	}
}
