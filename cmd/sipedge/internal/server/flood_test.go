package server

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
	"github.com/sipedge/sipedge/transport"
)

// A route without a usable gateway group goes to its next_hop, else to its
// ruri's host: IP literals, the transport parameter honoured, names
// skipped as unresolvable (no DNS on a shard).
func TestNextHop(t *testing.T) {
	cases := []struct {
		name        string
		r           route.Route
		addr        string
		tcp         bool
		uri, reason string
	}{
		{"next_hop URI", route.Route{NextHop: "sip:192.0.2.5:5070"}, "192.0.2.5:5070", false, "sip:192.0.2.5:5070", ""},
		{"next_hop host:port", route.Route{NextHop: "192.0.2.5:5070"}, "192.0.2.5:5070", false, "sip:192.0.2.5:5070", ""},
		{"next_hop no port", route.Route{NextHop: "sip:192.0.2.5"}, "192.0.2.5:5060", false, "sip:192.0.2.5:5060", ""},
		{"next_hop TCP", route.Route{NextHop: "sip:192.0.2.5:5070;transport=TCP"}, "192.0.2.5:5070", true, "sip:192.0.2.5:5070;transport=tcp", ""},
		{"next_hop IPv6", route.Route{NextHop: "sip:[2001:db8::5]"}, "[2001:db8::5]:5060", false, "sip:[2001:db8::5]:5060", ""},
		{"ruri only", route.Route{RURI: "sip:+15551234@192.0.2.6:5080"}, "192.0.2.6:5080", false, "sip:192.0.2.6:5080", ""},
		{"next_hop before ruri", route.Route{NextHop: "192.0.2.5", RURI: "sip:1@192.0.2.6"}, "192.0.2.5:5060", false, "sip:192.0.2.5:5060", ""},
		{"a name", route.Route{NextHop: "sip:gw.carrier.example:5060"}, "", false, "", route.ReasonUnresolvable},
		{"ruri with a name", route.Route{RURI: "sip:1@gw.carrier.example"}, "", false, "", route.ReasonUnresolvable},
		{"sips next_hop", route.Route{NextHop: "sips:192.0.2.5:5061"}, "", false, "", route.ReasonUnresolvable}, // no TLS
		{"next_hop port 0", route.Route{NextHop: "192.0.2.5:0"}, "", false, "", route.ReasonUnresolvable},
		{"ruri port 0", route.Route{RURI: "sip:1@[2001:db8::5]:0"}, "", false, "", route.ReasonUnresolvable},
		{"SIP: in capitals", route.Route{NextHop: "SIP:192.0.2.5"}, "192.0.2.5:5060", false, "sip:192.0.2.5:5060", ""},
	}
	for _, c := range cases {
		tgt, reason := nextHop(&c.r)
		if reason != c.reason {
			t.Errorf("%s: reason %q, want %q", c.name, reason, c.reason)
			continue
		}
		if reason != "" {
			continue
		}
		if tgt.Peer.Addr != netip.MustParseAddrPort(c.addr) || (tgt.Peer.Transport == transport.TCP) != c.tcp || tgt.URI != c.uri {
			t.Errorf("%s: %v tcp=%v %q, want %s tcp=%v %q", c.name, tgt.Peer.Addr, tgt.Peer.Transport == transport.TCP, tgt.URI, c.addr, c.tcp, c.uri)
		}
	}
}

// Never banned for flooding (issue 7): the trunks' sources, every gateway
// the health registry knows now (groups added at run time too), and the
// static routes' next hops.
func TestFloodExemptions(t *testing.T) {
	reg, err := health.New(health.Options{Groups: []health.GroupConfig{{Name: "yaml",
		Destinations: []health.DestConfig{{URI: "sip:192.0.2.1", Address: "192.0.2.1:5060"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	cfg := &config.Config{
		Trunks: []config.Trunk{{Name: "t", Sources: []config.Source{{Prefix: netip.MustParsePrefix("198.51.100.0/24")}}}},
		LCR: config.LCR{StaticRoutes: []config.StaticRoute{{Routes: []config.Route{
			{CarrierID: "hop", NextHop: "sip:203.0.113.9:5060"},
			{CarrierID: "ruri", RURI: "sip:1@203.0.113.10"},
		}}}},
	}
	var dialled dialledHops
	trunks := trunksOf(t, cfg)
	exempt := exemptFrom(cfg, reg, dialled.has, trunks.covers)
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
	if err := reg.AddGroup(health.GroupConfig{Name: "runtime",
		Destinations: []health.DestConfig{{URI: "sip:192.0.2.50", Address: "192.0.2.50:5060"}}}); err != nil {
		t.Fatal(err)
	}
	check("192.0.2.50", true) // a gateway added at run time
	check("203.0.113.20", false)
	dialled.add(netip.MustParseAddr("::ffff:203.0.113.20"), slog.Default())
	check("203.0.113.20", true) // an API route's next hop, once dialled

	// A trunk added at run time is exempt, until it is removed.
	check("100.64.0.1", false)
	if _, err := trunks.put(config.Trunk{Name: "runtime", TrunkGroup: "runtime",
		Sources: []config.Source{{Prefix: netip.MustParsePrefix("100.64.0.0/16"), Port: 5060}}}); err != nil {
		t.Fatal(err)
	}
	check("100.64.0.1", true)
	if err := trunks.remove("runtime"); err != nil {
		t.Fatal(err)
	}
	check("100.64.0.1", false)
	check("198.51.100.7", true) // the YAML's trunk stays
}

// The API's next hops are bounded: past maxDialledHops the flood guard
// applies to new ones, with one warning.
func TestDialledHopsBounded(t *testing.T) {
	var h dialledHops
	for i := range maxDialledHops + 5 {
		h.add(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), slog.New(slog.DiscardHandler))
	}
	if n := len(*h.set.Load()); n != maxDialledHops {
		t.Errorf("%d hops kept, want %d", n, maxDialledHops)
	}
	if !h.has(netip.AddrFrom4([4]byte{10, 0, 0, 1})) || h.has(netip.AddrFrom4([4]byte{10, 0, 39, 16})) {
		t.Errorf("the first hop should be kept and the %dth not", maxDialledHops+1)
	}
}

// The default policy's decisions: no decision is 503 Route Unavailable
// marked NoDecision, which an API reject with 503 is not.
func TestDecisionOf(t *testing.T) {
	none := decisionOf(lcr.Decision{NoDecision: true})
	if none.Code != 503 || none.Reason != "Route Unavailable" || !none.NoDecision {
		t.Errorf("no decision: %+v, want 503 Route Unavailable, NoDecision", none)
	}
	rej := decisionOf(lcr.Decision{Reject: &lcr.Reject{Code: 503, Reason: "Route Unavailable"}, Source: lcr.SourceLCR})
	if rej.Code != 503 || rej.NoDecision {
		t.Errorf("API reject: %+v, want 503 without NoDecision", rej)
	}
	if d := decisionOf(lcr.Decision{Source: lcr.SourceLCR}); d.Code != 404 || d.Reason != "No Route" || d.NoDecision {
		t.Errorf("no routes: %+v, want 404 No Route", d)
	}
}
