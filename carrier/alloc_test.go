//go:build !race

package carrier

import (
	"testing"
	"time"

	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
)

// A shard's dial path allocates nothing once warm: Reserve (a group
// member, a next hop) or ReserveLast, Pace of an unpaced carrier, Outcome,
// Report and Release, every call.
func TestShardDialAllocs(t *testing.T) {
	p := newTestPlane(t, group("a", "192.0.2.1:5060"))
	s := shardOf(p)
	member := &route.Route{CarrierID: "a", GatewayGroup: "a"}
	hop := &route.Route{CarrierID: "h", NextHop: "sip:192.0.2.9:5070"}
	number := []byte("+12025550123")
	var d Dial
	last := false
	call := func(r *route.Route) {
		reserve := s.Reserve
		if last = !last; last {
			reserve = s.ReserveLast
		}
		if reason := reserve(r, 1, number, &d); reason != "" {
			t.Fatal(reason)
		}
		if pace := s.Pace(&d, 1); pace != (Pace{}) {
			t.Fatalf("paced: %+v", pace)
		}
		s.Outcome(&d, 200, 0)
		s.Report(&Report{Event: Answered, CarrierID: r.CarrierID, Gateway: d.Gateway, Number: number, Code: 200,
			Dialed: true, Invite: time.Second, Progress: 2 * time.Second, Answer: 3 * time.Second})
		s.Report(&Report{Event: CallEnded, CarrierID: r.CarrierID, Answer: 3 * time.Second, Duration: time.Minute})
		s.Release(&d)
	}
	call(member)
	call(hop)
	if n := testing.AllocsPerRun(1000, func() { call(member); call(hop) }); n != 0 {
		t.Errorf("%v allocations per two dials, want 0", n)
	}
}

// Finding the account of a route's own cps, once registered, allocates
// nothing: it runs on every paced dial.
func TestRouteCPSKeyAllocs(t *testing.T) {
	c := newTestCPS(t)
	r := &route.Route{CarrierID: "wholesale", CPS: &route.CPS{Rate: 10}}
	if _, ok := c.keyOf(r, "g"); !ok {
		t.Fatal("not registered")
	}
	if n := testing.AllocsPerRun(100, func() { c.keyOf(r, "g") }); n != 0 {
		t.Errorf("%v allocations per lookup, want 0", n)
	}
}

// With quality statistics the dial path still allocates nothing once warm:
// Reserve asks for disables, Order finds nothing to move or reorders into
// the call's buffer, Report records the outcome, Tick seals nothing.
func TestQualityShardAllocs(t *testing.T) {
	now := time.Second
	p, s := newQualityPlane(t, quality.Config{Mode: quality.ModeDemote, Prefixes: []string{"", "+44"}}, &now,
		group("a", "192.0.2.1:5060"))
	demoteCheap(p, s, &now)
	prefix := "+44"
	if err := p.Quality().Disable(quality.Target{Carrier: "off", Prefix: &prefix}); err != nil {
		t.Fatal(err)
	}
	member, off := &route.Route{CarrierID: "a", GatewayGroup: "a"}, &route.Route{CarrierID: "off"}
	decision := []route.Route{{CarrierID: "cheap"}, *member}
	var buf []route.Route
	var d Dial
	call := func() {
		if got := s.Order(decision, uk, &buf); got[0].CarrierID != "a" {
			t.Fatalf("order %v", got)
		}
		if got := s.Order(decision, us, &buf); &got[0] != &decision[0] {
			t.Fatalf("order %v", got)
		}
		if reason := s.Reserve(off, 1, uk, &d); reason != route.ReasonDisabled {
			t.Fatal(reason)
		}
		if reason := s.Reserve(member, 1, uk, &d); reason != "" {
			t.Fatal(reason)
		}
		s.Outcome(&d, 200, 0)
		s.Report(&Report{Event: Answered, CarrierID: "a", Gateway: d.Gateway, Number: uk, Code: 200,
			Dialed: true, Invite: time.Second, Progress: 2 * time.Second, Answer: 3 * time.Second, At: now})
		s.Report(&Report{Event: CallEnded, CarrierID: "a", Gateway: d.Gateway, Number: uk, Answer: 3 * time.Second,
			Duration: time.Minute, At: now})
		s.Release(&d)
		s.Tick(now)
	}
	call()
	if n := testing.AllocsPerRun(1000, call); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}
