package carrier

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
)

// newQualityPlane returns a plane with quality statistics under cfg and
// groups, and its one shard, on a clock the test moves.
func newQualityPlane(t *testing.T, cfg quality.Config, now *time.Duration, groups ...health.GroupConfig) (*Plane, *Shard) {
	t.Helper()
	p, err := New(Options{Groups: groups, Log: slog.New(slog.DiscardHandler), Quality: &cfg,
		QualityOptions: quality.Options{Shards: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, p.NewShard(ShardOptions{Now: func() time.Duration { return *now }})
}

// update seals the shard's interval and runs the reader, as the shard's
// loop and the reader goroutine do.
func update(p *Plane, s *Shard, now *time.Duration) {
	*now += 5 * time.Second
	s.Tick(*now)
	p.Quality().Update(*now)
}

var (
	uk = []byte("+447700900123")
	us = []byte("+12025550123")
)

// What the call core reports feeds the quality statistics of the number's
// prefix, per carrier and per gateway member: attempts, answers, the far
// end's own answers, sipedge's own verdicts apart, undialled carriers and
// callers' early hang-ups counted against no one, PDD, AST and ACD.
func TestQualityFed(t *testing.T) {
	now := time.Second
	p, s := newQualityPlane(t, quality.Config{Prefixes: []string{"", "+44"}}, &now, group("a", "192.0.2.1:5060"))
	var d Dial
	if reason := s.Reserve(&route.Route{CarrierID: "a", GatewayGroup: "a"}, 1, uk, &d); reason != "" {
		t.Fatal(reason)
	}
	s.Release(&d)
	member := d.Gateway
	at := func(r Report) *Report { r.At = now; return &r }
	s.Report(at(Report{Event: Answered, CarrierID: "a", Gateway: member, Number: uk, Code: 200, Dialed: true,
		Invite: time.Second, Progress: 2 * time.Second, Answer: 5 * time.Second}))
	s.Report(at(Report{Event: CallEnded, CarrierID: "a", Gateway: member, Number: uk, Code: 200, Dialed: true,
		Invite: time.Second, Answer: 5 * time.Second, Duration: time.Minute}))
	// The far end's own answer: completed, not answered.
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "a", Gateway: member, Number: uk, Code: 486, Dialed: true}))
	// sipedge's own: Timer B, a ring-out.
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "a", Gateway: member, Number: uk, Code: 408, Dialed: true, Local: true}))
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "a", Gateway: member, Number: uk, Code: 408, Dialed: true,
		Reason: route.ReasonRingTimeout}))
	// Against no one: not dialled; the caller gave up before progress.
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "a", Number: uk, Code: 503, Reason: route.ReasonGroupDown}))
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "a", Gateway: member, Number: uk, Code: 487, Dialed: true,
		Reason: route.ReasonCallerCancelled, Abandoned: true}))
	// Over the carrier's CPS limit, retries used up: not its quality.
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "a", Gateway: member, Number: uk, Code: 503, Dialed: true,
		CPSRejected: true}))
	// Another prefix, a next hop: the carrier's figures only.
	s.Report(at(Report{Event: AttemptFailed, CarrierID: "h", Number: us, Code: 503, Dialed: true}))
	update(p, s, &now)

	st := p.Quality().Status()
	if len(st.Carriers) != 2 || len(st.Gateways) != 1 {
		t.Fatalf("status %+v", st)
	}
	h, a, gw := st.Carriers[0], st.Carriers[1], st.Gateways[0]
	if h.Prefix != "" || h.Carrier != "h" || h.Attempts != 1 || h.CCR.Value != 0 {
		t.Fatalf("next hop under \"\": %+v", h)
	}
	if a.Prefix != "+44" || a.Carrier != "a" || a.Attempts != 4 || a.ASR.Value != 0.25 || a.CCR.Value != 0.5 ||
		a.PDD.Value != 1000 || a.AST.Value != 4000 || a.ACD.Value != 60 {
		t.Fatalf("carrier a under +44: %+v", a)
	}
	if gw.Prefix != "+44" || gw.Gateway != member.URI || gw.Attempts != 4 || gw.ACD.Samples != 1 {
		t.Fatalf("gateway under +44: %+v", gw)
	}
}

// demoteCheap makes carrier cheap critical under +44: 30 dialled attempts
// answered 480 and nothing else.
func demoteCheap(p *Plane, s *Shard, now *time.Duration) {
	for range 30 {
		s.Report(&Report{Event: AttemptFailed, CarrierID: "cheap", Number: uk, Code: 480, Dialed: true, At: *now})
	}
	update(p, s, now)
}

// Order applies quality.mode for the number's prefix: a copy into the
// caller's buffer when the order changes, never the decision itself, and
// the decision when nothing moves (another prefix, mode off).
func TestQualityOrder(t *testing.T) {
	decision := []route.Route{{CarrierID: "cheap"}, {CarrierID: "good"}, {CarrierID: "other"}}
	for _, mode := range []string{quality.ModeDemote, quality.ModeSort, quality.ModeOff} {
		now := time.Second
		p, s := newQualityPlane(t, quality.Config{Mode: mode, Prefixes: []string{"+1", "+44"}}, &now)
		demoteCheap(p, s, &now)
		var buf []route.Route
		got := s.Order(decision, uk, &buf)
		if mode == quality.ModeOff {
			if &got[0] != &decision[0] {
				t.Fatalf("mode off: a copy %v", got)
			}
			continue
		}
		if got[0].CarrierID != "good" || got[1].CarrierID != "other" || got[2].CarrierID != "cheap" || &got[0] != &buf[0] {
			t.Fatalf("%s: %v (buffer %v)", mode, got, buf)
		}
		if decision[0].CarrierID != "cheap" {
			t.Fatalf("%s: the decision was changed: %v", mode, decision)
		}
		if got := s.Order(decision, us, &buf); &got[0] != &decision[0] {
			t.Fatalf("%s, another prefix: %v", mode, got)
		}
		if got := s.Order(decision[1:], uk, &buf); &got[0] != &decision[1] {
			t.Fatalf("%s, nothing to move: a copy %v", mode, got)
		}
	}
}

// A carrier disabled for the number's prefix is not dialled: Reserve
// refuses it first, taking no channel and asking nothing of its health.
func TestQualityDisabledNotReserved(t *testing.T) {
	g := group("a", "192.0.2.1:5060")
	g.MaxConcurrentCalls = 1
	now := time.Second
	p, s := newQualityPlane(t, quality.Config{Prefixes: []string{"", "+44"}}, &now, g)
	prefix := "+44"
	if err := p.Quality().Disable(quality.Target{Carrier: "a", Prefix: &prefix}); err != nil {
		t.Fatal(err)
	}
	r := &route.Route{CarrierID: "a", GatewayGroup: "a"}
	var d Dial
	if reason := s.Reserve(r, 1, uk, &d); reason != route.ReasonDisabled || d != (Dial{}) {
		t.Fatalf("disabled under +44: %q %+v", reason, d)
	}
	if reason := s.Reserve(r, 1, us, &d); reason != "" {
		t.Fatalf("under \"\" (the one channel must be free): %q", reason)
	}
}

// Quality and health stay apart: a carrier quality demoted and disabled
// keeps its gateway up, and a gateway health marked down puts nothing on
// the carrier's quality.
func TestQualityApartFromHealth(t *testing.T) {
	now := time.Second
	cheap := group("cheap", "192.0.2.1:5060")
	down := group("down", "192.0.2.2:5060")
	p, s := newQualityPlane(t, quality.Config{Mode: quality.ModeDemote, Prefixes: []string{"", "+44"}}, &now, cheap, down)
	// What the engine does for 30 calls answered 480: the gateway hears
	// each outcome, the plane each report.
	for range 30 {
		var d Dial
		if reason := s.Reserve(&route.Route{CarrierID: "cheap", GatewayGroup: "cheap"}, 1, uk, &d); reason != "" {
			t.Fatal(reason)
		}
		s.Outcome(&d, 480, 0)
		s.Report(&Report{Event: AttemptFailed, CarrierID: "cheap", Gateway: d.Gateway, Number: uk, Code: 480, Dialed: true, At: now})
		s.Release(&d)
	}
	update(p, s, &now)
	prefix := "+44"
	if err := p.Quality().Disable(quality.Target{Carrier: "cheap", Prefix: &prefix}); err != nil {
		t.Fatal(err)
	}
	if st := p.Quality().Status(); st.Carriers[0].Score < 10 || !st.Carriers[0].Demoted {
		t.Fatalf("cheap is not demoted: %+v", st.Carriers[0])
	}
	if gs, _ := p.Group("cheap"); gs.Members[0].State != "up" {
		t.Fatalf("demoted and disabled by quality, its gateway is %s", gs.Members[0].State)
	}
	var d Dial
	if reason := s.Reserve(&route.Route{CarrierID: "cheap", GatewayGroup: "cheap"}, 1, us, &d); reason != "" {
		t.Fatalf("under another prefix, its gateway is not picked: %q", reason)
	}
	s.Release(&d)

	// The reverse: a 503 with Retry-After cools the one member down; the
	// calls then burn the carrier undialled, which says nothing of its
	// quality.
	if reason := s.Reserve(&route.Route{CarrierID: "down", GatewayGroup: "down"}, 1, uk, &d); reason != "" {
		t.Fatal(reason)
	}
	s.Outcome(&d, 503, time.Minute)
	s.Release(&d)
	for range 30 {
		reason := s.Reserve(&route.Route{CarrierID: "down", GatewayGroup: "down"}, 1, uk, &d)
		if reason != route.ReasonGroupDown {
			t.Fatalf("health did not take the gateway down: %q", reason)
		}
		s.Report(&Report{Event: AttemptFailed, CarrierID: "down", Number: uk, Code: 503, Reason: reason, At: now})
	}
	update(p, s, &now)
	q := p.Quality()
	if q.Score(q.PrefixBytes(uk), "down") != 0 || q.Disabled(q.PrefixBytes(uk), "down") {
		t.Fatalf("health's down gateway scored by quality: %+v", q.Status())
	}
}

// NewShard gives each shard its own collector, and refuses a shard the
// plane has none for.
func TestQualityShards(t *testing.T) {
	cfg := quality.Config{}
	p, err := New(Options{Log: slog.New(slog.DiscardHandler), Quality: &cfg, QualityOptions: quality.Options{Shards: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := p.NewShard(ShardOptions{Index: 0}), p.NewShard(ShardOptions{Index: 1})
	if a.collector == b.collector || a.collector != p.Quality().Collector(0) {
		t.Fatal("shards share a collector")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a third shard got a collector")
		}
	}()
	p.NewShard(ShardOptions{Index: 2})
}
