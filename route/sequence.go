package route

import (
	"fmt"
	"slices"
	"time"
)

// DefaultRingTimeout is the ring bound of a sequence whose options name
// none, and the wait for progress of a carrier with no timeout_secs.
const DefaultRingTimeout = 30 * time.Second

// NoRingBound, as SequenceOptions.RingTimeout, is call.route(timeout=0):
// a carrier that has shown progress rings until it answers, fails or the
// caller gives up. Any negative RingTimeout means the same.
const NoRingBound time.Duration = -1

// NoDeadline is a Step's Deadline when no timer is to be armed.
const NoDeadline time.Duration = 0

// SequenceOptions are the sequence-wide settings of call.route(...). The
// zero value is valid: a 30 s ring bound and the default reroute causes.
type SequenceOptions struct {
	// RingTimeout is the sequence's ring bound, call.route(timeout=...):
	// the wait for progress of a carrier with no timeout_secs, and how long
	// from its dial a carrier that has shown progress may ring. 0 means
	// DefaultRingTimeout; NoRingBound (any negative value) means no ring
	// bound, call.route(timeout=0). Without a ring bound a carrier with no
	// timeout_secs still gets DefaultRingTimeout to show progress, so a
	// black-holing carrier cannot hang the call.
	RingTimeout time.Duration
	// GlobalCauses is lcr.reroute_causes; nil means DefaultRerouteCauses.
	GlobalCauses []int
	// GroupCauses returns gateway.groups[].reroute_causes for a gateway
	// group, nil when the group sets none or is unknown. It is not called
	// for a route with no gateway_group. nil means no group sets any.
	GroupCauses func(group string) []int
}

// RerouteCauses returns the codes on which r fails over to the next carrier.
// docs/design/lcr.md 3.5, three levels, the most specific wins: the
// route's reroute_causes, then its gateway group's, then lcr.reroute_causes,
// then DefaultRerouteCauses. A level that is nil is unset; an empty one is
// set and reroutes on nothing. The result aliases the option it came from.
func (o *SequenceOptions) RerouteCauses(r *Route) []int {
	if r.RerouteCauses != nil {
		return r.RerouteCauses
	}
	if o.GroupCauses != nil && r.GatewayGroup != "" {
		if c := o.GroupCauses(r.GatewayGroup); c != nil {
			return c
		}
	}
	if o.GlobalCauses != nil {
		return o.GlobalCauses
	}
	return DefaultRerouteCauses
}

// StepKind says what the B2BUA must do after an input to a Sequence.
type StepKind uint8

const (
	// StepNone: nothing; keep waiting on the carrier in flight with the
	// deadline already armed. A stale timeout, a 100 Trying, a repeated
	// provisional.
	StepNone StepKind = iota
	// StepWait: keep waiting on the carrier in flight, but re-arm its timer
	// at Deadline, or disarm it when Deadline is NoDeadline.
	StepWait
	// StepDial: dial Route now on a fresh B-leg dialog (new Call-ID, From
	// tag and CSeq) and arm a timer at Deadline that calls Timeout.
	StepDial
	// StepAnswered: Route answered (2xx); the sequence is over. Disarm the
	// timer.
	StepAnswered
	// StepFail: the sequence is over without an answer; the caller's
	// failure is Code and Reason (on_failure gets them and may Restart).
	// Disarm the timer.
	StepFail
)

var stepKindNames = [...]string{StepNone: "none", StepWait: "wait", StepDial: "dial",
	StepAnswered: "answered", StepFail: "fail"}

func (k StepKind) String() string {
	if int(k) < len(stepKindNames) {
		return stepKindNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", k)
}

// Step is what the B2BUA must do after an input. Carry it out in field
// order: CANCEL the burned carrier's B-leg if Cancel; fire on_route_failure
// for Attempt if Burned; then act on Kind.
type Step struct {
	Kind StepKind
	// Route is the index of the route to dial (StepDial), that answered
	// (StepAnswered) or in flight (StepWait).
	Route int
	// Deadline is when to call Timeout (StepDial, StepWait), on the clock
	// the inputs are given on; NoDeadline for none.
	Deadline time.Duration

	// Cancel asks the B2BUA to CANCEL the B-leg of BurnedRoute (RFC 3261
	// 9.1): its deadline passed, or the caller gave up after its INVITE left.
	Cancel bool
	// Burned reports that this input failed the carrier BurnedRoute and
	// Attempt was recorded for it (the last entry of Attempts): the
	// B2BUA fires on_route_failure once for it, before acting on Kind.
	Burned      bool
	BurnedRoute int
	Attempt     Attempt

	// Code and Reason are the caller's final response (StepFail). Own is
	// true when the response is sipedge's own (its 503 when no carrier
	// reached the callee, its 408 after a ring-out, its 487 after the caller
	// cancelled) rather than a carrier's, forwarded: there is then no
	// carrier response to copy headers from. A carrier's Reason is its
	// reason phrase as given to Final, possibly empty.
	Code   int
	Reason string
	Own    bool
}

// state is the state of a Sequence.
type state uint8

const (
	stIdle     state = iota // nothing dialled yet: Next starts the sequence
	stCalling               // a carrier dialled, no progress (101-199) from it yet
	stRinging               // the carrier in flight has shown progress
	stAnswered              // a carrier answered; terminal
	stFailed                // the sequence is over without an answer; Restart may reuse it
)

var stateNames = [...]string{stIdle: "idle", stCalling: "calling", stRinging: "ringing",
	stAnswered: "answered", stFailed: "failed"}

func (s state) String() string { return stateNames[s] }

// input is an input to a Sequence's state machine.
type input uint8

const (
	inStart      input = iota + 1 // Next
	inUndialable                  // the carrier selected could not be dialled
	inProgress                    // a provisional response from the carrier in flight
	inFinal                       // a final response from the carrier in flight
	inTimeout                     // the carrier's deadline passed
	inAbandon                     // the caller gave up (CANCEL or BYE on the A-leg)
)

var inputNames = [...]string{inStart: "Next", inUndialable: "Undialable", inProgress: "Progress",
	inFinal: "Final", inTimeout: "Timeout", inAbandon: "Abandon"}

type event struct {
	in     input
	now    time.Duration
	code   int
	reason string
}

// attemptNote is what a Sequence keeps about an attempt beside the Attempt
// itself, to pick and word the caller's failure.
type attemptNote struct {
	phrase string // the carrier's reason phrase, or sipedge's own
	own    bool   // the status is sipedge's (a ring timeout), not the carrier's
}

// Sequence is the sequential failover engine of call.route([...]): it tries
// the carriers of a routing decision one at a time, in order, and decides
// when to move on, when to stop and what the caller gets. It does no I/O,
// starts no goroutine and arms no timer: the B2BUA feeds it the carrier's
// responses and the deadlines it returned, as time.Duration on one
// monotonic clock, and carries out the Step each input returns.
//
// Inputs concern only the carrier in flight, the route of the last
// StepDial: a response on a B-leg already cancelled or failed over is the
// B2BUA's to absorb (a late 2xx is ACKed and BYEd), never fed here. Progress,
// Final, Undialable or Next out of turn is a bug in the caller and panics;
// Timeout and Abandon out of turn are ignored (stale timers, a double
// hang-up).
//
// A Sequence is not safe for concurrent use: it belongs to the call, and to
// the goroutine (shard) that owns the call.
type Sequence struct {
	routes []Route
	opt    SequenceOptions
	ring   time.Duration // the ring bound; negative: none

	state    state
	cur      int           // the route in flight or last selected; -1 before Next
	dialAt   time.Duration // when routes[cur] was dialled
	sent     bool          // its INVITE has left: Dialed, or a response from it
	progress time.Duration // when it first sent 101-199; 0 before
	deadline time.Duration // when routes[cur] times out; NoDeadline: never

	attempts []Attempt
	notes    []attemptNote // parallel to attempts
	base     int           // attempts[base:] are this sequence's, since the last Restart
}

// NewSequence returns a sequence over routes, in order, not yet started:
// call Next. routes is retained, not copied; it must not change while the
// sequence runs. An empty routes fails at Next with sipedge's own 503.
func NewSequence(routes []Route, opt SequenceOptions) *Sequence {
	s := &Sequence{}
	s.init(routes, opt)
	return s
}

// Ring returns the ring bound o gives a sequence: RingTimeout, 0 being
// DefaultRingTimeout; NoRingBound for none.
func (o *SequenceOptions) Ring() time.Duration {
	switch {
	case o.RingTimeout == 0:
		return DefaultRingTimeout
	case o.RingTimeout < 0:
		return NoRingBound
	}
	return o.RingTimeout
}

// ProgressWait is how long after its dial route r has to show progress in
// a sequence run with o (see Sequence.progressWait).
func (o *SequenceOptions) ProgressWait(r *Route) time.Duration { return progressWait(r, o.Ring()) }

func (s *Sequence) init(routes []Route, opt SequenceOptions) {
	s.routes, s.opt = routes, opt
	s.ring = opt.Ring()
	s.state, s.cur, s.dialAt, s.deadline, s.sent = stIdle, -1, 0, NoDeadline, false
	s.base = len(s.attempts)
}

// Reset makes s a new sequence over routes, as NewSequence does, reusing
// its storage: a B2BUA keeps one Sequence per pooled call.
func (s *Sequence) Reset(routes []Route, opt SequenceOptions) {
	s.attempts, s.notes = s.attempts[:0], s.notes[:0]
	s.init(routes, opt)
}

// Options returns the options the sequence runs with: those of its
// Reset, NewSequence or last Restart.
func (s *Sequence) Options() SequenceOptions { return s.opt }

// Restart starts the sequence over on routes, as on_failure routing the call
// again (a fresh call.route(...)): the call then goes through Next again.
// The attempts made so far are kept, so Attempts (the CDR's lcr_attempts)
// lists every carrier the call burned, but the caller's failure at the end
// is chosen among the new sequence's attempts only. Restart is allowed only
// after a StepFail.
func (s *Sequence) Restart(routes []Route, opt SequenceOptions) {
	if s.state != stFailed {
		panic(fmt.Sprintf("BUG: route: Restart in state %v", s.state))
	}
	s.init(routes, opt)
}

// Next starts the sequence at time now: it returns StepDial for the first
// route, or StepFail when there is none. It is called once, after
// NewSequence or Restart.
func (s *Sequence) Next(now time.Duration) Step {
	return s.step(event{in: inStart, now: now})
}

// Undialable reports at time now that the carrier of the last StepDial
// could not be dialled: its gateway group is unknown (and it has no
// next_hop) or entirely down, its destination would not resolve, or it is
// over its CPS limit. reason is one of the Reason constants, or the
// B2BUA's own. The carrier is recorded as a 503 attempt, not dialled, and
// the sequence moves on at once: the Step returned dials the next carrier
// or ends the call. Undialable is valid only before any response from the
// carrier.
func (s *Sequence) Undialable(now time.Duration, reason string) Step {
	return s.step(event{in: inUndialable, now: now, reason: reason})
}

// Dialed reports that the INVITE to the carrier in flight left at now,
// later than the Step that dialled it (a wait for a CPS slot, or a CPS
// reject's retry on a fresh B-leg). Its times count from the real dial
// (docs/design/lcr.md 3.2, the wait counts from the real dial): its
// deadline moves by the wait and elapsed_ms starts here. The Step's own
// Deadline is stale from then: the caller arms the carrier's wait from now.
// Call it on every dial, with the Step's own time when the INVITE left at
// once: until then a caller who gives up (Abandon) finds the carrier not
// dialled.
func (s *Sequence) Dialed(now time.Duration) {
	if s.state != stCalling {
		return
	}
	s.sent = true
	if now <= s.dialAt {
		return
	}
	if s.deadline != NoDeadline {
		s.deadline += now - s.dialAt
	}
	s.dialAt = now
}

// Progress reports at time now a provisional response (100-199) from the
// carrier in flight. A 101-199 is progress: on the first one the carrier's
// deadline may move (StepWait). A 100 Trying is not (StepNone).
func (s *Sequence) Progress(now time.Duration, code int) Step {
	if code < 100 || code > 199 {
		panic(fmt.Sprintf("BUG: route: Progress(%d): not a provisional response", code))
	}
	return s.step(event{in: inProgress, now: now, code: code})
}

// Final reports at time now a final response (200-699) from the carrier in
// flight, with its reason phrase. A 3xx is a failure like a 4xx: the
// redirect is not followed (RFC 3261 16.7 step 4 lets a proxy recurse on
// it; here its Contact would bypass the cost order and the gateway health
// that chose the carriers), it fails over only if it is a reroute cause,
// and the caller gets it as a 480 (forwarded). A locally generated 408 (the INVITE client transaction's Timer B)
// or 503 (a transport error, RFC 3261 8.1.3.1) is fed here as the carrier's.
func (s *Sequence) Final(now time.Duration, code int, reason string) Step {
	if code < 200 || code > 699 {
		panic(fmt.Sprintf("BUG: route: Final(%d): not a final response", code))
	}
	return s.step(event{in: inFinal, now: now, code: code, reason: reason})
}

// Timeout reports at time now that the deadline of the carrier in flight,
// as last returned in a Step, passed: the Step returned CANCELs it. A
// Timeout before the current deadline, with none armed, or after the
// sequence ended is stale and ignored (StepNone).
func (s *Sequence) Timeout(now time.Duration) Step {
	return s.step(event{in: inTimeout, now: now})
}

// Abandon reports at time now that the caller gave up. The carrier in
// flight is recorded as a 487 attempt (the response RFC 3261 9.2 gives a
// cancelled INVITE) and, if its INVITE left (Dialed), CANCELled; one whose
// INVITE had not left (a wait for a CPS slot) is recorded not dialled. The
// sequence ends on sipedge's own 487 for the A-leg's INVITE. After the
// sequence ended it is ignored.
func (s *Sequence) Abandon(now time.Duration) Step {
	return s.step(event{in: inAbandon, now: now})
}

// ActiveRoute returns the carrier that answered, call.active_route, and its
// index; ok is false until one has.
func (s *Sequence) ActiveRoute() (r Route, index int, ok bool) {
	if s.state != stAnswered {
		return Route{}, -1, false
	}
	return s.routes[s.cur], s.cur, true
}

// Attempts returns call.route_attempts: one entry per failed attempt, oldest
// first, undialled carriers included; empty when the first carrier answered.
// The slice is the Sequence's own, read-only, and valid until its next input.
func (s *Sequence) Attempts() []Attempt {
	if len(s.attempts) == 0 {
		return []Attempt{} // "[]" in the CDR, not null
	}
	return s.attempts[:len(s.attempts):len(s.attempts)]
}

// Timing returns when the carrier in flight, or the one that answered, was
// dialled and when it first sent 101-199 (0 if it has not).
func (s *Sequence) Timing() (dialed, progress time.Duration) { return s.dialAt, s.progress }

// Routes returns the routes of the sequence, as given; read-only.
func (s *Sequence) Routes() []Route { return s.routes }

// Last reports whether the route in flight, or the last one selected, is
// the sequence's last: should it fail, no carrier is left to fail over to
// (but what a Restart brings).
func (s *Sequence) Last() bool { return s.cur >= 0 && s.cur == len(s.routes)-1 }

// step feeds an event to the state machine: one method per state.
func (s *Sequence) step(e event) Step {
	switch s.state {
	case stIdle:
		return s.idle(e)
	case stCalling:
		return s.calling(e)
	case stRinging:
		return s.ringing(e)
	default:
		return s.ended(e)
	}
}

func (s *Sequence) bug(e event) string {
	return fmt.Sprintf("BUG: route: %s in state %v", inputNames[e.in], s.state)
}

// idle: nothing dialled yet.
func (s *Sequence) idle(e event) Step {
	switch e.in {
	case inStart:
		if len(s.routes) == 0 {
			// No carrier to dial at all: sipedge's own 503, as when none
			// left can be dialled (docs/design/lcr.md 3.9).
			return s.fail(Step{}, 503, "Service Unavailable", true)
		}
		// Dial the first carrier and arm its wait for progress
		// (docs/design/lcr.md 3.1, 3.2).
		return s.dial(e.now, 0, Step{})
	case inAbandon:
		// RFC 3261 9.2: the cancelled INVITE gets a 487; no carrier to cancel.
		return s.fail(Step{}, 487, "Request Terminated", true)
	case inTimeout:
		return Step{} // stale
	}
	panic(s.bug(e))
}

// calling: a carrier dialled, no progress from it yet.
func (s *Sequence) calling(e event) Step {
	switch e.in {
	case inProgress, inFinal:
		s.sent = true // a response: its INVITE left, Dialed or not
	}
	switch e.in {
	case inProgress:
		if e.code == 100 {
			// A 100 Trying is hop by hop and is no progress
			// (docs/design/lcr.md 3.3): RFC 3261 16.7 step 2 resets Timer C
			// only for 101-199.
			return Step{}
		}
		// Progress is any provisional from 101 to 199 from the carrier in
		// flight (docs/design/lcr.md 3.3).
		s.state, s.progress = stRinging, e.now
		if s.routes[s.cur].RerouteAfterProgress {
			// reroute_after_progress: the first deadline stays, whatever the
			// carrier sends (docs/design/lcr.md 3.3).
			return Step{}
		}
		// The deadline moves to the dial time plus the longer of the
		// carrier's own wait and the ring bound, so progress never shortens
		// a ring; with no ring bound a carrier that has shown progress rings
		// until it answers, fails or the caller gives up
		// (docs/design/lcr.md 3.3).
		d := NoDeadline
		if s.ring > 0 {
			d = s.dialAt + max(s.progressWait(&s.routes[s.cur]), s.ring)
		}
		if d == s.deadline {
			return Step{}
		}
		s.deadline = d
		return Step{Kind: StepWait, Route: s.cur, Deadline: d}
	case inFinal:
		return s.final(e)
	case inUndialable:
		// A carrier sipedge could not reach is skipped at once, without
		// waiting out its timeout for an INVITE that never left; it is its
		// own 503 attempt, dialed false (docs/design/lcr.md 3.8).
		st := s.burn(e.now, 503, false, e.reason, "Service Unavailable", true)
		if next, ok := s.advance(e.now, st); ok {
			return next
		}
		// None of the carriers left can be dialled: the caller and
		// OnFailure get sipedge's own 503, whatever the carrier before them
		// did (docs/design/lcr.md 3.9).
		return s.fail(st, 503, "Service Unavailable", true)
	case inTimeout:
		if s.stale(e.now) {
			return Step{}
		}
		return s.ringOut(e.now)
	case inAbandon:
		return s.abandon(e.now)
	}
	panic(s.bug(e))
}

// ringing: the carrier in flight has shown progress.
func (s *Sequence) ringing(e event) Step {
	switch e.in {
	case inProgress:
		return Step{} // only the first progress moves the deadline
	case inFinal:
		// A final failure after progress (a 503, say) still fails over:
		// only the timeout changes with progress (docs/design/lcr.md 3.6).
		return s.final(e)
	case inTimeout:
		if s.stale(e.now) {
			return Step{}
		}
		if s.routes[s.cur].RerouteAfterProgress {
			// reroute_after_progress: its progress is not trusted, it rings
			// out as a carrier that showed none, 503 and not 408
			// (docs/design/lcr.md 3.4, 3.9).
			return s.ringOut(e.now)
		}
		// Progress, then the moved deadline: CANCEL the carrier and fail the
		// call with 408 without trying the carriers left; the attempt is a
		// 408 (docs/design/lcr.md 3.4). RFC 3261 16.8: Timer C fired after a
		// provisional: CANCEL.
		st := s.burn(e.now, 408, true, ReasonRingTimeout, "Request Timeout", true)
		st.Cancel = true
		// The callee was reached and did not answer: the caller gets 408.
		return s.fail(st, 408, "Request Timeout", true)
	case inAbandon:
		return s.abandon(e.now)
	}
	panic(s.bug(e))
}

// ended: answered or failed.
func (s *Sequence) ended(e event) Step {
	switch e.in {
	case inTimeout, inAbandon:
		return Step{} // a stale timer; a hang-up after the end
	}
	panic(s.bug(e))
}

// ringOut: the carrier in flight passed its deadline with no progress (or
// with progress it is not trusted for, reroute_after_progress).
func (s *Sequence) ringOut(now time.Duration) Step {
	// No progress by the deadline: CANCEL the carrier, the attempt is a 408
	// (docs/design/lcr.md 3.4). RFC 3261 16.8: Timer C with no provisional,
	// "behave as if the transaction received a 408".
	st := s.burn(now, 408, true, ReasonRingTimeout, "Request Timeout", true)
	st.Cancel = true
	if s.reroutes(408) {
		// A ring-out before progress fails over when 408 is a reroute cause
		// (docs/design/lcr.md 3.4).
		if next, ok := s.advance(now, st); ok {
			return next
		}
	}
	// With no next carrier to dial, or a route that does not reroute on
	// 408, the call fails with sipedge's own 503, never turned into 500: no
	// carrier reached the callee (docs/design/lcr.md 3.4, 3.9).
	return s.fail(st, 503, "Service Unavailable", true)
}

// final handles a final response from the carrier in flight, with or
// without progress before it.
func (s *Sequence) final(e event) Step {
	if e.code < 300 {
		// Answered: the carrier in flight is the call's active route
		// (docs/design/lcr.md 3.6).
		s.state, s.deadline = stAnswered, NoDeadline
		return Step{Kind: StepAnswered, Route: s.cur}
	}
	// Every non-2xx a carrier returns is a failed attempt, a definitive 486
	// as much as a 503: OnRouteFailure hears each (docs/design/lcr.md 3.12).
	st := s.burn(e.now, e.code, true, "", e.reason, false)
	if e.code >= 600 {
		// A 6xx stops the sequence whatever the reroute causes say
		// (docs/design/lcr.md 3.6): RFC 3261 16.7 step 5, after a 6xx the
		// proxy "MUST NOT create any new branches"; step 6 prefers the 6xx.
		return s.fail(st, e.code, e.reason, false)
	}
	if !s.reroutes(e.code) {
		// Not a reroute cause (a 486 Busy Here): forwarded to the caller as
		// it is, another carrier would not help (docs/design/lcr.md 3.6).
		code, phrase := forwarded(e.code, e.reason, false)
		return s.fail(st, code, phrase, false)
	}
	// A reroute cause: the next carrier, on a fresh B-leg dialog
	// (docs/design/lcr.md 3.1, 3.6).
	if next, ok := s.advance(e.now, st); ok {
		return next
	}
	// Every carrier failed: the caller gets the best of the carriers'
	// failures (RFC 3261 16.7 step 6), not the last one; a carrier that rang
	// out (408) outranks a later one's 503, which reaches the caller as a
	// 500 (docs/design/lcr.md 3.7).
	i := s.base + bestFailure(s.attempts[s.base:])
	code, phrase := forwarded(s.attempts[i].Status, s.notes[i].phrase, s.notes[i].own)
	return s.fail(st, code, phrase, s.notes[i].own)
}

// abandon: the caller gave up while a carrier was in flight, its INVITE
// sent or still waiting for a CPS slot.
func (s *Sequence) abandon(now time.Duration) Step {
	// RFC 3261 9.1: CANCEL the pending INVITE; 9.2: it ends in a 487, which
	// the carrier's attempt records and the A-leg's INVITE is answered with.
	// An attempt's dialed says whether its INVITE left (docs/design/lcr.md
	// 3.10): a carrier whose INVITE had not left is not dialled, and has no
	// INVITE to CANCEL.
	st := s.burn(now, 487, s.sent, ReasonCallerCancelled, "Request Terminated", true)
	st.Cancel = s.sent
	return s.fail(st, 487, "Request Terminated", true)
}

// dial selects route i, dialled at now, and makes st a StepDial for it.
func (s *Sequence) dial(now time.Duration, i int, st Step) Step {
	s.state, s.cur, s.dialAt, s.progress, s.sent = stCalling, i, now, 0, false
	s.deadline = now + s.progressWait(&s.routes[i])
	st.Kind, st.Route, st.Deadline = StepDial, i, s.deadline
	return st
}

// advance dials the route after the current one; false when there is none.
func (s *Sequence) advance(now time.Duration, st Step) (Step, bool) {
	if s.cur+1 >= len(s.routes) {
		return st, false
	}
	return s.dial(now, s.cur+1, st), true
}

// fail ends the sequence with st as a StepFail for the caller's code.
func (s *Sequence) fail(st Step, code int, phrase string, own bool) Step {
	s.state, s.deadline = stFailed, NoDeadline
	st.Kind, st.Code, st.Reason, st.Own = StepFail, code, phrase, own
	return st
}

// burn records a failed attempt of the current route and returns a Step
// announcing it.
func (s *Sequence) burn(now time.Duration, status int, dialed bool, reason, phrase string, own bool) Step {
	a := Attempt{CarrierID: s.routes[s.cur].CarrierID, Status: status, Dialed: dialed, Reason: reason}
	if dialed {
		a.ElapsedMs = (now - s.dialAt).Milliseconds()
		if s.progress != 0 {
			a.PDD = s.progress - s.dialAt
		}
	}
	s.attempts = append(s.attempts, a)
	s.notes = append(s.notes, attemptNote{phrase: phrase, own: own})
	return Step{Burned: true, BurnedRoute: s.cur, Attempt: a}
}

// maxTimeoutSecs caps timeout_secs, a century: as good as no limit, and
// far enough from time.Duration's range that a deadline, dial time plus
// wait, cannot wrap into the past.
const maxTimeoutSecs = 100 * 365 * 24 * 3600

// progressWait is how long after its dial r has to show progress: its
// timeout_secs, else the ring bound, else 30 s (docs/design/lcr.md 3.2).
func (s *Sequence) progressWait(r *Route) time.Duration { return progressWait(r, s.ring) }

func progressWait(r *Route, ring time.Duration) time.Duration {
	switch {
	case r.TimeoutSecs > 0:
		return time.Duration(min(r.TimeoutSecs, maxTimeoutSecs)) * time.Second
	case ring > 0:
		return ring
	default:
		return DefaultRingTimeout
	}
}

// stale reports whether a Timeout at now is early for the armed deadline.
func (s *Sequence) stale(now time.Duration) bool {
	return s.deadline == NoDeadline || now < s.deadline
}

// reroutes reports whether code is a reroute cause of the current route.
func (s *Sequence) reroutes(code int) bool {
	return slices.Contains(s.opt.RerouteCauses(&s.routes[s.cur]), code)
}

// bestFailure returns the index in attempts of the best of the carriers'
// failures, RFC 3261 16.7 step 6: a 6xx if any; otherwise one of the lowest
// class; in the 4xx class preferably a 401, 407, 415, 420 or 484, which
// "provide information affecting resubmission"; among equals the earliest
// (the cheapest carrier's). A ring-out counts as the 408 it is recorded as,
// a 3xx as the 480 the caller would get for it (forwarded).
// Undialled carriers are skipped: their 503 is sipedge's verdict, not
// something a carrier said (docs/design/lcr.md 3.7); attempts must hold at
// least one dialled attempt.
func bestFailure(attempts []Attempt) int {
	best := -1
	for i := range attempts {
		if attempts[i].Dialed && (best < 0 || better(attempts[i].Status, attempts[best].Status)) {
			best = i
		}
	}
	if best < 0 {
		panic("BUG: route: no carrier failure to choose from")
	}
	return best
}

// better reports whether final response a ranks strictly above b.
func better(a, b int) bool {
	ca, cb := failureClass(a), failureClass(b)
	if ca == 6 || cb == 6 {
		return ca == 6 && cb != 6
	}
	if ca != cb {
		return ca < cb
	}
	return ca == 4 && resubmission(a) && !resubmission(b)
}

// failureClass is the class a final failure ranks in: a 3xx, which the
// caller gets as a 480, is a 4xx.
func failureClass(code int) int {
	if c := code / 100; c != 3 {
		return c
	}
	return 4
}

func resubmission(code int) bool {
	switch code {
	case 401, 407, 415, 420, 484:
		return true
	}
	return false
}

// forwarded returns the response the caller gets for a failure chosen for
// it: as is, except a carrier's 503, which becomes a 500 (RFC 3261 16.7
// step 6: "If the only response that was received is a 503, the proxy
// SHOULD generate a 500 response"; the carrier's unavailability is not
// sipedge's), and a carrier's 3xx, which becomes a 480 Temporarily
// Unavailable: a redirect names where to send the request next (RFC 3261
// 8.1.3.4, 21.3), which is the carrier's network, not the caller's to
// reach, and sipedge routes by cost, not by Contact. sipedge's own 503
// stays a 503.
func forwarded(code int, phrase string, own bool) (int, string) {
	switch {
	case code == 503 && !own:
		return 500, "Server Internal Error"
	case code >= 300 && code < 400:
		return 480, "Temporarily Unavailable"
	}
	return code, phrase
}
