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

// appendCredentials appends the header answering a to the INVITE for uri
// with body (RFC 3261 22.2, 22.3).
func (a *challenge) appendCredentials(dst, uri, body []byte) []byte {
	if a.proxy {
		dst = append(dst, "Proxy-Authorization: "...)
	} else {
		dst = append(dst, "Authorization: "...)
	}
	var buf [16]byte
	cnonce := randomToken(buf[:0], 16)
	dst = digest.AppendAuthorization(dst, &a.ch, a.cr, inviteMethod, uri, body, cnonce, 1)
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
		return false
	}
	a := &e.auth
	a.proxy = code == 407
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
		return false
	case c.authTries >= maxAuthTries || c.authTries > 0 && !a.ch.Stale:
		e.m.authRefused.Inc()
		e.warnAuth(c, "carrier refused sipedge's credentials", code, string(m.Get(kind)))
		return false
	}
	ainv := e.aInviteCopy(c)
	if ainv == nil {
		return false
	}
	c.authTries++
	a.cr = cr
	if !e.sendInvite(c, ainv, a) {
		return false // logged; the challenge is the attempt's failure
	}
	e.m.authAnswered.Inc()
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
