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
// failed probes or when its calls' outcomes make it an outlier (see
// outlier.go); it comes back half-open (success_threshold good probes,
// passive.down_secs for an unprobed group, or a call it answers while
// down) and is up again once half_open_calls trial calls have succeeded.
// A failed trial sends it down again.
const (
	stateUp uint32 = iota
	stateDown
	stateHalfOpen

	healthMask = 3
	// Flags in the same word, so that Pick tells a member with nothing to
	// check (the word is stateUp) by one load.
	flagUnresolvable uint32 = 1 << 2 // addr is nil
	flagCooldown     uint32 = 1 << 3 // cooldown may be in the future
	// flagProbeDown: down, and probes say so (they took it down, or failed
	// failure_threshold times while calls had). Only probes bring such a
	// member back; no Pick mode chooses it.
	flagProbeDown uint32 = 1 << 4
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
	runStart   atomic.Int64 // registry clock of the first of them
	trials     atomic.Int32 // half-open trial calls Pick may still hand out
	trialOKs   atomic.Int32 // half-open trial calls that succeeded
	rescues    atomic.Int32 // calls Pick sent it while calls held it down, not yet reported
	downAt     atomic.Int64 // registry clock when the member went down
	lastCode   atomic.Int32 // last probe reply, 0 = none or no reply
	lastRTT    atomic.Int64 // last probe round trip, ns
	window     callWindow   // recent calls and failures (outlier.go)

	inflight     atomic.Pointer[probeCall]
	removed      atomic.Bool
	unresolvable atomic.Bool // logged as unresolvable
	stale        atomic.Bool // logged as keeping its address through failed re-resolutions

	// Owned by the registry's writer (under Registry.mu) and by the probe
	// loop goroutine respectively.
	metricNames []string
	nextProbe   time.Duration

	rtt              *metrics.Histogram
	transitions      [numTransitions]*metrics.Counter // by new state
	retryAfterCapped *metrics.Counter                 // Retry-Afters cut to passive.max_retry_after_secs
}

// Transitions counted in sipedge_gateway_member_transitions_total: to each
// health state, and to cooling, a cooldown that begins.
const (
	toCooling      = len(stateNames)
	numTransitions = toCooling + 1
)

var transitionNames = [numTransitions]string{stateUp: "up", stateDown: "down", stateHalfOpen: "half_open", toCooling: "cooling"}

// health returns the member's state: stateUp, stateDown or stateHalfOpen.
func (st *state) health() uint32 { return st.word.Load() & healthMask }

// pickMode says which marks Pick heeds.
type pickMode uint8

const (
	// modeNormal: members that are up, or half-open with trial calls left.
	modeNormal pickMode = iota
	// modePanic and modeLastResort also take the members calls marked
	// down and half-open ones out of trials: the group is in panic, or the
	// caller has no carrier left to try. Never a member probes hold down,
	// one in cooldown or one that does not resolve.
	modePanic
	modeLastResort
)

// usable reports whether Pick may choose the member now. The common case,
// up with nothing to check, is one load, inlined.
func (st *state) usable(c *pickCtx) bool {
	if w := st.word.Load(); w != stateUp {
		return st.usableSlow(w, c)
	}
	return true
}

func (st *state) usableSlow(w uint32, c *pickCtx) bool {
	if w&flagUnresolvable != 0 || w&flagCooldown != 0 && st.cooldown.Load() > c.now() {
		return false
	}
	switch w & healthMask {
	case stateUp:
		return true
	case stateHalfOpen:
		return c.mode != modeNormal || st.trials.Load() > 0
	}
	return c.mode != modeNormal && w&flagProbeDown == 0
}

// up reports whether the member counts as up for the panic threshold: up,
// resolvable and not in cooldown.
func (st *state) up(c *pickCtx) bool {
	w := st.word.Load()
	return w == stateUp || w == flagCooldown && st.cooldown.Load() <= c.now()
}

// reserve claims the member for a call Pick returns: a half-open trial call
// if it has one left. ok is false when the member can no longer be chosen
// in mode (its state changed since the choice); rescue says it was chosen
// despite its marks (down, or out of trials), which only a mode other than
// modeNormal does. A down member's rescue is counted, for ReportCall to
// tell its outcome from a late one of a call placed before it went down:
// a Member has no room for a flag of its own (it lives in every Call).
func (st *state) reserve(mode pickMode) (rescue, ok bool) {
	for {
		w := st.word.Load()
		switch w & healthMask {
		case stateUp:
			return false, true
		case stateDown:
			if mode == modeNormal || w&flagProbeDown != 0 {
				return false, false
			}
			st.rescues.Add(1)
			return true, true
		}
		n := st.trials.Load()
		if n <= 0 {
			return mode != modeNormal, mode != modeNormal
		}
		if st.trials.CompareAndSwap(n, n-1) {
			return false, true
		}
	}
}

// takeRescue consumes a counted rescue, reporting whether there was one.
func (st *state) takeRescue() bool {
	for {
		n := st.rescues.Load()
		if n <= 0 {
			return false
		}
		if st.rescues.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// giveTrialBack returns a trial call an abandoned attempt did not use, up
// to the half_open_calls the member was given.
func (st *state) giveTrialBack(limit int32) {
	for {
		n := st.trials.Load()
		if n >= limit || st.trials.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// move changes the member's health to to when it is one of the states in
// from (a set of 1<<state bits), setting the flags in set and clearing
// those in clr. It reports whether it did.
func (st *state) move(from, to, set, clr uint32) bool {
	for {
		w := st.word.Load()
		if from&(1<<(w&healthMask)) == 0 {
			return false
		}
		if st.word.CompareAndSwap(w, (w&^healthMask&^clr|set)|to) {
			return true
		}
	}
}

// restart forgets the member's call history: the evidence of one state
// says nothing in the next.
func (st *state) restart() {
	st.callFails.Store(0)
	st.window.clear()
}

func (st *state) logAttrs(set *settings) []any {
	return []any{"group", set.group, "uri", st.uri, "address", st.address}
}

// toDown marks the member down, logging and counting it once. byProbe
// marks it probe-confirmed: only probes bring it back.
func (r *Registry) toDown(st *state, byProbe bool, why string, detail any) {
	var set uint32
	if byProbe {
		set = flagProbeDown
	}
	if !st.move(1<<stateUp|1<<stateHalfOpen, stateDown, set, 0) {
		return
	}
	st.probeOKs.Store(0)
	st.trials.Store(0)
	st.rescues.Store(0)
	st.downAt.Store(int64(r.now()))
	st.transitions[stateDown].Inc()
	if !st.removed.Load() {
		set := st.settings.Load()
		r.log.Warn("gateway member down", append(st.logAttrs(set), "by", why, "detail", detail)...)
	}
}

// confirmDown marks a member that calls took down probe-confirmed: probes
// failed failure_threshold times since.
func (r *Registry) confirmDown(st *state, detail string) {
	for {
		w := st.word.Load()
		if w&healthMask != stateDown || w&flagProbeDown != 0 {
			return
		}
		if st.word.CompareAndSwap(w, w|flagProbeDown) {
			break
		}
	}
	if !st.removed.Load() {
		r.log.Warn("gateway member down, confirmed by probes", append(st.logAttrs(st.settings.Load()), "detail", detail)...)
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
	if !st.move(1<<stateDown, stateHalfOpen, 0, flagProbeDown) {
		return
	}
	st.restart()
	st.transitions[stateHalfOpen].Inc()
	if !st.removed.Load() {
		r.log.Info("gateway member half-open", append(st.logAttrs(set), "by", why, "trial_calls", set.passive.HalfOpenCalls)...)
	}
}

// toUp closes the breaker of a half-open member.
func (r *Registry) toUp(st *state) {
	if !st.move(1<<stateHalfOpen, stateUp, 0, flagProbeDown) {
		return
	}
	st.restart()
	st.transitions[stateUp].Inc()
	if !st.removed.Load() {
		r.log.Info("gateway member up", st.logAttrs(st.settings.Load())...)
	}
}

// setCooldown makes Pick skip the member for d (a 503's Retry-After), cut
// to the group's passive.max_retry_after_secs: a carrier's Retry-After is
// advice (RFC 3261 21.5.4), and one reply must not take a gateway out for
// hours. It logs and counts (a transition to cooling) when a cooldown
// starts, not when a running one is extended, and counts every cut.
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
		if !st.cooldown.CompareAndSwap(old, until) {
			continue
		}
		st.word.Or(flagCooldown) // after the deadline: Pick reads it when the flag is set
		// The loop may sleep for up to a second: it wakes to clear the
		// cooldown on time (Pick's fast path skips the clock then).
		r.kick()
		if old > now {
			return // a running cooldown, extended
		}
		st.transitions[toCooling].Inc()
		if !st.removed.Load() {
			attrs := append(st.logAttrs(set), "by", why, "for", d)
			if asked != d {
				attrs = append(attrs, "retry_after", asked, "capped_to", d)
			}
			r.log.Info("gateway member in cooldown", attrs...)
		}
		return
	}
}

// cooldownLeft returns how long the member's cooldown lasts still, 0 when
// it has none.
func (r *Registry) cooldownLeft(st *state) time.Duration {
	return max(time.Duration(st.cooldown.Load())-r.now(), 0)
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
// returned by Pick or PickLastResort. Call it exactly once per Member
// returned with OK, when the attempt is over (a half-open member's trial
// calls are only accounted for this way). Safe from any goroutine; it does
// not allocate unless the member changes state.
//
// Outcomes the group's passive config counts (by default NoResponse,
// Status503 and TransportError) are failures, every other outcome except
// Abandoned a success. An up member's failures mark it down when they
// make it an outlier (outlier.go); one failure during a half-open trial
// sends it down at once; half_open_calls successes while half-open bring
// it up. A success of a call chosen while calls held the member down (a
// panic, or a last resort) brings it back half-open.
func (r *Registry) ReportCall(m Member, o Outcome) {
	st := m.st
	if st == nil || o >= numOutcomes {
		return
	}
	set := st.settings.Load()
	w := st.word.Load()
	rescued := w&healthMask == stateDown && st.takeRescue()
	if o == OutcomeAbandoned {
		if w&healthMask == stateHalfOpen {
			st.giveTrialBack(int32(set.passive.HalfOpenCalls))
		}
		return
	}
	failed := set.counts[o]
	var now time.Duration
	if !set.passive.Disabled {
		now = r.now()
		st.window.add(now, failed)
	}
	if !failed {
		if st.callFails.Load() != 0 {
			st.callFails.Store(0)
		}
		switch w & healthMask {
		case stateHalfOpen:
			if int(st.trialOKs.Add(1)) >= set.passive.HalfOpenCalls {
				r.toUp(st)
			}
		case stateDown:
			if rescued && w&flagProbeDown == 0 {
				r.toHalfOpen(st, "a call answered")
			}
		}
		return
	}
	n := st.callFails.Add(1)
	if n == 1 {
		st.runStart.Store(int64(now))
	}
	switch w & healthMask {
	case stateHalfOpen:
		r.toDown(st, false, "trial call", o.String())
	case stateUp:
		if why := st.outlier(&set.passive, now, n, o); why != "" {
			r.toDown(st, false, "calls", why)
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
	// 1 when Pick may choose the member: not down, resolvable and not in
	// cooldown (half-open counts, trial calls left or not).
	r.set.NewGauge(name("sipedge_gateway_member_up", ""), func() float64 {
		if w := st.word.Load(); w&healthMask != stateDown && w&flagUnresolvable == 0 && r.cooldownLeft(st) == 0 {
			return 1
		}
		return 0
	})
	r.set.NewGauge(name("sipedge_gateway_member_cooldown_seconds", ""), func() float64 {
		return r.cooldownLeft(st).Seconds()
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
	for s, n := range transitionNames {
		st.transitions[s] = r.set.NewCounter(name("sipedge_gateway_member_transitions_total", `,to="`+n+`"`))
	}
}

// registerGroupMetrics creates a group's own metrics, once for all its
// versions. Called under Registry.mu.
func (r *Registry) registerGroupMetrics(gs *groupState, group string) {
	label := `group="` + escapeLabel(group) + `"`
	name := func(n, extra string) string {
		full := n + "{" + label + extra + "}"
		gs.metricNames = append(gs.metricNames, full)
		return full
	}
	// 1 while the group is in panic: Pick then ignores the marks calls
	// left on its members.
	r.set.NewGauge(name("sipedge_gateway_group_panic", ""), func() float64 {
		if g := r.snap.Load().groups[group]; g != nil && g.gs == gs && g.panicking(&pickCtx{r: r}) {
			return 1
		}
		return 0
	})
	gs.rescues[0] = r.set.NewCounter(name("sipedge_gateway_rescue_picks_total", `,mode="panic"`))
	gs.rescues[1] = r.set.NewCounter(name("sipedge_gateway_rescue_picks_total", `,mode="last_resort"`))
}

// unregisterGroupMetrics removes a group's own metrics. Called under
// Registry.mu.
func (r *Registry) unregisterGroupMetrics(gs *groupState) {
	for _, n := range gs.metricNames {
		r.set.UnregisterMetric(n)
	}
	gs.metricNames = nil
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
