package quality

import "math"

// stat is one of the statistics.
type stat uint8

const (
	statASR stat = iota
	statCCR
	statPDD
	statAST
	statACD
	numStats
)

// statInfo describes a statistic: its key in the configuration and the
// status, whether it is a ratio (else a mean time), on which side of a
// threshold it is bad, and the unit of its thresholds.
type statInfo struct {
	key      string  // asr, ccr, pdd_ms, ast_ms, acd_secs
	name     string  // asr, ccr, pdd, ast, acd: metric labels and log lines
	metric   string  // the value's metric name after sipedge_quality_
	bound    string  // the bound's
	ratio    bool    // a fraction of attempts, else a mean time
	lowIsBad bool    // a value below a threshold is bad (else above)
	unit     float64 // seconds per threshold unit: 1e-3 for ms (ratios: 1)
	max      float64 // largest threshold, in the threshold's unit
	want     string  // what a threshold must be, for Check
}

var stats = [numStats]statInfo{
	statASR: {key: "asr", name: "asr", metric: "asr", bound: "asr_bound", ratio: true, lowIsBad: true, unit: 1, max: 1, want: "a fraction above 0, at most 1 (0.25 is 25%)"},
	statCCR: {key: "ccr", name: "ccr", metric: "ccr", bound: "ccr_bound", ratio: true, lowIsBad: true, unit: 1, max: 1, want: "a fraction above 0, at most 1 (0.25 is 25%)"},
	statPDD: {key: "pdd_ms", name: "pdd", metric: "pdd_seconds", bound: "pdd_bound_seconds", unit: 1e-3, max: maxTimeMs, want: "milliseconds, 1 to 3600000"},
	statAST: {key: "ast_ms", name: "ast", metric: "ast_seconds", bound: "ast_bound_seconds", unit: 1e-3, max: maxTimeMs, want: "milliseconds, 1 to 3600000"},
	statACD: {key: "acd_secs", name: "acd", metric: "acd_seconds", bound: "acd_bound_seconds", lowIsBad: true, unit: 1, max: maxACDSecs, want: "seconds, above 0, at most 86400"},
}

// level is where a statistic's bound stands against its thresholds.
type level uint8

const (
	levelOK level = iota
	levelWarning
	levelCritical
	levelDisabled // the profile disables the statistic
)

var levelNames = [...]string{levelOK: "ok", levelWarning: "warning", levelCritical: "critical", levelDisabled: "disabled"}

func (l level) String() string { return levelNames[l] }

// zScore returns z such that P(N(0,1) <= z) = confidence: the one-sided
// normal quantile (1.645 for 0.95).
func zScore(confidence float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*confidence-1)
}

// wilsonUpper returns the upper Wilson score bound of a ratio of k in n at
// normal quantile z; 1 for n = 0 (nothing known: any ratio is possible).
func wilsonUpper(k, n uint64, z float64) float64 {
	if n == 0 {
		return 1
	}
	nf := float64(n)
	p := float64(k) / nf
	z2 := z * z
	center := p + z2/(2*nf)
	half := z * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return min(1, (center+half)/(1+z2/nf))
}

// meanBound returns the mean of a time statistic and the optimistic end of
// its one-sided confidence interval at z: below the mean for PDD and AST
// (high is bad), above it for ACD (low is bad). The spread is the sample
// standard deviation, but never less than the mean nor than the warning
// threshold (0 when disabled): doc.go says why. For n = 0 both are NaN.
func meanBound(m moments, z, warning float64, lowIsBad bool) (mean, bound float64) {
	if m.n == 0 {
		return math.NaN(), math.NaN()
	}
	n := float64(m.n)
	mean = m.sum / n
	sd := 0.0
	if m.n >= 2 {
		if v := (m.sq - n*mean*mean) / (n - 1); v > 0 {
			sd = math.Sqrt(v)
		}
	}
	half := z * max(sd, mean, warning) / math.Sqrt(n)
	if lowIsBad {
		return mean, mean + half
	}
	return mean, max(0, mean-half)
}

// judge returns the level of a bound against l's thresholds (in seconds
// for times).
func judge(info *statInfo, l *limits, bound float64) level {
	if !l.on {
		return levelDisabled
	}
	if math.IsNaN(bound) {
		return levelOK
	}
	past := func(t float64) bool {
		if info.lowIsBad {
			return bound < t
		}
		return bound > t
	}
	switch {
	case l.criticalOn && past(l.critical):
		return levelCritical
	case past(l.warning):
		return levelWarning
	}
	return levelOK
}

// limits are a statistic's Limits in the statistic's internal unit
// (seconds for times).
type limits struct {
	on                bool // the warning threshold is set
	criticalOn        bool // and the critical one too
	warning, critical float64
	weight            float64
}

// profile is a Profile ready to judge: thresholds in internal units.
type profile struct {
	name                            string
	warningPenalty, criticalPenalty float64
	limits                          [numStats]limits
}

func newProfile(p *Profile) *profile {
	q := &profile{name: p.Name, warningPenalty: p.WarningPenalty, criticalPenalty: p.CriticalPenalty}
	for s := range numStats {
		l, info := p.limits(s), &stats[s]
		q.limits[s] = limits{
			on:         l.Warning != Off,
			criticalOn: l.Warning != Off && l.Critical != Off,
			warning:    float64(l.Warning) * info.unit,
			critical:   float64(l.Critical) * info.unit,
			weight:     l.Weight,
		}
	}
	return q
}

// figure is one statistic of a pair over the window: its value (a ratio,
// or a mean in seconds), its samples, the bound it is judged by, its level
// and the penalty it adds to the score (weight x the level's penalty).
type figure struct {
	value, bound float64 // NaN without samples
	samples      uint64
	level        level
	penalty      float64
}

// figures are a pair's statistics over the window, and its score.
type figures struct {
	attempts uint64
	stat     [numStats]figure
	score    float64
}

// judgeTally computes the figures of t under profile p at quantile z.
func judgeTally(t *tally, p *profile, z float64) figures {
	f := figures{attempts: t.attempts}
	ratio := func(s stat, k uint64) {
		g := &f.stat[s]
		g.samples, g.value, g.bound = t.attempts, math.NaN(), math.NaN()
		if t.attempts > 0 {
			g.value = float64(k) / float64(t.attempts)
			g.bound = wilsonUpper(k, t.attempts, z)
		}
	}
	ratio(statASR, t.answered)
	ratio(statCCR, t.completed)
	times := [numStats]*moments{statPDD: &t.pdd, statAST: &t.ast, statACD: &t.acd}
	for s := statPDD; s <= statACD; s++ {
		g, l, m := &f.stat[s], &p.limits[s], times[s]
		w := 0.0
		if l.on {
			w = l.warning
		}
		g.samples = m.n
		g.value, g.bound = meanBound(*m, z, w, stats[s].lowIsBad)
	}
	for s := range numStats {
		g := &f.stat[s]
		g.level = judge(&stats[s], &p.limits[s], g.bound)
		switch g.level {
		case levelWarning:
			g.penalty = p.limits[s].weight * p.warningPenalty
		case levelCritical:
			g.penalty = p.limits[s].weight * p.criticalPenalty
		}
		f.score += g.penalty
	}
	return f
}
