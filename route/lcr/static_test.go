package lcr

import (
	"errors"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/route"
)

func rt(carrier string, rate float64) route.Route {
	return route.Route{CarrierID: carrier, GatewayGroup: carrier, Rate: rate}
}

func carriers(routes []route.Route) string {
	ids := make([]string, len(routes))
	for i := range routes {
		ids[i] = routes[i].CarrierID
	}
	return strings.Join(ids, ",")
}

func testTable(t *testing.T) *StaticTable {
	t.Helper()
	tab, err := NewStaticTable([]StaticEntry{
		{Prefix: "", Routes: []route.Route{rt("default", 0.1)}},
		{Prefix: "1", Routes: []route.Route{rt("us-b", 0.02), rt("us-a", 0.01), rt("us-c", 0.02)}},
		{Prefix: "+1202", Routes: []route.Route{rt("dc", 0.005)}},
		{Prefix: "44", Routes: []route.Route{rt("uk-b", 0.03), rt("uk-a", 0.03)}},
		{Prefix: "447", Routes: []route.Route{rt("uk-mobile", 0.05)}},
		{Prefix: "1900", Routes: nil}, // premium numbers: blocked
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestStaticTableLookup(t *testing.T) {
	tab := testTable(t)
	f := func(number, want string, wantOK bool) {
		t.Helper()
		routes, ok := tab.Lookup(number)
		if got := carriers(routes); got != want || ok != wantOK {
			t.Fatalf("Lookup(%q) = %q, %v; want %q, %v", number, got, ok, want, wantOK)
		}
	}
	// Longest prefix wins; routes by rate, equal rates in table order.
	f("+12025550123", "dc", true)
	f("12025550123", "dc", true)
	f("+13105550100", "us-a,us-b,us-c", true)
	f("1", "us-a,us-b,us-c", true)
	f("447700900123", "uk-mobile", true)
	f("+442079460000", "uk-b,uk-a", true)
	f("44", "uk-b,uk-a", true)
	f("4", "default", true)
	// "" matches everything, including the empty number and non-digits.
	f("", "default", true)
	f("+", "default", true)
	f("33123456789", "default", true)
	f("anonymous", "default", true)
	f("12x02", "us-a,us-b,us-c", true) // the match stops at the first non-digit
	// An empty route list blocks the prefix.
	f("19005550100", "", true)
	if tab.Len() != 6 {
		t.Fatalf("Len %d", tab.Len())
	}
}

func TestStaticTableNoDefault(t *testing.T) {
	tab, err := NewStaticTable([]StaticEntry{{Prefix: "33", Routes: []route.Route{rt("fr", 0.01)}}})
	if err != nil {
		t.Fatal(err)
	}
	if routes, ok := tab.Lookup("44123"); ok || routes != nil {
		t.Fatalf("unmatched number: %v %v", routes, ok)
	}
	var nilTable *StaticTable
	if _, ok := nilTable.Lookup("33"); ok || nilTable.Len() != 0 {
		t.Fatal("a nil table matches")
	}
}

func TestStaticTableCopiesRoutes(t *testing.T) {
	in := []route.Route{rt("b", 2), rt("a", 1)}
	tab, err := NewStaticTable([]StaticEntry{{Prefix: "1", Routes: in}})
	if err != nil {
		t.Fatal(err)
	}
	if carriers(in) != "b,a" {
		t.Fatalf("the caller's routes were reordered: %s", carriers(in))
	}
	in[0].CarrierID = "changed"
	if routes, _ := tab.Lookup("1"); carriers(routes) != "a,b" {
		t.Fatalf("routes %s", carriers(routes))
	}
}

func TestStaticTableErrors(t *testing.T) {
	f := func(entries []StaticEntry, want string) {
		t.Helper()
		_, err := NewStaticTable(entries)
		if err == nil || !errors.Is(err, ErrInvalidTable) || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
	}
	f([]StaticEntry{{Prefix: "12a"}}, `prefix "12a" is not digits`)
	f([]StaticEntry{{Prefix: "++1"}}, `prefix "++1" is not digits`)
	f([]StaticEntry{{Prefix: "44"}, {Prefix: "+44"}}, `prefix "+44" appears twice`)
	f([]StaticEntry{{Prefix: ""}, {Prefix: "+"}}, `prefix "+" appears twice`)
	f([]StaticEntry{{Prefix: "1", Routes: []route.Route{{CarrierID: "a"}}}}, `prefix "1": routes[0]`)
	f([]StaticEntry{{Prefix: "1", Routes: []route.Route{{GatewayGroup: "g"}}}}, "carrier_id is empty")
	f([]StaticEntry{{Prefix: "1", Routes: []route.Route{{CarrierID: "a", GatewayGroup: "g", Rate: -1}}}}, "rate -1")
}

// TestStaticResolver: without an API URL the resolver answers from the
// table, synchronously.
func TestStaticResolver(t *testing.T) {
	r := newTestResolver(t, Options{Static: testTable(t), FallbackGatewayGroup: "unused"})
	called := false
	r.Lookup(testRequest("+13105550100"), func(d Decision) {
		called = true
		if d.Source != route.SourceStatic || d.NoDecision || d.Reject != nil || d.TTL != 0 || carriers(d.Routes) != "us-a,us-b,us-c" {
			t.Fatalf("decision %+v", d)
		}
	})
	if !called {
		t.Fatal("done was not called synchronously")
	}
	empty := newTestResolver(t, Options{})
	d := empty.lookup(t, testRequest("+13105550100"))
	if d.Source != route.SourceStatic || d.NoDecision || len(d.Routes) != 0 {
		t.Fatalf("empty table: decision %+v", d)
	}
	if _, ok := r.LookupCached([]byte("cust-trunks:+13105550100")); ok {
		t.Fatal("LookupCached hit in static mode")
	}
}
