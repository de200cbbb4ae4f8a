package b2bua

import (
	"strconv"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// localHost returns sipedge's host:port for transport k.
func (e *Engine) localHost(k transport.Kind) string { return e.cfg.Local.For(k) }

// appendContact appends sipedge's Contact for a message sent over
// transport k (RFC 3261 8.1.1.8): its address on k, and k named unless it
// is the one a URI without a transport parameter means.
func (e *Engine) appendContact(dst []byte, k transport.Kind) []byte {
	dst = append(dst, "Contact: <sip:"...)
	dst = append(dst, e.cfg.User...)
	dst = append(dst, '@')
	dst = append(dst, e.localHost(k)...)
	dst = append(dst, k.URIParam()...)
	return append(dst, ">\r\n"...)
}

// appendRequestHead appends the start line and the dialog headers of a
// request sipedge sends on leg l to d (RFC 3261 12.2.1.1, destOf): its
// Request-URI, Route, sipedge's Via for its transport, From our URI and
// tag, To the peer's URI and tag (empty before the dialog exists), the
// leg's Call-ID, CSeq. The caller appends Contact, other headers and
// AppendBody. dst must be empty: e.tmp.req records where each part went,
// for SendBuilt, which then need not parse the request.
func (e *Engine) appendRequestHead(dst []byte, method string, l *leg, d *dest, cseq uint32, maxForwards int) []byte {
	r := &e.tmp.req
	r.CSeq = cseq
	dst = append(dst, method...)
	r.Method = span(0, dst)
	dst = append(dst, ' ')
	at := len(dst)
	dst = append(dst, d.uri...)
	r.URI = span(at, dst)
	dst = append(dst, " SIP/2.0\r\nVia: "...)
	at = len(dst)
	dst = append(dst, "SIP/2.0/"...)
	dst = append(dst, d.peer.Transport.String()...)
	dst = append(dst, ' ')
	dst = append(dst, e.localHost(d.peer.Transport)...)
	dst = append(dst, ";branch="...)
	branch := len(dst)
	dst = append(dst, "z9hG4bK"...)
	dst = randomToken(dst, 16)
	r.Branch = span(branch, dst)
	dst = append(dst, ";rport"...)
	r.Via = span(at, dst)
	dst = append(dst, "\r\nMax-Forwards: "...)
	dst = strconv.AppendInt(dst, int64(maxForwards), 10)
	dst = append(dst, "\r\n"...)
	at = len(dst)
	if len(d.routes) > 0 {
		dst = parser.AppendHeader(dst, "Route", d.routes)
	}
	r.Route = span(at, dst)
	dst = append(dst, "From: "...)
	at = len(dst)
	dst = append(dst, l.localURI...)
	dst = append(dst, ";tag="...)
	dst = append(dst, l.localTag...)
	r.From = span(at, dst)
	dst = append(dst, "\r\nTo: "...)
	at = len(dst)
	dst = append(dst, l.remoteURI...)
	if len(l.remoteTag) > 0 {
		dst = append(dst, ";tag="...)
		dst = append(dst, l.remoteTag...)
	}
	r.To = span(at, dst)
	dst = append(dst, "\r\nCall-ID: "...)
	at = len(dst)
	dst = append(dst, l.callID...)
	r.CallID = span(at, dst)
	dst = append(dst, "\r\nCSeq: "...)
	dst = strconv.AppendUint(dst, uint64(cseq), 10)
	dst = append(dst, ' ')
	dst = append(dst, method...)
	return append(dst, "\r\n"...)
}

// span is what dst gained since it was start bytes long.
func span(start int, dst []byte) txn.Span {
	return txn.Span{Start: uint32(start), End: uint32(len(dst))}
}

// sendBuilt starts a client transaction for the request in e.tmp.out, whose
// head appendRequestHead wrote.
func (e *Engine) sendBuilt(to transport.Peer) (txn.Handle, error) {
	e.tmp.req.Data = e.tmp.out
	h, err := e.txns.SendBuilt(&e.tmp.req, to, e.now)
	e.tmp.req.Data = nil
	return h, err
}

// appendBodyOf appends m's Content-Type (unfolded, see appendUnfolded) and
// body and ends the message.
func appendBodyOf(dst []byte, m *parser.Message) []byte {
	if m == nil || len(m.Body()) == 0 {
		return parser.AppendBody(dst, "", nil)
	}
	if ct := m.Get(parser.HeaderContentType); ct != nil {
		dst = append(dst, "Content-Type: "...)
		dst = appendUnfolded(dst, ct)
		dst = append(dst, "\r\n"...)
	}
	return parser.AppendBody(dst, "", m.Body())
}

// appendRelayedResponse builds the response to req, received on leg s of
// call c, that relays resp from the other leg: its code, reason, allowed
// headers and body, with sipedge's Contact on responses that establish or
// refresh a dialog, and req's own Record-Route, which the requester's UA
// takes its route set from (RFC 3261 12.1.1: copied into a response that
// establishes a dialog; nothing of the other leg's); a 2xx to an INVITE
// or UPDATE with the session timer of the leg (appendSession2xx). A
// reliable provisional of sipedge's own (rseq, not 0: sendReliable) has
// Require: 100rel and its RSeq, and no body unless the caller made an
// offer.
func (e *Engine) appendRelayedResponse(dst []byte, c *Call, s side, req, resp *parser.Message, toTag []byte, rseq uint32) []byte {
	code, reason := resp.StatusCode(), string(resp.ReasonPhrase())
	if code == 401 || code == 407 {
		// A challenge is for the hop that received it: its digest covers
		// that leg's Request-URI, and its header is never relayed (never),
		// so the other side could not answer it; a 401 or 407 without it
		// would break RFC 3261 22.1.
		code, reason = 403, "Forbidden"
	}
	dst = parser.AppendResponse(dst, req, code, reason, toTag)
	if code > 100 && code < 300 && dialogForming(req.Method()) {
		dst = e.appendContact(dst, c.leg(s).peer.Transport)
		dst = parser.AppendKind(dst, req, parser.HeaderRecordRoute)
	}
	dst = e.policy.appendAllowed(dst, resp)
	switch {
	case code >= 200 && code < 300 && targetRefresh(req.Method()):
		dst = e.appendSession2xx(dst, c, s, resp)
	case rseq != 0:
		dst = append(dst, "Require: 100rel\r\nRSeq: "...)
		dst = strconv.AppendUint(dst, uint64(rseq), 10)
		dst = append(dst, "\r\n"...)
		if !c.extra.rel.offer {
			return appendBodyOf(dst, nil)
		}
	}
	return appendBodyOf(dst, resp)
}

// appendResponse builds sipedge's own response to req.
func appendResponse(dst []byte, req *parser.Message, code int, reason string, toTag []byte) []byte {
	dst = parser.AppendResponse(dst, req, code, reason, toTag)
	return parser.AppendBody(dst, "", nil)
}

// dialogForming reports whether a request's 2xx carries a Contact: it
// creates a dialog or refreshes its target (RFC 3261 12.1, 12.2;
// RFC 3311 5.2; RFC 6665).
func dialogForming(m parser.Method) bool {
	switch m {
	case parser.MethodInvite, parser.MethodUpdate, parser.MethodSubscribe, parser.MethodNotify, parser.MethodRefer:
		return true
	}
	return false
}

// appendNameAddr appends "display" <uri> for an address: the identity of a
// dialog's URI without its tag or other parameters. The display name is
// written clean (appendDisplay): the caller's goes on the carrier's From.
func appendNameAddr(dst []byte, a *parser.Address) []byte {
	if len(a.Display) > 0 {
		if a.Quoted {
			dst = append(dst, '"')
			dst = appendDisplay(dst, a.Display)
			dst = append(dst, "\" "...)
		} else {
			dst = appendDisplay(dst, a.Display)
			dst = append(dst, ' ')
		}
	}
	dst = append(dst, '<')
	dst = append(dst, a.URI...)
	return append(dst, '>')
}

// appendDisplay appends a display name as Address holds it (the inside of
// a quoted string, or tokens and LWS) without its control bytes. A
// quoted-pair may escape any byte but CR and LF (RFC 3261 25.1), and RFC
// 4475 3.1.1.2 has a valid display name carry a NUL and a DEL that way, so
// Validate lets them through; relayed, a NUL ends the header early at
// some parsers and starts a forged one at others. Such a quoted-pair is
// left out whole (no backslash left to escape the closing quote), and a
// fold (RFC 3261 7.3.1) keeps only its white space.
func appendDisplay(dst, d []byte) []byte {
	for i := 0; i < len(d); i++ {
		switch c := d[i]; {
		case c == '\\' && i+1 < len(d):
			if e := d[i+1]; e >= ' ' && e != 0x7f || e == '\t' {
				dst = append(dst, c, e)
			}
			i++
		case c == '\r' || c == '\n': // only in a fold, by Parse
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendRouteSet appends the Record-Route values of m, joined with ", ",
// in order for the UAS side of a dialog and reversed for the UAC side
// (RFC 3261 12.1.1, 12.1.2).
func appendRouteSet(dst []byte, m *parser.Message, reverse bool) []byte {
	n := m.Count(parser.HeaderRecordRoute)
	for k := 0; k < n; k++ {
		i := k
		if reverse {
			i = n - 1 - k
		}
		if k > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, m.Nth(parser.HeaderRecordRoute, i)...)
	}
	return dst
}
