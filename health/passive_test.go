package health

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// Concurrent failures from many shards mark the member down once: one log
// line, one transition counted.
func TestPassiveLoggedOnce(t *testing.T) {
	r, clk, logs := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1)})
	var sel Selector
	m, _ := r.Pick("g", 0, &sel)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				clk.advance(time.Millisecond) // 800 ms of failures in all
				r.ReportCall(m, OutcomeNoResponse)
			}
		})
	}
	wg.Wait()
	if n := logs.count(`msg="gateway member down"`); n != 1 {
		t.Fatalf("%d down lines:\n%s", n, logs)
	}
	if n := m.st.transitions[stateDown].Get(); n != 1 {
		t.Fatalf("%d down transitions counted", n)
	}
}

// A half-open member gets exactly half_open_calls trial calls, from any
// number of shards at once; it is up when they all succeed.
func TestHalfOpenTrials(t *testing.T) {
	const trials = 4
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1), Passive: PassiveConfig{HalfOpenCalls: trials}})
	s := st(t, r, "g", 0)
	r.toDown(s, true, "test", nil)
	r.toHalfOpen(s, "test")

	var got atomic.Int32
	var picked sync.Mutex
	var members []Member
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var sel Selector
			for range 50 {
				m, res := r.Pick("g", 0, &sel)
				if res == OK {
					got.Add(1)
					picked.Lock()
					members = append(members, m)
					picked.Unlock()
				} else if res != GroupDown {
					t.Errorf("Pick: %v", res)
				}
			}
		})
	}
	wg.Wait()
	if got.Load() != trials {
		t.Fatalf("%d trial calls let through, want %d", got.Load(), trials)
	}
	// An abandoned attempt gives its trial back.
	r.ReportCall(members[0], OutcomeAbandoned)
	var sel Selector
	m, res := r.Pick("g", 0, &sel)
	if res != OK {
		t.Fatalf("after an abandoned trial: %v", res)
	}
	members[0] = m
	for i, m := range members {
		if s.health() != stateHalfOpen {
			t.Fatalf("up after %d of %d good trials", i, trials)
		}
		r.ReportCall(m, OutcomeAnswered)
	}
	if s.health() != stateUp {
		t.Fatalf("%s after %d good trials, want up", stateNames[s.health()], trials)
	}
	if counts := pickCounts(t, r, "g", 100); counts[0] != 100 {
		t.Fatalf("full traffic after the trials: %v", counts)
	}
}

// A failed trial sends the member down at once, whatever the threshold.
func TestHalfOpenTrialFails(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(2), Passive: PassiveConfig{FailureThreshold: 5}})
	s := st(t, r, "g", 0)
	r.toDown(s, true, "test", nil)
	r.toHalfOpen(s, "test")
	var sel Selector
	for {
		m, _ := r.Pick("g", 0, &sel)
		if m.Index == 0 {
			r.ReportCall(m, OutcomeStatus503)
			break
		}
	}
	if s.health() != stateDown {
		t.Fatalf("%s after a failed trial, want down", stateNames[s.health()])
	}
}

// An unprobed group's member marked down by calls comes back half-open
// after passive.down_secs, on the probe loop's own clock.
func TestPassiveRecoveryUnprobed(t *testing.T) {
	testtier.RequiresWallClock(t)
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(1),
		Passive: PassiveConfig{DownTime: 50 * time.Millisecond}})
	r.Start()
	var sel Selector
	m, _ := r.Pick("g", 0, &sel)
	r.ReportCall(m, OutcomeAbandoned)
	downAt := time.Now()
	r.toDown(m.st, false, "test", nil)
	if _, res := r.Pick("g", 0, &sel); res != GroupDown {
		t.Fatalf("after the failure: %v", res)
	}
	testtier.Eventually(t, 2*time.Second, "half-open", func() bool { return m.st.health() == stateHalfOpen })
	if el := time.Since(downAt); el < 50*time.Millisecond {
		t.Fatalf("back after %v, want 50 ms", el)
	}
	if _, res := r.Pick("g", 0, &sel); res != OK {
		t.Fatalf("half-open: %v", res)
	}
}

// Cooldown from a call's 503 with Retry-After: skipped, then back.
func TestCallCooldown(t *testing.T) {
	testtier.RequiresWallClock(t)
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(2)})
	r.Start()
	var sel Selector
	m, _ := r.Pick("g", 0, &sel)
	r.Cooldown(m, 80*time.Millisecond)
	start := time.Now()
	counts := pickCounts(t, r, "g", 10)
	if counts[m.Index] != 0 {
		t.Fatalf("member in cooldown picked: %v", counts)
	}
	testtier.Eventually(t, time.Second, "cooldown cleared by the loop", func() bool { return m.st.cooldown.Load() == 0 })
	if el := time.Since(start); el < 70*time.Millisecond {
		t.Fatalf("cooldown over after %v", el)
	}
	if counts := pickCounts(t, r, "g", 10); counts[m.Index] != 5 {
		t.Fatalf("after the cooldown: %v", counts)
	}
}

// A Retry-After longer than passive.max_retry_after_secs, to a call or to a
// probe, buys a cooldown of the cap only: one carrier 503 with
// "Retry-After: 86400" must not take a gateway out for a day. The cut is
// logged and counted.
func TestRetryAfterCapped(t *testing.T) {
	r, logs := newTestRegistry(t, Options{},
		GroupConfig{Name: "def", Destinations: dests(1)},
		GroupConfig{Name: "g", Destinations: dests(2), Passive: PassiveConfig{MaxRetryAfter: 60 * time.Second}})
	cooldownLeft := func(s *state) time.Duration { return time.Duration(s.cooldown.Load()) - r.now() }
	var sel Selector

	m, _ := r.Pick("def", 0, &sel)
	r.Cooldown(m, 24*time.Hour)
	if left := cooldownLeft(m.st); left > DefaultMaxRetryAfter || left < DefaultMaxRetryAfter-time.Minute {
		t.Fatalf("default cap: cooldown of %v, want about %v", left, DefaultMaxRetryAfter)
	}
	m, _ = r.Pick("g", 0, &sel)
	r.Cooldown(m, 24*time.Hour)
	if left := cooldownLeft(m.st); left > time.Minute || left < 50*time.Second {
		t.Fatalf("call: cooldown of %v, want about 1m", left)
	}
	probed := st(t, r, "g", 1-m.Index)
	r.probeDone(probed, ProbeResult{Code: 503, RetryAfter: 24 * time.Hour})
	if left := cooldownLeft(probed); left > time.Minute || left < 50*time.Second {
		t.Fatalf("probe: cooldown of %v, want about 1m", left)
	}
	r.Cooldown(m, 30*time.Second) // under the cap: honoured as asked, not counted
	if n := m.st.retryAfterCapped.Get(); n != 1 {
		t.Fatalf("%d capped Retry-Afters counted for the call's member, want 1", n)
	}
	if n := probed.retryAfterCapped.Get(); n != 1 {
		t.Fatalf("%d capped Retry-Afters counted for the probed member, want 1", n)
	}
	if n := logs.count(`retry_after=24h0m0s capped_to=1m0s`); n != 2 {
		t.Fatalf("%d log lines name the cap, want 2:\n%s", n, logs)
	}
}

// A trial is reserved atomically: concurrent reservations never take more
// than there are, even when they all passed the usable check.
func TestTakeTrial(t *testing.T) {
	var s state
	s.word.Store(stateHalfOpen)
	s.trials.Store(5)
	var taken atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if rescue, ok := s.reserve(modeNormal); ok {
					if rescue {
						t.Error("a half-open member with trials left reserved as a rescue")
					}
					taken.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if taken.Load() != 5 || s.trials.Load() != 0 {
		t.Fatalf("%d trials taken, %d left; want 5, 0", taken.Load(), s.trials.Load())
	}
	if rescue, ok := s.reserve(modeLastResort); !ok || !rescue {
		t.Fatalf("out of trials, a last resort: rescue %v ok %v; want a rescue", rescue, ok)
	}
	s.word.Store(stateUp)
	if rescue, ok := s.reserve(modeNormal); !ok || rescue {
		t.Fatalf("an up member: rescue %v ok %v; want no rescue", rescue, ok)
	}
}
