package quality

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// z95 is the quantile of the default confidence.
var z95 = zScore(DefaultConfidence)

func TestZScore(t *testing.T) {
	f := func(confidence, want float64) {
		t.Helper()
		if got := zScore(confidence); math.Abs(got-want) > 5e-4 {
			t.Errorf("zScore(%v) = %v, want %v", confidence, got, want)
		}
	}
	f(0.5, 0)
	f(0.8, 0.8416)
	f(0.9, 1.2816)
	f(0.95, 1.6449)
	f(0.975, 1.9600)
	f(0.99, 2.3263)
}

func TestWilsonUpper(t *testing.T) {
	f := func(k, n uint64, want float64) {
		t.Helper()
		if got := wilsonUpper(k, n, z95); math.Abs(got-want) > 5e-5 {
			t.Errorf("wilsonUpper(%d, %d) = %.5f, want %.5f", k, n, got, want)
		}
	}
	f(0, 0, 1) // nothing known
	f(1, 1, 1)
	f(50, 50, 1)
	f(1, 2, 0.87916)
	f(0, 2, 0.57495)
	f(0, 24, 0.10131)
	f(0, 25, 0.09763)
	f(0, 50, 0.05132)
	f(10, 30, 0.48339)
	f(20, 30, 0.78916)
	f(50, 100, 0.58116)
	f(500, 1000, 0.52599)
}

// TestRatioVerdicts: the ratio statistics under the built-in profile. One
// failure in two is no verdict; fifty in fifty is; the evidence needed is
// where the Wilson bound crosses the threshold.
func TestRatioVerdicts(t *testing.T) {
	p := newProfile(&DefaultProfile)
	f := func(s stat, k, n uint64, want level) {
		t.Helper()
		got := judge(&stats[s], &p.limits[s], wilsonUpper(k, n, z95))
		if got != want {
			t.Errorf("%s %d/%d: %v, want %v", stats[s].name, k, n, got, want)
		}
	}
	f(statASR, 1, 2, levelOK)
	f(statASR, 0, 2, levelOK)
	f(statASR, 0, 50, levelCritical)
	f(statCCR, 0, 50, levelCritical)
	// ASR: critical below 10% from 25 straight failures, warning below 25%
	// from 9.
	f(statASR, 0, 8, levelOK)
	f(statASR, 0, 9, levelWarning)
	f(statASR, 0, 24, levelWarning)
	f(statASR, 0, 25, levelCritical)
	// CCR: critical below 40% from 5 straight failures.
	f(statCCR, 0, 4, levelWarning)
	f(statCCR, 0, 5, levelCritical)
	// A carrier near its threshold needs many more: 20% ASR is not
	// critical at any n, a warning once the bound is under 25%.
	f(statASR, 20, 100, levelOK)
	f(statASR, 200, 1000, levelWarning)
	f(statASR, 2000, 10000, levelWarning)
	// 5% ASR is critical from about 100 attempts.
	f(statASR, 3, 60, levelWarning)
	f(statASR, 5, 100, levelCritical)
}

func TestMeanBound(t *testing.T) {
	samples := func(xs ...float64) moments {
		var m moments
		for _, x := range xs {
			m.add(x)
		}
		return m
	}
	f := func(m moments, warning float64, lowIsBad bool, wantMean, wantBound float64) {
		t.Helper()
		mean, bound := meanBound(m, z95, warning, lowIsBad)
		if !(math.Abs(mean-wantMean) < 1e-3 || math.IsNaN(mean) && math.IsNaN(wantMean)) ||
			!(math.Abs(bound-wantBound) < 1e-3 || math.IsNaN(bound) && math.IsNaN(wantBound)) {
			t.Errorf("meanBound(%+v, %v, %v) = %v, %v; want %v, %v", m, warning, lowIsBad, mean, bound, wantMean, wantBound)
		}
	}
	nan := math.NaN()
	f(moments{}, 5, false, nan, nan)
	// One sample: the spread is at least the mean or the warning.
	f(samples(20), 5, false, 20, 0)
	f(samples(2), 15, true, 2, 2+z95*15)
	// Equal samples: the floor, not a zero deviation.
	f(samples(20, 20), 5, false, 20, 0)
	f(samples(20, 20, 20, 20), 5, false, 20, 20-z95*20/2)
	// A deviation above the floor is used.
	f(samples(1, 19, 1, 19), 2, false, 10, 10-z95*math.Sqrt(108)/2)
	// Below the mean, the mean floors it.
	f(samples(1, 9, 1, 9), 2, false, 5, 5-z95*5/2)
	// Disabled warning (0): the mean alone floors it.
	f(samples(4, 4, 4, 4), 0, true, 4, 4+z95*4/2)
}

// TestTimeVerdicts: the samples a time statistic needs before a verdict,
// under the built-in profile (PDD: warning above 5 s, critical above 10 s;
// AST: warning above 30 s; ACD: warning below 15 s, critical below 5 s).
func TestTimeVerdicts(t *testing.T) {
	p := newProfile(&DefaultProfile)
	f := func(s stat, x float64, n int, want level) {
		t.Helper()
		var m moments
		for range n {
			m.add(x)
		}
		_, bound := meanBound(m, z95, p.limits[s].warning, stats[s].lowIsBad)
		if got := judge(&stats[s], &p.limits[s], bound); got != want {
			t.Errorf("%s %v s x %d: %v, want %v (bound %v)", stats[s].name, x, n, got, want, bound)
		}
	}
	// No verdict from one or two samples, however bad.
	f(statPDD, 600, 1, levelOK)
	f(statPDD, 600, 2, levelOK)
	f(statPDD, 600, 3, levelCritical)
	// Twice the critical threshold: 11 samples; 1.3 times: 51.
	f(statPDD, 20, 10, levelWarning)
	f(statPDD, 20, 11, levelCritical)
	f(statPDD, 13, 50, levelWarning)
	f(statPDD, 13, 51, levelCritical)
	// Below the warning threshold: never.
	f(statPDD, 4.9, 100000, levelOK)
	// PDD at twice its 5 s warning: a warning from 11 samples.
	f(statPDD, 10, 10, levelOK)
	f(statPDD, 10, 11, levelWarning)
	// AST: a warning above 30 s, never critical (the built-in profile
	// has none).
	f(statAST, 60, 10, levelOK)
	f(statAST, 60, 11, levelWarning)
	f(statAST, 600, 1000, levelWarning)
	// ACD of 0 s: the warning after 3 calls, critical after 25.
	f(statACD, 0, 2, levelOK)
	f(statACD, 0, 3, levelWarning)
	f(statACD, 0, 24, levelWarning)
	f(statACD, 0, 25, levelCritical)
	f(statACD, 120, 1000, levelOK)
}

func TestJudgeEdges(t *testing.T) {
	f := func(info *statInfo, l limits, bound float64, want level) {
		t.Helper()
		if got := judge(info, &l, bound); got != want {
			t.Errorf("judge(%s, %+v, %v) = %v, want %v", info.name, l, bound, got, want)
		}
	}
	asr, pdd := &stats[statASR], &stats[statPDD]
	both := limits{on: true, criticalOn: true, warning: 0.25, critical: 0.1, weight: 1}
	f(asr, both, 0.25, levelOK) // at the threshold is not past it
	f(asr, both, 0.2499, levelWarning)
	f(asr, both, 0.1, levelWarning)
	f(asr, both, 0.0999, levelCritical)
	f(asr, both, math.NaN(), levelOK)
	f(asr, limits{on: true, warning: 0.25, critical: 0.1}, 0, levelWarning) // critical off
	f(asr, limits{warning: 0.25, critical: 0.1}, 0, levelDisabled)          // warning off: both
	hi := limits{on: true, criticalOn: true, warning: 5, critical: 10, weight: 1}
	f(pdd, hi, 5, levelOK)
	f(pdd, hi, 5.001, levelWarning)
	f(pdd, hi, 10, levelWarning)
	f(pdd, hi, 10.001, levelCritical)
}

// TestScore: the score is the weighted sum of the levels' penalties, and a
// disabled statistic adds nothing.
func TestScore(t *testing.T) {
	prof := DefaultProfile
	prof.WarningPenalty, prof.CriticalPenalty = 2, 7
	prof.ASR.Weight = 3
	prof.PDD.Warning = Off
	p := newProfile(&prof)
	var tl tally
	for range 100 { // ASR 0 (critical), CCR 100%, PDD 60 s (disabled)
		tl.record(vCompleted, 60, 0)
	}
	for range 100 { // ACD 10 s: a warning
		tl.acd.add(10)
	}
	f := judgeTally(&tl, p, z95)
	want := [numStats]level{levelCritical, levelOK, levelDisabled, levelOK, levelWarning}
	for s := range numStats {
		if f.stat[s].level != want[s] {
			t.Errorf("%s: %v, want %v", stats[s].name, f.stat[s].level, want[s])
		}
	}
	if f.score != 3*7+2 || f.stat[statASR].penalty != 21 || f.stat[statACD].penalty != 2 || f.stat[statPDD].penalty != 0 {
		t.Errorf("score %v (%+v), want 23", f.score, f.stat)
	}
}

func TestClassify(t *testing.T) {
	f := func(o Outcome, want verdict) {
		t.Helper()
		if got := classify(&o); got != want {
			t.Errorf("classify(%+v) = %v, want %v", o, got, want)
		}
	}
	f(Outcome{Status: 200, Dialed: true}, vAnswered)
	f(Outcome{Status: 299, Dialed: true, PDD: time.Second}, vAnswered)
	f(Outcome{Status: 486, Dialed: true}, vCompleted)
	f(Outcome{Status: 404, Dialed: true}, vCompleted)
	f(Outcome{Status: 408, Dialed: true}, vCompleted) // the carrier's own
	f(Outcome{Status: 302, Dialed: true}, vCompleted)
	f(Outcome{Status: 603, Dialed: true}, vCompleted)
	f(Outcome{Status: 500, Dialed: true}, vAttempt)
	f(Outcome{Status: 503, Dialed: true}, vAttempt)
	f(Outcome{Status: 408, Dialed: true, Local: true}, vAttempt)
	f(Outcome{Status: 503, Dialed: true, Local: true}, vAttempt)
	f(Outcome{Status: 408, Dialed: true, Reason: "ring_timeout", PDD: time.Second}, vAttempt)
	f(Outcome{Status: 487, Dialed: true, Reason: "caller_cancelled"}, vNone)
	f(Outcome{Status: 487, Dialed: true, Reason: "caller_cancelled", PDD: time.Second}, vCompleted)
	f(Outcome{Status: 487, Dialed: false, Reason: "caller_cancelled"}, vNone)
	f(Outcome{Status: 503, Reason: "group_down"}, vNone)
	f(Outcome{Status: 503, Reason: "cps_limited"}, vNone)
	f(Outcome{Status: 503, Reason: ReasonDisabled}, vNone)
	f(Outcome{Status: 503, Dialed: true, Reason: "something_new"}, vAttempt)
	f(Outcome{Status: 0, Dialed: true}, vAttempt)
}

// TestInvariants: over random outcome streams, CCR >= ASR (value and
// bound); over answered attempts, the mean AST >= the mean PDD.
func TestInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	statuses := []int{200, 200, 486, 480, 404, 408, 503, 500, 603, 302}
	p := newProfile(&DefaultProfile)
	for round := range 200 {
		var all, answered tally
		for range 1 + rng.IntN(300) {
			o := Outcome{Status: statuses[rng.IntN(len(statuses))], Dialed: rng.IntN(10) > 0, Local: rng.IntN(8) == 0}
			if rng.IntN(3) > 0 {
				o.PDD = time.Duration(1+rng.IntN(10_000)) * time.Millisecond
			}
			o.Setup = o.PDD + time.Duration(rng.IntN(30_000))*time.Millisecond
			if rng.IntN(10) == 0 {
				o.Reason = "caller_cancelled"
			}
			if v := classify(&o); v != vNone {
				all.record(v, seconds(o.PDD), seconds(o.Setup))
				if v == vAnswered {
					answered.record(v, seconds(o.PDD), seconds(o.Setup))
				}
			}
		}
		f := judgeTally(&all, p, z95)
		asr, ccr := f.stat[statASR], f.stat[statCCR]
		if all.attempts > 0 && (ccr.value < asr.value || ccr.bound < asr.bound) {
			t.Fatalf("round %d: CCR %v (bound %v) < ASR %v (bound %v)", round, ccr.value, ccr.bound, asr.value, asr.bound)
		}
		a := judgeTally(&answered, p, z95)
		if pdd, ast := a.stat[statPDD], a.stat[statAST]; pdd.samples > 0 && ast.value < pdd.value {
			t.Fatalf("round %d: over answered attempts AST %v < PDD %v", round, ast.value, pdd.value)
		}
	}
}
