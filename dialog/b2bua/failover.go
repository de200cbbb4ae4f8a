package b2bua

import (
	"context"
	"log/slog"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// carryOut does what the failover sequence asks (route.Step), in the
// Step's field order: CANCEL the burned carrier, notify its failure, then
// act on the kind. It loops while carriers are burned without being
// dialled, so an undialable carrier never waits out a ring timeout.
// failure is the carrier's final response st follows from, which the
// caller may get relayed (failCall); nil for any other input.
func (e *Engine) carryOut(c *Call, st route.Step, failure *parser.Message) {
	for {
		if st.Cancel && c.bTxn != 0 {
			code := carrier.OutcomeNoResponse
			if c.att.progress || c.att.trying {
				// It rang, or at least answered 100: the gateway works, the
				// callee did not answer (or ring) in time.
				code = carrier.OutcomeAbandoned
			}
			e.report(c, code, 0)
			// RFC 3261 9.1; the carrier's later responses reach
			// onBInviteResponse as a burned leg's: a 2xx is ACKed and BYEd.
			if e.txns.Cancel(c.bTxn, e.now) == nil {
				e.after()
			}
			c.bTxn = 0
		} else if st.Cancel {
			// Left between a CPS reject and its retry: the reject is not
			// the gateway's health, and its attempt is over.
			e.report(c, carrier.OutcomeAbandoned, 0)
		}
		if st.Burned {
			e.burned(c, st)
		}
		switch st.Kind {
		case route.StepNone:
			return
		case route.StepWait:
			e.armSequence(c, st)
			return
		case route.StepAnswered:
			e.stopSequence(c)
			e.answered(c)
			return
		case route.StepDial:
			// A CPS-reject retry or a slot still awaited belongs to the
			// carrier the sequence left: it must not dial this one too.
			// Nor may its deadline, which would otherwise fire on this
			// carrier while it waits for a CPS slot (dialNow arms its own).
			e.stopPacing(c)
			e.stopSequence(c)
			e.env.Carriers.Release(&c.att.dial) // the carrier left, and what it held
			r := &c.seq.Routes()[st.Route]
			if st.Burned {
				e.failingOver(c, st, r)
			}
			var reason string
			if e.lastCarrier(c) {
				reason = e.env.Carriers.ReserveLast(r, c.key, c.callee, &c.att.dial)
			} else {
				reason = e.env.Carriers.Reserve(r, c.key, c.callee, &c.att.dial)
			}
			if reason != "" {
				if reason == route.ReasonCallsLimited {
					e.m.callsLimited.Inc()
				}
				st = c.seq.Undialable(e.now, reason)
				continue
			}
			c.att.start(r)
			c.attRedirected, c.attIntervalRetried = false, false
			// The carrier's deadline counts from its dial, not from the
			// decision to dial it: a paced INVITE gets its full time.
			c.att.wait = st.Deadline - e.now
			if st.Deadline == route.NoDeadline {
				c.att.wait = -1
			}
			next, ok := e.pace(c)
			if !ok {
				st = next
				continue
			}
			return
		case route.StepFail:
			e.stopSequence(c)
			code, reason := st.Code, st.Reason
			if st.Own {
				// sipedge's own response (an undialable tail gets sipedge's
				// own 503, whatever the carrier before it did): the carrier
				// response being handled, of the same code maybe, is not
				// relayed, neither its phrase nor its headers.
				failure = nil
			}
			if e.env.Policy.OnFailure != nil && !c.onFailureRan {
				c.onFailureRan = true
				act := e.onFailure(c, code, reason)
				if len(act.Routes) > 0 {
					c.seq.Restart(e.order(c, act.Routes, 1), c.seq.Options()) // the call's ring bound still
					st = c.seq.Next(e.now)
					continue
				}
				if act.Code >= 300 && act.Code <= 699 {
					// The policy's own response: not the carrier's relayed.
					code, reason, failure = act.Code, act.Reason, nil
				}
			}
			if reason == "" {
				reason = defaultReason(code)
			}
			e.failCall(c, code, reason, failure)
			return
		}
	}
}

// lastCarrier reports whether the carrier c dials next is its last: no
// route follows it, and no OnFailure hook is left to route the call again
// (a backup trunk beats a gateway calls marked down).
func (e *Engine) lastCarrier(c *Call) bool {
	return c.seq.Last() && (e.env.Policy.OnFailure == nil || c.onFailureRan)
}

// report gives the carrier plane the outcome of the carrier in flight on
// its gateway, once (Carriers.Outcome).
func (e *Engine) report(c *Call, code int, retryAfter time.Duration) {
	if c.att.reported {
		return
	}
	c.att.reported = true
	e.env.Carriers.Outcome(&c.att.dial, code, retryAfter)
}

// burned logs and reports a failed attempt: a failover is an operational
// event, logged at info.
func (e *Engine) burned(c *Call, st route.Step) {
	a := st.Attempt
	switch {
	case !e.env.Log.Enabled(context.Background(), slog.LevelInfo):
		// Nothing to build: a discarded line would still cost its arguments.
	case a.Dialed:
		e.env.Log.Info("LCR: carrier failed", "call_id", string(c.a.callID), "carrier", a.CarrierID,
			"status", a.Status, "elapsed_ms", a.ElapsedMs)
	default:
		e.env.Log.Info("LCR: carrier burned without dialling", "call_id", string(c.a.callID), "carrier", a.CarrierID,
			"reason", a.Reason, "status", a.Status)
	}
	e.m.attempts.Inc()
	e.attemptFailed(c, st, false)
}

// attemptFailed tells the carrier plane, then the policy, of the attempt
// st burned; abandoned when the caller gave up on it.
func (e *Engine) attemptFailed(c *Call, st route.Step, abandoned bool) {
	r := &c.seq.Routes()[st.BurnedRoute]
	a := st.Attempt
	rep := &e.tmp.rep // not a local: through an interface, it would escape
	*rep = carrier.Report{Event: carrier.AttemptFailed, CarrierID: a.CarrierID, Number: c.callee, Code: a.Status,
		Reason: a.Reason, Dialed: a.Dialed, Abandoned: abandoned && a.PDD == 0, At: e.now}
	inFlight := r == c.att.route // reserved: the carrier in flight
	if inFlight {
		rep.Gateway = c.att.dial.Gateway
		rep.Local, rep.CPSRejected = c.att.local, c.att.cpsReject
		if a.Dialed {
			rep.Invite = c.att.dialed
			if a.PDD != 0 {
				rep.Progress = rep.Invite + a.PDD
			}
		}
	}
	if a.Dialed && inFlight {
		e.attemptLeg(c)
	}
	e.env.Carriers.Report(rep)
	if e.env.Policy.OnRouteFailure != nil {
		e.onRouteFailure(c, r, a)
	}
}

// answered tells the carrier plane, then the policy, that the carrier in
// flight answered.
func (e *Engine) answered(c *Call) {
	_, i, ok := c.seq.ActiveRoute()
	if !ok {
		return
	}
	r := &c.seq.Routes()[i]
	dialed, progress := c.seq.Timing()
	e.tmp.rep = carrier.Report{Event: carrier.Answered, CarrierID: r.CarrierID, Gateway: c.att.dial.Gateway,
		Number: c.callee, Code: c.finalCode, Dialed: true, Invite: dialed, Progress: progress, Answer: c.tAnswer,
		At: e.now}
	e.env.Carriers.Report(&e.tmp.rep)
	if e.env.Policy.OnAnswer != nil {
		e.onAnswer(c, r)
	}
}

// failingOver logs the sequence's advance from the carrier it burned to
// route r, the next to dial, at info.
func (e *Engine) failingOver(c *Call, st route.Step, r *route.Route) {
	if !e.env.Log.Enabled(context.Background(), slog.LevelInfo) {
		return // a discarded line would still cost its arguments
	}
	e.env.Log.Info("LCR: failing over", "call_id", string(c.a.callID), "from", st.Attempt.CarrierID,
		"to", r.CarrierID)
}

// armSequence (re)arms the sequence's deadline for the carrier in flight.
func (e *Engine) armSequence(c *Call, st route.Step) {
	e.stopSequence(c)
	if st.Deadline != route.NoDeadline {
		c.att.timer = e.env.Clock.StartAt(st.Deadline, timerSequence, e.arg(c))
	}
}

func (e *Engine) stopSequence(c *Call) {
	if c.att.timer != 0 {
		e.env.Clock.Stop(c.att.timer)
		c.att.timer = 0
	}
}

// defaultReason is the reason phrase of sipedge's own responses.
func defaultReason(code int) string {
	switch code {
	case 408:
		return "Request Timeout"
	case 480:
		return "Temporarily Unavailable"
	case 487:
		return "Request Terminated"
	case 500:
		return "Server Internal Error"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Server Time-out"
	}
	return "Call Failed"
}
