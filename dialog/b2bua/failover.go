package b2bua

import (
	"context"
	"log/slog"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/route"
)

// carryOut does what the failover sequence asks (route.Step), in the
// Step's field order: CANCEL the burned carrier, notify its failure, then
// act on the kind. It loops while carriers are burned without being
// dialled, so an undialable carrier never waits out a ring timeout.
func (e *Engine) carryOut(c *Call, st route.Step) {
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
			if reason := e.env.Carriers.Reserve(r, c.key, &c.att.dial); reason != "" {
				if reason == route.ReasonCallsLimited {
					e.m.callsLimited.Inc()
				}
				st = c.seq.Undialable(e.now, reason)
				continue
			}
			c.att.start(r)
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
				e.failure = nil
			}
			if e.env.Policy.OnFailure != nil && !c.onFailureRan {
				c.onFailureRan = true
				act := e.env.Policy.OnFailure(c, code, reason)
				if len(act.Routes) > 0 {
					c.seq.Restart(act.Routes, e.cfg.Sequence)
					st = c.seq.Next(e.now)
					continue
				}
				if act.Code >= 300 && act.Code <= 699 {
					// The policy's own response: not the carrier's relayed.
					code, reason, e.failure = act.Code, act.Reason, nil
				}
			}
			if reason == "" {
				reason = defaultReason(code)
			}
			e.failCall(c, code, reason)
			return
		}
	}
}

// pace reserves a slot of the carrier's calls-per-second budget (deferred
// to the next free slot while one comes within the account's max_wait)
// and dials now, later on the shard's wheel, or when an asynchronous
// reservation is posted back (Paced). Over the limit the carrier is burned without dialling, reason
// cps_limited, and its quality is not blamed: ok is false and the caller
// continues with the returned step.
func (e *Engine) pace(c *Call) (route.Step, bool) {
	p := e.env.Carriers.Pace(&c.att.dial, e.arg(c))
	switch {
	case p.Pending:
		c.att.pacing = true
		return route.Step{}, true
	case p.Over:
		e.m.cpsLimited.Inc()
		e.report(c, carrier.OutcomeAbandoned, 0) // the gateway picked was not tried: its trial goes back
		return c.seq.Undialable(e.now, route.ReasonCPSLimited), false
	case p.Wait > 0:
		c.att.pacing = true
		c.att.paceTimer = e.env.Clock.StartAt(e.now+p.Wait, timerPace, e.arg(c))
		return route.Step{}, true
	}
	return e.dialNow(c)
}

// Paced delivers an asynchronous CPS reservation for the call ref names.
func (e *Engine) Paced(ref uint64, p carrier.Pace, now time.Duration) {
	e.now = now
	c := e.callByArg(ref)
	if c == nil || !c.att.pacing || c.canceled {
		return
	}
	switch {
	case p.Over:
		c.att.pacing = false
		e.m.cpsLimited.Inc()
		e.report(c, carrier.OutcomeAbandoned, 0) // the gateway picked was not tried: its trial goes back
		e.carryOut(c, c.seq.Undialable(e.now, route.ReasonCPSLimited))
	case p.Wait > 0:
		c.att.paceTimer = e.env.Clock.StartAt(e.now+p.Wait, timerPace, e.arg(c))
	default:
		e.paced(c)
	}
}

// stopPacing drops the wait for a CPS slot or a CPS-reject retry.
func (e *Engine) stopPacing(c *Call) {
	if c.att.paceTimer != 0 {
		e.env.Clock.Stop(c.att.paceTimer)
		c.att.paceTimer = 0
	}
	c.att.pacing = false
}

// paced dials a call whose slot has come.
func (e *Engine) paced(c *Call) {
	c.att.pacing, c.att.paceTimer = false, 0
	if st, ok := e.dialNow(c); !ok {
		e.carryOut(c, st)
	}
}

// dialNow sends the B-leg INVITE and arms the carrier's deadline; when it
// cannot be sent the carrier is burned and ok is false.
func (e *Engine) dialNow(c *Call) (route.Step, bool) {
	if !e.dial(c) {
		e.report(c, carrier.OutcomeTransport, 0)
		return c.seq.Undialable(e.now, reasonSendFailed), false
	}
	c.seq.Dialed(e.now) // after a CPS wait: its times count from here
	c.att.dialed = e.now
	e.stopSequence(c)
	if c.att.wait >= 0 {
		c.att.timer = e.env.Clock.StartAt(e.now+c.att.wait, timerSequence, e.arg(c))
	}
	return route.Step{}, true
}

// reasonSendFailed is the attempt's reason when its INVITE could not be
// sent.
const reasonSendFailed = "send_failed"

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
	rep := &e.rep // not a local: through an interface, it would escape
	*rep = carrier.Report{Event: carrier.AttemptFailed, CarrierID: a.CarrierID, Number: c.callee, Code: a.Status,
		Reason: a.Reason, Dialed: a.Dialed, Abandoned: abandoned && a.PDD == 0}
	if r == c.att.route { // reserved: the carrier in flight
		rep.Gateway = c.att.dial.Gateway
		if a.Dialed {
			rep.Invite = c.att.dialed
			if a.PDD != 0 {
				rep.Progress = rep.Invite + a.PDD
			}
		}
	}
	e.env.Carriers.Report(rep)
	if e.env.Policy.OnRouteFailure != nil {
		e.env.Policy.OnRouteFailure(c, r, a)
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
	e.rep = carrier.Report{Event: carrier.Answered, CarrierID: r.CarrierID, Gateway: c.att.dial.Gateway,
		Number: c.callee, Code: c.finalCode, Dialed: true, Invite: dialed, Progress: progress, Answer: c.tAnswer}
	e.env.Carriers.Report(&e.rep)
	if e.env.Policy.OnAnswer != nil {
		e.env.Policy.OnAnswer(c, r)
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
