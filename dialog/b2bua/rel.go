package b2bua

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
)

// relState is a call's reliable provisional responses (RFC 3262), each leg
// on its own: sipedge is the caller's UAS and the carrier's UAC, and the
// PRACKs of one leg are never relayed to the other (doc.go, Reliable
// provisional responses).
type relState struct {
	// The caller's leg, sipedge its UAS (RFC 3262 3).
	callerRequires bool // its INVITE requires 100rel: every 101-199 goes reliably
	callerSupports bool // it supports 100rel: a provisional the carrier sent reliably goes reliably
	offer          bool // its INVITE carried an offer: a reliable provisional's SDP is the answer
	unacked        bool // the last reliable provisional awaits its PRACK
	withBody       bool // and carried a body: a 2xx waits for that PRACK
	held           bool // the 2xx in Call.ok2xx waits for that PRACK
	rseq           uint32
	inviteCSeq     uint32 // the CSeq of the INVITE it answers, which the PRACK's RAck names
	timer          uint64 // its retransmission
	wait, end      time.Duration
	sent           []byte // it, retransmitted until its PRACK (a pooled buffer)
	// pending is the carrier's latest provisional, as received, waiting for
	// that PRACK to go reliably in turn (a pooled buffer).
	pending []byte

	// The carrier's leg, sipedge its UAC (RFC 3262 4): the RSeq of the last
	// reliable provisional PRACKed in the B-leg's early dialog, 0 for none.
	carrierRSeq uint32
}

// callerRel notes what the caller's INVITE m says of 100rel (RFC 3262 3).
func (e *Engine) callerRel(c *Call, m *parser.Message) {
	requires := m.Count(parser.HeaderRequire) > 0 && m.HasOptionTag(parser.HeaderRequire, "100rel")
	supports := mayList100rel(m, parser.HeaderSupported) && m.HasOptionTag(parser.HeaderSupported, "100rel")
	if !requires && !supports {
		return
	}
	x := &e.extraOf(c).rel
	x.callerRequires, x.callerSupports, x.offer = requires, supports || requires, len(m.Body()) > 0
}

// mayList100rel reports whether a header of kind of m may list 100rel: a
// look for its digits that spares most INVITEs (Supported: timer,
// replaces) HasOptionTag's walk through the tags.
func mayList100rel(m *parser.Message, kind parser.HeaderKind) bool {
	for i := 0; i < m.Count(kind); i++ {
		for v := m.Nth(kind, i); ; {
			k := bytes.IndexByte(v, '1')
			if k < 0 || k+2 >= len(v) {
				break
			}
			if v[k+1] == '0' && v[k+2] == '0' {
				return true
			}
			v = v[k+1:]
		}
	}
	return false
}

// offer100rel reports whether c's B-leg INVITEs support 100rel: when the
// caller does, and its INVITE carries an offer, so that the SDP of a
// carrier's reliable provisional is an answer, which sipedge PRACKs
// without a body (RFC 3262 5): an offer there would want its answer in
// the PRACK, which only the caller could give.
func (c *Call) offer100rel() bool {
	return c.extra != nil && c.extra.rel.callerSupports && c.extra.rel.offer
}

// reliableProvisional returns the RSeq of m, a 101-199, when it is sent
// reliably (RFC 3262 3: Require: 100rel and RSeq).
func reliableProvisional(m *parser.Message) (uint32, bool) {
	if m.Count(parser.HeaderRSeq) == 0 || !m.HasOptionTag(parser.HeaderRequire, "100rel") {
		return 0, false
	}
	rseq, err := parser.ParseRSeq(m.Get(parser.HeaderRSeq))
	return rseq, err == nil
}

// prackCarrier PRACKs the carrier's reliable provisional m, whose RSeq is
// rseq, in the B-leg's early dialog (RFC 3262 4): the first of the dialog
// whatever its RSeq, then each one higher than the last. It reports false
// for one to go no further: a retransmission, which the PRACK's own
// transaction already answers, or one out of order, which "MUST NOT be
// acknowledged with a PRACK, and MUST NOT be processed further".
func (e *Engine) prackCarrier(c *Call, m *parser.Message, rseq uint32) bool {
	x := &e.extraOf(c).rel
	if x.carrierRSeq != 0 && rseq != x.carrierRSeq+1 {
		return false
	}
	x.carrierRSeq = rseq
	cseq, _ := m.CSeq()
	B := &c.b
	B.cseq++
	d := legDest(B)
	b := e.appendRequestHead(e.tmp.out[:0], "PRACK", B, &d, B.cseq, 70)
	b = append(b, "RAck: "...)
	b = strconv.AppendUint(b, uint64(rseq), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(cseq.Num), 10)
	b = append(b, " INVITE\r\n"...)
	e.tmp.out = parser.AppendBody(b, "", nil)
	if _, err := e.sendBuilt(*d.peer); err == nil {
		e.after()
	}
	return true
}

// relayReliably sends the caller the carrier's provisional resp reliably
// when it must go so: always to a caller that requires 100rel, and to one
// that supports it when the carrier sent it reliably (RFC 3262 3). While
// an earlier one awaits its PRACK the latest is kept to go next ("the UAS
// MUST NOT send a second reliable provisional response until the first is
// acknowledged"), unless it would replace one with a body by one without.
// It reports false when resp goes unreliably, as any other.
func (e *Engine) relayReliably(c *Call, resp *parser.Message) bool {
	x := &c.extra.rel
	if !x.callerRequires {
		if _, ok := reliableProvisional(resp); !ok || !x.callerSupports {
			return false
		}
	}
	if x.unacked {
		if len(x.pending) == 0 || len(resp.Body()) > 0 || !x.pendingHasBody(&e.tmp.prov) {
			if x.pending == nil {
				x.pending = e.getBuf()
			}
			x.pending = append(x.pending[:0], resp.Bytes()...)
		}
		return true
	}
	e.sendReliable(c, resp)
	return true
}

// pendingHasBody reports whether the pending provisional has a body,
// parsing it into m.
func (x *relState) pendingHasBody(m *parser.Message) bool {
	return m.Parse(x.pending) == nil && len(m.Body()) > 0
}

// sendReliable sends the caller resp, the carrier's provisional, as a
// reliable provisional of its own (RFC 3262 3): Require: 100rel, the next
// RSeq (the first one random, from 1 to 2**31-1), retransmitted from T1,
// doubling, until its PRACK. Its body only when the caller's INVITE had an
// offer, whose answer it is: in a caller's dialog without one, an SDP here
// would be an offer (RFC 3262 5), answered in the caller's PRACK, which the
// carrier's dialog has no place for.
func (e *Engine) sendReliable(c *Call, resp *parser.Message) {
	req := c.ainv
	x := &c.extra.rel
	if req == nil {
		return
	}
	if x.rseq == 0 {
		x.rseq = rand.Uint32N(1<<31-1) + 1
	} else {
		x.rseq++
	}
	if cseq, err := req.CSeq(); err == nil {
		x.inviteCSeq = cseq.Num
	}
	b := e.appendRelayedResponse(e.tmp.out[:0], c, sideA, req, resp, c.a.localTag, x.rseq)
	e.tmp.out = b
	x.withBody = x.offer && len(resp.Body()) > 0
	if x.sent == nil {
		x.sent = e.getBuf()
	}
	x.sent = append(x.sent[:0], b...)
	x.unacked = true
	x.wait, x.end = e.t1(), e.now+64*e.t1()
	x.timer = e.env.Clock.StartAt(e.now+x.wait, timerRel, e.arg(c))
	if e.txns.Respond(c.aTxn, e.tmp.out, e.now) == nil {
		e.after()
	}
}

// hold2xx reports whether the 2xx for the caller, built in c.ok2xx, must
// wait for the PRACK of a reliable provisional with a body: "it MUST NOT
// send a final response until those provisional responses are
// acknowledged" (RFC 3262 3). A provisional still pending is dropped: the
// final response supersedes it. Without a body the last one is no longer
// retransmitted, but a PRACK for it is still answered.
func (e *Engine) hold2xx(c *Call) bool {
	x := &c.extra.rel
	x.pending = x.pending[:0]
	if !x.unacked {
		return false
	}
	if x.withBody {
		x.held = true
		return true
	}
	e.stopRel(c.extra)
	return false
}

// onPrack answers the caller's PRACK m, in server transaction h (RFC 3262
// 3): 481 unless it acknowledges the reliable provisional awaiting one (its
// RAck names that RSeq and the INVITE's CSeq); else 200, and the next
// provisional, or the 2xx held for it, goes. A PRACK with a body (an offer,
// RFC 3262 5) acknowledges the provisional but gets 488: the caller's
// offer would need an answer only the carrier could give, in a dialog
// sipedge does not relay PRACKs into.
func (e *Engine) onPrack(c *Call, m *parser.Message, h txn.Handle) {
	var x *relState
	if c.extra != nil {
		x = &c.extra.rel
	}
	rack, err := parser.ParseRAck(m.Get(parser.HeaderRAck))
	if x == nil || !x.unacked || err != nil || rack.RSeq != x.rseq || rack.CSeq != x.inviteCSeq || rack.Method != parser.MethodInvite {
		e.respond(h, m, 481, "Call/Transaction Does Not Exist", nil)
		return
	}
	x.unacked = false
	e.stopRel(c.extra)
	if len(m.Body()) > 0 {
		e.respond(h, m, 488, "Not Acceptable Here", nil)
	} else {
		e.respond(h, m, 200, "OK", nil)
	}
	switch {
	case x.held:
		x.held = false
		if req := c.ainv; req != nil && len(c.ok2xx) > 0 {
			e.start2xx(c, sideA, req)
			if e.txns.Respond(c.aTxn, c.ok2xx, e.now) == nil {
				e.after()
			}
		}
	case len(x.pending) > 0 && !c.answered && e.tmp.prov.Parse(x.pending) == nil:
		x.pending = x.pending[:0]
		e.sendReliable(c, &e.tmp.prov)
	}
}

// stopRel stops the retransmission of the reliable provisional.
func (e *Engine) stopRel(x *callExtra) {
	if x.rel.timer != 0 {
		e.env.Clock.Stop(x.rel.timer)
		x.rel.timer = 0
	}
}

// relNewDialog forgets the reliable provisionals of the early dialogs a
// new B-leg INVITE leaves (a failover, a challenge answered, a redirect):
// the caller sees the next carrier's under another To tag, a new early
// dialog, whose first RSeq it takes as it comes; and the carrier's next
// early dialog starts its own.
func (e *Engine) relNewDialog(c *Call) {
	x := &c.extra.rel
	e.stopRel(c.extra)
	x.unacked, x.withBody, x.held, x.pending, x.carrierRSeq = false, false, false, x.pending[:0], 0
}

// retransmitRel sends the reliable provisional again (RFC 3262 3), the
// interval doubling; after 64*T1 without its PRACK the call fails: "the
// UAS SHOULD reject the original request with a 5xx response".
func (e *Engine) retransmitRel(c *Call) {
	x := &c.extra.rel
	x.timer = 0
	if !x.unacked {
		return
	}
	if e.now < x.end {
		e.env.Send(c.a.peer, x.sent)
		x.wait *= 2
		x.timer = e.env.Clock.StartAt(min(e.now+x.wait, x.end), timerRel, e.arg(c))
		return
	}
	e.env.Log.Info("no PRACK for a reliable provisional; failing the call", "call_id", string(c.a.callID))
	x.unacked, x.held = false, false
	c.hangup, c.ended = cdr.HangupSystem, endNoPrack
	c.finalCode, c.finalReason = 500, append(c.finalReason[:0], "Server Internal Error"...)
	if c.answered { // its 2xx was held: the carrier's call ends
		e.sendBye(c, &c.b, nil)
		e.end(c, cdr.HangupSystem) // the caller's INVITE gets the 500 (settle)
		return
	}
	e.respond(c.aTxn, c.ainv, 500, "Server Internal Error", c.a.localTag)
	e.abandon(c, nil)
}
