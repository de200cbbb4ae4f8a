package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/parser"
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
	a, ok := e.challengeOf(c, m, code, c.authTries)
	if !ok {
		return false
	}
	ainv := e.aInviteCopy(c)
	if ainv == nil {
		return false
	}
	c.authTries++
	if !e.sendInvite(c, ainv, a) {
		return false // logged; the challenge is the attempt's failure
	}
	e.m.authAnswered.Inc()
	return true
}

// challengeOf returns the challenge of the carrier's 401 or 407 m that
// sipedge answers with the account of c's gateway group, after tries
// answers to the request it challenges (the RFC 3261 22.2 loop guard: a
// second challenge only for a stale nonce); false, counted and warned of,
// when it answers none.
func (e *Engine) challengeOf(c *Call, m *parser.Message, code int, tries uint8) (*challenge, bool) {
	var (
		cr    digest.Credentials
		realm string
		ok    bool
	)
	if e.env.Credentials != nil {
		cr, realm, ok = e.env.Credentials(&c.target)
	}
	if !ok {
		e.m.authNoCredentials.Inc()
		return nil, false
	}
	a := &e.auth
	a.proxy, a.cr = code == 407, cr
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
		e.warnAuth(c, "carrier challenge sipedge cannot answer: no Digest challenge of a supported algorithm and the configured realm",
			code, string(m.Get(kind)))
		return nil, false
	case tries >= maxAuthTries || tries > 0 && !a.ch.Stale:
		e.m.authRefused.Inc()
		e.warnAuth(c, "carrier refused sipedge's credentials", code, string(m.Get(kind)))
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
	a, ok := e.challengeOf(c, m, code, r.authTries)
	if !ok {
		return false
	}
	r.authTries++
	req := &e.areq // the caller's request (parseRelayed)
	mf, present, _ := req.MaxForwards()
	if !present {
		mf = 70
	}
	B := &c.b
	B.cseq++
	b := e.appendRequestHead(e.out[:0], string(req.MethodBytes()), B, B.cseq, max(mf-1, 0))
	if dialogForming(req.Method()) {
		b = e.appendContact(b, B)
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
	e.out = appendBodyOf(b, req)
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

// authLogInterval paces the warnings of challenges sipedge could not
// answer: a wrong password fails every call to the carrier, and one line a
// minute per shard says so as well as thousands.
const authLogInterval = time.Minute

// warnAuth warns that a carrier's challenge was the attempt's failure, at
// most once per authLogInterval; the lines it left out are counted in the
// next (and all of them in sipedge_carrier_auth_challenges_total).
func (e *Engine) warnAuth(c *Call, msg string, code int, challenge string) {
	if e.authLogged && e.now-e.authLogAt < authLogInterval {
		e.authSuppressed++
		return
	}
	e.env.Log.Warn(msg, "carrier", c.target.CarrierID, "group", c.target.Group, "code", code,
		"challenge", challenge, "call_id", string(c.a.callID), "suppressed_since_last", e.authSuppressed)
	e.authLogged, e.authLogAt, e.authSuppressed = true, e.now, 0
}
