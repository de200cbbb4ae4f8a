package carrier

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
)

// Preview says what Reserve and Pace would make of a route, taking
// nothing: the member or next hop, or why the carrier would be skipped
// (each reason), and the CPS wait; the channels, trial calls and CPS
// slots are all still there for the calls after it.
func TestPreview(t *testing.T) {
	paced := group("paced", "192.0.2.3:5060")
	paced.CPS = &health.CPSConfig{Rate: 1, Burst: 1, MaxWaitMs: ms(200)}
	full := group("full", "192.0.2.4:5060")
	full.MaxConcurrentCalls = 1
	p := newTestPlane(t, group("a", "192.0.2.1:5060"), group("down", "192.0.2.2:5060"), paced, full)
	s := shardOf(p)
	f := func(r route.Route, reason, addr, cpsKey string, wait time.Duration) {
		t.Helper()
		for range 3 { // peeking again changes nothing
			pv, err := p.Preview(context.Background(), &r, 1, uk)
			if err != nil {
				t.Fatal(err)
			}
			if pv.Reason != reason || pv.CPSKey != cpsKey || pv.Wait > wait || wait > 0 && pv.Wait < wait-20*time.Millisecond {
				t.Fatalf("%+v: %+v, want reason %q, CPS account %q, wait %v", r, pv, reason, cpsKey, wait)
			}
			if reason == "" && pv.Dial.Peer.Addr != netip.MustParseAddrPort(addr) {
				t.Fatalf("%+v: dial %+v, want %s", r, pv.Dial, addr)
			}
		}
	}
	f(route.Route{CarrierID: "x", GatewayGroup: "a"}, "", "192.0.2.1:5060", "", 0)
	f(route.Route{CarrierID: "x", NextHop: "sip:192.0.2.9:5080"}, "", "192.0.2.9:5080", "", 0)
	f(route.Route{CarrierID: "x", GatewayGroup: "nope"}, route.ReasonUnknownGroup, "", "", 0)
	f(route.Route{CarrierID: "x", NextHop: "sip:gw.example.com"}, route.ReasonUnresolvable, "", "", 0)
	if p.Exempt(netip.MustParseAddr("192.0.2.9")) {
		t.Error("a previewed next hop is exempt from the flood guard: only a dialled one is")
	}

	// Down: its one member cooled down.
	var d Dial
	if s.Reserve(&route.Route{CarrierID: "x", GatewayGroup: "down"}, 1, uk, &d) != "" {
		t.Fatal("down: not reserved")
	}
	s.Outcome(&d, 503, time.Minute)
	f(route.Route{CarrierID: "x", GatewayGroup: "down"}, route.ReasonGroupDown, "", "", 0)

	// Its one channel in use: calls_limited; released, dialled again.
	r := route.Route{CarrierID: "x", GatewayGroup: "full"}
	f(r, "", "192.0.2.4:5060", "", 0)
	if s.Reserve(&r, 1, uk, &d) != "" {
		t.Fatal("full: the preview took its channel")
	}
	f(r, route.ReasonCallsLimited, "", "", 0)
	s.Release(&d)
	f(r, "", "192.0.2.4:5060", "", 0)

	// Paced at 1/s, 200 ms of wait at most: free; its one slot taken, the
	// next 1.15 s away: over.
	r = route.Route{CarrierID: "x", GatewayGroup: "paced"}
	f(r, "", "192.0.2.3:5060", "paced", 0)
	if s.Reserve(&r, 1, uk, &d) != "" || s.Pace(&d, 0) != (Pace{}) {
		t.Fatal("paced: the previews took its slot")
	}
	s.Release(&d)
	f(r, route.ReasonCPSLimited, "", "paced", 0)

	// A route's own cps: its account, free before any call drew from it.
	f(route.Route{CarrierID: "y", GatewayGroup: "a", CPS: &route.CPS{Rate: 1}}, "", "192.0.2.1:5060", "y", 0)
	if _, ok := p.Limiter().Lookup("y"); ok {
		t.Error("a preview registered the route's account")
	}
}

// With quality statistics, the dry run's order is Shard.Order's in every
// mode, a demoted carrier is marked, and a carrier disabled for the
// number's prefix is skipped as Reserve skips it, before its channel.
func TestPreviewQuality(t *testing.T) {
	decision := []route.Route{{CarrierID: "cheap", GatewayGroup: "a"}, {CarrierID: "good", GatewayGroup: "a"}}
	for _, mode := range []string{quality.ModeDemote, quality.ModeSort, quality.ModeOff} {
		now := time.Second
		p, s := newQualityPlane(t, quality.Config{Mode: mode, Prefixes: []string{"+1", "+44"}}, &now, group("a", "192.0.2.1:5060"))
		demoteCheap(p, s, &now)
		var buf []route.Route
		want, got := s.Order(decision, uk, &buf), p.PreviewOrder(decision, uk)
		if len(got) != 2 || got[0].CarrierID != want[0].CarrierID || got[1].CarrierID != want[1].CarrierID {
			t.Fatalf("%s: %v, Order %v", mode, got, want)
		}
		if decision[0].CarrierID != "cheap" {
			t.Fatalf("%s: the decision was changed: %v", mode, decision)
		}
		for _, r := range decision {
			pv, err := p.Preview(context.Background(), &r, 1, uk)
			if err != nil || pv.Reason != "" || pv.Demoted != (r.CarrierID == "cheap") {
				t.Fatalf("%s, %s: %+v %v, want dialled, demoted only if cheap", mode, r.CarrierID, pv, err)
			}
		}
		if pv, _ := p.Preview(context.Background(), &decision[0], 1, us); pv.Demoted {
			t.Fatalf("%s: cheap demoted under another prefix", mode)
		}
	}

	full := group("full", "192.0.2.4:5060")
	full.MaxConcurrentCalls = 1
	now := time.Second
	p, s := newQualityPlane(t, quality.Config{Prefixes: []string{"+44"}}, &now, full)
	prefix := "+44"
	if err := p.Quality().Disable(quality.Target{Carrier: "off", Prefix: &prefix}); err != nil {
		t.Fatal(err)
	}
	var d Dial
	if s.Reserve(&route.Route{CarrierID: "on", GatewayGroup: "full"}, 1, uk, &d) != "" {
		t.Fatal("on: not reserved")
	}
	r := route.Route{CarrierID: "off", GatewayGroup: "full"}
	if pv, _ := p.Preview(context.Background(), &r, 1, uk); pv.Reason != route.ReasonDisabled {
		t.Fatalf("disabled, its group full: %+v, want %s first", pv, route.ReasonDisabled)
	}
	if pv, _ := p.Preview(context.Background(), &r, 1, us); pv.Reason != route.ReasonCallsLimited {
		t.Fatalf("another prefix: %+v, want %s", pv, route.ReasonCallsLimited)
	}
}
