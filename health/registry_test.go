package health

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
)

// Groups added and removed while shards pick: a new group is usable as soon
// as AddGroup returns, a removed one is never chosen once RemoveGroup
// returns, and the fixed group is never missed.
func TestRuntimeAddRemoveWhilePicking(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "fixed", Destinations: dests(2)})
	const (
		phaseBefore int32 = iota
		phaseAdded
		phaseRemoved
	)
	var phase atomic.Int32
	var stop atomic.Bool
	var seenAdded, reads atomic.Int64
	// readersRun lets the readers go round a few times in the phase just
	// set (rather than sleeping on the wall clock).
	readersRun := func() {
		for n := reads.Load(); reads.Load() < n+8 && !t.Failed(); {
			runtime.Gosched()
		}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			var sel Selector
			for !stop.Load() {
				runtime.Gosched() // leave the writer some CPU on small machines
				reads.Add(1)
				if _, res := r.Pick("fixed", 7, &sel); res != OK {
					t.Errorf("fixed group: %v", res)
					return
				}
				// The phase holds through the Pick when it reads the same
				// (it is a new value each round).
				p := phase.Load()
				m, res := r.Pick("rt", 7, &sel)
				if phase.Load() != p {
					p = phaseBefore
				}
				switch {
				case p&3 == phaseAdded && res != OK:
					t.Errorf("added group: %v", res)
					return
				case p&3 == phaseRemoved && res != UnknownGroup:
					t.Errorf("removed group: %v %+v", res, m)
					return
				case res == OK:
					seenAdded.Add(1)
					r.ReportCall(m, OutcomeAnswered)
				}
			}
		})
	}
	for round := range 20 {
		cfg := GroupConfig{Name: "rt", Algorithm: []string{AlgorithmWeighted, AlgorithmRoundRobin, AlgorithmHash}[round%3], Destinations: dests(1 + round%4)}
		if err := r.AddGroup(cfg); err != nil {
			t.Fatal(err)
		}
		phase.Store(int32(round)<<2 | phaseAdded)
		var sel Selector
		if _, res := r.Pick("rt", 0, &sel); res != OK {
			t.Fatalf("right after AddGroup: %v", res)
		}
		readersRun()
		if round%2 == 0 { // an update in place
			cfg.Destinations = dests(3)
			if err := r.AddGroup(cfg); err != nil {
				t.Fatal(err)
			}
			readersRun()
		}
		phase.Store(phaseBefore)
		if err := r.RemoveGroup("rt"); err != nil {
			t.Fatal(err)
		}
		phase.Store(int32(round)<<2 | phaseRemoved)
		if _, res := r.Pick("rt", 0, &sel); res != UnknownGroup {
			t.Fatalf("right after RemoveGroup: %v", res)
		}
		readersRun()
		phase.Store(phaseBefore)
	}
	stop.Store(true)
	wg.Wait()
	if seenAdded.Load() == 0 {
		t.Fatal("the readers never picked the runtime group")
	}
}

// Updating a group keeps the health of members whose uri and address did
// not change; changed members start afresh and removed ones lose their
// metrics.
func TestUpdateKeepsHealth(t *testing.T) {
	set := metrics.NewSet()
	r, _ := newTestRegistry(t, Options{Metrics: set})
	d := dests(3)
	if err := r.AddGroup(GroupConfig{Name: "g", Destinations: d}); err != nil {
		t.Fatal(err)
	}
	r.toDown(st(t, r, "g", 0), true, "test", nil)
	r.toDown(st(t, r, "g", 1), true, "test", nil)
	keptState := st(t, r, "g", 0)
	keptState.probeFails.Store(7)

	// 0 kept (new weight and priority), 1 changes address, 2 removed, 3 new.
	d2 := []DestConfig{d[0], d[1], {URI: "sip:new.example.com", Address: "127.0.0.1:7000"}}
	d2[0].Weight, d2[0].Priority = 5, 1
	d2[1].Address = "127.0.0.1:6999"
	d2 = append([]DestConfig{d2[2]}, d2[0], d2[1]) // reordered too
	if err := r.AddGroup(GroupConfig{Name: "g", Destinations: d2}); err != nil {
		t.Fatal(err)
	}
	if s := st(t, r, "g", 1); s != keptState || s.health() != stateDown || s.probeFails.Load() != 7 {
		t.Fatalf("unchanged member lost its health: same=%v state=%s", s == keptState, stateNames[s.health()])
	}
	if s := st(t, r, "g", 2); s.health() != stateUp {
		t.Fatalf("member with a new address: %s, want up", stateNames[s.health()])
	}
	if !keptState.settings.Load().passive.Disabled && keptState.settings.Load() != r.snap.Load().groups["g"].settings {
		t.Fatal("kept member still has the old group's settings")
	}
	counts := pickCounts(t, r, "g", 100)
	if counts[1] != 0 || counts[0] != 50 || counts[2] != 50 {
		t.Fatalf("picks after the update: %v", counts)
	}
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	out := buf.String()
	if strings.Contains(out, `address="127.0.0.1:5063"`) || strings.Contains(out, `address="127.0.0.1:5062"`) {
		t.Fatalf("metrics of removed members still exported:\n%s", out)
	}
	for _, want := range []string{
		`sipedge_gateway_member_up{group="g",uri="sip:gw0.example.com",address="127.0.0.1:5061"} 0`,
		`sipedge_gateway_member_up{group="g",uri="sip:new.example.com",address="127.0.0.1:7000"} 1`,
		`sipedge_gateway_member_consecutive_failures{group="g",uri="sip:gw0.example.com",address="127.0.0.1:5061",source="probe"} 7`,
		`sipedge_gateway_member_transitions_total{group="g",uri="sip:gw0.example.com",address="127.0.0.1:5061",to="down"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
	if err := r.RemoveGroup("g"); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	set.WritePrometheus(&buf)
	if strings.Contains(buf.String(), "sipedge_gateway") {
		t.Fatalf("metrics of a removed group still exported:\n%s", buf.String())
	}
	// Re-adding registers them again without a duplicate-metric panic.
	if err := r.AddGroup(GroupConfig{Name: "g", Destinations: d}); err != nil {
		t.Fatal(err)
	}
}

func TestFixedGroups(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "yaml", Destinations: dests(1)})
	if err := r.RemoveGroup("yaml"); !errors.Is(err, ErrFixedGroup) || !strings.Contains(err.Error(), `"yaml"`) {
		t.Fatalf("RemoveGroup(fixed) = %v", err)
	}
	if err := r.AddGroup(GroupConfig{Name: "yaml", Destinations: dests(2)}); !errors.Is(err, ErrFixedGroup) {
		t.Fatalf("AddGroup(fixed) = %v", err)
	}
	if err := r.RemoveGroup("nope"); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("RemoveGroup(unknown) = %v", err)
	}
	if err := r.AddGroup(GroupConfig{Name: "rt", Destinations: []DestConfig{{URI: "mailto:x", Address: "nohost"}}}); !errors.Is(err, ErrInvalidGroup) {
		t.Fatalf("AddGroup(invalid) = %v", err)
	}
	if err := r.AddGroup(GroupConfig{Name: "rt", Destinations: dests(1)}); err != nil {
		t.Fatal(err)
	}
	gs := r.Groups()
	if len(gs) != 2 || gs[0].Name != "yaml" || gs[1].Name != "rt" || gs[1].Algorithm != AlgorithmWeighted || gs[1].Probe.Interval != DefaultProbeInterval {
		t.Fatalf("Groups() = %+v", gs)
	}
	gs[1].Destinations[0].URI = "sip:changed" // a copy
	if r.Groups()[1].Destinations[0].URI == "sip:changed" {
		t.Fatal("Groups() shares its slices")
	}
	if g, ok := r.Group("yaml"); !ok || !g.Fixed || len(g.Members) != 1 || g.Members[0].State != "up" {
		t.Fatalf("Group(yaml) = %+v %v", g, ok)
	}
	if _, err := New(Options{Logger: slog.New(slog.DiscardHandler), Groups: []GroupConfig{{Name: "a", Destinations: dests(1)}, {Name: "a", Destinations: dests(1)}}}); !errors.Is(err, ErrInvalidGroup) {
		t.Fatalf("duplicate YAML groups: %v", err)
	}
}

// fakeDNS is an injectable resolver.
type fakeDNS struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	errs  map[string]error
	calls atomic.Int32
}

// fail makes lookups of host fail with err.
func (f *fakeDNS) fail(host string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errs == nil {
		f.errs = map[string]error{}
	}
	f.errs[host] = err
}

func (f *fakeDNS) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[host]; err != nil {
		return nil, err
	}
	a, ok := f.names[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return a, nil
}

func (f *fakeDNS) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(addrs) == 0 {
		delete(f.names, host)
		return
	}
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	f.names[host] = as
}

func TestDNSNames(t *testing.T) {
	testtier.RequiresWallClock(t)
	dns := &fakeDNS{names: map[string][]netip.Addr{}}
	dns.set("gw.example.net", "192.0.2.1", "192.0.2.2")
	r, logs := newTestRegistry(t, Options{Resolve: dns.resolve, ResolveInterval: 20 * time.Millisecond})
	err := r.AddGroup(GroupConfig{Name: "g", Destinations: []DestConfig{
		{URI: "sip:gw.example.net", Address: "gw.example.net:5080"},
		{URI: "sip:other.example.net", Address: "other.example.net:5060"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var sel Selector
	pick := func() (Member, Result) { return r.Pick("g", 0, &sel) }
	for range 4 { // the unresolvable member is skipped
		m, res := pick()
		if res != OK || m.Addr != netip.MustParseAddrPort("192.0.2.1:5080") {
			t.Fatalf("Pick = %v %v", m.Addr, res)
		}
	}
	if logs.count(`msg="gateway member unresolvable"`) != 1 {
		t.Fatalf("logs:\n%s", logs)
	}
	r.Start()
	// The current address is kept while the name still has it.
	dns.set("gw.example.net", "192.0.2.2", "192.0.2.1")
	calls := dns.calls.Load()
	testtier.Eventually(t, time.Second, "a re-resolution", func() bool { return dns.calls.Load() >= calls+4 })
	if m, _ := pick(); m.Addr.Addr() != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("address changed to %v though still resolved", m.Addr)
	}
	dns.set("gw.example.net", "192.0.2.9")
	testtier.Eventually(t, time.Second, "the new address", func() bool { m, _ := pick(); return m.Addr == netip.MustParseAddrPort("192.0.2.9:5080") })
	dns.set("other.example.net", "2001:db8::1")
	testtier.Eventually(t, time.Second, "the other name", func() bool {
		m, _ := pick()
		return m.Addr == netip.MustParseAddrPort("[2001:db8::1]:5060")
	})
	dns.set("gw.example.net")
	dns.set("other.example.net")
	testtier.Eventually(t, time.Second, "unresolvable", func() bool { _, res := pick(); return res == Unresolvable })
	if n := logs.count(`msg="gateway member unresolvable"`); n != 3 {
		t.Fatalf("%d unresolvable lines, want 3 (once per change):\n%s", n, logs)
	}
	// Down and unresolvable together: down.
	dns.set("gw.example.net", "192.0.2.1")
	testtier.Eventually(t, time.Second, "resolved", func() bool { _, res := pick(); return res == OK })
	r.toDown(st(t, r, "g", 0), true, "test", nil)
	if _, res := pick(); res != GroupDown {
		t.Fatalf("one down, one unresolvable: %v", res)
	}
}

// Known follows the members' addresses: YAML groups, groups added and
// removed at run time, and names as they resolve. Carriers are never
// banned for flooding by it.
func TestKnown(t *testing.T) {
	testtier.RequiresWallClock(t)
	dns := &fakeDNS{names: map[string][]netip.Addr{}}
	r, _ := newTestRegistry(t, Options{Resolve: dns.resolve, ResolveInterval: 20 * time.Millisecond},
		GroupConfig{Name: "yaml", Destinations: []DestConfig{{URI: "sip:192.0.2.1", Address: "192.0.2.1:5060"}}})
	known := func(a string) bool { return r.Known(netip.MustParseAddr(a)) }
	if !known("192.0.2.1") || known("192.0.2.2") {
		t.Fatal("the YAML group's member")
	}
	if err := r.AddGroup(GroupConfig{Name: "runtime", Destinations: []DestConfig{
		{URI: "sip:192.0.2.2", Address: "192.0.2.2:5060"},
		{URI: "sip:gw.example.net", Address: "gw.example.net:5080"},
	}}); err != nil {
		t.Fatal(err)
	}
	if !known("192.0.2.2") || known("192.0.2.3") {
		t.Fatal("a group added at run time")
	}
	r.Start()
	dns.set("gw.example.net", "192.0.2.3")
	testtier.Eventually(t, time.Second, "the name resolved", func() bool { return known("192.0.2.3") })
	dns.set("gw.example.net", "192.0.2.4")
	testtier.Eventually(t, time.Second, "the name moved", func() bool { return known("192.0.2.4") && !known("192.0.2.3") })
	if err := r.RemoveGroup("runtime"); err != nil {
		t.Fatal(err)
	}
	if known("192.0.2.2") || known("192.0.2.4") || !known("192.0.2.1") {
		t.Fatal("a group removed")
	}
}

// RerouteCauses reads a group's causes, YAML or added at run time.
func TestRerouteCauses(t *testing.T) {
	r, _ := newTestRegistry(t, Options{},
		GroupConfig{Name: "yaml", Destinations: dests(1), RerouteCauses: []int{404}})
	if err := r.AddGroup(GroupConfig{Name: "runtime", Destinations: dests(1), RerouteCauses: []int{403, 404}}); err != nil {
		t.Fatal(err)
	}
	if got := r.RerouteCauses("yaml"); !slices.Equal(got, []int{404}) {
		t.Errorf("yaml: %v", got)
	}
	if got := r.RerouteCauses("runtime"); !slices.Equal(got, []int{403, 404}) {
		t.Errorf("runtime: %v", got)
	}
	if got := r.RerouteCauses("none"); got != nil {
		t.Errorf("unknown group: %v", got)
	}
}

// TestDNSTemporaryFailureKeepsAddress: a re-resolution that fails for the
// resolver's sake (a timeout, a SERVFAIL) says nothing about the name: the
// member keeps the address it had, instead of its carrier being skipped as
// unresolvable until the next resolution. A name that is gone (NXDOMAIN)
// still makes it unresolvable.
func TestDNSTemporaryFailureKeepsAddress(t *testing.T) {
	testtier.RequiresWallClock(t)
	dns := &fakeDNS{names: map[string][]netip.Addr{}}
	dns.set("gw.example.net", "192.0.2.1")
	set := metrics.NewSet()
	r, logs := newTestRegistry(t, Options{Resolve: dns.resolve, ResolveInterval: 20 * time.Millisecond, Metrics: set})
	stale := func() bool {
		var buf bytes.Buffer
		set.WritePrometheus(&buf)
		return strings.Contains(buf.String(), `sipedge_gateway_member_address_stale{group="g",uri="sip:gw.example.net",address="gw.example.net:5060"} 1`)
	}
	if err := r.AddGroup(GroupConfig{Name: "g", Destinations: []DestConfig{{URI: "sip:gw.example.net", Address: "gw.example.net:5060"}}}); err != nil {
		t.Fatal(err)
	}
	var sel Selector
	r.Start()
	dns.fail("gw.example.net", &net.DNSError{Err: "i/o timeout", Name: "gw.example.net", IsTimeout: true, IsTemporary: true})
	calls := dns.calls.Load()
	testtier.Eventually(t, time.Second, "re-resolutions", func() bool { return dns.calls.Load() >= calls+3 })
	if m, res := r.Pick("g", 0, &sel); res != OK || m.Addr != netip.MustParseAddrPort("192.0.2.1:5060") {
		t.Fatalf("after resolver timeouts: Pick = %v %v, want the address it had", m.Addr, res)
	}
	if n := logs.count(`msg="gateway member unresolvable"`); n != 0 {
		t.Fatalf("%d unresolvable lines for a resolver timeout:\n%s", n, logs)
	}
	// Observable: the log line once, and a gauge while it lasts.
	if !stale() {
		t.Fatal("sipedge_gateway_member_address_stale is not 1 while re-resolution fails")
	}
	dns.fail("gw.example.net", nil) // the resolver answers again
	testtier.Eventually(t, time.Second, "the stale gauge back at 0", func() bool { return !stale() })
	dns.fail("gw.example.net", &net.DNSError{Err: "no such host", Name: "gw.example.net", IsNotFound: true})
	testtier.Eventually(t, time.Second, "unresolvable", func() bool { _, res := r.Pick("g", 0, &sel); return res == Unresolvable })
}
