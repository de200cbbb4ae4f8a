package health

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// reportAt plays calls through a one-member group "g" at rate per second
// on the fake clock, each reported as it is made: failed(i) says whether
// call i got no answer. It returns how long after the first failure the
// member went down, or -1 if it stayed up.
func reportAt(t *testing.T, r *Registry, clk *fakeClock, rate float64, calls int, failed func(i int) bool) time.Duration {
	t.Helper()
	var sel Selector
	interval := time.Duration(float64(time.Second) / rate)
	firstFail := time.Duration(-1)
	for i := range calls {
		clk.advance(interval)
		m, res := r.Pick("g", 0, &sel)
		if res != OK {
			t.Fatalf("call %d: Pick %v with the member %s", i, res, stateNames[m.st.health()])
		}
		o := OutcomeAnswered
		if failed(i) {
			o = OutcomeNoResponse
			if firstFail < 0 {
				firstFail = clk.now()
			}
		}
		r.ReportCall(m, o)
		if m.st.health() == stateDown {
			return clk.since(firstFail)
		}
	}
	return -1
}

// Outlier detection weighs the evidence: a few lost calls among many, a
// burst under a second or a steady loss of a few percent leave a member
// up; a member that stops answering goes down within two seconds at any
// rate from one call a second up, and a low-rate one after three failures
// in a row.
func TestOutlierDetection(t *testing.T) {
	f := func(name string, rate float64, calls int, failed func(i int) bool, downWithin time.Duration) {
		t.Helper()
		r, clk, logs := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1)})
		got := reportAt(t, r, clk, rate, calls, failed)
		switch {
		case downWithin == 0 && got >= 0:
			t.Errorf("%s: down %v after the first failure, want up:\n%s", name, got, logs)
		case downWithin > 0 && got < 0:
			t.Errorf("%s: still up, want down within %v", name, downWithin)
		case downWithin > 0 && got > downWithin:
			t.Errorf("%s: down %v after the first failure, want within %v:\n%s", name, got, downWithin, logs)
		case downWithin > 0:
			t.Logf("%s: down %v after the first failure: %s", name, got, logs)
		}
	}
	at := func(is ...int) func(int) bool {
		return func(i int) bool {
			for _, j := range is {
				if i == j {
					return true
				}
			}
			return false
		}
	}
	every := func(n, of int) func(int) bool { return func(i int) bool { return i%of < n } }

	const up = 0
	// A loaded host losing a few datagrams.
	f("six no-answers scattered among 20,000 calls at 1,000/s", 1000, 20000, at(1500, 4200, 7777, 9000, 13001, 18500), up)
	f("three in a row among 20,000 at 1,000/s", 1000, 20000, at(5000, 5001, 5002), up)
	f("six in a row, twice, at 1,000/s", 1000, 20000, at(3000, 3001, 3002, 3003, 3004, 3005, 9000, 9001, 9002, 9003, 9004, 9005), up)
	f("a 300 ms burst of losses at 1,000/s", 1000, 20000, func(i int) bool { return i >= 5000 && i < 5300 }, up)
	f("10 % lost at 1,000/s", 1000, 20000, every(1, 10), up)
	f("30 % lost at 1,000/s", 1000, 20000, every(3, 10), up)
	f("10 % lost at 5/s for 20 minutes", 5, 6000, every(1, 10), up)
	f("two in a row now and then at 1/s", 1, 600, func(i int) bool { return i%50 < 2 }, up)

	// Black holes, after a while of answered calls.
	f("black-holed at 1,000/s", 1000, 10000, from(5000), time.Second)
	f("black-holed at 100/s", 100, 2000, from(1000), time.Second)
	f("black-holed at 5/s", 5, 200, from(100), 1200*time.Millisecond)
	f("black-holed at 1/s", 1, 100, from(50), 2*time.Second)
	f("black-holed at one call in 5 s", 0.2, 50, from(25), 10*time.Second)
	f("black-holed from the first call at 1,000/s", 1000, 2000, from(0), time.Second)
	f("a 100 ms burst from the first call at 1,000/s", 1000, 5000, func(i int) bool { return i < 100 }, up)
	f("a 400 ms burst at 1,000/s, after coming back", 1000, 5000, func(i int) bool { return i < 400 }, up)
	// Failing most calls, never three in a row over a second.
	f("60 % lost at 1,000/s", 1000, 10000, func(i int) bool { return i >= 5000 && i%5 < 3 }, 2*time.Second)
	f("60 % lost at 20/s", 20, 1000, func(i int) bool { return i >= 500 && i%5 < 3 }, 2*time.Second)
}

// The decision's parameters: failure_threshold, failure_percent and
// min_calls, and which outcomes count. Calls one second apart.
func TestPassiveMarksDown(t *testing.T) {
	f := func(passive PassiveConfig, outcomes []Outcome, wantDown bool) {
		t.Helper()
		r, clk, _ := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1), Passive: passive})
		var sel Selector
		for _, o := range outcomes {
			clk.advance(time.Second)
			m, res := r.Pick("g", 0, &sel)
			if res != OK {
				t.Fatalf("passive %+v outcomes %v: Pick %v before the last outcome", passive, outcomes, res)
			}
			r.ReportCall(m, o)
		}
		_, res := r.Pick("g", 0, &sel)
		if down := res == GroupDown; down != wantDown {
			t.Fatalf("passive %+v outcomes %v: Pick %v, want down=%v", passive, outcomes, res, wantDown)
		}
	}
	nr, s503, te, ok, other := OutcomeNoResponse, OutcomeStatus503, OutcomeTransportError, OutcomeAnswered, OutcomeOther
	f(PassiveConfig{}, []Outcome{nr, nr, nr}, true)
	f(PassiveConfig{}, []Outcome{nr, s503, te}, true) // in a row, of any counted kind
	f(PassiveConfig{}, []Outcome{nr, nr}, false)
	f(PassiveConfig{}, []Outcome{nr, nr, ok, nr, nr}, false) // a success ends the run
	f(PassiveConfig{}, []Outcome{nr, nr, other, nr, nr}, false)
	f(PassiveConfig{FailureThreshold: 5}, []Outcome{nr, nr, nr, nr}, false)
	f(PassiveConfig{FailureThreshold: 5}, []Outcome{nr, nr, nr, nr, nr}, true)
	// The share: 3 of 4 calls within the window with min_calls 4.
	f(PassiveConfig{MinCalls: 4}, []Outcome{nr, nr, ok, nr}, true)
	f(PassiveConfig{MinCalls: 4, FailurePercent: 80}, []Outcome{nr, nr, ok, nr}, false)
	f(PassiveConfig{MinCalls: 5}, []Outcome{nr, nr, ok, nr}, false)
	// As little evidence as can be asked for: one failure is still none
	// (failures must last half a second), a second one a second later is.
	f(PassiveConfig{FailureThreshold: 1, MinCalls: 1, FailurePercent: 1}, []Outcome{te}, false)
	f(PassiveConfig{FailureThreshold: 1, MinCalls: 3, FailurePercent: 1}, []Outcome{te, ok, te}, true)
	f(PassiveConfig{Outcomes: []string{PassiveNoResponse}}, []Outcome{s503, s503, s503, s503}, false)
	f(PassiveConfig{Outcomes: []string{PassiveStatus503}}, []Outcome{s503, s503, s503}, true)
	f(PassiveConfig{Disabled: true}, []Outcome{nr, nr, nr, nr}, false)
}

// The window forgets: failures more than ten seconds old are no evidence,
// and a member that changes state starts with none.
func TestOutlierWindow(t *testing.T) {
	r, clk, _ := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1),
		Passive: PassiveConfig{MinCalls: 4, HalfOpenCalls: 1}})
	s := st(t, r, "g", 0)
	var sel Selector
	report := func(o Outcome) {
		t.Helper()
		clk.advance(300 * time.Millisecond)
		m, res := r.Pick("g", 0, &sel)
		if res != OK {
			t.Fatalf("Pick: %v", res)
		}
		r.ReportCall(m, o)
	}
	report(OutcomeNoResponse)
	report(OutcomeNoResponse)
	report(OutcomeAnswered)
	if c, f := s.window.totals(clk.now()); c != 3 || f != 2 {
		t.Fatalf("window holds %d calls, %d failed; want 3, 2", c, f)
	}
	clk.advance(evidenceWindow)
	if c, f := s.window.totals(clk.now()); c != 0 || f != 0 {
		t.Fatalf("after the window, %d calls, %d failed; want none", c, f)
	}
	report(OutcomeNoResponse)
	report(OutcomeAnswered)
	report(OutcomeNoResponse)
	if s.health() != stateUp {
		t.Fatal("down on 2 failures of 3 calls, min_calls 4")
	}
	report(OutcomeNoResponse)
	if s.health() != stateDown {
		t.Fatal("up with 3 failures of 4 calls")
	}
	if c, f := s.window.totals(clk.now()); c != 4 || f != 3 {
		t.Fatalf("window holds %d calls, %d failed; want 4, 3", c, f)
	}
	r.toHalfOpen(s, "test")
	if c, _ := s.window.totals(clk.now()); c != 0 || s.callFails.Load() != 0 {
		t.Fatalf("half-open with %d calls in the window, %d failures in a row", c, s.callFails.Load())
	}
	report(OutcomeAnswered) // the trial: up
	report(OutcomeNoResponse)
	report(OutcomeNoResponse)
	if s.health() != stateUp {
		t.Fatalf("%s on 2 failures after coming back", stateNames[s.health()])
	}
}

// A bucket counts up to its limit and no further: a flood saturates it
// rather than wrapping into the failures.
func TestCallWindowSaturates(t *testing.T) {
	var w callWindow
	now := time.Hour
	seq := uint64(now / bucketWidth)
	w.buckets[seq%uint64(numBuckets)].Store((seq&tagMask)<<tagShift | (countMask-1)<<callsShift | 5)
	w.add(now, true)
	w.add(now, true)
	w.add(now, false)
	if c, f := w.bucket(seq); c != countMask || f != 6 {
		t.Fatalf("bucket %d calls, %d failures; want %d, 6", c, f, countMask)
	}
	// A bucket left from a lap before reads empty and restarts.
	w.add(now+evidenceWindow, false)
	if c, f := w.bucket(seq + uint64(numBuckets)); c != 1 || f != 0 {
		t.Fatalf("next lap: %d calls, %d failures; want 1, 0", c, f)
	}
	if c, _ := w.bucket(seq); c != 0 {
		t.Fatalf("the old lap still reads %d calls", c)
	}
}

// A member calls took down comes back: half-open after passive.down_secs
// (unprobed) or success_threshold good probes (probed), then up after its
// trial calls; probes that fail meanwhile make its down probe-confirmed.
func TestOutlierRecovery(t *testing.T) {
	blackHole := func(r *Registry, clk *fakeClock) *state {
		t.Helper()
		if got := reportAt(t, r, clk, 100, 1000, from(500)); got < 0 {
			t.Fatal("still up after 5 s of a black hole")
		}
		return st(t, r, "g", 0)
	}
	trials := func(r *Registry, s *state) {
		t.Helper()
		var sel Selector
		for i := range DefaultHalfOpenCalls {
			if s.health() != stateHalfOpen {
				t.Fatalf("trial %d: %s, want half_open", i, stateNames[s.health()])
			}
			m, res := r.Pick("g", 0, &sel)
			if res != OK {
				t.Fatalf("trial %d: Pick %v", i, res)
			}
			r.ReportCall(m, OutcomeAnswered)
		}
		if s.health() != stateUp {
			t.Fatalf("%s after the trials, want up", stateNames[s.health()])
		}
	}

	t.Run("unprobed", func(t *testing.T) {
		r, clk, _ := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1)})
		s := blackHole(r, clk)
		clk.advance(DefaultPassiveDownTime - time.Second)
		r.tick(clk.now())
		if s.health() != stateDown {
			t.Fatalf("%s a second before passive.down_secs", stateNames[s.health()])
		}
		clk.advance(time.Second)
		r.tick(clk.now())
		trials(r, s)
	})
	t.Run("probed", func(t *testing.T) {
		p := &fakeProber{}
		r, clk, logs := newClockRegistry(t, Options{Prober: p}, GroupConfig{Name: "g", Destinations: dests(1),
			Probe: ProbeConfig{Enabled: true}})
		s := blackHole(r, clk)
		clk.advance(time.Minute)
		r.tick(clk.now())
		if s.health() != stateDown {
			t.Fatalf("%s: an unprobed group's recovery in a probed one", stateNames[s.health()])
		}
		for range DefaultFailureThreshold {
			r.probeDone(s, ProbeResult{Err: errProbeLost})
		}
		if w := s.word.Load(); w&flagProbeDown == 0 {
			t.Fatal("probes failed while down, not probe-confirmed")
		}
		if gs, _ := r.Group("g"); gs.Members[0].DownBy != "probe" {
			t.Fatalf("down_by %q, want probe", gs.Members[0].DownBy)
		}
		if n := logs.count("confirmed by probes"); n != 1 {
			t.Fatalf("%d lines say probes confirmed it", n)
		}
		for range DefaultSuccessThreshold {
			r.probeDone(s, ProbeResult{Code: 200})
		}
		trials(r, s)
		if s.word.Load()&flagProbeDown != 0 {
			t.Fatal("up, still flagged probe-confirmed")
		}
	})
}

func from(k int) func(int) bool { return func(i int) bool { return i >= k } }

// fakeProber records probes and never answers: tests call probeDone.
type fakeProber struct{ n int }

func (p *fakeProber) Probe(Member, time.Duration, func(ProbeResult)) { p.n++ }

// The panic threshold: a group with fewer than panic_threshold_percent of
// its members up, one at least, chooses among every member calls marked
// down too (never one probes hold down); a group with none up is down (the
// next carrier, or PickLastResort, takes the call). Tiers count by their
// share: a full backup tier is no panic.
func TestPanicThreshold(t *testing.T) {
	f := func(name string, priorities []int, passiveDown, probeDown []int, threshold *int, wantPanic bool, want []int) {
		t.Helper()
		d := dests(len(priorities))
		for i, p := range priorities {
			d[i].Priority = p
		}
		r, clk, _ := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: d, PanicThreshold: threshold})
		for _, i := range passiveDown {
			r.toDown(st(t, r, "g", i), false, "test", nil)
		}
		for _, i := range probeDown {
			r.toDown(st(t, r, "g", i), true, "test", nil)
		}
		gs, _ := r.Group("g")
		if gs.Panic != wantPanic {
			t.Errorf("%s: panic %v, want %v", name, gs.Panic, wantPanic)
		}
		var sel Selector
		counts := map[int]int{}
		marked := 0
		for i := range 300 {
			clk.advance(time.Millisecond)
			m, res := r.Pick("g", uint64(i), &sel)
			if res != OK {
				if len(want) > 0 {
					t.Errorf("%s: Pick %v", name, res)
				}
				break
			}
			counts[m.Index]++
			if m.st.health() != stateUp {
				marked++
			}
			r.ReportCall(m, OutcomeAbandoned)
		}
		if n := r.snap.Load().groups["g"].gs.rescues[0].Get(); n != uint64(marked) {
			t.Errorf("%s: %d panic picks counted, %d of members marked down", name, n, marked)
		}
		for _, i := range want {
			if counts[i] == 0 {
				t.Errorf("%s: member %d never chosen: %v", name, i, counts)
			}
		}
		if len(counts) != len(want) {
			t.Errorf("%s: chosen %v, want exactly %v", name, counts, want)
		}
	}
	pct := func(p int) *int { return &p }
	f("3 members, 2 down by calls", []int{0, 0, 0}, []int{0, 1}, nil, nil, true, []int{0, 1, 2})
	f("3 members, 2 down by calls, panic off", []int{0, 0, 0}, []int{0, 1}, nil, pct(0), false, []int{2})
	f("3 members, 2 down by probes", []int{0, 0, 0}, nil, []int{0, 1}, nil, true, []int{2})
	f("3 members, 1 down by calls, 1 by probes", []int{0, 0, 0}, []int{0}, []int{1}, nil, true, []int{0, 2})
	f("4 members, 2 down: half up is no panic", []int{0, 0, 0, 0}, []int{0, 1}, nil, nil, false, []int{2, 3})
	f("4 members, 2 down, threshold 75 %", []int{0, 0, 0, 0}, []int{0, 1}, nil, pct(75), true, []int{0, 1, 2, 3})
	f("1 member down: none up, no panic", []int{0}, []int{0}, nil, nil, false, nil)
	f("3 members all down by calls", []int{0, 0, 0}, []int{0, 1, 2}, nil, nil, false, nil)
	f("a dead primary tier, a full backup", []int{0, 0, 1}, []int{0, 1}, nil, nil, false, []int{2})
	f("both tiers mostly down: every tier at once", []int{0, 0, 1, 1, 1}, []int{0, 1, 2, 3}, nil, nil, true, []int{0, 1, 2, 3, 4})
}

// The group's panic is logged when the probe loop sees it start and end,
// shown by a gauge, and its picks of members calls marked down counted.
func TestPanicObservable(t *testing.T) {
	r, clk, logs := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(3)})
	gauge := func() string {
		t.Helper()
		var b bytes.Buffer
		r.set.WritePrometheus(&b)
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, `sipedge_gateway_group_panic{group="g"} `) {
				return l
			}
		}
		t.Fatal("no panic gauge")
		return ""
	}
	r.tick(clk.now())
	if g := gauge(); g != `sipedge_gateway_group_panic{group="g"} 0` {
		t.Fatalf("healthy: %s", g)
	}
	r.toDown(st(t, r, "g", 0), false, "test", nil)
	r.toDown(st(t, r, "g", 1), false, "test", nil)
	if g := gauge(); g != `sipedge_gateway_group_panic{group="g"} 1` {
		t.Fatalf("2 of 3 down: %s", g)
	}
	r.tick(clk.now())
	r.tick(clk.now())
	if n := logs.count(`msg="gateway group in panic`); n != 1 {
		t.Fatalf("%d panic lines:\n%s", n, logs)
	}
	counts := pickCounts(t, r, "g", 30)
	if rescued := r.snap.Load().groups["g"].gs.rescues[0].Get(); rescued != uint64(counts[0]+counts[1]) || rescued == 0 {
		t.Fatalf("%d panic picks counted for %v", rescued, counts)
	}
	r.toHalfOpen(st(t, r, "g", 0), "test")
	r.toUp(st(t, r, "g", 0))
	r.tick(clk.now())
	if n := logs.count(`msg="gateway group out of panic"`); n != 1 {
		t.Fatalf("%d out-of-panic lines:\n%s", n, logs)
	}
}

// PickLastResort, for the last carrier of a call: when calls marked every
// member down, it still chooses one (tiers in order); never one probes hold
// down, one in cooldown or one that does not resolve. A call it places that
// is answered brings the member back half-open; a late answer to a call
// placed before the member went down does not.
func TestPickLastResort(t *testing.T) {
	d := dests(3)
	d[2].Priority = 1
	r, clk, _ := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: d})
	var sel Selector
	early, _ := r.Pick("g", 0, &sel)
	for i := range 3 {
		r.toDown(st(t, r, "g", i), false, "test", nil)
	}
	if _, res := r.Pick("g", 0, &sel); res != GroupDown {
		t.Fatalf("Pick: %v, want group_down", res)
	}
	counts := map[int]int{}
	for range 10 {
		m, res := r.PickLastResort("g", 0, &sel)
		if res != OK || m.st.health() != stateDown {
			t.Fatalf("PickLastResort: %v, member %s", res, stateNames[m.st.health()])
		}
		counts[m.Index]++
		r.ReportCall(m, OutcomeNoResponse)
	}
	if counts[2] != 0 || counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("last resort picks %v: want the first tier's members only", counts)
	}
	if n := r.snap.Load().groups["g"].gs.rescues[1].Get(); n != 10 {
		t.Fatalf("%d last-resort picks counted, want 10", n)
	}
	r.ReportCall(early, OutcomeAnswered) // placed before the down mark
	if s := early.st; s.health() != stateDown {
		t.Fatalf("a late answer brought member %d %s", early.Index, stateNames[s.health()])
	}

	// Probes, cooldowns and names: each excludes its member.
	r.toDown(st(t, r, "g", 0), true, "test", nil)
	st(t, r, "g", 0).word.Or(flagProbeDown) // it was down already
	clk.advance(time.Millisecond)
	r.setCooldown(st(t, r, "g", 1), time.Minute, "test")
	m, res := r.PickLastResort("g", 0, &sel)
	if res != OK || m.Index != 2 {
		t.Fatalf("PickLastResort: member %d %v, want 2 (the other tier's)", m.Index, res)
	}
	st(t, r, "g", 2).setAddr(nil)
	if _, res := r.PickLastResort("g", 0, &sel); res != GroupDown {
		t.Fatalf("PickLastResort with nothing to rescue: %v", res)
	}
	ap := st(t, r, "g", 1).addr.Load()
	st(t, r, "g", 2).setAddr(ap)

	// The rescue answered: half-open, and up after its trials.
	clk.advance(2 * time.Minute)
	r.expireCooldown(st(t, r, "g", 1), clk.now())
	m, _ = r.PickLastResort("g", 0, &sel)
	r.ReportCall(m, OutcomeAnswered)
	if s := m.st; s.health() != stateHalfOpen {
		t.Fatalf("member %d %s after answering a last-resort call, want half_open", m.Index, stateNames[s.health()])
	}
	if gs, _ := r.Group("g"); gs.Members[0].DownBy != "probe" || gs.Members[m.Index].DownBy != "" {
		t.Fatalf("down_by: %q, %q", gs.Members[0].DownBy, gs.Members[m.Index].DownBy)
	}
}

// Concurrent reports keep the window's counts whole.
func TestCallWindowConcurrent(t *testing.T) {
	var w callWindow
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			for i := range 5000 {
				w.add(time.Hour, (i+g)%2 == 0)
			}
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if c, f := w.totals(time.Hour); c != 20000 || f != 10000 {
		t.Fatalf("%d calls, %d failures; want 20000, 10000", c, f)
	}
}
