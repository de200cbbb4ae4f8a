package quality

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by the error of New when the configuration is
// not valid.
var ErrInvalidConfig = errors.New("quality: invalid configuration")

// Modes, the configuration's mode.
const (
	ModeOff    = "off"    // statistics and scores only; routes keep the API's order
	ModeDemote = "demote" // a carrier whose score reaches its profile's critical penalty goes last
	ModeSort   = "sort"   // carriers ordered by score, the API's order breaking ties
)

// Defaults filled in by SetDefaults for zero fields.
const (
	DefaultSamplingIntervalSecs = 5
	DefaultHistorySpanSecs      = 1800
	DefaultConfidence           = 0.95
	DefaultWarningPenalty       = 1
	DefaultCriticalPenalty      = 10
	DefaultWeight               = 1
)

// Bounds of the configuration.
const (
	maxSamplingIntervalSecs = 3600
	// maxIntervals bounds history_span_secs / sampling_interval_secs: the
	// reader's ring of intervals.
	maxIntervals    = 100_000
	maxPrefixDigits = 32 // as the static rate table's prefixes
	maxNameLen      = 128
	maxTimeMs       = 3_600_000 // PDD and AST thresholds: an hour
	maxACDSecs      = 86_400
)

// Off, as a Threshold, disables it: qrouting's -1.
const Off Threshold = -1

// Threshold is a warning or critical threshold, or bad_dst_threshold: a
// number of the statistic's unit, 0 for the default, or -1 (Off) to
// disable it. It decodes from YAML and JSON numbers; its own decoding lets
// -1 through decoders that refuse negative numbers.
type Threshold float64

// UnmarshalText implements encoding.TextUnmarshaler: a YAML scalar.
func (t *Threshold) UnmarshalText(b []byte) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%q: want a number, or -1 to disable", b)
	}
	return t.set(f)
}

// UnmarshalJSON implements json.Unmarshaler: a JSON number.
func (t *Threshold) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: want a number, or -1 to disable", b)
	}
	return t.set(f)
}

func (t *Threshold) set(f float64) error {
	if f < 0 && f != -1 {
		return fmt.Errorf("%v: want a number from 0, or -1 to disable", f)
	}
	*t = Threshold(f)
	return nil
}

// Config is the quality section of the configuration. The YAML and JSON
// keys are the same. Zero fields take their defaults in SetDefaults.
type Config struct {
	// Mode is off (the default), demote or sort.
	Mode string `yaml:"mode" json:"mode"`
	// Prefixes are the quality prefixes: digits, a leading '+' ignored. A
	// dialled number counts under the longest that it starts with; ""
	// matches every number. Default [""].
	Prefixes []string `yaml:"prefixes" json:"prefixes"`
	// SamplingIntervalSecs is how often the statistics rotate; default 5.
	SamplingIntervalSecs int `yaml:"sampling_interval_secs" json:"sampling_interval_secs"`
	// HistorySpanSecs is how long a sample counts; default 1800. It is
	// rounded up to a whole number of sampling intervals.
	HistorySpanSecs int `yaml:"history_span_secs" json:"history_span_secs"`
	// Confidence is the one-sided confidence of the bounds a statistic is
	// judged by (doc.go), above 0.5 and below 1; default 0.95.
	Confidence float64 `yaml:"confidence" json:"confidence"`
	// BadDstThreshold is the score at which a pair raises a bad-destination
	// event; 0 (the default) is the critical penalty of the pair's
	// profile, Off no events.
	BadDstThreshold Threshold `yaml:"bad_dst_threshold" json:"bad_dst_threshold"`
	// WebhookURL, when set, gets each event as a JSON POST.
	WebhookURL string `yaml:"webhook_url" json:"webhook_url,omitempty"`
	// AutoDisable disables a (prefix, carrier) pair on its event.
	AutoDisable bool `yaml:"auto_disable" json:"auto_disable"`
	// Profiles judge the statistics. A prefix takes the profile that lists
	// it, else the profile named "default" if there is one, else
	// DefaultProfile.
	Profiles []Profile `yaml:"profiles" json:"profiles,omitempty"`
}

// Profile is how the statistics of the prefixes it lists are judged: per
// statistic a warning and a critical threshold and a weight; a pair's score
// is the sum over its statistics of weight x the penalty of the level it
// is at (0, WarningPenalty or CriticalPenalty). The ratios (ASR, CCR) are
// fractions, from 0 to 1; PDD and AST are in milliseconds, ACD in seconds.
// Zero fields take DefaultProfile's values.
type Profile struct {
	Name            string   `yaml:"name" json:"name"`
	Prefixes        []string `yaml:"prefixes" json:"prefixes,omitempty"`
	WarningPenalty  float64  `yaml:"warning_penalty" json:"warning_penalty"`   // default 1
	CriticalPenalty float64  `yaml:"critical_penalty" json:"critical_penalty"` // default 10
	ASR             Limits   `yaml:"asr" json:"asr"`
	CCR             Limits   `yaml:"ccr" json:"ccr"`
	PDD             Limits   `yaml:"pdd_ms" json:"pdd_ms"`
	AST             Limits   `yaml:"ast_ms" json:"ast_ms"`
	ACD             Limits   `yaml:"acd_secs" json:"acd_secs"`
}

// Limits are one statistic's thresholds. For ASR, CCR and ACD a value
// below a threshold is bad; for PDD and AST a value above. Off as Warning
// disables the statistic, its critical threshold included; Off as Critical
// keeps the statistic at most at warning.
type Limits struct {
	Warning  Threshold `yaml:"warning" json:"warning"`
	Critical Threshold `yaml:"critical" json:"critical"`
	Weight   float64   `yaml:"weight" json:"weight"` // default 1
}

// DefaultProfile is the built-in profile (doc.go says why these figures):
// it judges every prefix when the configuration has no profiles, and fills
// the fields a configured profile leaves at zero. Do not modify it.
var DefaultProfile = Profile{
	Name:            "default",
	WarningPenalty:  DefaultWarningPenalty,
	CriticalPenalty: DefaultCriticalPenalty,
	ASR:             Limits{Warning: 0.25, Critical: 0.10, Weight: 1},
	CCR:             Limits{Warning: 0.70, Critical: 0.40, Weight: 1},
	PDD:             Limits{Warning: 5000, Critical: 10000, Weight: 1},
	AST:             Limits{Warning: 30000, Critical: Off, Weight: 1},
	ACD:             Limits{Warning: 15, Critical: 5, Weight: 1},
}

// SetDefaults fills c's zero fields with their defaults, in place (the
// slices it fills are new).
func (c *Config) SetDefaults() {
	orDefault(&c.Mode, ModeOff)
	if len(c.Prefixes) == 0 {
		c.Prefixes = []string{""}
	}
	orDefault(&c.SamplingIntervalSecs, DefaultSamplingIntervalSecs)
	orDefault(&c.HistorySpanSecs, DefaultHistorySpanSecs)
	orDefault(&c.Confidence, DefaultConfidence)
	for i := range c.Profiles {
		c.Profiles[i].SetDefaults()
	}
}

// SetDefaults fills p's zero fields from DefaultProfile.
func (p *Profile) SetDefaults() {
	d := &DefaultProfile
	orDefault(&p.WarningPenalty, d.WarningPenalty)
	orDefault(&p.CriticalPenalty, d.CriticalPenalty)
	for s := range numStats {
		l, dl := p.limits(s), d.limits(s)
		orDefault(&l.Warning, dl.Warning)
		orDefault(&l.Critical, dl.Critical)
		orDefault(&l.Weight, dl.Weight)
	}
}

func (p *Profile) limits(s stat) *Limits {
	return [numStats]*Limits{statASR: &p.ASR, statCCR: &p.CCR, statPDD: &p.PDD, statAST: &p.AST, statACD: &p.ACD}[s]
}

// SamplingInterval returns sampling_interval_secs as a duration.
func (c *Config) SamplingInterval() time.Duration {
	return time.Duration(c.SamplingIntervalSecs) * time.Second
}

// Check reports each of c's problems to bad, with its field as a path under
// the quality section (e.g. "profiles[1].asr.critical") and why. c must
// have its defaults (SetDefaults).
func (c *Config) Check(bad func(field, problem string)) {
	badf := func(field, format string, args ...any) { bad(field, fmt.Sprintf(format, args...)) }
	if !slices.Contains([]string{ModeOff, ModeDemote, ModeSort}, c.Mode) {
		badf("mode", "%q: want off, demote or sort", c.Mode)
	}
	prefixes := map[string]string{}
	for i, p := range c.Prefixes {
		f := fmt.Sprintf("prefixes[%d]", i)
		d, err := prefixDigits(p)
		if err != nil {
			badf(f, "%v", err)
			continue
		}
		if first, dup := prefixes[d]; dup {
			badf(f, "%q: duplicate prefix (also %s)", p, first)
			continue
		}
		prefixes[d] = f
	}
	if n := c.SamplingIntervalSecs; n < 1 || n > maxSamplingIntervalSecs {
		badf("sampling_interval_secs", "%d: want 1 to %d", n, maxSamplingIntervalSecs)
	} else if h := c.HistorySpanSecs; h < n || h/n > maxIntervals {
		badf("history_span_secs", "%d: want %d (one sampling interval) to %d", h, n, n*maxIntervals)
	}
	if cf := c.Confidence; !(cf > 0.5 && cf < 1) {
		badf("confidence", "%v: want a probability above 0.5 and below 1, such as 0.95", cf)
	}
	if t := c.BadDstThreshold; t != Off && !(t >= 0) || math.IsInf(float64(t), 0) {
		badf("bad_dst_threshold", "%v: want a score from 0 (the profile's critical penalty), or -1 for no events", float64(t))
	}
	if c.WebhookURL != "" {
		if u, err := url.Parse(c.WebhookURL); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			badf("webhook_url", "%q: want an http:// or https:// URL", c.WebhookURL)
		}
	}
	names := map[string]string{}
	assigned := map[string]string{}
	for i := range c.Profiles {
		p := &c.Profiles[i]
		f := fmt.Sprintf("profiles[%d]", i)
		switch {
		case p.Name == "" || !printable(p.Name, maxNameLen):
			badf(f+".name", "%q: want 1 to %d printable characters", p.Name, maxNameLen)
		case names[p.Name] != "":
			badf(f+".name", "%q: duplicate name (also %s)", p.Name, names[p.Name])
		default:
			names[p.Name] = f
		}
		for j, pre := range p.Prefixes {
			pf := fmt.Sprintf("%s.prefixes[%d]", f, j)
			d, err := prefixDigits(pre)
			switch {
			case err != nil:
				badf(pf, "%v", err)
			case prefixes[d] == "":
				badf(pf, "%q: not one of quality.prefixes", pre)
			case assigned[d] != "":
				badf(pf, "%q: already in %s", pre, assigned[d])
			default:
				assigned[d] = pf
			}
		}
		p.check(func(field, problem string) { bad(f+"."+field, problem) })
	}
}

// check reports the problems of a profile with its defaults.
func (p *Profile) check(bad func(field, problem string)) {
	badf := func(field, format string, args ...any) { bad(field, fmt.Sprintf(format, args...)) }
	if w := p.WarningPenalty; !(w > 0) || math.IsInf(w, 0) {
		badf("warning_penalty", "%v: want a number above 0", w)
	}
	if c := p.CriticalPenalty; !(c >= p.WarningPenalty) || math.IsInf(c, 0) {
		badf("critical_penalty", "%v: want a number from warning_penalty (%v)", c, p.WarningPenalty)
	}
	for s := range numStats {
		info, l := &stats[s], p.limits(s)
		f := info.key
		if w := l.Weight; !(w > 0) || math.IsInf(w, 0) {
			badf(f+".weight", "%v: want a number above 0 (warning: -1 disables the statistic)", w)
		}
		for _, t := range []struct {
			name string
			v    Threshold
		}{{"warning", l.Warning}, {"critical", l.Critical}} {
			v := float64(t.v)
			switch {
			case t.v == Off:
			case !(v > 0) || v > info.max:
				badf(f+"."+t.name, "%v: want %s, or -1 to disable", v, info.want)
			}
		}
		if l.Warning == Off || l.Critical == Off {
			continue
		}
		if info.lowIsBad && l.Critical >= l.Warning {
			badf(f+".critical", "%v: want it below warning (%v): below critical is worse", float64(l.Critical), float64(l.Warning))
		}
		if !info.lowIsBad && l.Critical <= l.Warning {
			badf(f+".critical", "%v: want it above warning (%v): above critical is worse", float64(l.Critical), float64(l.Warning))
		}
	}
}

// prefixDigits returns a quality prefix without its leading '+', or why it
// is not one.
func prefixDigits(p string) (string, error) {
	d := strings.TrimPrefix(p, "+")
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return "", fmt.Errorf("%q: want digits with an optional leading +", p)
		}
	}
	if len(d) > maxPrefixDigits {
		return "", fmt.Errorf("%q: %d digits, at most %d", p, len(d), maxPrefixDigits)
	}
	return d, nil
}

func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// printable reports whether s is at most n bytes of printable ASCII.
func printable(s string, n int) bool {
	if len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// clone returns a deep copy of c.
func (c Config) clone() Config {
	c.Prefixes = slices.Clone(c.Prefixes)
	c.Profiles = slices.Clone(c.Profiles)
	for i := range c.Profiles {
		c.Profiles[i].Prefixes = slices.Clone(c.Profiles[i].Prefixes)
	}
	return c
}
