package b2bua

import (
	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
)

// onCancel answers a CANCEL (RFC 3261 9.2): 200 to the CANCEL, 487 to the
// INVITE, and the B-leg cancelled once it has sent a provisional (the
// transaction layer holds the CANCEL until then, RFC 3261 9.1).
func (e *Engine) onCancel(m *parser.Message, a *txn.Action) {
	var role txnRole
	c := e.roleOf(a.Ref, &role)
	if a.Ref != 0 && c != nil && role.kind == roleRelayIn {
		// A re-INVITE being relayed: 200 to the CANCEL, and the one sent on
		// the other leg cancelled, whose 487 is relayed back (RFC 3261 9).
		e.respond(a.Txn, m, 200, "OK", nil)
		if r := &c.relays[role.slot]; r.out != 0 && e.txns.CancelWith(r.out, e.cancelHeaders(m), e.now) == nil {
			e.after()
		}
		return
	}
	if a.Ref == 0 {
		e.respond(a.Txn, m, 481, "Call/Transaction Does Not Exist", nil)
		return
	}
	// RFC 3261 9.2: "as long as the CANCEL matched an existing transaction,
	// the UAS answers the CANCEL request itself with a 200 (OK)", even one
	// that has sent its final response and outlived its call; its To tag
	// "SHOULD be the same" as the INVITE's responses'.
	e.respond(a.Txn, m, 200, "OK", e.cancelTag(a.Ref, c, &role))
	if c == nil || role.kind != roleAInvite || c.answered || c.canceled {
		return
	}
	if c.state == stateRouting { // no carrier dialled yet
		c.hangup = cdr.HangupCaller
		e.failCall(c, 487, "Request Terminated", nil)
		return
	}
	c.finalCode, c.finalReason = 487, append(c.finalReason[:0], "Request Terminated"...)
	c.hangup = cdr.HangupCaller
	if req := e.aInviteCopy(c); req != nil {
		e.respond(c.aTxn, req, 487, "Request Terminated", c.a.localTag)
	}
	e.abandon(c, m)
}

// cancelTag returns the To tag of the 200 to a CANCEL of the caller's
// INVITE, server transaction h (RFC 3261 9.2): the tag of the last
// response the INVITE got, or with none yet but a 100, the one its call
// answers with; nil (a fresh one) when neither is known. In e.tmp.tag.
func (e *Engine) cancelTag(h txn.Handle, c *Call, role *txnRole) []byte {
	var to parser.Address
	if r := e.txns.Response(h); len(r) > 0 && e.tmp.resp.Parse(r) == nil && e.tmp.resp.To(&to) == nil && len(to.Tag) > 0 {
		e.tmp.tag = append(e.tmp.tag[:0], to.Tag...)
		return e.tmp.tag
	}
	if c != nil && role.kind == roleAInvite {
		e.tmp.tag = append(e.tmp.tag[:0], c.a.localTag...)
		return e.tmp.tag
	}
	return nil
}

// cancelHeaders returns the header lines of cancel, the caller's CANCEL,
// that go on the CANCEL sipedge sends on the other leg: its Reason (RFC
// 3326 2; "Call completed elsewhere" keeps the callee from showing a missed
// call) when the header policy allows Reason. The rest of a CANCEL is its
// INVITE's (RFC 3261 9.1). The lines are in e.tmp.out, for CancelWith to copy.
func (e *Engine) cancelHeaders(cancel *parser.Message) []byte {
	if cancel == nil || !e.policy.kinds.Has(parser.HeaderReason) {
		return nil
	}
	e.tmp.out = e.tmp.out[:0]
	for i := 0; i < cancel.Count(parser.HeaderReason); i++ {
		e.tmp.out = append(e.tmp.out, "Reason: "...)
		e.tmp.out = appendUnfolded(e.tmp.out, cancel.Nth(parser.HeaderReason, i))
		e.tmp.out = append(e.tmp.out, "\r\n"...)
	}
	return e.tmp.out
}

// abandon stops the sequence because the caller gave up with cancel, its
// CANCEL (nil: sipedge gave up for it): the carrier in flight is cancelled (RFC 3261 9.1) and the call
// ends with its final response, so that a 2xx crossing the CANCEL is ACKed
// and BYEd.
func (e *Engine) abandon(c *Call, cancel *parser.Message) {
	e.giveUpAttempt(c)
	if c.bTxn != 0 {
		if err := e.txns.CancelWith(c.bTxn, e.cancelHeaders(cancel), e.now); err == nil {
			e.after()
			return
		}
	}
	e.end(c, cdr.HangupCaller)
}

// giveUpAttempt stops the sequence for a caller who gave up, with a CANCEL
// or a BYE in its early dialog: the carrier in flight is burned as
// caller_cancelled (status 487, the call's lcr_attempts entry with its
// B-leg) and reported, its gateway hearing that the attempt was abandoned.
// The caller sends the B-leg's CANCEL.
func (e *Engine) giveUpAttempt(c *Call) {
	c.canceled = true
	if c.att.timer != 0 {
		e.env.Clock.Stop(c.att.timer)
		c.att.timer = 0
	}
	e.report(c, carrier.OutcomeAbandoned, 0)
	e.stopPacing(c)
	if st := c.seq.Abandon(e.now); st.Burned {
		e.attemptFailed(c, st, true)
	}
}
