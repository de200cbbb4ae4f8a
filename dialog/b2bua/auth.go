package b2bua

import (
	"bytes"
	"strconv"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// challenge is a carrier's Digest challenge to a B-leg INVITE and the
// account sipedge answers it with.
type challenge struct {
	ch    digest.Challenge // views into the response being handled
	cr    digest.Credentials
	proxy bool // a 407's: answered in Proxy-Authorization
}

// appendCredentials appends the header answering a to a request of method
// for uri with body (RFC 3261 22.2, 22.3).
func (a *challenge) appendCredentials(dst, uri, body, method []byte) []byte {
	if a.proxy {
		dst = append(dst, "Proxy-Authorization: "...)
	} else {
		dst = append(dst, "Authorization: "...)
	}
	var buf [16]byte
	cnonce := randomToken(buf[:0], 16)
	dst = digest.AppendAuthorization(dst, &a.ch, a.cr, method, uri, body, cnonce, 1)
	return append(dst, "\r\n"...)
}

var inviteMethod = []byte("INVITE")

// maxAuthTries bounds the challenges answered per carrier attempt: one, and
// one more when the carrier says the nonce was stale, the credentials
// right (RFC 7616 3.3).
const maxAuthTries = 2

// answerChallenge answers the carrier's 401 or 407 to the B-leg INVITE
// with the credentials of its gateway group: the same INVITE again, in the
// same dialog (Call-ID, From tag, To without tag), with the next CSeq, a
// new branch and the credentials (RFC 3261 8.1.3.5, 22.2). The carrier's
// deadline runs on from its dial. False when sipedge cannot answer, and
// the response is the attempt's failure as any other: the group holds no
// credentials, no challenge is one sipedge can answer (another scheme,
// algorithm or realm), or the carrier challenges again a request that
// carried them, with no stale nonce to explain it: it refused them.
func (e *Engine) answerChallenge(c *Call, m *parser.Message, code int) bool {
	a, ok := e.challengeOf(&c.att.dial, "call_id", c.a.callID, m, code, c.att.authTries)
	if !ok {
		return false
	}
	ainv := e.aInviteCopy(c)
	if ainv == nil {
		return false
	}
	c.att.authTries++
	if !e.sendInvite(c, ainv, a) {
		return false // logged; the challenge is the attempt's failure
	}
	e.m.authAnswered.Inc()
	return true
}

// challengeOf returns the challenge of the carrier's 401 or 407 m that
// sipedge answers with the account of t's gateway group, after tries
// answers to the request it challenges (the RFC 3261 22.2 loop guard: a
// second challenge only for a stale nonce); false, counted and warned of
// (the call named by idKey and callID), when it answers none.
func (e *Engine) challengeOf(t *carrier.Dial, idKey string, callID []byte, m *parser.Message, code int, tries uint8) (*challenge, bool) {
	acct := e.env.Carriers.Credentials(t)
	if acct == nil {
		e.m.authNoCredentials.Inc()
		return nil, false
	}
	realm := acct.Realm
	a := &e.tmp.auth
	a.proxy, a.cr = code == 407, digest.Credentials{Username: acct.Username, Password: acct.Password}
	kind := parser.HeaderWWWAuthenticate
	if a.proxy {
		kind = parser.HeaderProxyAuthenticate
	}
	// The first challenge sipedge can answer: a carrier lists them in its
	// order of preference (RFC 8760 2.4).
	found := false
	for i := 0; i < m.Count(kind) && !found; i++ {
		found = digest.ParseChallenge(m.Nth(kind, i), &a.ch) == nil &&
			(realm == "" || string(a.ch.Realm) == realm)
	}
	switch {
	case !found:
		e.m.authUnanswerable.Inc()
		e.warnAuth(t, idKey, callID, "carrier challenge sipedge cannot answer: no Digest challenge of a supported algorithm and the configured realm",
			code, string(m.Get(kind)))
		return nil, false
	case tries >= maxAuthTries || tries > 0 && !a.ch.Stale:
		e.m.authRefused.Inc()
		e.warnAuth(t, idKey, callID, "carrier refused sipedge's credentials", code, string(m.Get(kind)))
		return nil, false
	}
	return a, true
}

// answerRelayChallenge answers the carrier's 401 or 407 to a request the
// caller sent in the dialog and sipedge relayed (a re-INVITE, UPDATE,
// INFO...): the request again with the next CSeq and the credentials, the
// caller's transaction waiting on (RFC 3261 22.2). Once per request, or
// twice on a stale nonce; false when sipedge cannot answer, and the
// caller gets the failure as 403 (appendRelayedResponse).
func (e *Engine) answerRelayChallenge(c *Call, role txnRole, m *parser.Message, code int) bool {
	r := &c.relays[role.slot]
	a, ok := e.challengeOf(&c.att.dial, "call_id", c.a.callID, m, code, r.authTries)
	if !ok {
		return false
	}
	r.authTries++
	req := &e.tmp.areq // the caller's request (parseRelayed)
	mf, present, _ := req.MaxForwards()
	if !present {
		mf = 70
	}
	B := &c.b
	B.cseq++
	d := legDest(B)
	b := e.appendRequestHead(e.tmp.out[:0], string(req.MethodBytes()), B, &d, B.cseq, max(mf-1, 0))
	if dialogForming(req.Method()) {
		b = e.appendContact(b, B.peer.Transport)
	}
	b = e.policy.appendAllowed(b, req)
	at := len(b)
	b = a.appendCredentials(b, B.target, req.Body(), req.MethodBytes())
	if req.Method() == parser.MethodInvite {
		B.inviteCSeq = B.cseq
		// Its 2xx's ACK repeats the credentials (RFC 3261 13.2.2.4).
		if B.ackCopy == nil {
			B.ackCopy = e.getBuf()
		}
		B.ackCopy, B.ackAuth = append(B.ackCopy[:0], b[at:]...), true
	}
	e.tmp.out = appendBodyOf(b, req)
	h, err := e.sendBuilt(B.peer)
	if err != nil {
		return false
	}
	e.unwatch(r.out)
	r.out = h
	e.watch(r.in, c, roleRelayIn, h, role.slot)
	e.watch(h, c, roleRelayOut, r.in, role.slot)
	e.m.authAnswered.Inc()
	e.after()
	return true
}

// carrierBye is what a BYE sipedge sent the carrier needs while it is
// pending, to be answered if challenged (answerByeChallenge): the call
// ended as it went (end), and a held call keeps nothing for its BYE. The
// carrier, whose group's account answers, and the challenges answered;
// the BYE's bytes are its transaction's, which come with the response
// (txn.Action.Data). An entry of Engine.byes, named by the BYE's role and
// given back with it (unwatch): a warm engine reuses them, and holds as
// many as it has such BYEs in flight.
type carrierBye struct {
	target carrier.Dial
	tries  uint8
	next   int32 // the free list
}

// watchCarrierBye watches h, a BYE sent to t's carrier, past its call's end.
func (e *Engine) watchCarrierBye(h txn.Handle, t *carrier.Dial) {
	i := e.byes.free
	if i >= 0 {
		e.byes.free = e.byes.list[i].next
	} else {
		i = int32(len(e.byes.list))
		e.byes.list = append(e.byes.list, carrierBye{})
	}
	b := &e.byes.list[i] // not a literal: see watch
	b.target, b.tries, b.next = *t, 0, -1
	e.setRole(h, roleCarrierBye).bye = i
}

// freeCarrierBye gives entry i of e.byes.list back, its Dial cleared: the
// Gateway it names is not kept alive past the BYE.
func (e *Engine) freeCarrierBye(i int32) {
	e.byes.list[i] = carrierBye{next: e.byes.free}
	e.byes.free = i
}

var byeMethod = []byte("BYE")

// answerByeChallenge answers the carrier's 401 or 407 to bye, a BYE
// sipedge sent it in transaction h (entry i of e.byes.list), with the
// credentials of its gateway group: the BYE again in the same dialog, a
// new transaction with the next CSeq (RFC 3261 8.1.3.5, 22.2), under the
// same rules as the INVITE's (challengeOf: once, and once more on a stale
// nonce). The new transaction takes h's entry. False when sipedge cannot
// answer: the carrier ends the call on its own timers.
func (e *Engine) answerByeChallenge(h txn.Handle, i int32, m *parser.Message, code int, bye []byte, peer transport.Peer) bool {
	p := &e.byes.list[i]
	a, ok := e.challengeOf(&p.target, "b_call_id", m.CallID(), m, code, p.tries)
	if !ok {
		return false
	}
	b, uri, body, ok := e.appendByeAgain(e.tmp.out[:0], bye)
	if !ok {
		return false
	}
	b = a.appendCredentials(b, uri, body, byeMethod)
	e.tmp.out = parser.AppendBody(b, "", body)
	again, err := e.sendBuilt(peer)
	if err != nil {
		return false
	}
	e.byes.list[i].tries++
	e.roles[h.Index()] = txnRole{} // the entry goes with the new BYE
	e.setRole(again, roleCarrierBye).bye = i
	e.m.authAnswered.Inc()
	e.after()
	return true
}

// appendByeAgain appends bye, a BYE sipedge built (sendBye, or an earlier
// answer), as the next request of its dialog (RFC 3261 8.1.3.5, 22.2):
// the same Request-URI, Route, From, To, Call-ID, Max-Forwards and the
// headers the policy copied into it, a new branch in its Via, the next
// CSeq, and neither the credentials it carried nor Content-Length, which
// the caller appends after the new ones. It returns the Request-URI and
// the body, views into bye. bye holds one header a line under the names
// sipedge writes; dst must be empty, e.tmp.req recording the method and the
// branch for sendBuilt.
func (e *Engine) appendByeAgain(dst, bye []byte) (_, uri, body []byte, ok bool) {
	end := bytes.Index(bye, crlfcrlf)
	if end < 0 {
		return dst, nil, nil, false
	}
	head, body := bye[:end], bye[end+len(crlfcrlf):]
	e.tmp.req = txn.Built{}
	for first := true; len(head) > 0; first = false {
		var line []byte
		if k := bytes.Index(head, crlf); k >= 0 {
			line, head = head[:k], head[k+len(crlf):]
		} else {
			line, head = head, nil
		}
		switch {
		case first: // BYE Request-URI SIP/2.0
			sp, last := bytes.IndexByte(line, ' '), bytes.LastIndexByte(line, ' ')
			if sp <= 0 || last <= sp {
				return dst, nil, nil, false
			}
			dst = append(dst, line...)
			e.tmp.req.Method = span(0, dst[:sp])
			uri = line[sp+1 : last]
		case e.tmp.req.Branch.End == 0 && bytes.HasPrefix(line, viaPrefix): // sipedge's
			k := bytes.Index(line, branchParam)
			if k < 0 {
				return dst, nil, nil, false
			}
			k += len(branchParam)
			n := bytes.IndexByte(line[k:], ';')
			if n < 0 {
				n = len(line) - k
			}
			dst = append(dst, line[:k]...)
			at := len(dst)
			dst = randomToken(append(dst, "z9hG4bK"...), 16)
			e.tmp.req.Branch = span(at, dst)
			dst = append(dst, line[k+n:]...)
		case bytes.HasPrefix(line, cseqPrefix):
			num, method, _ := bytes.Cut(line[len(cseqPrefix):], space)
			var n uint64
			for _, d := range num {
				if d < '0' || d > '9' || n >= 1<<31 {
					return dst, nil, nil, false
				}
				n = n*10 + uint64(d-'0')
			}
			if n+1 >= 1<<31 { // RFC 3261 8.1.1.5: below 2**31
				return dst, nil, nil, false
			}
			e.tmp.req.CSeq = uint32(n + 1)
			dst = append(dst, cseqPrefix...)
			dst = strconv.AppendUint(dst, n+1, 10)
			dst = append(append(dst, ' '), method...)
		case bytes.HasPrefix(line, authorizationPrefix), bytes.HasPrefix(line, proxyAuthorizationPrefix),
			bytes.HasPrefix(line, contentLengthPrefix):
			continue
		default:
			dst = append(dst, line...)
		}
		dst = append(dst, crlf...)
	}
	if e.tmp.req.Branch.End == 0 || e.tmp.req.CSeq == 0 {
		return dst, nil, nil, false
	}
	return dst, uri, body, true
}

// The parts of a request sipedge built that appendByeAgain rewrites, as
// sipedge writes them.
var (
	crlf                     = []byte("\r\n")
	crlfcrlf                 = []byte("\r\n\r\n")
	space                    = []byte(" ")
	viaPrefix                = []byte("Via: ")
	branchParam              = []byte(";branch=")
	cseqPrefix               = []byte("CSeq: ")
	authorizationPrefix      = []byte("Authorization: ")
	proxyAuthorizationPrefix = []byte("Proxy-Authorization: ")
	contentLengthPrefix      = []byte("Content-Length: ")
)

// authLogInterval paces the warnings of challenges sipedge could not
// answer: a wrong password fails every call to the carrier, and one line a
// minute per shard says so as well as thousands.
const authLogInterval = time.Minute

// warnAuth warns that a carrier's challenge was the attempt's failure, at
// most once per authLogInterval; the lines it left out are counted in the
// next (and all of them in sipedge_carrier_auth_challenges_total). The
// call is named by idKey and callID: "call_id" and the caller's Call-ID,
// or "b_call_id" and the carrier's for a BYE, sent as the call ended.
func (e *Engine) warnAuth(t *carrier.Dial, idKey string, callID []byte, msg string, code int, challenge string) {
	if e.authLog.logged && e.now-e.authLog.at < authLogInterval {
		e.authLog.suppressed++
		return
	}
	e.env.Log.Warn(msg, "carrier", t.CarrierID, "group", t.Group, "code", code,
		"challenge", challenge, idKey, string(callID), "suppressed_since_last", e.authLog.suppressed)
	e.authLog.logged, e.authLog.at, e.authLog.suppressed = true, e.now, 0
}
