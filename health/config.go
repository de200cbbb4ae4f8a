package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Group algorithms and passive outcome names, as written in the
// configuration.
const (
	AlgorithmWeighted   = "weighted"
	AlgorithmRoundRobin = "round_robin"
	AlgorithmHash       = "hash"

	PassiveNoResponse     = "no_response"     // an INVITE got no reply at all
	PassiveStatus503      = "status_503"      // an INVITE got a 503
	PassiveTransportError = "transport_error" // an INVITE could not be sent
)

// Defaults filled in by AddGroup for zero fields.
const (
	DefaultProbeInterval    = 15 * time.Second
	MinProbeInterval        = 10 * time.Millisecond // below, AddGroup refuses the group
	DefaultProbeTimeout     = 2 * time.Second
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 2
	// DefaultProbeJitter is the YAML's default jitter_ms. AddGroup does not
	// fill it in (0 means no jitter); the admin API presets it before
	// decoding, as the YAML loader does, so that an absent key and an
	// explicit 0 differ.
	DefaultProbeJitter = 500 * time.Millisecond

	DefaultPassiveFailureThreshold = 3
	// DefaultFailurePercent and DefaultMinCalls: a member is an outlier
	// when half of the last 20 calls (or of the last second's, if more)
	// failed (outlier.go).
	DefaultFailurePercent = 50
	DefaultMinCalls       = 20
	// DefaultPanicThreshold is Envoy's: a group with fewer than half of
	// its members up (and one at least) chooses among all of them.
	DefaultPanicThreshold  = 50
	DefaultHalfOpenCalls   = 3
	DefaultPassiveDownTime = 30 * time.Second
	// DefaultMaxRetryAfter bounds the cooldown a 503's Retry-After buys: a
	// carrier's "Retry-After: 86400" on one call must not take a gateway
	// out of rotation for a day.
	DefaultMaxRetryAfter = 300 * time.Second
	// MaxRetryAfterLimit is the largest max_retry_after_secs accepted.
	MaxRetryAfterLimit = 24 * time.Hour
	// MaxMinCalls is the largest passive.min_calls accepted.
	MaxMinCalls = 1_000_000
)

// GroupConfig is a gateway group: one carrier's pool of destinations. It is
// the one model of a group: gateway.groups[] of the YAML (the yaml tags,
// decoded by the configuration loader) and the admin API's groups (the JSON
// names are the YAML keys), with one set of defaults (Preset, SetDefaults)
// and one set of rules (CheckFields). Zero fields take the defaults above
// when the group is added; Groups and Group return the group with its
// defaults filled in.
type GroupConfig struct {
	Name      string         `json:"name" yaml:"name"`
	Algorithm string         `json:"algorithm" yaml:"algorithm"` // weighted (default), round_robin or hash
	Transport transport.Kind `json:"transport" yaml:"transport"` // udp (default) or tcp
	// RerouteCauses overrides lcr.reroute_causes for this carrier (empty =
	// inherit). The health package only stores them.
	RerouteCauses []int         `json:"reroute_causes,omitempty" yaml:"reroute_causes"`
	Probe         ProbeConfig   `json:"probe" yaml:"probe"`
	Passive       PassiveConfig `json:"passive" yaml:"passive"`
	Destinations  []DestConfig  `json:"destinations" yaml:"destinations"`
	// CPS is the carrier account's calls-per-second limit and CPSReject
	// the carrier's rejects that say it was exceeded (docs/design/cps.md), as the
	// YAML's gateway.groups[].cps and cps_reject. The health package only
	// stores them, for the pacing of dials (see Options.OnAdd); nil CPS =
	// unpaced.
	CPS       *CPSConfig  `json:"cps,omitempty" yaml:"cps"`
	CPSReject []CPSReject `json:"cps_reject,omitempty" yaml:"cps_reject"`
	// MaxConcurrentCalls is the carrier's channel limit: the calls it
	// takes at once (0: none). The health package only stores it (see
	// Options.OnAdd).
	MaxConcurrentCalls int `json:"max_concurrent_calls,omitempty" yaml:"max_concurrent_calls"`
	// Auth is the account sipedge holds with the carrier, to answer its
	// Digest challenges to INVITEs (the YAML's gateway.groups[].auth). The
	// health package only stores it (Registry.Auth).
	Auth *AuthConfig `json:"auth,omitempty" yaml:"auth"`
	// FollowRedirects lets a 3xx from one of the group's members send the
	// call on to another member it names (Registry.Redirect), once per
	// attempt; otherwise a 3xx is the attempt's failure.
	FollowRedirects bool `json:"follow_redirects,omitempty" yaml:"follow_redirects"`
	// PanicThreshold is the percentage of the group's members (0 to 100)
	// below which, if one at least is up, the group is in panic: Pick
	// ignores the marks calls left on members (see Pick). nil is
	// DefaultPanicThreshold; 0 turns panics off.
	PanicThreshold *int `json:"panic_threshold_percent" yaml:"panic_threshold_percent"`
}

// AuthConfig is an account with a carrier. Realm, when set, is the only
// realm its credentials answer. The password is write-only: it is never
// marshalled, so the admin API does not show it.
type AuthConfig struct {
	Username string `json:"username" yaml:"username"`
	Password string `json:"password" yaml:"password"` // "${VAR}" keeps it out of the YAML file
	Realm    string `json:"realm,omitempty" yaml:"realm"`
}

// Check reports each of a's problems to bad, with its field (username,
// password or realm) and why.
func (a *AuthConfig) Check(bad func(field, problem string)) {
	// The username and realm go out in quoted strings; the password never
	// leaves (an empty one is most likely an unset ${VAR}).
	if a.Username == "" || !printable(a.Username, 256) {
		bad("username", fmt.Sprintf("%q: want 1 to 256 printable characters", a.Username))
	}
	if a.Password == "" || len(a.Password) > 256 {
		bad("password", fmt.Sprintf("want 1 to 256 bytes, got %d", len(a.Password)))
	}
	if !printable(a.Realm, 256) {
		bad("realm", fmt.Sprintf("%q: want up to 256 printable characters", a.Realm))
	}
}

// MarshalJSON writes a without its password.
func (a AuthConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Username string `json:"username"`
		Realm    string `json:"realm,omitempty"`
	}{a.Username, a.Realm})
}

// CPSConfig is a group's CPS limit. MaxWaitMs nil is 1000 (1 s); 0 never
// waits. Key names the carrier account the limit is shared under (empty:
// the group's name).
type CPSConfig struct {
	Rate      float64 `json:"rate" yaml:"rate"`
	Burst     int     `json:"burst,omitempty" yaml:"burst"`
	MaxWaitMs *int64  `json:"max_wait_ms,omitempty" yaml:"max_wait_ms"`
	Key       string  `json:"key,omitempty" yaml:"key"`
}

// MaxWait returns the CPS limit's max wait.
func (c *CPSConfig) MaxWait() time.Duration {
	if c.MaxWaitMs == nil {
		return time.Second
	}
	return time.Duration(*c.MaxWaitMs) * time.Millisecond
}

// CPSReject matches a carrier's CPS reject: a status code and, optionally,
// text that the Reason header or the reason phrase must contain.
type CPSReject struct {
	Code   int    `json:"code" yaml:"code"`
	Reason string `json:"reason,omitempty" yaml:"reason"`
}

// ProbeConfig configures OPTIONS probing of a group's members. In JSON the
// durations are numbers named as in the YAML: interval_secs, timeout_ms and
// jitter_ms (fractions are accepted).
type ProbeConfig struct {
	Enabled          bool          `yaml:"enabled"`
	Interval         time.Duration `yaml:"interval_secs"`     // default 15 s
	Timeout          time.Duration `yaml:"timeout_ms"`        // default 2 s
	FailureThreshold int           `yaml:"failure_threshold"` // consecutive failed probes that mark a member down; default 3
	SuccessThreshold int           `yaml:"success_threshold"` // consecutive good probes that bring a down member back; default 2
	// HealthyCodes are the replies that count as alive (empty = any reply
	// except 503).
	HealthyCodes []int `yaml:"healthy_codes"`
	// Jitter is the upper bound of a random delay added to each interval
	// (0 = none; decoders preset DefaultProbeJitter, see Preset).
	Jitter time.Duration `yaml:"jitter_ms"`
}

// PassiveConfig says which outcomes of real calls count against a member,
// when they make it an outlier that goes down (outlier.go), and how a member
// comes back (the YAML's gateway.groups[].passive). In JSON down_secs and
// max_retry_after_secs are numbers of seconds.
type PassiveConfig struct {
	// Disabled turns passive signals off: calls never mark a member down.
	Disabled bool `yaml:"disabled"`
	// Outcomes are the call outcomes that count against a member (its
	// failures): PassiveNoResponse, PassiveStatus503,
	// PassiveTransportError. Empty = all three.
	Outcomes []string `yaml:"outcomes"`
	// FailureThreshold is the fewest failures that mark a member down:
	// that many in a row spread over a second at least, or that many
	// among the recent calls when they are FailurePercent of them.
	// Default 3.
	FailureThreshold int `yaml:"failure_threshold"`
	// FailurePercent is the share of the recent calls (1 to 100 %) that
	// must have failed for a member to go down; default 50.
	FailurePercent int `yaml:"failure_percent"`
	// MinCalls is the fewest recent calls the share is judged over: the
	// last second's calls, and older ones up to ten seconds back until
	// there are MinCalls; below, only a run of failures counts. Default
	// 20.
	MinCalls int `yaml:"min_calls"`
	// HalfOpenCalls is the number of trial calls a member that comes back
	// is given (half-open) before it takes full traffic; default 3.
	HalfOpenCalls int `yaml:"half_open_calls"`
	// DownTime is, for a group that is not probed, how long a member marked
	// down by calls stays down before it is given trial calls again; a
	// probed group's members come back through probing. Default 30 s.
	DownTime time.Duration `yaml:"down_secs"`
	// MaxRetryAfter caps the cooldown that a 503's Retry-After (RFC 3261
	// 21.5.4, 20.33) to a call or a probe puts a member in; longer ones are
	// cut to it, logged and counted. Default 300 s, at most 24 h.
	MaxRetryAfter time.Duration `yaml:"max_retry_after_secs"`
}

// DestConfig is one member of a gateway group.
type DestConfig struct {
	URI string `json:"uri" yaml:"uri"` // sip: or sips: URI
	// Address is where to send: "ip:port" (IPv6 in brackets) or
	// "dns-name:port", re-resolved periodically.
	Address  string `json:"address" yaml:"address"`
	Weight   int    `json:"weight" yaml:"weight"`     // default 1 (0 = default)
	Priority int    `json:"priority" yaml:"priority"` // lower tiers first
}

type probeJSON struct {
	Enabled          bool    `json:"enabled"`
	Interval         float64 `json:"interval_secs"`
	Timeout          float64 `json:"timeout_ms"`
	FailureThreshold int     `json:"failure_threshold"`
	SuccessThreshold int     `json:"success_threshold"`
	HealthyCodes     []int   `json:"healthy_codes,omitempty"`
	Jitter           float64 `json:"jitter_ms"`
}

type passiveJSON struct {
	Disabled         bool     `json:"disabled"`
	Outcomes         []string `json:"outcomes,omitempty"`
	FailureThreshold int      `json:"failure_threshold"`
	FailurePercent   int      `json:"failure_percent"`
	MinCalls         int      `json:"min_calls"`
	HalfOpenCalls    int      `json:"half_open_calls"`
	DownTime         float64  `json:"down_secs"`
	MaxRetryAfter    float64  `json:"max_retry_after_secs"`
}

// MarshalJSON implements json.Marshaler.
func (p ProbeConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(probeJSON{
		Enabled:          p.Enabled,
		Interval:         p.Interval.Seconds(),
		Timeout:          ms(p.Timeout),
		FailureThreshold: p.FailureThreshold,
		SuccessThreshold: p.SuccessThreshold,
		HealthyCodes:     p.HealthyCodes,
		Jitter:           ms(p.Jitter),
	})
}

// UnmarshalJSON implements json.Unmarshaler. Keys that are absent keep the
// values p already has (so defaults can be preset); unknown keys are errors.
func (p *ProbeConfig) UnmarshalJSON(b []byte) error {
	j := probeJSON{
		Enabled:          p.Enabled,
		Interval:         p.Interval.Seconds(),
		Timeout:          ms(p.Timeout),
		FailureThreshold: p.FailureThreshold,
		SuccessThreshold: p.SuccessThreshold,
		HealthyCodes:     p.HealthyCodes,
		Jitter:           ms(p.Jitter),
	}
	if err := strictUnmarshal(b, &j); err != nil {
		return err
	}
	var err error
	q := ProbeConfig{Enabled: j.Enabled, FailureThreshold: j.FailureThreshold, SuccessThreshold: j.SuccessThreshold, HealthyCodes: j.HealthyCodes}
	if q.Interval, err = duration("interval_secs", j.Interval, time.Second); err != nil {
		return err
	}
	if q.Timeout, err = duration("timeout_ms", j.Timeout, time.Millisecond); err != nil {
		return err
	}
	if q.Jitter, err = duration("jitter_ms", j.Jitter, time.Millisecond); err != nil {
		return err
	}
	*p = q
	return nil
}

// MarshalJSON implements json.Marshaler.
func (p PassiveConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(passiveJSON{
		Disabled:         p.Disabled,
		Outcomes:         p.Outcomes,
		FailureThreshold: p.FailureThreshold,
		FailurePercent:   p.FailurePercent,
		MinCalls:         p.MinCalls,
		HalfOpenCalls:    p.HalfOpenCalls,
		DownTime:         p.DownTime.Seconds(),
		MaxRetryAfter:    p.MaxRetryAfter.Seconds(),
	})
}

// UnmarshalJSON implements json.Unmarshaler, like ProbeConfig's.
func (p *PassiveConfig) UnmarshalJSON(b []byte) error {
	j := passiveJSON{
		Disabled:         p.Disabled,
		Outcomes:         p.Outcomes,
		FailureThreshold: p.FailureThreshold,
		FailurePercent:   p.FailurePercent,
		MinCalls:         p.MinCalls,
		HalfOpenCalls:    p.HalfOpenCalls,
		DownTime:         p.DownTime.Seconds(),
		MaxRetryAfter:    p.MaxRetryAfter.Seconds(),
	}
	if err := strictUnmarshal(b, &j); err != nil {
		return err
	}
	d, err := duration("down_secs", j.DownTime, time.Second)
	if err != nil {
		return err
	}
	ra, err := duration("max_retry_after_secs", j.MaxRetryAfter, time.Second)
	if err != nil {
		return err
	}
	*p = PassiveConfig{Disabled: j.Disabled, Outcomes: j.Outcomes, FailureThreshold: j.FailureThreshold,
		FailurePercent: j.FailurePercent, MinCalls: j.MinCalls, HalfOpenCalls: j.HalfOpenCalls, DownTime: d, MaxRetryAfter: ra}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func duration(key string, v float64, unit time.Duration) (time.Duration, error) {
	if v < 0 || math.IsNaN(v) || v*float64(unit) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%s: %v: want a non-negative number", key, v)
	}
	return time.Duration(math.Round(v * float64(unit))), nil
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// clone returns a deep copy of g.
func (g GroupConfig) clone() GroupConfig {
	g.RerouteCauses = slices.Clone(g.RerouteCauses)
	g.Probe.HealthyCodes = slices.Clone(g.Probe.HealthyCodes)
	g.Passive.Outcomes = slices.Clone(g.Passive.Outcomes)
	g.Destinations = slices.Clone(g.Destinations)
	if g.CPS != nil {
		c := *g.CPS
		if c.MaxWaitMs != nil {
			w := *c.MaxWaitMs
			c.MaxWaitMs = &w
		}
		g.CPS = &c
	}
	g.CPSReject = slices.Clone(g.CPSReject)
	if g.Auth != nil {
		a := *g.Auth
		g.Auth = &a
	}
	if g.PanicThreshold != nil {
		p := *g.PanicThreshold
		g.PanicThreshold = &p
	}
	return g
}

// Check reports what AddGroup would refuse in g by its own rules (not
// Options.OnAdd's), changing nothing; the error wraps ErrInvalidGroup and
// lists every problem.
func (g GroupConfig) Check() error {
	if _, err := g.normalize(); err != nil {
		return fmt.Errorf("cannot add group %q: %w", g.Name, err)
	}
	return nil
}

// normalize fills in the defaults of a deep copy of g and checks it; the
// error lists every problem, each prefixed with its field.
func (g GroupConfig) normalize() (GroupConfig, error) {
	g = g.clone()
	g.SetDefaults()
	var errs []error
	g.CheckFields(func(field, problem string) {
		errs = append(errs, fmt.Errorf("%s: %s", field, problem))
	})
	if len(errs) > 0 {
		return g, fmt.Errorf("%w: %w", ErrInvalidGroup, errors.Join(errs...))
	}
	return g, nil
}

// Preset puts in place the defaults of the keys whose zero means something
// of its own (probe.jitter_ms: 0 is no jitter), for a decoder to call
// before it decodes a group: an absent key then differs from an explicit
// 0. The YAML loader and DecodeGroup call it.
func (g *GroupConfig) Preset() { g.Probe.Jitter = DefaultProbeJitter }

// SetDefaults replaces g's zero fields by their defaults (the constants
// above); a nil PanicThreshold becomes DefaultPanicThreshold. It changes
// g's slices in place.
func (g *GroupConfig) SetDefaults() {
	orDefault(&g.Algorithm, AlgorithmWeighted)
	orDefault(&g.Transport, transport.UDP)
	orDefault(&g.Probe.Interval, DefaultProbeInterval)
	orDefault(&g.Probe.Timeout, DefaultProbeTimeout)
	orDefault(&g.Probe.FailureThreshold, DefaultFailureThreshold)
	orDefault(&g.Probe.SuccessThreshold, DefaultSuccessThreshold)
	orDefault(&g.Passive.FailureThreshold, DefaultPassiveFailureThreshold)
	orDefault(&g.Passive.FailurePercent, DefaultFailurePercent)
	orDefault(&g.Passive.MinCalls, DefaultMinCalls)
	if g.PanicThreshold == nil {
		p := DefaultPanicThreshold
		g.PanicThreshold = &p
	}
	orDefault(&g.Passive.HalfOpenCalls, DefaultHalfOpenCalls)
	orDefault(&g.Passive.DownTime, DefaultPassiveDownTime)
	orDefault(&g.Passive.MaxRetryAfter, DefaultMaxRetryAfter)
	for i := range g.Destinations {
		orDefault(&g.Destinations[i].Weight, 1)
	}
}

// CheckFields reports each of g's problems to bad, with its field, as the
// YAML and the JSON name it ("destinations[1].address"), and why. g has
// its defaults (SetDefaults). These are the rules of every gateway group:
// the YAML's (the configuration loader reports them with their line) and
// the admin API's (Check, AddGroup).
func (g *GroupConfig) CheckFields(bad func(field, problem string)) {
	badf := func(field, format string, args ...any) { bad(field, fmt.Sprintf(format, args...)) }
	if g.Name == "" {
		badf("name", "required")
	}
	if !slices.Contains([]string{AlgorithmWeighted, AlgorithmRoundRobin, AlgorithmHash}, g.Algorithm) {
		badf("algorithm", "%q: want one of %q, %q, %q", g.Algorithm, AlgorithmWeighted, AlgorithmRoundRobin, AlgorithmHash)
	}
	if !g.Transport.Served() {
		badf("transport", "%q: want udp or tcp", g.Transport)
	}
	for i, c := range g.RerouteCauses {
		if c < 300 || c > 699 {
			badf(fmt.Sprintf("reroute_causes[%d]", i), "%d: want a SIP failure code, 300 to 699", c)
		}
	}
	p := g.Probe
	if p.Interval < MinProbeInterval {
		badf("probe.interval_secs", "%v: must be at least %v", p.Interval, MinProbeInterval)
	}
	if p.Timeout < time.Millisecond {
		badf("probe.timeout_ms", "%v: must be at least 1 ms", p.Timeout)
	}
	if p.Jitter < 0 {
		badf("probe.jitter_ms", "must not be negative")
	}
	if p.FailureThreshold < 0 {
		badf("probe.failure_threshold", "%d: must not be negative", p.FailureThreshold)
	}
	if p.SuccessThreshold < 0 {
		badf("probe.success_threshold", "%d: must not be negative", p.SuccessThreshold)
	}
	for i, c := range p.HealthyCodes {
		if c < 100 || c > 699 {
			badf(fmt.Sprintf("probe.healthy_codes[%d]", i), "%d: want a SIP status code, 100 to 699", c)
		}
	}
	s := g.Passive
	for i, o := range s.Outcomes {
		if o != PassiveNoResponse && o != PassiveStatus503 && o != PassiveTransportError {
			badf(fmt.Sprintf("passive.outcomes[%d]", i), "%q: want one of %q, %q, %q", o, PassiveNoResponse, PassiveStatus503, PassiveTransportError)
		}
	}
	if s.FailureThreshold < 0 {
		badf("passive.failure_threshold", "%d: must not be negative", s.FailureThreshold)
	}
	if s.FailurePercent < 0 || s.FailurePercent > 100 {
		badf("passive.failure_percent", "%d: want 1 to 100", s.FailurePercent)
	}
	if s.MinCalls < 0 || s.MinCalls > MaxMinCalls {
		badf("passive.min_calls", "%d: want 1 to %d", s.MinCalls, MaxMinCalls)
	}
	if p := g.PanicThreshold; p != nil && (*p < 0 || *p > 100) {
		badf("panic_threshold_percent", "%d: want 0 to 100", *p)
	}
	if s.HalfOpenCalls < 0 {
		badf("passive.half_open_calls", "%d: must not be negative", s.HalfOpenCalls)
	}
	if s.DownTime < 0 {
		badf("passive.down_secs", "must not be negative")
	}
	switch ra := s.MaxRetryAfter; {
	case ra < time.Second:
		badf("passive.max_retry_after_secs", "%v: want 1 s to %v", ra, MaxRetryAfterLimit)
	case ra > MaxRetryAfterLimit:
		badf("passive.max_retry_after_secs", "%v: at most %v (a day)", ra.Seconds(), MaxRetryAfterLimit.Seconds())
	}
	if c := g.CPS; c != nil {
		// The limiter checks the rest (Options.OnAdd).
		if !(c.Rate > 0) || math.IsInf(c.Rate, 0) {
			badf("cps.rate", "%v: want calls per second above 0 (no cps: unpaced)", c.Rate)
		}
		if c.Burst < 0 {
			badf("cps.burst", "%d: must not be negative", c.Burst)
		}
		if c.MaxWaitMs != nil && (*c.MaxWaitMs < 0 || *c.MaxWaitMs > 3600_000) {
			badf("cps.max_wait_ms", "%d: want 0 to 3600000", *c.MaxWaitMs)
		}
		if !printable(c.Key, 128) {
			badf("cps.key", "%q: want up to 128 printable characters", c.Key)
		}
	}
	for i, r := range g.CPSReject {
		if r.Code < 400 || r.Code > 699 {
			badf(fmt.Sprintf("cps_reject[%d].code", i), "%d: want a SIP failure code, 400 to 699", r.Code)
		}
		if !printable(r.Reason, 256) {
			badf(fmt.Sprintf("cps_reject[%d].reason", i), "%q: want up to 256 printable characters", r.Reason)
		}
	}
	if g.MaxConcurrentCalls < 0 {
		badf("max_concurrent_calls", "%d: must not be negative", g.MaxConcurrentCalls)
	}
	if a := g.Auth; a != nil {
		a.Check(func(field, problem string) { bad("auth."+field, problem) })
	}
	if len(g.Destinations) == 0 {
		badf("destinations", "at least one destination required")
	}
	seen := map[[2]string]int{}
	for i, d := range g.Destinations {
		f := fmt.Sprintf("destinations[%d]", i)
		var u parser.URI
		if parser.ParseURI([]byte(d.URI), &u) != nil || !u.IsSIP() {
			badf(f+".uri", "%q: want a sip: or sips: URI", d.URI)
		}
		if d.Address == "" {
			badf(f+".address", "required")
		} else if _, _, _, err := parseAddress(d.Address); err != nil {
			badf(f+".address", "%v", err)
		}
		if d.Weight < 0 {
			badf(f+".weight", "%d: must not be negative", d.Weight)
		}
		if d.Priority < 0 {
			badf(f+".priority", "%d: must not be negative", d.Priority)
		}
		k := [2]string{d.URI, d.Address}
		if j, dup := seen[k]; dup {
			badf(f, "duplicate of destinations[%d] (same uri and address)", j)
		}
		seen[k] = i
	}
}

func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// parseAddress splits "host:port" (transport.SplitHostPort): host an IP
// address (IPv6 in brackets) or a DNS name, port 1 to 65535. ip is valid
// when host is an IP address.
func parseAddress(s string) (host string, port uint16, ip netip.Addr, err error) {
	host, port, err = transport.SplitHostPort(s)
	if err != nil {
		return "", 0, ip, err
	}
	if port == 0 {
		return "", 0, ip, fmt.Errorf("%q: port must not be 0", s)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		ip = a.Unmap()
	}
	return host, port, ip, nil
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
