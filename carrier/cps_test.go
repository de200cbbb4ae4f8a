package carrier

import (
	"fmt"
	"testing"
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// A route from the API may carry its own cps : its account is
// registered on first use, shared by the routes that name it, its limit
// follows the latest route, and it paces like a group's.
func TestRouteCPS(t *testing.T) {
	c := newTestCPS(t, health.GroupConfig{Name: "carrier-a", CPS: &health.CPSConfig{Rate: 50, Burst: 1, MaxWaitMs: ms(1000)}})
	const group = "carrier-a"
	none := 0
	own := &route.Route{CarrierID: "wholesale-b", CPS: &route.CPS{Rate: 2, MaxWaitMs: &none}}

	gk, ok := c.keyOf(&route.Route{CarrierID: "carrier-a"}, group)
	if !ok || gk != (*c.groups.Load())["carrier-a"].key {
		t.Fatal("a route without cps draws from its group's account")
	}
	k, ok := c.keyOf(own, group)
	if !ok || k == gk {
		t.Fatalf("a route's own cps: key %v ok %v (group's %v)", k, ok, gk)
	}
	if k2, _ := c.keyOf(&route.Route{CarrierID: "wholesale-b", CPS: &route.CPS{Rate: 2, MaxWaitMs: &none}}, group); k2 != k {
		t.Error("the same account twice is two keys")
	}
	shared, _ := c.keyOf(&route.Route{CarrierID: "x", CPS: &route.CPS{Rate: 2, MaxWaitMs: &none, Key: "wholesale-b"}}, group)
	if shared != k {
		t.Error("a route naming the account's key does not share it")
	}
	// Rate 2, no wait: the second call in the same instant is over.
	now := time.Now()
	if d := reserveAt(t, c.limiter, k); d.Over {
		t.Fatal("the first call is over the limit")
	}
	if d := reserveAt(t, c.limiter, k); !d.Over {
		t.Fatalf("a second call at once passed a 2/s account without wait (%v)", time.Since(now))
	}
	// The latest limit wins.
	wait := 1000
	if k3, _ := c.keyOf(&route.Route{CarrierID: "wholesale-b", CPS: &route.CPS{Rate: 2, MaxWaitMs: &wait}}, group); k3 != k {
		t.Fatal("a new limit made a new key")
	}
	if d := reserveAt(t, c.limiter, k); d.Over || d.Wait <= 0 {
		t.Fatalf("after max_wait_ms 1000 the next call should wait: %+v", d)
	}
}

func reserveAt(t *testing.T, l *ratelimit.Limiter, k ratelimit.Key) ratelimit.Decision {
	t.Helper()
	d, now := l.ReserveAsync(k, func(ratelimit.Decision) { t.Error("an in-process limiter answered later") })
	if !now {
		t.Fatal("an in-process limiter did not answer at once")
	}
	return d
}

// A cps_reject matcher's text is looked for in the reason phrase and in
// the Reason header, and the match backs off the account the
// dial drew from: the route's own cps when it has one, else the group's.
func TestCPSRejectMatchAndBackoff(t *testing.T) {
	c := newTestCPS(t, health.GroupConfig{Name: "carrier-a", CPS: &health.CPSConfig{Rate: 50, Burst: 1, MaxWaitMs: ms(1000)},
		CPSReject: []health.CPSReject{{Code: 503, Reason: "cps_limit"}}})
	dialOf := func(r *route.Route) *Dial { return &Dial{Group: "carrier-a", route: r} }
	plain := &route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a"}
	if _, ok := c.reject(dialOf(plain), 503, []byte("Service Unavailable"), nil); ok {
		t.Error("a plain 503 matched")
	}
	if _, ok := c.reject(dialOf(plain), 503, []byte("Service Unavailable"), []byte(`Q.850;cause=41;text="CPS_LIMIT reached"`)); !ok {
		t.Error("the Reason header's text did not match")
	}
	if _, ok := c.reject(dialOf(plain), 503, []byte("CPS_Limit"), nil); !ok {
		t.Error("the reason phrase's text did not match")
	}
	gk := (*c.groups.Load())["carrier-a"].key
	if r := c.limiter.Rate(gk); r >= 50 {
		t.Errorf("the group's account rate %v after two rejects, want it backed off", r)
	}
	own := &route.Route{CarrierID: "wholesale", GatewayGroup: "carrier-a", CPS: &route.CPS{Rate: 10}}
	rk, _ := c.keyOf(own, "carrier-a")
	before := c.limiter.Rate(gk)
	if _, ok := c.reject(dialOf(own), 503, []byte("cps_limit"), nil); !ok {
		t.Fatal("no match")
	}
	if r := c.limiter.Rate(rk); r >= 10 {
		t.Errorf("the route's account rate %v, want it backed off", r)
	}
	if r := c.limiter.Rate(gk); r < before-1 { // it only recovers meanwhile (AIMD)
		t.Errorf("the group's account backed off (%v -> %v) for a route with its own cps", before, r)
	}
}

// TestRouteCPSValidIsPaced: a route's cps that the API validation accepts
// registers in the limiter, and one the limiter refuses is refused by the
// validation (the whole answer is an API failure, as for any invalid
// field): an accepted route that failed to register would not be paced at
// all, the opposite of what the API asked. lcr cannot import ratelimit, so
// the two bounds are checked together here, around each of them.
func TestRouteCPSValidIsPaced(t *testing.T) {
	l, err := ratelimit.NewLocal(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hour := 1.15 / 3600 // the slowest rate: 1/rate × 1.15 is an hour
	var cases []route.CPS
	for _, r := range []float64{hour * (1 - 1e-9), hour, hour * (1 + 1e-9), 1.0 / 3600, 0.0002, 0.001, 1, 50, 1e6, 1e300, 1e-300} {
		cases = append(cases, route.CPS{Rate: r}, route.CPS{Rate: r, Burst: 2})
	}
	for b := 3125; b <= 3135; b++ { // an hour of calls at 1/s, spaced 1.15 s
		cases = append(cases, route.CPS{Rate: 1, Burst: b})
	}
	for _, b := range []int{3_599_999_999, 3_600_000_000, 3_600_000_001, 3_600_000_002} { // 1 µs apart
		cases = append(cases, route.CPS{Rate: 1e300, Burst: b})
	}
	for i, c := range cases {
		valid := lcr.ValidateRoute(&route.Route{CarrierID: "a", GatewayGroup: "g", CPS: &c})
		_, reg := l.Register(fmt.Sprint("k", i), routeLimit(&c))
		if (valid == nil) != (reg == nil) {
			t.Errorf("cps %+v: API validation %v, limiter %v", c, valid, reg)
		}
	}
}

// A group added at run time paces its dials from its account, at the
// limit it names, and its CPS rejects are matched; removed, it paces
// nothing. An invalid limit refuses the group.
func TestRuntimeGroupCPS(t *testing.T) {
	c := newTestCPS(t)
	const tgt = "rt"
	if _, ok := c.keyOf(nil, tgt); ok {
		t.Fatal("an unknown group is paced")
	}
	if err := c.addGroup(health.GroupConfig{Name: "rt", CPS: &health.CPSConfig{Rate: 0.00001}}); err == nil {
		t.Fatal("a limit the limiter refuses was accepted")
	}
	g := health.GroupConfig{Name: "rt", CPS: &health.CPSConfig{Rate: 5, Key: "acct"},
		CPSReject: []health.CPSReject{{Code: 503, Reason: "cps"}}}
	if err := c.addGroup(g); err != nil {
		t.Fatal(err)
	}
	k, ok := c.keyOf(nil, tgt)
	if acct, _ := c.limiter.Lookup("acct"); !ok || k != acct {
		t.Fatalf("runtime group key %v %v, want the account acct's", k, ok)
	}
	if rj := (*c.groups.Load())["rt"].rejects; len(rj) != 1 || rj[0].Code != 503 {
		t.Fatalf("rejects %+v", rj)
	}
	c.removeGroup("rt")
	if _, ok := c.keyOf(nil, tgt); ok {
		t.Fatal("a removed group is still paced")
	}
}

// checkGroup refuses the limits addGroup refuses, and registers nothing: a
// reload checks all its groups with it before it adds any.
func TestCPSCheckGroup(t *testing.T) {
	c := newTestCPS(t)
	good := health.GroupConfig{Name: "good", CPS: &health.CPSConfig{Rate: 10}}
	bad := health.GroupConfig{Name: "bad", CPS: &health.CPSConfig{Rate: 1, Burst: 1 << 30}} // more than an hour of calls
	if err := checkGroup(good); err != nil {
		t.Fatalf("checkGroup(good) = %v", err)
	}
	if _, ok := c.limiter.Lookup("good"); ok {
		t.Fatal("checkGroup registered the group's account")
	}
	if err := checkGroup(bad); err == nil || c.addGroup(bad) == nil {
		t.Fatalf("checkGroup(bad) = %v, and addGroup must refuse it too", err)
	}
	if err := checkGroup(health.GroupConfig{Name: "unpaced"}); err != nil {
		t.Fatalf("checkGroup(no cps) = %v", err)
	}
}

func ms(n int64) *int64 { return &n }
