package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// respond sends sipedge's own response on server transaction h.
func (e *Engine) respond(h txn.Handle, req *parser.Message, code int, reason string, toTag []byte) {
	e.tmp.out = appendResponse(e.tmp.out[:0], req, code, reason, e.tagFor(toTag))
	if err := e.txns.Respond(h, e.tmp.out, e.now); err == nil {
		e.after()
	}
}

// tagFor returns toTag, or when it is nil a fresh random tag: every
// response but a 100 has a To tag (RFC 3261 8.2.6.2), also one that ends
// no dialog (AppendResponse adds it only when the request's To has none).
func (e *Engine) tagFor(toTag []byte) []byte {
	if toTag != nil {
		return toTag
	}
	e.tmp.tag = randomToken(e.tmp.tag[:0], 10)
	return e.tmp.tag
}

// respondLimited refuses a call over an ingress limit: 503 with
// Retry-After (RFC 3261 21.5.4), before any routing work.
func (e *Engine) respondLimited(h txn.Handle, req *parser.Message, retry time.Duration) {
	e.respondRetry(h, req, 503, "Service Unavailable", max(int(retry/time.Second), 1))
}

// respondRetry answers on server transaction h with code and a
// Retry-After of secs seconds (RFC 3261 20.33).
func (e *Engine) respondRetry(h txn.Handle, req *parser.Message, code int, reason string, secs int) {
	b := parser.AppendResponse(e.tmp.out[:0], req, code, reason, e.tagFor(nil))
	b = parser.AppendHeaderUint(b, "Retry-After", uint64(secs))
	e.tmp.out = parser.AppendBody(b, "", nil)
	if e.txns.Respond(h, e.tmp.out, e.now) == nil {
		e.after()
	}
}

// rejectStateless answers a request the transaction layer refused.
func (e *Engine) rejectStateless(m *parser.Message, from transport.Peer, err error) {
	code, reason, drop := 500, "Server Internal Error", false
	switch err {
	case txn.ErrFull:
		code, reason = 503, "Service Unavailable"
	default:
		code, reason, drop = parser.Answer(m, err)
	}
	if drop || m.Method() == parser.MethodAck {
		return
	}
	var via parser.Via
	if m.TopVia(&via) != nil {
		return
	}
	b := parser.AppendResponse(e.tmp.out[:0], m, code, reason, e.tagFor(nil))
	e.tmp.out = parser.AppendBody(b, "", nil)
	e.env.Send(e.replyTo(m, from), e.tmp.out)
}

// replyTo is where responses to request m from peer from go: where RFC
// 3261 18.2.2 says (txn.ReplyTo), or back to the source port for a trunk
// with ForceRPort.
func (e *Engine) replyTo(m *parser.Message, from transport.Peer) transport.Peer {
	var via parser.Via
	if m.TopVia(&via) != nil {
		return from // the transaction layer refuses it
	}
	if e.trunks.set.forceRPort {
		if t := e.trunkOf(from); t != nil && t.ForceRPort {
			return from
		}
	}
	if e.trunks.forced > 0 {
		// A call keeps its trunk: one removed or replaced since the call
		// began still answers its dialog at the source port.
		if c, s := e.lookupCall(m.CallID()); c != nil && s == sideA && c.trunk != nil && c.trunk.ForceRPort {
			return from
		}
	}
	return txn.ReplyTo(&via, from)
}
