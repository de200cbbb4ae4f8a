package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// dial sends the B-leg INVITE for c's target: a fresh Call-ID, From tag and
// CSeq (dialog hygiene: a carrier never sees a Call-ID another
// carrier saw), the caller's user re-hosted on sipedge's address, and the
// A INVITE's allowed headers and body. It reports false when the INVITE
// could not be sent.
func (e *Engine) dial(c *Call) bool {
	ainv := e.aInviteCopy(c)
	if ainv == nil {
		return false
	}
	B := &c.b
	e.unindexLeg(c, B)
	B.callID = e.env.MintCallID(B.callID[:0])
	B.localTag = randomToken(B.localTag[:0], 10)
	B.peer = c.att.dial.Peer
	B.cseq = 0
	c.att.authTries = 0
	e.indexLeg(c, B)
	return e.sendInvite(c, ainv, nil)
}

// sendInvite sends an INVITE in c's B-leg dialog (its Call-ID and From tag)
// with the next CSeq: the first, or the same request again with the
// credentials answering the carrier's challenge (RFC 3261 22.2).
func (e *Engine) sendInvite(c *Call, ainv *parser.Message, auth *challenge) bool {
	B := &c.b
	r := c.att.route
	id := &e.tmp.id
	e.shape(id, c, r)
	addressB(B, id, r, c.att.dial.URI, c.callerDisplay(), e.localHost(B.peer.Transport), c.attRedirected)
	// No early dialog yet (a challenged INVITE's ended with it), no remote
	// CSeq (RFC 3261 12.2.2).
	B.remoteTag, B.routes, B.acked = B.remoteTag[:0], B.routes[:0], false
	B.cseq++
	B.inviteCSeq, B.remoteCSeq = B.cseq, 0
	// Each B-leg early dialog gets its own A-leg To tag (RFC 3261 12.1.1:
	// the caller sees the carriers as forks).
	c.a.localTag = randomToken(c.a.localTag[:0], 10)
	if c.extra != nil {
		e.relNewDialog(c)
	}

	d := legDest(B)
	b := e.appendRequestHead(e.tmp.out[:0], "INVITE", B, &d, B.cseq, int(c.maxFwd))
	b = e.appendContact(b, B.peer.Transport)
	// A route's header replaces the caller's of the same name: its value
	// is the one the carrier reads.
	var routeHeaders map[string]string
	if r != nil {
		routeHeaders = r.Headers
	}
	uphold := e.cfg.SessionTimer.Uphold
	b = appendOwnSupported(b, c.offer100rel(), uphold)
	b = e.policy.appendAllowedExcept(b, ainv, identityHeaders|routeHeaderKinds(r), routeHeaders)
	if uphold {
		b = e.appendSessionRequest(b, c, sideB, true)
	}
	b = e.cfg.appendIdentity(b, id, B.peer.Transport)
	b = e.appendRouteHeaders(b, c, r)
	switch {
	case auth != nil:
		at := len(b)
		b = auth.appendCredentials(b, B.target, ainv.Body(), inviteMethod)
		// Kept for the ACK of its 2xx, which must repeat them (RFC 3261
		// 13.2.2.4).
		if B.ackCopy == nil {
			B.ackCopy = e.getBuf()
		}
		B.ackCopy = append(B.ackCopy[:0], b[at:]...)
	case B.ackAuth: // an earlier carrier's
		e.putBuf(B.ackCopy)
		B.ackCopy = nil
	}
	B.ackAuth = auth != nil
	b = appendBodyOf(b, ainv)
	e.tmp.out = b
	h, err := e.sendBuilt(B.peer)
	if err != nil {
		e.env.Log.Warn("cannot send B-leg INVITE", "err", err, "call_id", string(c.a.callID))
		return false
	}
	c.bTxn = h
	e.watch(h, c, roleBInvite, 0, -1)
	e.after()
	return true
}

// addressB writes the addresses of B-leg l, whose identity is id, to
// route r dialled at dialURI (carrier.Dial.URI): its Request-URI (target),
// To (remoteURI) and From (localURI, without its tag), display being the
// caller's display name (callerDisplay's form), local sipedge's host:port
// on l's transport; redirected keeps l's target, the carrier's Contact
// (followRedirect).
func addressB(l *leg, id *identity, r *route.Route, dialURI string, display []byte, local string, redirected bool) {
	host := trimScheme(dialURI)
	if r != nil && r.RURI != "" {
		// The route's own Request-URI (its ruri): its host, port
		// and parameters as given; its number, shaped, is in id.ruriUser.
		host = ruriHost(r.RURI)
	}
	if !redirected {
		l.target = append(l.target[:0], "sip:"...)
		l.target = append(l.target, id.ruriUser...)
		l.target = append(l.target, '@')
		l.target = append(l.target, host...)
	}
	// To carries the shaped number without the tech prefix.
	l.remoteURI = append(l.remoteURI[:0], "<sip:"...)
	l.remoteURI = append(l.remoteURI, id.callee...)
	l.remoteURI = append(l.remoteURI, '@')
	l.remoteURI = append(l.remoteURI, host...)
	l.remoteURI = append(l.remoteURI, '>')
	l.localURI = l.localURI[:0]
	if id.anon {
		l.localURI = append(l.localURI, `"Anonymous" <sip:anonymous@anonymous.invalid>`...)
		return
	}
	l.localURI = append(l.localURI, display...)
	l.localURI = append(l.localURI, "<sip:"...)
	l.localURI = append(l.localURI, id.caller...)
	if len(id.caller) > 0 {
		l.localURI = append(l.localURI, '@')
	}
	l.localURI = append(l.localURI, hostOnly(local)...)
	l.localURI = append(l.localURI, '>')
}

// callerDisplay returns the display name of the caller's From as
// appendNameAddr wrote it into a.remoteURI, quotes and trailing SP
// included, before <fromURI>: empty when there is none. The copy of the
// INVITE need not parse its From again.
func (c *Call) callerDisplay() []byte {
	return c.a.remoteURI[:len(c.a.remoteURI)-len(c.fromURI)-2]
}

// trimScheme returns "host:port;params" of "sip:host:port;params".
func trimScheme(uri string) string {
	for i := 0; i < len(uri); i++ {
		if uri[i] == ':' {
			return uri[i+1:]
		}
	}
	return uri
}

// hostOnly returns the host of "host:port".
func hostOnly(hp string) string {
	if len(hp) > 0 && hp[0] == '[' {
		for i := range hp {
			if hp[i] == ']' {
				return hp[:i+1]
			}
		}
		return hp
	}
	for i := len(hp) - 1; i >= 0; i-- {
		if hp[i] == ':' {
			return hp[:i]
		}
	}
	return hp
}

// pace reserves a slot of the carrier's calls-per-second budget (deferred
// to the next free slot while one comes within the account's max_wait)
// and dials now, later on the shard's wheel, or when an asynchronous
// reservation is posted back (Paced). Over the limit the carrier is burned without dialling, reason
// cps_limited, and its quality is not blamed: ok is false and the caller
// continues with the returned step.
func (e *Engine) pace(c *Call) (route.Step, bool) {
	p := e.env.Carriers.Pace(&c.att.dial, e.arg(c))
	switch {
	case p.Pending:
		c.att.pacing = true
		return route.Step{}, true
	case p.Over:
		e.m.cpsLimited.Inc()
		e.report(c, carrier.OutcomeAbandoned, 0) // the gateway picked was not tried: its trial goes back
		return c.seq.Undialable(e.now, route.ReasonCPSLimited), false
	case p.Wait > 0:
		c.att.pacing = true
		c.att.paceTimer = e.env.Clock.StartAt(e.now+p.Wait, timerPace, e.arg(c))
		return route.Step{}, true
	}
	return e.dialNow(c)
}

// Paced delivers an asynchronous CPS reservation for the call ref names.
func (e *Engine) Paced(ref uint64, p carrier.Pace, now time.Duration) {
	e.now = now
	c := e.callByArg(ref)
	if c == nil || !c.att.pacing || c.canceled {
		return
	}
	switch {
	case p.Over:
		c.att.pacing = false
		e.m.cpsLimited.Inc()
		e.report(c, carrier.OutcomeAbandoned, 0) // the gateway picked was not tried: its trial goes back
		e.carryOut(c, c.seq.Undialable(e.now, route.ReasonCPSLimited), nil)
	case p.Wait > 0:
		c.att.paceTimer = e.env.Clock.StartAt(e.now+p.Wait, timerPace, e.arg(c))
	default:
		e.paced(c)
	}
}

// stopPacing drops the wait for a CPS slot or a CPS-reject retry.
func (e *Engine) stopPacing(c *Call) {
	if c.att.paceTimer != 0 {
		e.env.Clock.Stop(c.att.paceTimer)
		c.att.paceTimer = 0
	}
	c.att.pacing = false
}

// paced dials a call whose slot has come.
func (e *Engine) paced(c *Call) {
	c.att.pacing, c.att.paceTimer = false, 0
	if st, ok := e.dialNow(c); !ok {
		e.carryOut(c, st, nil)
	}
}

// dialNow sends the B-leg INVITE and arms the carrier's deadline; when it
// cannot be sent the carrier is burned and ok is false.
func (e *Engine) dialNow(c *Call) (route.Step, bool) {
	if !e.dial(c) {
		e.report(c, carrier.OutcomeTransport, 0)
		return c.seq.Undialable(e.now, reasonSendFailed), false
	}
	c.seq.Dialed(e.now) // after a CPS wait: its times count from here
	c.att.dialed = e.now
	e.stopSequence(c)
	if c.att.wait >= 0 {
		c.att.timer = e.env.Clock.StartAt(e.now+c.att.wait, timerSequence, e.arg(c))
	}
	return route.Step{}, true
}

// reasonSendFailed is the attempt's reason when its INVITE could not be
// sent.
const reasonSendFailed = "send_failed"
