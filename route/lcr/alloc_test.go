//go:build !race

package lcr

import (
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
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
