//go:build !race

package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// A call whose decision is in the in-process cache is routed without an
// allocation, its trunk's attributes in the key included: it runs on the
// shard for every call.
func TestRouteCacheHitAllocs(t *testing.T) {
	testtier.RequiresSockets(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"routes":[{"carrier_id":"a","gateway_group":"a"}],"cache_ttl_secs":60}`)
	}))
	defer api.Close()
	res, err := lcr.New(lcr.Options{APIURL: api.URL, KeyAttributes: []string{"customer", "tier"},
		Metrics: metrics.NewSet(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	cfg := &config.Config{Trunks: []config.Trunk{{Name: "t", TrunkGroup: "tg",
		Sources:    []config.Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}},
		Attributes: map[string]string{"customer": "acme", "region": "eu"}}}}
	trunks := trunksOf(t, cfg)
	a := &shardApp{s: &Server{cfg: cfg, lcr: res, trunks: trunks}}
	rr := &b2bua.RouteRequest{Trunk: trunks.set.Load().Match(netip.MustParseAddrPort("192.0.2.1:5060")), Dialed: []byte("+12025550123")}

	got := make(chan lcr.Decision, 1)
	res.Lookup(&lcr.Request{DialedNumber: "+12025550123", Source: lcr.CallSource{TrunkGroup: "tg"},
		Attributes: cfg.Trunks[0].Attributes}, func(d lcr.Decision) { got <- d })
	if d := <-got; len(d.Routes) != 1 {
		t.Fatalf("priming lookup: %+v", d)
	}
	if d := a.route(rr); d.Pending || len(d.Routes) != 1 {
		t.Fatalf("not a cache hit: %+v", d)
	}
	if n := testing.AllocsPerRun(1000, func() { a.route(rr) }); n != 0 {
		t.Errorf("%v allocations per cached route, want 0", n)
	}
}

// A call routed by the static table is routed without an allocation: the
// table is behind an atomic pointer the admin API replaces.
func TestRouteStaticAllocs(t *testing.T) {
	table, err := lcr.NewStaticTable([]lcr.StaticEntry{{Prefix: "1", Routes: []route.Route{{CarrierID: "a", GatewayGroup: "a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	a := &shardApp{s: &Server{cfg: &config.Config{}}}
	a.s.static.Store(table)
	rr := &b2bua.RouteRequest{Dialed: []byte("+12025550123")}
	if d := a.route(rr); len(d.Routes) != 1 || d.Source != "static" {
		t.Fatalf("not a static decision: %+v", d)
	}
	if n := testing.AllocsPerRun(1000, func() { a.route(rr) }); n != 0 {
		t.Errorf("%v allocations per static route, want 0", n)
	}
}
