package carrier

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// A route naming a group becomes a dial to a member of it, with the
// member's transport; one naming no known group, its next hop; a group
// whose members are all down, none.
func TestReserve(t *testing.T) {
	tcp := group("b", "192.0.2.2:5070")
	tcp.Transport = transport.TCP
	p := newTestPlane(t, group("a", "192.0.2.1:5060"), tcp)
	s := shardOf(p)
	f := func(r route.Route, wantReason, wantAddr string, wantTCP bool, wantGroup string) {
		t.Helper()
		var d Dial
		if reason := s.Reserve(&r, 1, nil, &d); reason != wantReason {
			t.Fatalf("%+v: reason %q, want %q", r, reason, wantReason)
		}
		if wantReason != "" {
			if d != (Dial{}) {
				t.Fatalf("%+v: the dial was written: %+v", r, d)
			}
			return
		}
		if d.Peer.Addr != netip.MustParseAddrPort(wantAddr) || (d.Peer.Transport == transport.TCP) != wantTCP ||
			d.Group != wantGroup || d.CarrierID != r.CarrierID {
			t.Fatalf("%+v: dial %+v, want %s tcp=%v group %q", r, d, wantAddr, wantTCP, wantGroup)
		}
		s.Release(&d)
	}
	f(route.Route{CarrierID: "x", GatewayGroup: "a"}, "", "192.0.2.1:5060", false, "a")
	f(route.Route{CarrierID: "x", GatewayGroup: "b"}, "", "192.0.2.2:5070", true, "b")
	f(route.Route{CarrierID: "x", GatewayGroup: "nope", NextHop: "sip:192.0.2.9:5080"}, "", "192.0.2.9:5080", false, "sip:192.0.2.9:5080")
	f(route.Route{CarrierID: "x", GatewayGroup: "nope"}, route.ReasonUnknownGroup, "", false, "")
	f(route.Route{CarrierID: "x", NextHop: "sip:gw.example.com"}, route.ReasonUnresolvable, "", false, "")

	// Cooled down by a 503's Retry-After, the one member is not picked.
	var d Dial
	if reason := s.Reserve(&route.Route{CarrierID: "x", GatewayGroup: "a"}, 1, nil, &d); reason != "" {
		t.Fatal(reason)
	}
	s.Outcome(&d, 503, time.Minute)
	f(route.Route{CarrierID: "x", GatewayGroup: "a"}, route.ReasonGroupDown, "", false, "")
}

// ReserveLast, for the call's last carrier, dials the member calls marked
// down, where Reserve finds none (counted as a last-resort rescue); a
// member cooling down after a 503's Retry-After it never takes. Calls take
// a member down only over a second (health/outlier.go), so this test
// waits that long.
func TestReserveLast(t *testing.T) {
	testtier.RequiresWallClock(t)
	set := metrics.NewSet()
	p, err := New(Options{Groups: []health.GroupConfig{group("a", "192.0.2.1:5060"), group("b", "192.0.2.2:5060")},
		HealthMetrics: set, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s := shardOf(p)
	a := &route.Route{CarrierID: "a", GatewayGroup: "a"}
	for i := range 3 { // no answer three times in a row, over a second
		if i > 0 {
			time.Sleep(550 * time.Millisecond)
		}
		var d Dial
		if reason := s.Reserve(a, 1, nil, &d); reason != "" {
			t.Fatalf("call %d: %q", i, reason)
		}
		s.Outcome(&d, OutcomeNoResponse, 0)
		s.Release(&d)
	}
	var d Dial
	if reason := s.Reserve(a, 1, nil, &d); reason != route.ReasonGroupDown {
		t.Fatalf("Reserve after three calls without an answer: %q, want group_down", reason)
	}
	// The dry run's view agrees, and takes nothing.
	ctx := context.Background()
	if pv, _ := p.Preview(ctx, a, 1, nil); pv.Reason != route.ReasonGroupDown {
		t.Fatalf("Preview: %+v, want group_down", pv)
	}
	for range 2 {
		if pv, _ := p.PreviewLast(ctx, a, 1, nil); pv.Reason != "" || !pv.LastResort || pv.Dial.Peer.Addr != netip.MustParseAddrPort("192.0.2.1:5060") {
			t.Fatalf("PreviewLast: %+v, want the member calls marked down, as a last resort", pv)
		}
	}
	if reason := s.ReserveLast(a, 1, nil, &d); reason != "" || d.Peer.Addr != netip.MustParseAddrPort("192.0.2.1:5060") {
		t.Fatalf("ReserveLast: %q, dial %+v; want the member calls marked down", reason, d)
	}
	s.Outcome(&d, 200, 0)
	s.Release(&d)
	var out bytes.Buffer
	set.WritePrometheus(&out)
	if !strings.Contains(out.String(), `sipedge_gateway_rescue_picks_total{group="a",mode="last_resort"} 1`) {
		t.Errorf("the rescue is not counted:\n%s", out.String())
	}

	b := &route.Route{CarrierID: "b", GatewayGroup: "b"}
	if reason := s.Reserve(b, 1, nil, &d); reason != "" {
		t.Fatal(reason)
	}
	s.Outcome(&d, 503, time.Minute)
	s.Release(&d)
	if pv, _ := p.PreviewLast(ctx, b, 1, nil); pv.Reason != route.ReasonGroupDown {
		t.Fatalf("PreviewLast of a member cooling down: %+v, want group_down", pv)
	}
	if reason := s.ReserveLast(b, 1, nil, &d); reason != route.ReasonGroupDown {
		t.Fatalf("ReserveLast of a member cooling down: %q, want group_down", reason)
	}
}

// A carrier at its channel limit is skipped before a member is picked: the
// pick advances the group's selection (and may take one of a half-open
// member's few trial calls), which a skip that never dials must not do.
// The channel comes back on Release, once.
func TestReserveAtCallLimitPicksNoMember(t *testing.T) {
	g := health.GroupConfig{Name: "a", Algorithm: health.AlgorithmRoundRobin, MaxConcurrentCalls: 1,
		Destinations: []health.DestConfig{{URI: "sip:192.0.2.1", Address: "192.0.2.1:5060"}, {URI: "sip:192.0.2.2", Address: "192.0.2.2:5060"}}}
	p := newTestPlane(t, g)
	s := shardOf(p)
	r := &route.Route{CarrierID: "a", GatewayGroup: "a"}
	var first, second Dial
	if reason := s.Reserve(r, 1, nil, &first); reason != "" {
		t.Fatal(reason)
	}
	if reason := s.Reserve(r, 1, nil, &second); reason != route.ReasonCallsLimited {
		t.Fatalf("at the limit: %q, want calls_limited", reason)
	}
	s.Release(&first)
	s.Release(&first) // a second Release gives nothing back
	if reason := s.Reserve(r, 1, nil, &second); reason != "" {
		t.Fatal(reason)
	}
	if second.Peer.Addr == first.Peer.Addr {
		t.Fatalf("both calls went to %v: the skip at the limit advanced the rotation", first.Peer.Addr)
	}
	var third Dial
	if reason := s.Reserve(r, 1, nil, &third); reason != route.ReasonCallsLimited {
		t.Fatalf("a second Release of the first call gave a channel back: %q", reason)
	}
}

// Groups added, replaced and removed at run time keep their CPS accounts
// and channel limits in step; an invalid CPS limit refuses the group.
func TestRuntimeGroupLimits(t *testing.T) {
	p := newTestPlane(t)
	s := shardOf(p)
	g := group("rt", "192.0.2.1:5060")
	g.MaxConcurrentCalls = 1
	g.CPS = &health.CPSConfig{Rate: 1, Burst: 1, MaxWaitMs: ms(0)}
	if err := p.AddGroup(g); err != nil {
		t.Fatal(err)
	}
	r := &route.Route{CarrierID: "rt", GatewayGroup: "rt"}
	var d, d2 Dial
	if reason := s.Reserve(r, 1, nil, &d); reason != "" {
		t.Fatal(reason)
	}
	if pace := s.Pace(&d, 7); pace != (Pace{}) {
		t.Fatalf("first dial: %+v, want to go now", pace)
	}
	if pace := s.Pace(&d, 8); !pace.Over {
		t.Fatalf("second dial in the same second: %+v, want over the limit", pace)
	}
	if reason := s.Reserve(r, 1, nil, &d2); reason != route.ReasonCallsLimited {
		t.Fatalf("over max_concurrent_calls: %q", reason)
	}
	if err := p.RemoveGroup("rt"); err != nil {
		t.Fatal(err)
	}
	s.Release(&d) // its channel goes back to the removed group's count
	if _, ok := p.Group("rt"); ok {
		t.Fatal("the group is still there")
	}
	bad := group("bad", "192.0.2.3:5060")
	bad.CPS = &health.CPSConfig{Rate: 1, Burst: 1 << 30} // more than an hour of calls
	if err := p.AddGroup(bad); err == nil {
		t.Fatal("a group with an invalid CPS limit was added")
	}
	if err := p.CheckGroup(bad); err == nil {
		t.Fatal("CheckGroup accepts what AddGroup refuses")
	}
}

// The group's account answers its carrier's challenges; a next hop has none.
func TestCredentials(t *testing.T) {
	g := group("a", "192.0.2.1:5060")
	g.Auth = &health.AuthConfig{Username: "u", Password: "p", Realm: "carrier.example"}
	s := shardOf(newTestPlane(t, g))
	var d Dial
	s.Reserve(&route.Route{CarrierID: "a", GatewayGroup: "a"}, 1, nil, &d)
	if a := s.Credentials(&d); a == nil || a.Username != "u" || a.Password != "p" || a.Realm != "carrier.example" {
		t.Fatalf("credentials %+v", a)
	}
	s.Reserve(&route.Route{CarrierID: "h", NextHop: "192.0.2.9"}, 1, nil, &d)
	if a := s.Credentials(&d); a != nil {
		t.Fatalf("a next hop's credentials %+v", a)
	}
}

// What the call core reports becomes the per-carrier metrics: attempts by
// code, dialled or not and reason, post-dial delay, setup time, duration.
func TestReportMetrics(t *testing.T) {
	set := metrics.NewSet()
	p, err := New(Options{CarrierMetrics: set, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := shardOf(p)
	s.Report(&Report{Event: AttemptFailed, CarrierID: "a", Code: 503, Dialed: true, Invite: time.Second, Progress: 3 * time.Second})
	s.Report(&Report{Event: AttemptFailed, CarrierID: "a", Code: 503, Reason: route.ReasonCPSLimited})
	s.Report(&Report{Event: AttemptFailed, CarrierID: "a", Code: 408, Dialed: true, Reason: route.ReasonRingTimeout})
	s.Report(&Report{Event: AttemptFailed, CarrierID: "a", Code: 408, Dialed: true})
	s.Report(&Report{Event: Answered, CarrierID: "b", Code: 200, Dialed: true, Invite: time.Second, Answer: 5 * time.Second})
	s.Report(&Report{Event: CallEnded, CarrierID: "b", Code: 200, Dialed: true, Answer: 5 * time.Second, Duration: time.Minute})
	var b bytes.Buffer
	set.WritePrometheus(&b)
	out := b.String()
	for _, want := range []string{
		`sipedge_lcr_attempts_total{carrier="a",code="503",dialed="true",reason=""} 1`,
		`sipedge_lcr_attempts_total{carrier="a",code="503",dialed="false",reason="cps_limited"} 1`,
		// sipedge's ring-out apart from the carrier's own 408.
		`sipedge_lcr_attempts_total{carrier="a",code="408",dialed="true",reason="ring_timeout"} 1`,
		`sipedge_lcr_attempts_total{carrier="a",code="408",dialed="true",reason=""} 1`,
		`sipedge_lcr_attempts_total{carrier="b",code="200",dialed="true",reason=""} 1`,
		`sipedge_lcr_pdd_seconds_sum{carrier="a"} 2`,
		`sipedge_lcr_setup_seconds_sum{carrier="b"} 4`,
		`sipedge_lcr_call_duration_seconds_sum{carrier="b"} 60`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `sipedge_lcr_pdd_seconds_count{carrier="b"}`) {
		t.Error("a PDD for an answer without progress")
	}
}

// A route naming an unknown group is warned of at most once a minute per
// shard, the next warning counting those left out.
func TestUnknownGroupWarningPaced(t *testing.T) {
	var logged bytes.Buffer
	p, err := New(Options{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Duration(0)
	s := p.NewShard(ShardOptions{Now: func() time.Duration { return now }})
	r := &route.Route{CarrierID: "x", GatewayGroup: "typo", NextHop: "192.0.2.9"}
	var d Dial
	for range 3 {
		s.Reserve(r, 1, nil, &d)
	}
	now += time.Minute
	s.Reserve(r, 1, nil, &d)
	if n := strings.Count(logged.String(), "unknown gateway_group"); n != 2 || !strings.Contains(logged.String(), "suppressed_since_last=2") {
		t.Fatalf("%d warnings:\n%s", n, logged.String())
	}
}

// NextHops, the call core's own plane, dials next hops and nothing else.
func TestNextHops(t *testing.T) {
	var n NextHops
	var d Dial
	if reason := n.Reserve(&route.Route{CarrierID: "a", GatewayGroup: "a"}, 1, nil, &d); reason != route.ReasonUnknownGroup {
		t.Fatalf("a group: %q", reason)
	}
	if reason := n.Reserve(&route.Route{CarrierID: "a", NextHop: "sip:192.0.2.9;transport=tcp"}, 1, nil, &d); reason != "" ||
		d.Peer != (transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.9:5060"), Transport: transport.TCP}) {
		t.Fatalf("%q %+v", reason, d)
	}
	if n.Pace(&d, 1) != (Pace{}) || n.Credentials(&d) != nil {
		t.Fatal("NextHops paces or holds credentials")
	}
}

// Redirect moves a dial within its group to the member a 3xx names, when
// the group follows redirects: a new gateway and address, the same
// carrier, group and channel. A next hop, a group that does not follow, or
// a host outside the group leaves the dial as it was.
func TestRedirect(t *testing.T) {
	g := health.GroupConfig{Name: "a", FollowRedirects: true, MaxConcurrentCalls: 1, Destinations: []health.DestConfig{
		{URI: "sip:192.0.2.1:5060", Address: "192.0.2.1:5060", Priority: 0},
		{URI: "sip:192.0.2.2:5070", Address: "192.0.2.2:5070", Priority: 1},
	}}
	p := newTestPlane(t, g, group("b", "192.0.2.3:5060"))
	s := shardOf(p)
	var d Dial
	if reason := s.Reserve(&route.Route{CarrierID: "x", GatewayGroup: "a"}, 1, nil, &d); reason != "" {
		t.Fatal(reason)
	}
	if d.Gateway.Index != 0 {
		t.Fatalf("picked member %d, want the first tier's", d.Gateway.Index)
	}
	before := d
	if s.Redirect(&d, []byte("198.51.100.1"), 5060) || d != before {
		t.Fatalf("redirected outside the group: %+v", d)
	}
	if !s.Redirect(&d, []byte("192.0.2.2"), 5070) {
		t.Fatal("not redirected to the group's other member")
	}
	if d.Gateway.Index != 1 || d.Peer.Addr != netip.MustParseAddrPort("192.0.2.2:5070") || d.CarrierID != "x" || d.Group != "a" || d.channel == nil {
		t.Fatalf("redirected dial %+v", d)
	}
	s.Release(&d)
	if reason := s.Reserve(&route.Route{CarrierID: "x", GatewayGroup: "a"}, 1, nil, &d); reason != "" {
		t.Fatalf("the channel was not given back once: %s", reason)
	}
	s.Release(&d)

	var other Dial
	s.Reserve(&route.Route{CarrierID: "y", GatewayGroup: "b"}, 1, nil, &other)
	if s.Redirect(&other, []byte("192.0.2.3"), 0) {
		t.Fatal("redirected in a group that does not follow redirects")
	}
	s.Reserve(&route.Route{CarrierID: "h", NextHop: "sip:192.0.2.9"}, 1, nil, &other)
	if s.Redirect(&other, []byte("192.0.2.9"), 0) {
		t.Fatal("a next hop redirected")
	}
}
