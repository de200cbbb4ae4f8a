package b2bua

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// maxTeardowns bounds the dialogs an engine ends from a 2xx alone at once
// (endUnwanted): a flood of 2xx responses, which anyone can send with
// sipedge's Via, costs at most this many BYE transactions per shard.
const maxTeardowns = 64

// teardown is a dialog endUnwanted is ending: its BYE's client transaction
// and the dialog's key (dialogKey). It lasts as long as the transaction
// does, which is what lets a retransmitted 2xx be ACKed again without
// another BYE.
type teardown struct {
	dialog uint64
	bye    txn.Handle // 0: the slot is free
}

// dialogKey names the dialog a 2xx to one of sipedge's INVITEs establishes:
// its Call-ID and To tag (RFC 3261 12), sipedge's From tag being unique per
// Call-ID.
func dialogKey(callID, toTag []byte) uint64 {
	return xxhash.Sum64(callID) ^ bits.RotateLeft64(xxhash.Sum64(toTag), 1)
}

// endUnwanted ACKs and BYEs the dialog a 2xx establishes that no call keeps
// (RFC 3261 13.2.2.4, 15): a late answer from a carrier the call left, a
// second dialog from a forking carrier, an answer that crossed the call's
// end, or one that came after its INVITE's transaction had ended (stray).
// c is the call the answer belongs to, nil when it has ended; peer is where
// the ACK and BYE go. The dialog is built from the response alone (RFC 3261
// 12.1.2): its Contact as the Request-URI, its Record-Route reversed as the
// route set, its From, To and Call-ID, the BYE's CSeq one above the
// INVITE's. It is built in the engine's scratch leg, which never shares a
// call's buffers: a call's leg copied into it would be rewritten.
//
// Once per dialog: while the BYE's transaction lives, a retransmission of
// the 2xx is only ACKed again. At most maxTeardowns run at once; a stray
// 2xx beyond them is left unanswered, and the peer, which retransmits it,
// gets its ACK and BYE when a slot is free, or ends the dialog itself after
// 64*T1 (RFC 3261 13.3.1.4). A 2xx that matched one of sipedge's client
// transactions is never left so: strays, which anyone can send, would
// otherwise keep sipedge from ending the dialogs it did establish (a 200
// crossing a CANCEL); without a free slot it is torn down unrecorded.
func (e *Engine) endUnwanted(c *Call, m *parser.Message, peer transport.Peer, stray bool) {
	var to parser.Address
	if m.To(&to) != nil || len(to.Tag) == 0 {
		return // a 2xx without a To tag establishes no dialog to end
	}
	key := dialogKey(m.CallID(), to.Tag)
	free := -1
	for i := range e.teardowns {
		td := &e.teardowns[i]
		if td.bye != 0 {
			if _, _, live := e.txns.State(td.bye); !live {
				td.bye = 0
			}
		}
		switch {
		case td.bye == 0:
			if free < 0 {
				free = i
			}
		case td.dialog == key:
			e.tmp.leg.reset()
			e.legFromResponse(&e.tmp.leg, m, peer)
			e.ack(nil, &e.tmp.leg, nil) // a retransmission: ACKed again, not BYEd again
			return
		}
	}
	if free < 0 && stray {
		e.m.teardownsOverCap.Inc()
		return
	}
	e.tmp.leg.reset()
	e.legFromResponse(&e.tmp.leg, m, peer)
	if len(e.tmp.leg.target) == 0 {
		return // no SIP Contact: nowhere to address the ACK and BYE
	}
	e.m.lateAnswers.Inc()
	if stray {
		e.m.strayAnswers.Inc()
	}
	e.ack(nil, &e.tmp.leg, nil)
	if h := e.sendBye(c, &e.tmp.leg, nil); h != 0 && free >= 0 {
		e.teardowns[free] = teardown{dialog: key, bye: h}
	}
}

// legFromResponse fills l with the dialog a 2xx to one of sipedge's
// INVITEs establishes, from the response alone: enough to ACK and BYE it.
func (e *Engine) legFromResponse(l *leg, m *parser.Message, peer transport.Peer) {
	var from parser.Address
	_ = m.From(&from)
	l.callID = append(l.callID[:0], m.CallID()...)
	l.localTag = append(l.localTag[:0], from.Tag...)
	l.localURI = appendNameAddr(l.localURI[:0], &from)
	var to parser.Address
	_ = m.To(&to)
	l.remoteURI = appendNameAddr(l.remoteURI[:0], &to)
	e.confirmLeg(l, m)
	if cseq, err := m.CSeq(); err == nil {
		l.inviteCSeq, l.cseq = cseq.Num, cseq.Num
	}
	l.peer = peer
}

// strayResponse handles a response no client transaction matches, its top
// Via sipedge's own (Receive checked it): a 2xx to an INVITE that outlived
// the transaction (RFC 6026 Timer M, or the 64*T1 after a CANCEL) is ACKed
// again in a live dialog, or ACKed and BYEd where it came from when no call
// keeps its dialog (orphan2xx). Nothing else is answered.
func (e *Engine) strayResponse(m *parser.Message, from transport.Peer, _ error) {
	e.orphan2xx(m, true, from)
}

// orphan2xx handles a 2xx to an INVITE no call watches: its transaction
// ended (stray, from peer), or the call or re-INVITE it answered is done
// with it (its transaction's peer). In a live dialog it is a
// retransmission, ACKed again once sipedge has ACKed it (RFC 3261
// 13.2.2.4). Otherwise one of sipedge's INVITEs established a dialog nobody
// keeps, as when a carrier's 200 crosses the call's CANCEL or end, or comes
// after its transaction: it is ACKed and BYEd (RFC 3261 13.2.2.4, 15).
func (e *Engine) orphan2xx(m *parser.Message, stray bool, peer transport.Peer) {
	if code := m.StatusCode(); code < 200 || code >= 300 {
		return
	}
	cseq, err := m.CSeq()
	if err != nil || cseq.Method != parser.MethodInvite {
		return
	}
	c, s := e.lookupCall(m.CallID())
	if c != nil {
		l := c.leg(s)
		var to parser.Address
		if m.To(&to) == nil && string(to.Tag) == string(l.remoteTag) {
			e.ackAgain(c, l, cseq.Num)
			return
		}
	}
	e.endUnwanted(c, m, peer, stray)
}
