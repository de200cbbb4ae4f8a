package lcr

import (
	"context"
	"net/http"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
)

func explainRequest(number string) *route.Request {
	return &route.Request{CallID: []byte("dry"), TrunkGroup: "cust-trunks", Dialed: []byte(number)}
}

// The static table explains itself by the prefix that matched; a number
// none matches is 404 No Route, as a Router answers it.
func TestExplainStatic(t *testing.T) {
	table, err := NewStaticTable([]StaticEntry{
		{Prefix: "+44", Routes: []route.Route{{CarrierID: "b", GatewayGroup: "b", Rate: 0.02}, {CarrierID: "a", GatewayGroup: "a", Rate: 0.01}}},
		{Prefix: "4420", Routes: []route.Route{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestResolver(t, Options{Static: table})
	f := func(number, prefix string, matched bool, carriers ...string) {
		t.Helper()
		ex := r.Explain(context.Background(), nil, explainRequest(number))
		var got []string
		for _, rt := range ex.Decision.Routes {
			got = append(got, rt.CarrierID)
		}
		if ex.From != FromStatic || ex.Prefix != prefix || ex.Matched != matched || len(got) != len(carriers) {
			t.Fatalf("%s: %+v, want static prefix %q %v %v", number, ex, prefix, matched, carriers)
		}
		for i := range got {
			if got[i] != carriers[i] {
				t.Fatalf("%s: carriers %v, want %v", number, got, carriers)
			}
		}
		if len(carriers) == 0 && (ex.Decision.Code != 404 || ex.Decision.Reason != "No Route") {
			t.Fatalf("%s: %+v, want 404 No Route", number, ex.Decision)
		}
	}
	f("447700900123", "+44", true, "a", "b") // cheapest first
	f("442071234567", "4420", true)          // a block
	f("12025550100", "", false)              // no prefix
}

// From the API: a fresh answer is "api" and not cached (a call after the
// dry run still asks the API, and so does the next dry run); once a call
// cached it, "cache" from the local tier; a failing API is the fallback or
// none, with the failure's kind, counted nowhere.
func TestExplainAPI(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL, CacheTTL: 60e9})
	q := explainRequest("15551234")
	for range 2 {
		ex := r.Explain(context.Background(), nil, q)
		if ex.From != FromAPI || len(ex.Decision.Routes) != 1 || ex.Decision.Routes[0].CarrierID != "carrier-a" {
			t.Fatalf("%+v, want carrier-a from the API", ex)
		}
	}
	if n := api.requests.Load(); n != 2 {
		t.Fatalf("%d API requests, want one per dry run", n)
	}
	if _, ok := r.LookupCached(r.AppendKey(nil, "cust-trunks", "15551234", nil)); ok {
		t.Fatal("a dry run cached its answer")
	}
	req := testRequest("15551234")
	r.lookup(t, req) // a call's lookup caches it
	if ex := r.Explain(context.Background(), nil, q); ex.From != FromCache || ex.Tier != "local" || len(ex.Decision.Routes) != 1 {
		t.Fatalf("%+v, want the local tier's", ex)
	}
	if n := api.requests.Load(); n != 3 {
		t.Fatalf("%d API requests, want 3", n)
	}

	down := newAPIServer(t, staticReply(http.StatusServiceUnavailable, `{}`))
	for _, fallback := range []string{"", "backup"} {
		r := newTestResolver(t, Options{APIURL: down.URL, FallbackGatewayGroup: fallback})
		ex := r.Explain(context.Background(), nil, q)
		want, code := FromNone, 503
		if fallback != "" {
			want, code = FromFallback, 0
		}
		if ex.From != want || ex.Failure != "5xx" || ex.Decision.Code != code {
			t.Fatalf("fallback %q: %+v, want %s after a 5xx", fallback, ex, want)
		}
		if fallback != "" && (len(ex.Decision.Routes) != 1 || ex.Decision.Routes[0].GatewayGroup != "backup") {
			t.Fatalf("fallback: %+v", ex.Decision)
		}
		if r.failures(t, "5xx") != 0 {
			t.Fatal("a dry run counted an API failure")
		}
	}
}
