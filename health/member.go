package health

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/transport"
)

// Member states. A member starts up; it goes down on failure_threshold
// failed probes or passive.failure_threshold counted call outcomes; it comes
// back half-open (success_threshold good probes, or passive.down_secs for an
// unprobed group) and is up again once half_open_calls trial calls have
// succeeded. A failed trial sends it down again.
const (
	stateUp uint32 = iota
	stateDown
	stateHalfOpen

	healthMask = 3
	// Flags in the same word, so that Pick tells a member with nothing to
	// check (the word is stateUp) by one load.
	flagUnresolvable uint32 = 1 << 2 // addr is nil
	flagCooldown     uint32 = 1 << 3 // cooldown may be in the future
)

var stateNames = [...]string{stateUp: "up", stateDown: "down", stateHalfOpen: "half_open"}

// settings are the parts of a group a member's state needs when it is
// reported on. They are immutable; a group update publishes new ones.
type settings struct {
	group     string
	transport transport.Kind
	probe     ProbeConfig
	passive   PassiveConfig
	counts    [numOutcomes]bool // which outcomes count against a member
}

// state is one member's health, shared by every version of its group in
// which the member's uri and address are unchanged. Every mutable field is
// an atomic: the shards read it in Pick and write it in ReportCall, the probe
// loop and the Prober's callbacks write it, all without locks.
type state struct {
	uri, address string
	host         string // DNS name, or "" when address is an IP address
	port         uint16

	settings atomic.Pointer[settings]
	word     atomic.Uint32                  // health state | flags
	addr     atomic.Pointer[netip.AddrPort] // nil = unresolvable
	cooldown atomic.Int64                   // registry clock until which the member is skipped; 0 = none

	probeFails atomic.Int32 // consecutive failed probes
	probeOKs   atomic.Int32 // consecutive good probes while down
	callFails  atomic.Int32 // consecutive counted call outcomes
	trials     atomic.Int32 // half-open trial calls Pick may still hand out
	trialOKs   atomic.Int32 // half-open trial calls that succeeded
	downAt     atomic.Int64 // registry clock when the member went down
	lastCode   atomic.Int32 // last probe reply, 0 = none or no reply
	lastRTT    atomic.Int64 // last probe round trip, ns

	inflight     atomic.Pointer[probeCall]
	removed      atomic.Bool
	unresolvable atomic.Bool // logged as unresolvable
	stale        atomic.Bool // logged as keeping its address through failed re-resolutions

	// Owned by the registry's writer (under Registry.mu) and by the probe
	// loop goroutine respectively.
	metricNames []string
	nextProbe   time.Duration

	rtt              *metrics.Histogram
	transitions      [3]*metrics.Counter // by new state
	retryAfterCapped *metrics.Counter    // Retry-Afters cut to passive.max_retry_after_secs
}

// health returns the member's state: stateUp, stateDown or stateHalfOpen.
func (st *state) health() uint32 { return st.word.Load() & healthMask }

// usable reports whether Pick may choose the member now. The common case,
// up with nothing to check, is one load, inlined.
func (st *state) usable(now *lazyNow) bool {
	if w := st.word.Load(); w != stateUp {
		return st.usableSlow(w, now)
	}
	return true
}

func (st *state) usableSlow(w uint32, now *lazyNow) bool {
	if w&healthMask == stateDown || w&flagUnresolvable != 0 {
		return false
	}
	if w&flagCooldown != 0 && st.cooldown.Load() > now.get() {
		return false
	}
	return w&healthMask == stateUp || st.trials.Load() > 0
}

// takeTrial reserves a half-open trial call. It reports false when the
// member is half-open and has none left.
func (st *state) takeTrial() bool {
	for {
		if st.health() != stateHalfOpen {
			return true
		}
		n := st.trials.Load()
		if n <= 0 {
			return false
		}
		if st.trials.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// setHealth moves the member from one of the states in from to to, keeping
// the flags. It reports whether it did.
func (st *state) setHealth(to uint32, from ...uint32) bool {
	for {
		w := st.word.Load()
		ok := false
		for _, f := range from {
			ok = ok || w&healthMask == f
		}
		if !ok {
			return false
		}
		if st.word.CompareAndSwap(w, w&^healthMask|to) {
			return true
		}
	}
}

func (st *state) logAttrs(set *settings) []any {
	return []any{"group", set.group, "uri", st.uri, "address", st.address}
}

// toDown marks the member down, logging and counting it once.
func (r *Registry) toDown(st *state, why string, detail any) {
	if !st.setHealth(stateDown, stateUp, stateHalfOpen) {
		return
	}
	st.probeOKs.Store(0)
	st.trials.Store(0)
	st.downAt.Store(int64(r.now()))
	st.transitions[stateDown].Inc()
	if !st.removed.Load() {
		set := st.settings.Load()
		r.log.Warn("gateway member down", append(st.logAttrs(set), "by", why, "detail", detail)...)
	}
}

// toHalfOpen gives a down member trial calls.
func (r *Registry) toHalfOpen(st *state, why string) {
	set := st.settings.Load()
	if st.health() != stateDown {
		return
	}
	st.trials.Store(int32(set.passive.HalfOpenCalls))
	st.trialOKs.Store(0)
	if !st.setHealth(stateHalfOpen, stateDown) {
		return
	}
	st.callFails.Store(0)
	st.transitions[stateHalfOpen].Inc()
	if !st.removed.Load() {
		r.log.Info("gateway member half-open", append(st.logAttrs(set), "by", why, "trial_calls", set.passive.HalfOpenCalls)...)
	}
}

// toUp closes the breaker of a half-open member.
func (r *Registry) toUp(st *state) {
	if !st.setHealth(stateUp, stateHalfOpen) {
		return
	}
	st.callFails.Store(0)
	st.transitions[stateUp].Inc()
	if !st.removed.Load() {
		r.log.Info("gateway member up", st.logAttrs(st.settings.Load())...)
	}
}

// setCooldown makes Pick skip the member for d (a 503's Retry-After), cut
// to the group's passive.max_retry_after_secs: a carrier's Retry-After is
// advice (RFC 3261 21.5.4), and one reply must not take a gateway out for
// hours. It logs when a cooldown starts (not when a running one is
// extended) and counts every cut.
func (r *Registry) setCooldown(st *state, d time.Duration, why string) {
	set := st.settings.Load()
	asked := d
	if max := set.passive.MaxRetryAfter; max > 0 && d > max {
		d = max
		st.retryAfterCapped.Inc()
	}
	now := int64(r.now())
	until := now + int64(d)
	for {
		old := st.cooldown.Load()
		if old >= until {
			return
		}
		if st.cooldown.CompareAndSwap(old, until) {
			st.word.Or(flagCooldown) // after the deadline: Pick reads it when the flag is set
			if old <= now && !st.removed.Load() {
				attrs := append(st.logAttrs(set), "by", why, "for", d)
				if asked != d {
					attrs = append(attrs, "retry_after", asked, "capped_to", d)
				}
				r.log.Info("gateway member in cooldown", attrs...)
			}
			// The loop may sleep for up to a second: it wakes to clear the
			// cooldown on time (Pick's fast path skips the clock then).
			r.kick()
			return
		}
	}
}

// expireCooldown clears a cooldown that is over, so that Pick's fast path
// does not read the clock.
func (r *Registry) expireCooldown(st *state, now time.Duration) {
	cd := st.cooldown.Load()
	if cd == 0 || cd > int64(now) {
		return
	}
	// Flag first: a cooldown set meanwhile changes the deadline, so the
	// swap fails and the flag is put back.
	st.word.And(^flagCooldown)
	if !st.cooldown.CompareAndSwap(cd, 0) {
		st.word.Or(flagCooldown)
		return
	}
	if !st.removed.Load() {
		r.log.Info("gateway member cooldown over", st.logAttrs(st.settings.Load())...)
	}
}

// setAddr publishes a resolved address, or nil for unresolvable.
func (st *state) setAddr(ap *netip.AddrPort) {
	if ap == nil {
		st.word.Or(flagUnresolvable)
		st.addr.Store(nil)
		return
	}
	st.addr.Store(ap)
	st.word.And(^flagUnresolvable)
}

// Outcome is what a real call attempt through a member said about it.
type Outcome uint8

const (
	// OutcomeAnswered: the gateway answered (2xx).
	OutcomeAnswered Outcome = iota
	// OutcomeOther: any other final response (486, 404, ...): the gateway
	// is alive.
	OutcomeOther
	// OutcomeNoResponse: the INVITE got no reply at all (Timer B).
	OutcomeNoResponse
	// OutcomeStatus503: the gateway answered 503.
	OutcomeStatus503
	// OutcomeTransportError: the INVITE could not be sent (connection
	// refused, ICMP unreachable, ...).
	OutcomeTransportError
	// OutcomeAbandoned: the attempt says nothing about the gateway (never
	// sent, or cancelled by the caller before any reply). It gives a
	// half-open member's trial call back.
	OutcomeAbandoned
	numOutcomes
)

var outcomeNames = [...]string{"answered", "other", "no_response", "status_503", "transport_error", "abandoned"}

// String returns the outcome's name.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + fmt.Sprint(uint8(o)) + ")"
}

// ReportCall records the outcome of a real call attempt through m, a Member
// returned by Pick. Call it exactly once per Member that Pick returned with
// OK, when the attempt is over (a half-open member's trial calls are only
// accounted for this way). Safe from any goroutine; it does not allocate
// unless the member changes state.
//
// Outcomes the group's passive config counts (by default NoResponse,
// Status503 and TransportError) count against the member:
// passive.failure_threshold in a row mark it down, and one during a
// half-open trial sends it down at once. Any other outcome except Abandoned
// resets the count and counts as a successful trial.
func (r *Registry) ReportCall(m Member, o Outcome) {
	st := m.st
	if st == nil || o >= numOutcomes {
		return
	}
	set := st.settings.Load()
	if o == OutcomeAbandoned {
		if st.health() == stateHalfOpen {
			st.trials.Add(1)
		}
		return
	}
	if set.counts[o] {
		n := st.callFails.Add(1)
		switch st.health() {
		case stateHalfOpen:
			r.toDown(st, "trial call", o.String())
		case stateUp:
			if int(n) >= set.passive.FailureThreshold {
				r.toDown(st, "calls", fmt.Sprintf("%d consecutive %s", n, o))
			}
		}
		return
	}
	if st.callFails.Load() != 0 {
		st.callFails.Store(0)
	}
	if st.health() == stateHalfOpen {
		if int(st.trialOKs.Add(1)) >= set.passive.HalfOpenCalls {
			r.toUp(st)
		}
	}
}

// Cooldown makes Pick skip m for d: for a 503 with Retry-After to a real
// call. Safe from any goroutine. A longer running cooldown is kept.
func (r *Registry) Cooldown(m Member, d time.Duration) {
	if m.st != nil && d > 0 {
		r.setCooldown(m.st, d, "call")
	}
}

// registerMetrics creates the member's metrics with its labels baked in.
// Called under Registry.mu.
func (r *Registry) registerMetrics(st *state, group string) {
	labels := `group="` + escapeLabel(group) + `",uri="` + escapeLabel(st.uri) + `",address="` + escapeLabel(st.address) + `"`
	name := func(n, extra string) string {
		full := n + "{" + labels + extra + "}"
		st.metricNames = append(st.metricNames, full)
		return full
	}
	r.set.NewGauge(name("sipedge_gateway_member_up", ""), func() float64 {
		if w := st.word.Load(); w&healthMask != stateDown && w&flagUnresolvable == 0 {
			return 1
		}
		return 0
	})
	r.set.NewGauge(name("sipedge_gateway_member_consecutive_failures", `,source="probe"`), func() float64 {
		return float64(st.probeFails.Load())
	})
	r.set.NewGauge(name("sipedge_gateway_member_consecutive_failures", `,source="call"`), func() float64 {
		return float64(st.callFails.Load())
	})
	// 1 while failed re-resolutions (a timeout, a SERVFAIL) leave the
	// member on its last address: logged once, visible for as long.
	r.set.NewGauge(name("sipedge_gateway_member_address_stale", ""), func() float64 {
		if st.stale.Load() {
			return 1
		}
		return 0
	})
	st.rtt = r.set.NewHistogram(name("sipedge_gateway_probe_rtt_seconds", ""))
	st.retryAfterCapped = r.set.NewCounter(name("sipedge_gateway_retry_after_capped_total", ""))
	for s, n := range stateNames {
		st.transitions[s] = r.set.NewCounter(name("sipedge_gateway_member_transitions_total", `,to="`+n+`"`))
	}
}

// unregisterMetrics removes the member's metrics. Called under Registry.mu.
func (r *Registry) unregisterMetrics(st *state) {
	for _, n := range st.metricNames {
		r.set.UnregisterMetric(n)
	}
	st.metricNames = nil
}

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
