package server

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route"
)

// Never banned for flooding: the trunks' sources, every gateway the
// carrier plane knows now (groups added at run time too), the static
// routes' next hops, and the API's next hops once dialled.
func TestFloodExemptions(t *testing.T) {
	plane, err := carrier.New(carrier.Options{Groups: []health.GroupConfig{{Name: "yaml",
		Destinations: []health.DestConfig{{URI: "sip:192.0.2.1", Address: "192.0.2.1:5060"}}}},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Close()
	cfg := &config.Config{
		Trunks: []config.Trunk{{Name: "t", Sources: []b2bua.Source{{Prefix: netip.MustParsePrefix("198.51.100.0/24")}}}},
		LCR: config.LCR{StaticRoutes: []config.StaticRoute{{Routes: []config.Route{
			{CarrierID: "hop", NextHop: "sip:203.0.113.9:5060"},
			{CarrierID: "ruri", RURI: "sip:1@203.0.113.10"},
		}}}},
	}
	trunks := trunksOf(t, cfg)
	exempt := exemptFrom(cfg, plane.Exempt, trunks.covers)
	check := func(a string, want bool) {
		t.Helper()
		if got := exempt(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s exempt %v, want %v", a, got, want)
		}
	}
	check("192.0.2.1", true)    // a YAML gateway
	check("198.51.100.7", true) // a trunk's source
	check("203.0.113.9", true)  // a next hop
	check("203.0.113.10", true) // a Request-URI host
	check("192.0.2.50", false)  // nobody
	if err := plane.AddGroup(health.GroupConfig{Name: "runtime",
		Destinations: []health.DestConfig{{URI: "sip:192.0.2.50", Address: "192.0.2.50:5060"}}}); err != nil {
		t.Fatal(err)
	}
	check("192.0.2.50", true) // a gateway added at run time
	check("203.0.113.20", false)
	sh := plane.NewShard(carrier.ShardOptions{Now: func() time.Duration { return 0 }})
	var d carrier.Dial
	if reason := sh.Reserve(&route.Route{CarrierID: "api", NextHop: "sip:[::ffff:203.0.113.20]"}, 1, nil, &d); reason != "" {
		t.Fatalf("the API's next hop: %s", reason)
	}
	check("203.0.113.20", true) // an API route's next hop, once dialled

	// A trunk added at run time is exempt, until it is removed.
	check("100.64.0.1", false)
	if _, err := trunks.put(config.Trunk{Name: "runtime", TrunkGroup: "runtime",
		Sources: []b2bua.Source{{Prefix: netip.MustParsePrefix("100.64.0.0/16"), Port: 5060}}}); err != nil {
		t.Fatal(err)
	}
	check("100.64.0.1", true)
	if err := trunks.remove("runtime"); err != nil {
		t.Fatal(err)
	}
	check("100.64.0.1", false)
	check("198.51.100.7", true) // the YAML's trunk stays
}
