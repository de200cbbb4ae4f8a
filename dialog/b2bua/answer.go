package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// onBInviteResponse handles a response to a B-leg INVITE: the current
// carrier's feeds the failover sequence; a burned carrier's 2xx is ACKed
// and BYEd (RFC 3261 13.2.2.4 leaves it a dialog to end), the rest ignored.
func (e *Engine) onBInviteResponse(c *Call, m *parser.Message, h txn.Handle, peer transport.Peer) {
	code := m.StatusCode()
	if h != c.bTxn || c.canceled {
		if code >= 200 && code < 300 {
			e.endUnwanted(c, m, peer, false)
		}
		if h == c.bTxn && code >= 200 {
			e.end(c, cdr.HangupCaller) // the caller cancelled; the carrier has answered
		}
		return
	}
	var to parser.Address
	_ = m.To(&to)
	switch {
	case code == 100: // hop by hop: not progress (RFC 3261 16.7 step 2)
		c.att.trying = true // but the gateway is alive
		return
	case code < 200:
		if c.tProvisional == 0 {
			c.tProvisional = e.now
		}
		if len(to.Tag) > 0 && string(to.Tag) != string(c.b.remoteTag) {
			// A new early dialog: its remote target and route set are the
			// 1xx's (RFC 3261 12.1.2), for requests sent in it (UPDATE,
			// PRACK), and its reliable provisionals their own RSeq space.
			e.confirmLeg(&c.b, m)
			if c.extra != nil {
				c.extra.rel.carrierRSeq = 0
			}
		}
		if m.Count(parser.HeaderRSeq) > 0 {
			if rseq, ok := reliableProvisional(m); ok && !e.prackCarrier(c, m, rseq) {
				return
			}
		}
		c.att.progress = true
		e.relayToCaller(c, m)
		e.carryOut(c, c.seq.Progress(e.now, code), nil)
	case code < 300:
		if c.answered {
			if string(to.Tag) == string(c.b.remoteTag) {
				// A retransmission of the 2xx (RFC 6026 Timer M): the ACK
				// was lost, or the caller has not ACKed yet.
				if cseq, err := m.CSeq(); err == nil {
					e.ackAgain(c, &c.b, cseq.Num)
				}
				return
			}
			// A second dialog from a forking carrier: ACK and BYE it.
			e.endUnwanted(c, m, peer, false)
			return
		}
		e.confirmLeg(&c.b, m)
		e.report(c, code, 0)
		c.answered = true
		c.state = stateConfirmed
		if e.cfg.SessionTimer.Uphold {
			e.sessionAnswered(c, sideB, m)
			if ainv := e.aInviteCopy(c); ainv != nil {
				e.keepSentSDP(c, sideB, ainv.Body()) // the offer the carrier got
			}
			e.sessionRefreshed(c, sideB)
		}
		c.tAnswer = e.now
		if c.tProvisional == 0 {
			c.tProvisional = e.now
		}
		c.finalCode, c.finalReason = code, append(c.finalReason[:0], m.ReasonPhrase()...)
		e.carryOut(c, c.seq.Final(e.now, code, ""), nil)
		e.relayToCaller(c, m)
		if e.cfg.MaxDuration > 0 {
			c.maxDur = e.env.Clock.StartAt(e.now+e.cfg.MaxDuration, timerMaxDuration, e.arg(c))
		}
		e.journalAnswered(c)
		e.m.answered.Inc()
	default:
		// The transaction layer ACKs the failure (RFC 3261 17.1.1.3); the
		// sequence decides between the next carrier and the caller.
		c.bTxn = 0
		if (code == 401 || code == 407) && e.answerChallenge(c, m, code) {
			return
		}
		if code < 400 && e.followRedirect(c, m, code) {
			return
		}
		if code == 422 && e.cfg.SessionTimer.Uphold && e.retryInterval(c, m) {
			return
		}
		cpsReject := false
		// After a 101-199 the carrier had taken the call: its failure is
		// no CPS reject, and a retry would ring the callee again from a
		// sequence that has moved on from dialling (route.Sequence).
		if !c.att.progress {
			delay, ok := e.env.Carriers.CPSReject(&c.att.dial, code, m.ReasonPhrase(), m.Get(parser.HeaderReason))
			cpsReject = ok
			if ok && c.att.cpsRetries < MaxCPSRetries {
				// The carrier refused the call over its CPS limit: not its
				// fault; retry it after the delay on a fresh B-leg.
				c.att.cpsRetries++
				c.att.trying = false // the retry's fresh B-leg has sent no 100 yet
				e.m.cpsRejects.Inc()
				c.att.paceTimer = e.env.Clock.StartAt(e.now+delay, timerPace, e.arg(c))
				return
			}
		}
		var retry time.Duration
		if ra, ok, err := m.RetryAfter(); ok && err == nil {
			retry = time.Duration(ra.Seconds) * time.Second
		}
		if cpsReject {
			// Retries used up: the carrier's CPS limit, not its health (a
			// 503 would put the gateway in cooldown), nor its quality.
			e.report(c, carrier.OutcomeAbandoned, 0)
			c.att.cpsReject = true
		} else {
			e.report(c, code, retry)
		}
		e.carryOut(c, c.seq.Final(e.now, code, phrase(code, m.ReasonPhrase())), m)
	}
}

// confirmLeg records the B-leg dialog a 2xx, or a 1xx for an early
// dialog, establishes (RFC 3261 12.1.2).
func (e *Engine) confirmLeg(B *leg, m *parser.Message) {
	var to parser.Address
	_ = m.To(&to)
	B.remoteTag = append(B.remoteTag[:0], to.Tag...)
	refreshTarget(B, m) // without a SIP Contact the Request-URI stays the target
	B.routes = appendRouteSet(B.routes[:0], m, true)
}

// relayToCaller answers the caller's INVITE with the B-leg's response.
func (e *Engine) relayToCaller(c *Call, resp *parser.Message) {
	req := e.aInviteCopy(c)
	if req == nil {
		return
	}
	code := resp.StatusCode()
	if code < 200 && c.extra != nil && e.relayReliably(c, resp) {
		return
	}
	e.tmp.out = e.appendRelayedResponse(e.tmp.out[:0], c, sideA, req, resp, c.a.localTag, 0)
	if code >= 200 && code < 300 {
		if c.ok2xx == nil {
			c.ok2xx = e.getBuf()
		}
		c.ok2xx = append(c.ok2xx[:0], e.tmp.out...)
		if e.cfg.SessionTimer.Uphold {
			e.keepSentSDP(c, sideA, resp.Body())
			e.sessionRefreshed(c, sideA)
		}
		if c.extra != nil && e.hold2xx(c) {
			return // until the PRACK of a reliable provisional (onPrack)
		}
		e.start2xx(c, sideA, req)
	}
	if err := e.txns.Respond(c.aTxn, e.tmp.out, e.now); err == nil {
		e.after()
	}
}

// aInviteCopy returns the caller's INVITE, parsed when the call began (nil
// once the caller has ACKed the 2xx and it is no longer needed).
func (e *Engine) aInviteCopy(c *Call) *parser.Message { return c.ainv }

// releaseInvite returns the call's copy of the caller's INVITE to the pools.
func (e *Engine) releaseInvite(c *Call) {
	e.putBuf(c.aInvite)
	if c.ainv != nil {
		e.pool.msgs = append(e.pool.msgs, c.ainv)
	}
	c.aInvite, c.ainv = nil, nil
}

// start2xx begins retransmitting the 2xx in c.ok2xx to side to, which sent
// invite, until its ACK (RFC 3261 13.3.1.4): from T1, doubling up to
// T2, for 64*T1.
func (e *Engine) start2xx(c *Call, to side, invite *parser.Message) {
	if c.rtx != 0 {
		e.env.Clock.Stop(c.rtx)
	}
	c.rtxTo = to
	if cseq, err := invite.CSeq(); err == nil {
		c.rtxCSeq = cseq.Num
	}
	c.rtxWait = e.t1()
	c.rtxEnd = e.now + 64*e.t1()
	c.rtx = e.env.Clock.StartAt(e.now+c.rtxWait, timer2xx, e.arg(c))
}

func (e *Engine) retransmit2xx(c *Call) {
	c.rtx = 0
	if len(c.ok2xx) == 0 {
		return
	}
	if e.now >= c.rtxEnd {
		// No ACK: "the session SHOULD be terminated" (RFC 3261 13.3.1.4).
		e.env.Log.Info("no ACK for the 2xx; ending the call", "call_id", string(c.a.callID))
		if c.byeOnAck { // the other side has hung up already
			e.sendBye(c, c.leg(c.rtxTo), nil)
			e.end(c, cdr.HangupNone)
			return
		}
		c.ended = endNoAck
		e.hangup(c, cdr.HangupSystem)
		return
	}
	e.m.retransmitted2xx.Inc()
	e.env.Send(c.leg(c.rtxTo).peer, c.ok2xx)
	c.rtxWait = min(2*c.rtxWait, e.t2())
	c.rtx = e.env.Clock.StartAt(e.now+c.rtxWait, timer2xx, e.arg(c))
}

func (e *Engine) t1() (d time.Duration) {
	if d = e.cfg.Txn.T1; d == 0 {
		d = txn.DefaultT1
	}
	return d
}

func (e *Engine) t2() (d time.Duration) {
	if d = e.cfg.Txn.T2; d == 0 {
		d = txn.DefaultT2
	}
	return d
}

// onAck handles the ACK for a 2xx (RFC 3261 13.2.2.4): the caller's ACK
// stops the 2xx retransmissions and sends the B-leg's ACK; an ACK from the
// B side for a 2xx it got from a relayed re-INVITE goes to the caller.
func (e *Engine) onAck(m *parser.Message, _ *txn.Action) {
	c, s := e.lookupCall(m.CallID())
	if c == nil || !c.answered {
		return // no 2xx of ours to acknowledge: a stray ACK (RFC 3261 17.2.3)
	}
	var to parser.Address
	if m.To(&to) != nil || string(to.Tag) != string(c.leg(s).localTag) {
		return // not in this dialog
	}
	if s == c.rtxTo && len(c.ok2xx) > 0 {
		if cseq, err := m.CSeq(); err != nil || cseq.Num != c.rtxCSeq {
			// An ACK is for the INVITE its CSeq names (RFC 3261 13.2.2.4):
			// a late duplicate of an earlier one's acknowledges nothing.
			return
		}
		// The 2xx sipedge retransmits went to s, which sent the INVITE: it
		// arrived. The INVITE and its 2xx are no longer needed, and a held
		// call keeps no copy of them.
		if c.rtx != 0 {
			e.env.Clock.Stop(c.rtx)
			c.rtx = 0
		}
		e.putBuf(c.ok2xx)
		c.ok2xx = nil
	}
	if s == sideA {
		e.releaseInvite(c)
	}
	// The other side's 2xx, which sipedge relayed, is ACKed on its leg.
	e.ack(c, c.leg(opposite(s)), m)
	if c.byeOnAck && s == c.rtxTo {
		// The other side hung up while this one's ACK was awaited.
		e.sendBye(c, c.leg(s), nil)
		e.end(c, cdr.HangupNone)
	}
}

// ack sends the ACK for the 2xx to leg l's last INVITE (of call c, nil for
// a dialog no call keeps), with the body of from, the other side's ACK (a
// late SDP answer), when there is one. An ACK for a 2xx is a transaction
// of its own (RFC 3261 13.2.2.4, 17.1.1.3) and goes where the dialog's
// requests go: a retransmitted 2xx is ACKed again with a rebuilt one.
func (e *Engine) ack(c *Call, l *leg, from *parser.Message) {
	d := e.destOf(c, l)
	b := e.appendRequestHead(e.tmp.out[:0], "ACK", l, &d, l.inviteCSeq, 70)
	auth := l.ackAuth
	if auth {
		b = append(b, l.ackCopy...) // the INVITE's credentials (RFC 3261 13.2.2.4)
	}
	if from != nil && c != nil && c.extra != nil {
		e.keepSentSDP(c, c.sideOf(l), from.Body())
	}
	e.tmp.out = appendBodyOf(b, from)
	l.acked, l.ackAuth = true, false
	e.keepAck(l, from, auth)
	e.env.Send(*d.peer, e.tmp.out)
}

// ackAgain answers a retransmission of a 2xx to an INVITE of leg l's
// dialog with CSeq cseq, whose ACK was lost (RFC 3261 13.2.2.4): the ACK
// again once sipedge has sent it. The 2xx of an INVITE before l's last
// (a re-INVITE followed it, so it was ACKed, RFC 3261 14.1) gets an ACK
// of its own CSeq, which is what the peer matches it by.
func (e *Engine) ackAgain(c *Call, l *leg, cseq uint32) {
	switch {
	case cseq == l.inviteCSeq:
		if l.acked {
			e.reack(c, l)
		}
	case cseq < l.inviteCSeq:
		d := e.destOf(c, l)
		b := e.appendRequestHead(e.tmp.out[:0], "ACK", l, &d, cseq, 70)
		e.tmp.out = parser.AppendBody(b, "", nil)
		e.env.Send(*d.peer, e.tmp.out)
	}
}

// reack ACKs again the retransmitted 2xx to leg l's last INVITE: the same
// ACK when it carried a body, since a 2xx with an offer must have its
// answer in the ACK (RFC 3261 13.2.2.4) and the peer missed the first, or
// the INVITE's credentials, which are not kept apart once sent. While
// ackAuth is set no ACK was built yet and ackCopy holds only the
// credentials: a challenged re-INVITE's late 2xx, after its relay failed,
// gets its first ACK here.
func (e *Engine) reack(c *Call, l *leg) {
	if len(l.ackCopy) > 0 && !l.ackAuth {
		e.env.Send(*e.destOf(c, l).peer, l.ackCopy)
		return
	}
	e.ack(c, l, nil)
}

// keepAck keeps the ACK in e.tmp.out for leg l when from, the other side's
// ACK it relays, had a body, or when it carried credentials (auth); else
// l keeps none.
func (e *Engine) keepAck(l *leg, from *parser.Message, auth bool) {
	switch {
	case auth || from != nil && len(from.Body()) > 0:
		if l.ackCopy == nil {
			l.ackCopy = e.getBuf()
		}
		l.ackCopy = append(l.ackCopy[:0], e.tmp.out...)
	case l.ackCopy != nil:
		e.putBuf(l.ackCopy)
		l.ackCopy = nil
	}
}

// phrase returns a carrier's reason phrase as a string, without a copy when
// it is the usual one for its code (RFC 3261 21): the failures a failover
// sees are mostly those, and the sequence keeps the phrase for the CDR.
func phrase(code int, b []byte) string {
	var usual string
	switch code {
	case 403:
		usual = "Forbidden"
	case 404:
		usual = "Not Found"
	case 408:
		usual = "Request Timeout"
	case 480:
		usual = "Temporarily Unavailable"
	case 486:
		usual = "Busy Here"
	case 487:
		usual = "Request Terminated"
	case 500:
		usual = "Server Internal Error"
	case 502:
		usual = "Bad Gateway"
	case 503:
		usual = "Service Unavailable"
	case 504:
		usual = "Server Time-out"
	case 603:
		usual = "Decline"
	}
	if string(b) == usual {
		return usual
	}
	return string(b)
}
