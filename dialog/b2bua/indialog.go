package b2bua

import (
	"math/rand/v2"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
)

// other returns the leg opposite s.
func (c *Call) leg(s side) *leg {
	if s == sideA {
		return &c.a
	}
	return &c.b
}

func opposite(s side) side {
	if s == sideA {
		return sideB
	}
	return sideA
}

// inDialog handles a request that is not an initial INVITE or a CANCEL:
// matched to its dialog by Call-ID and tags (RFC 3261 12.2.2) and relayed
// to the other leg, or answered here.
func (e *Engine) inDialog(m *parser.Message, a *txn.Action) {
	var to parser.Address
	if m.To(&to) != nil || to.Tag == nil {
		// Out of a dialog: OPTIONS is answered with what sipedge does (RFC
		// 3261 11.2), the rest is not allowed, with Allow (21.4.6).
		code, reason, caps := 405, "Method Not Allowed", allowHeader
		if m.Method() == parser.MethodOptions {
			code, reason, caps = 200, "OK", capabilities
		}
		e.tmp.out = parser.AppendResponse(e.tmp.out[:0], m, code, reason, e.tagFor(nil))
		e.tmp.out = append(e.tmp.out, caps...)
		e.tmp.out = parser.AppendBody(e.tmp.out, "", nil)
		if e.txns.Respond(a.Txn, e.tmp.out, e.now) == nil {
			e.after()
		}
		return
	}
	c, s := e.lookupCall(m.CallID())
	if c == nil || string(to.Tag) != string(c.leg(s).localTag) {
		e.respond(a.Txn, m, 481, "Call/Transaction Does Not Exist", nil)
		return
	}
	// CSeq numbers rise within a dialog, each side its own (RFC 3261
	// 12.2.2): a lower one than the last is refused with 500.
	if cseq, err := m.CSeq(); err == nil {
		l := c.leg(s)
		if cseq.Num < l.remoteCSeq {
			e.respond(a.Txn, m, 500, "Server Internal Error", nil)
			return
		}
		l.remoteCSeq = cseq.Num
	}
	switch m.Method() {
	case parser.MethodBye:
		e.respond(a.Txn, m, 200, "OK", nil)
		if c.state == stateEnding {
			return
		}
		hangup := cdr.HangupCaller
		if s == sideB {
			hangup = cdr.HangupCallee
		}
		if !c.answered { // a BYE in an early dialog (RFC 3261 15)
			if s == sideA {
				// The caller's INVITE is still pending in the dialog its BYE
				// ends: 487, as RFC 3261 15.1.2 recommends. The caller gave
				// up as with a CANCEL (the carrier's attempt is listed
				// alike), but the call ends now, not at the carrier's 487:
				// the BYE ended the dialog.
				c.finalCode, c.finalReason = 487, append(c.finalReason[:0], "Request Terminated"...)
				if c.bTxn != 0 && e.txns.Cancel(c.bTxn, e.now) == nil {
					e.after()
				}
				e.giveUpAttempt(c)
			}
			e.end(c, hangup)
			return
		}
		switch {
		case c.byeOnAck && s == c.rtxTo:
			// The other side hung up first, and this one, whose ACK its BYE
			// waited for, hangs up too: nobody is left to send a BYE to.
		case len(c.ok2xx) > 0 && c.rtxTo == opposite(s):
			// The other side has not ACKed sipedge's 2xx: no BYE to it
			// until the ACK comes or the retransmissions end (RFC 3261 15),
			// and the 2xx goes on, which it may not have had.
			if !c.byeOnAck { // else a second BYE: the call ended at the first
				c.hangup, c.byeOnAck, c.tEnd = hangup, true, e.now
				c.byeHdrs = e.policy.appendAllowed(e.getBuf(), m) // its Reason, for the BYE that waits
			}
			return
		default:
			e.sendBye(c, c.leg(opposite(s)), m)
		}
		e.end(c, hangup)
		return
	case parser.MethodRefer:
		e.respond(a.Txn, m, e.cfg.ReferCode, referReason(e.cfg.ReferCode), nil)
		return
	case parser.MethodPrack:
		// Each leg's reliable provisionals are its own (rel.go): the
		// caller's PRACKs are sipedge's to answer, and the carrier gets
		// none to send.
		if s == sideB {
			e.respond(a.Txn, m, 481, "Call/Transaction Does Not Exist", nil)
			return
		}
		e.onPrack(c, m, a.Txn)
		return
	case parser.MethodInvite:
		// One INVITE transaction at a time in a dialog (RFC 3261 14.2): a
		// second INVITE from a side whose first has no final response yet
		// gets 500 with a Retry-After of 0 to 10 s; one that meets an
		// INVITE sipedge sent on its leg (glare) gets 491. So does one
		// while a 2xx waits for its ACK (14.1): the ACK is to be relayed
		// with the CSeq of the INVITE on the other leg, which a relayed
		// re-INVITE would replace.
		switch {
		case s == sideA && !c.answered || c.reinvite[s-1]:
			e.respondRetry(a.Txn, m, 500, "Server Internal Error", rand.IntN(11))
			return
		case !c.answered || c.reinvite[opposite(s)-1] || len(c.ok2xx) > 0 || c.refreshing():
			e.respond(a.Txn, m, 491, "Request Pending", nil)
			return
		}
	}
	if targetRefresh(m.Method()) && e.refuseInterval(a.Txn, m) { // RFC 4028 9
		return
	}
	e.relay(c, s, m, a.Txn)
}

func referReason(code int) string {
	switch code {
	case 603:
		return "Decline"
	case 403:
		return "Forbidden"
	case 405:
		return "Method Not Allowed"
	case 501:
		return "Not Implemented"
	}
	return "Refused"
}

// relay sends request m, received on leg s in server transaction in, to the
// other leg with that leg's identifiers (RFC 3261 12.2.1.1).
func (e *Engine) relay(c *Call, s side, m *parser.Message, in txn.Handle) {
	slot := -1
	for i := range c.relays {
		if c.relays[i].in == 0 {
			slot = i
			break
		}
	}
	mf, present, _ := m.MaxForwards()
	if !present {
		mf = 70
	}
	switch {
	case slot < 0:
		e.respondRetry(in, m, 500, "Server Internal Error", rand.IntN(11)) // as RFC 3261 14.2 asks
		return
	case mf == 0:
		e.respond(in, m, 483, "Too Many Hops", nil)
		return
	}
	out := c.leg(opposite(s))
	out.cseq++
	method := string(m.MethodBytes())
	d := e.destOf(c, out)
	b := e.appendRequestHead(e.tmp.out[:0], method, out, &d, out.cseq, mf-1)
	if dialogForming(m.Method()) {
		b = e.appendContact(b, d.peer.Transport)
	}
	if e.cfg.SessionTimer.Uphold && targetRefresh(m.Method()) {
		// Each leg's session timer is sipedge's: the requester's says what
		// its leg's becomes, the other leg gets its own (RFC 4028 7.4, 9).
		e.sessionRequested(c, s, m)
		b = appendOwnSupported(b, false, true)
		b = e.policy.appendAllowed(b, m)
		b = e.appendSessionRequest(b, c, opposite(s), false)
		e.keepSentSDP(c, opposite(s), m.Body())
	} else {
		b = e.policy.appendAllowed(b, m)
	}
	b = appendBodyOf(b, m)
	e.tmp.out = b
	if m.Method() == parser.MethodInvite {
		out.inviteCSeq = out.cseq
		c.reinvite[s-1] = true
		// The credentials of an earlier challenged INVITE, whose answer
		// failed, are not this one's ACK's.
		out.ackAuth, out.ackCopy = false, out.ackCopy[:0]
	}
	r := &c.relays[slot]
	r.setRelayed(m)
	r.from, r.in = s, in
	h, err := e.sendBuilt(*d.peer)
	if err != nil {
		e.unrelayed(c, s, r)
		e.respond(in, m, 503, "Service Unavailable", nil)
		return
	}
	r.out = h
	e.watch(in, c, roleRelayIn, h, int8(slot))
	e.watch(h, c, roleRelayOut, in, int8(slot))
	e.after()
}

// unrelayed frees the slot of a request from side s that could not be
// relayed, and its re-INVITE mark: left set, every later re-INVITE of the
// call would meet 491.
func (e *Engine) unrelayed(c *Call, s side, r *relay) {
	if r.method == parser.MethodInvite {
		c.reinvite[s-1] = false
	}
	r.in = 0
}

// onResponse handles a response to one of the engine's client transactions.
func (e *Engine) onResponse(m *parser.Message, a *txn.Action) {
	h := a.Txn
	var role txnRole
	c := e.roleOf(h, &role)
	if role.kind == roleCarrierBye {
		e.onCarrierByeResponse(h, role, m, a)
		return
	}
	if c == nil {
		e.orphan2xx(m, false, a.Peer)
		return
	}
	switch role.kind {
	case roleBInvite:
		e.onBInviteResponse(c, m, h, a.Peer)
	case roleRelayOut:
		e.onRelayResponse(c, role, m)
	case roleRefresh:
		e.onRefreshResponse(c, side(role.slot), h, m)
	case roleBye:
		// The caller, or the peer of a dialog no call keeps (endUnwanted),
		// acknowledged the end; nothing is left to do. A challenge is not
		// answered: sipedge holds no account with the caller, and the
		// dialog ended is not the call's carrier's.
	}
}

// onCarrierByeResponse handles the carrier's response to a BYE sipedge
// sent it (sendBye), after the call's end: a 401 or 407 is answered with
// the BYE again and the group's credentials (answerByeChallenge), which
// left unanswered keep the call up at the carrier, and billed, until a
// timer of its own ends it; any other final response ends the matter.
func (e *Engine) onCarrierByeResponse(h txn.Handle, role txnRole, m *parser.Message, a *txn.Action) {
	code := m.StatusCode()
	if code < 200 {
		return
	}
	if (code == 401 || code == 407) && e.answerByeChallenge(h, role.bye, m, code, a.Data, a.Peer) {
		return
	}
	e.unwatch(h)
}

// onRelayResponse answers the relayed request with the other leg's response.
func (e *Engine) onRelayResponse(c *Call, role txnRole, m *parser.Message) {
	r := &c.relays[role.slot]
	if r.out == 0 || m.StatusCode() == 100 {
		return
	}
	from := c.leg(r.from)
	if err := e.parseRelayed(r); err != nil {
		return
	}
	code := m.StatusCode()
	if (code == 401 || code == 407) && r.from == sideA && e.answerRelayChallenge(c, role, m, code) {
		return
	}
	if targetRefresh(r.method) && code >= 200 && code < 300 {
		// A re-INVITE or UPDATE is a target refresh: accepted, its Contact
		// is the requester's remote target (RFC 3261 12.2.2, RFC 3311 5.2)
		// and the 2xx's the answerer's (RFC 3261 12.2.1.2, RFC 3311 5.1).
		refreshTarget(from, &e.tmp.areq)
		refreshTarget(c.leg(opposite(r.from)), m)
	}
	if r.method == parser.MethodInvite && code >= 200 && code < 300 {
		// A re-INVITE's 2xx is retransmitted until the ACK.
		c.leg(opposite(r.from)).acked = false // until the other side's ACK is forwarded
	}
	if e.cfg.SessionTimer.Uphold && targetRefresh(r.method) && code >= 200 && code < 300 {
		// A refresh of the session on both legs (RFC 4028 10): the other
		// leg's peer answered sipedge's request, this one gets sipedge's 2xx.
		e.sessionAnswered(c, opposite(r.from), m)
		e.sessionRefreshed(c, opposite(r.from))
		e.sessionRefreshed(c, r.from)
		e.keepSentSDP(c, r.from, m.Body())
	}
	e.tmp.out = e.appendRelayedResponse(e.tmp.out[:0], c, r.from, &e.tmp.areq, m, nil, 0)
	if r.method == parser.MethodInvite && code >= 200 && code < 300 {
		if c.ok2xx == nil {
			c.ok2xx = e.getBuf()
		}
		c.ok2xx = append(c.ok2xx[:0], e.tmp.out...)
		e.start2xx(c, r.from, &e.tmp.areq)
	}
	if e.txns.Respond(r.in, e.tmp.out, e.now) == nil {
		e.after()
	}
	if code >= 200 {
		if r.method == parser.MethodInvite {
			c.reinvite[r.from-1] = false
		}
		e.unwatch(r.in)
		e.unwatch(r.out)
		r.in, r.out = 0, 0
		if (code == 481 || code == 408) && c.answered && !subscriptionUsage(r.method) {
			// The answering leg has no such dialog, or no longer answers:
			// "the UAC SHOULD terminate the dialog" (RFC 3261 12.2.1.2),
			// and with it the call, rather than bill a call that is gone.
			e.m.orphans.Inc()
			c.ended = endNoResponse
			e.hangup(c, cdr.HangupSystem)
		}
	}
}

// subscriptionUsage reports whether a method belongs to a subscription
// sharing the dialog, whose 481 ends that usage only (RFC 5057 5).
func subscriptionUsage(m parser.Method) bool {
	return m == parser.MethodSubscribe || m == parser.MethodNotify || m == parser.MethodRefer
}

// targetRefresh reports whether a request in an INVITE dialog refreshes
// the remote target (RFC 3261 12.2, RFC 3311 5).
func targetRefresh(m parser.Method) bool {
	return m == parser.MethodInvite || m == parser.MethodUpdate
}

// refreshTarget makes the SIP Contact of m, if any, leg l's remote target.
func refreshTarget(l *leg, m *parser.Message) {
	var contact parser.Address
	if m.Contact(0, &contact) == nil && sipScheme(contact.URI) {
		l.target = append(l.target[:0], contact.URI...)
	}
}

// onTxnFailure handles a client transaction that timed out or could not be
// sent.
func (e *Engine) onTxnFailure(h txn.Handle, transport bool) {
	var role txnRole
	c := e.roleOf(h, &role)
	if c == nil {
		return
	}
	switch role.kind {
	case roleBInvite:
		if h != c.bTxn {
			return
		}
		c.bTxn = 0
		if c.canceled {
			e.end(c, cdr.HangupCaller)
			return
		}
		c.att.local = true // the failure below is sipedge's, fed as the carrier's
		if transport {
			// The INVITE could not reach the carrier: a 503 (RFC 3261
			// 8.1.3.1), which fails over at once.
			e.report(c, carrier.OutcomeTransport, 0)
			e.carryOut(c, c.seq.Final(e.now, 503, "Service Unavailable"), nil)
			return
		}
		e.report(c, carrier.OutcomeNoResponse, 0)
		// No final response from the carrier (RFC 3261 17.1.1.2 Timer B):
		// a failure of this carrier like a 408.
		e.carryOut(c, c.seq.Final(e.now, 408, "Request Timeout"), nil)
	case roleRelayOut:
		// A leg that stops answering in-dialog requests is an orphan:
		// answer the relayed request and tear the call down.
		r := &c.relays[role.slot]
		if e.parseRelayed(r) == nil {
			e.respond(r.in, &e.tmp.areq, 408, "Request Timeout", nil)
		}
		e.unwatch(r.in)
		r.in, r.out = 0, 0
		e.m.orphans.Inc()
		c.ended = endNoResponse
		e.hangup(c, cdr.HangupSystem)
	case roleRefresh:
		if c.extra != nil && c.extra.session[role.slot-1].refresh == h {
			e.refreshFailed(c, side(role.slot))
		}
	}
}

// sendBye sends a BYE on leg l in a client transaction of the engine's own,
// with the headers the policy relays of from, the other side's BYE, when
// it answers one (a Reason, RFC 3326). It returns the BYE's transaction,
// 0 when it could not be sent.
func (e *Engine) sendBye(c *Call, l *leg, from *parser.Message) txn.Handle {
	if c != nil && !l.acked && (l == &c.b && c.answered || len(c.ok2xx) > 0 && l == c.leg(opposite(c.rtxTo))) {
		// The 2xx sipedge got on l and relayed, whose ACK it still awaits
		// from the other side: ACKed first (RFC 3261 13.2.2.4), or the peer
		// retransmits it for 32 s.
		e.ack(c, l, nil)
	}
	l.cseq++
	d := e.destOf(c, l)
	b := e.appendRequestHead(e.tmp.out[:0], "BYE", l, &d, l.cseq, 70)
	if from != nil {
		b = e.policy.appendAllowed(b, from)
	} else if c != nil && c.byeOnAck && l == c.leg(c.rtxTo) {
		b = append(b, c.byeHdrs...) // the other side's BYE, which waited for this side's ACK
	}
	e.tmp.out = parser.AppendBody(b, "", nil)
	h, err := e.sendBuilt(*d.peer)
	if err != nil {
		return 0
	}
	switch {
	case c != nil && l == &c.b:
		// The carrier may challenge it: what an answer needs outlives the
		// call, which ends as its BYE goes (end), while the BYE is pending.
		e.watchCarrierBye(h, &c.att.dial)
	case c != nil:
		e.watch(h, c, roleBye, 0, -1)
	}
	e.after()
	return h
}

// hangup ends a confirmed call from sipedge's side: BYE on both legs.
func (e *Engine) hangup(c *Call, side cdr.HangupSide) {
	switch {
	case c.answered && c.byeOnAck:
		// One side hung up already, its BYE answered, and the other's BYE
		// waits for that side's ACK: it goes now, and the side that hung
		// up gets no BYE back (it would answer 481), only the ACK its 2xx
		// may still lack (RFC 3261 13.2.2.4).
		if l := c.leg(opposite(c.rtxTo)); !l.acked {
			e.ack(c, l, nil)
		}
		e.sendBye(c, c.leg(c.rtxTo), nil)
	case c.answered:
		e.sendBye(c, &c.a, nil)
		e.sendBye(c, &c.b, nil)
	}
	e.end(c, side)
}
