package b2bua

import (
	"math/bits"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// trunkOf returns the trunk a source address belongs to, nil if none, in
// the set loaded for the request being handled.
func (e *Engine) trunkOf(from transport.Peer) *Trunk { return e.set.Match(from.Addr) }

// isInitialInvite reports whether m is an INVITE outside a dialog.
func isInitialInvite(m *parser.Message) bool {
	if m.Method() != parser.MethodInvite {
		return false
	}
	var to parser.Address
	return m.To(&to) == nil && to.Tag == nil
}

// admit filters initial INVITEs by source before the transaction layer
// sees them, so that an unknown source gets nothing, not even a 100
// Trying. It reports whether the request goes on.
func (e *Engine) admit(m *parser.Message, from transport.Peer) bool {
	if !isInitialInvite(m) || e.trunkOf(from) != nil {
		return true
	}
	e.m.unknownSource.Inc()
	if e.cfg.RejectUnknown {
		e.out = appendResponse(e.out[:0], m, 403, "Forbidden", nil)
		e.env.Send(from, e.out)
	}
	return false
}

// onRequest handles a new server transaction.
func (e *Engine) onRequest(m *parser.Message, a *txn.Action) {
	switch m.Method() {
	case parser.MethodInvite:
		if isInitialInvite(m) {
			e.newCall(m, a)
			return
		}
	case parser.MethodCancel:
		e.onCancel(m, a)
		return
	}
	e.inDialog(m, a)
}

// respond sends sipedge's own response on server transaction h.
func (e *Engine) respond(h txn.Handle, req *parser.Message, code int, reason string, toTag []byte) {
	e.out = appendResponse(e.out[:0], req, code, reason, e.tagFor(toTag))
	if err := e.txns.Respond(h, e.out, e.now); err == nil {
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
	e.tag = randomToken(e.tag[:0], 10)
	return e.tag
}

// respondLimited refuses a call over an ingress limit: 503 with
// Retry-After (RFC 3261 21.5.4), before any routing work.
func (e *Engine) respondLimited(h txn.Handle, req *parser.Message, retry time.Duration) {
	e.respondRetry(h, req, 503, "Service Unavailable", max(int(retry/time.Second), 1))
}

// respondRetry answers on server transaction h with code and a
// Retry-After of secs seconds (RFC 3261 20.33).
func (e *Engine) respondRetry(h txn.Handle, req *parser.Message, code int, reason string, secs int) {
	b := parser.AppendResponse(e.out[:0], req, code, reason, e.tagFor(nil))
	b = parser.AppendHeaderUint(b, "Retry-After", uint64(secs))
	e.out = parser.AppendBody(b, "", nil)
	if e.txns.Respond(h, e.out, e.now) == nil {
		e.after()
	}
}

// sipScheme reports whether uri is a sip: or sips: URI (Validate parsed it
// whole already).
func sipScheme(uri []byte) bool {
	return len(uri) > 4 && equalFold(uri[:4], "sip:") || len(uri) > 5 && equalFold(uri[:5], "sips:")
}

// newCall takes an initial INVITE from a trunk (RFC 3261 13.3) and starts
// its B-leg.
func (e *Engine) newCall(m *parser.Message, a *txn.Action) {
	trunk := e.trunkOf(a.Peer)
	switch {
	case trunk == nil: // admit let it through: RejectUnknown raced a config change
		e.respond(a.Txn, m, 403, "Forbidden", nil)
		return
	case e.live > 0 && e.callOf(m.CallID()):
		// A Call-ID names one call: this INVITE is the live call's again on
		// another branch, a merged request (RFC 3261 8.2.2.2), or reuses a
		// Call-ID sipedge minted. A second call would dial the carrier
		// again and take the first one's Call-ID over.
		e.respond(a.Txn, m, 482, "Loop Detected", nil)
		return
	case e.env.Draining():
		e.m.rejected.Inc()
		e.respond(a.Txn, m, 503, "Service Unavailable", nil)
		return
	case e.cfg.MaxCalls > 0 && e.live >= e.cfg.MaxCalls:
		e.m.rejected.Inc()
		e.respond(a.Txn, m, 503, "Service Unavailable", nil)
		return
	}
	if !trunk.admit(e.now) {
		e.m.trunkLimited.Inc()
		e.respondLimited(a.Txn, m, ingressRetry)
		return
	}
	mf, present, _ := m.MaxForwards()
	if !present {
		mf = 70
	}
	if mf == 0 { // RFC 3261 16.3 step 3: forwarding would take it below zero
		e.respond(a.Txn, m, 483, "Too Many Hops", nil)
		return
	}
	var ruri parser.URI
	var from, to, contact parser.Address
	if parser.ParseURI(m.RequestURI(), &ruri) != nil || m.From(&from) != nil || m.To(&to) != nil {
		e.respond(a.Txn, m, 400, "Bad Request", nil)
		return
	}
	// The caller's Contact is where the A-leg's in-dialog requests go: an
	// INVITE must carry exactly one SIP URI there (RFC 3261 8.1.1.8).
	if m.Count(parser.HeaderContact) != 1 || m.Contact(0, &contact) != nil || contact.Star || !sipScheme(contact.URI) {
		e.respond(a.Txn, m, 400, "Missing Contact", nil)
		return
	}
	if len(ruri.User) == 0 {
		e.respond(a.Txn, m, 404, "Not Found", nil)
		return
	}
	// The trunk's concurrent calls, across the node's shards: taken last,
	// so that no refusal above has to give it back.
	if n := trunk.Stats.Calls.Add(1); trunk.MaxCalls > 0 && n > int64(trunk.MaxCalls) {
		trunk.Stats.Calls.Add(-1)
		trunk.Stats.Refused.Add(1)
		e.m.trunkLimited.Inc()
		e.respondLimited(a.Txn, m, time.Second)
		return
	}
	var fromURI parser.URI
	_ = from.ParseURI(&fromURI)
	_, c := e.allocCall()
	c.state = stateRouting
	c.trunk = trunk
	if trunk.ForceRPort {
		e.forcedCalls++
	}
	c.maxFwd = uint8(mf - 1) // Validate bounds Max-Forwards to 0-255; 0 was answered 483
	c.key = xxhash.Sum64(m.CallID())
	c.tInvite = e.now
	c.aTxn = a.Txn
	c.ainv = e.getMsg()
	c.aInvite = m.CopyTo(c.ainv, e.getBuf())
	if n := trunk.Normalize; n != nil {
		// The trunk's numbers in E.164, for routing, the carriers (before
		// their own policies) and the CDR.
		c.caller = n.Shape(c.caller, fromURI.User)
		c.callee = n.Shape(c.callee, ruri.User)
	} else {
		c.caller = append(c.caller, fromURI.User...)
		c.callee = append(c.callee, ruri.User...)
	}
	c.fromURI = append(c.fromURI, from.URI...)

	// The A-leg: sipedge is the UAS (RFC 3261 12.1.1).
	A := &c.a
	A.callID = append(A.callID, m.CallID()...)
	A.remoteTag = append(A.remoteTag, from.Tag...)
	A.remoteURI = appendNameAddr(A.remoteURI, &from)
	if cseq, err := m.CSeq(); err == nil {
		A.remoteCSeq = cseq.Num
	}
	A.localURI = appendNameAddr(A.localURI, &to)
	A.localTag = randomToken(A.localTag, 10)
	A.target = append(A.target, contact.URI...)
	A.routes = appendRouteSet(A.routes, m, false)
	A.peer = e.replyTo(m, a.Peer)
	c.srcPort = a.Peer.Addr.Port()
	e.indexLeg(c, A)
	e.watch(a.Txn, c, roleAInvite, 0, -1)
	e.m.started.Inc()

	e.rr = e.routeRequest(c, to.URI)
	e.dec = e.env.Router.Route(&e.rr)
	if e.dec.Pending {
		return // Decided carries on
	}
	e.decided(c)
}

// callOf reports whether callID names a live call's leg.
func (e *Engine) callOf(callID []byte) bool {
	c, _ := e.lookupCall(callID)
	return c != nil
}

// routeRequest describes call c, whose caller's To URI is to, to the
// Router. The dialled number is in E.164 when the trunk has a number policy
// (Trunk.Normalize), so that "+1202...", "1202..." and "001202..." find the
// same routes and cache entry.
func (e *Engine) routeRequest(c *Call, to []byte) route.Request {
	return route.Request{Ref: e.arg(c), CallID: c.a.callID, Trunk: c.trunk.Name, TrunkGroup: c.trunk.Group,
		Attributes: c.trunk.Attributes, Dialed: c.callee, From: c.fromURI, To: to,
		Source: transport.Peer{Addr: c.sourceAddr(), Transport: c.a.peer.Transport}}
}

// Decided delivers the routing decision for the call Ref names, which the
// Router answered Pending: an LCR API lookup finished off the shard and was
// posted back. A call that ended meanwhile (the caller cancelled) ignores it.
func (e *Engine) Decided(ref uint64, d route.Decision, now time.Duration) {
	e.now = now
	if c := e.callByArg(ref); c != nil && c.state == stateRouting {
		e.dec = d
		e.decided(c)
	}
}

// decided carries out the routing decision in e.dec: reject, or start the
// carriers.
func (e *Engine) decided(c *Call) {
	d := &e.dec
	if e.env.Policy.OnInvite != nil {
		var to parser.Address
		if ainv := e.aInviteCopy(c); ainv != nil {
			_ = ainv.To(&to)
		}
		e.rr = e.routeRequest(c, to.URI)
		e.env.Policy.OnInvite(&e.rr, d)
	}
	if d.Code != 0 || len(d.Routes) == 0 && d.Source == route.SourceNone {
		code, reason := d.Code, d.Reason
		if code == 0 {
			code, reason = 503, "Service Unavailable"
		}
		e.m.rejected.Inc()
		e.failCall(c, code, reason)
		return
	}
	// The B-legs: the carriers one at a time, each a fresh dialog.
	c.state = stateEarly
	c.source = d.Source
	c.seq.Reset(d.Routes, e.cfg.Sequence)
	e.carryOut(c, c.seq.Next(e.now))
}

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
	id := &e.id
	e.shape(id, c, r)
	host := trimScheme(c.att.dial.URI)
	if r != nil && r.RURI != "" {
		// The route's own Request-URI (its ruri): its host, port
		// and parameters as given; its number, shaped, is in id.ruriUser.
		host = ruriHost(r.RURI)
	}
	B.target = append(B.target[:0], "sip:"...)
	B.target = append(B.target, id.ruriUser...)
	B.target = append(B.target, '@')
	B.target = append(B.target, host...)
	// To carries the shaped number without the tech prefix.
	B.remoteURI = append(B.remoteURI[:0], "<sip:"...)
	B.remoteURI = append(B.remoteURI, id.callee...)
	B.remoteURI = append(B.remoteURI, '@')
	B.remoteURI = append(B.remoteURI, host...)
	B.remoteURI = append(B.remoteURI, '>')
	B.localURI = B.localURI[:0]
	if id.anon {
		B.localURI = append(B.localURI, `"Anonymous" <sip:anonymous@anonymous.invalid>`...)
	} else {
		B.localURI = append(B.localURI, c.callerDisplay()...)
		B.localURI = append(B.localURI, "<sip:"...)
		B.localURI = append(B.localURI, id.caller...)
		if len(id.caller) > 0 {
			B.localURI = append(B.localURI, '@')
		}
		B.localURI = append(B.localURI, hostOnly(e.localHost(B))...)
		B.localURI = append(B.localURI, '>')
	}
	// No early dialog yet (a challenged INVITE's ended with it), no remote
	// CSeq (RFC 3261 12.2.2).
	B.remoteTag, B.routes, B.acked = B.remoteTag[:0], B.routes[:0], false
	B.cseq++
	B.inviteCSeq, B.remoteCSeq = B.cseq, 0
	// Each B-leg early dialog gets its own A-leg To tag (RFC 3261 12.1.1:
	// the caller sees the carriers as forks).
	c.a.localTag = randomToken(c.a.localTag[:0], 10)

	b := e.appendRequestHead(e.out[:0], "INVITE", B, B.cseq, int(c.maxFwd))
	b = e.appendContact(b, B)
	// A route's header replaces the caller's of the same name: its value
	// is the one the carrier reads.
	var routeHeaders map[string]string
	if r != nil {
		routeHeaders = r.Headers
	}
	b = e.policy.appendAllowedExcept(b, ainv, identityHeaders|routeHeaderKinds(r), routeHeaders)
	b = e.appendIdentity(b, id, B, ainv)
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
	e.out = b
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

// failCall answers the caller with code and ends the call.
func (e *Engine) failCall(c *Call, code int, reason string) {
	if code == 401 || code == 407 {
		// A carrier's challenge was for sipedge's account with it, which
		// the caller cannot answer; and a 401 or 407 without its challenge
		// would break RFC 3261 22.1. sipedge does not challenge callers.
		code, reason = 403, "Forbidden"
	}
	c.finalCode, c.finalReason = code, append(c.finalReason[:0], reason...)
	if req := c.ainv; req != nil && !c.canceled {
		if f := e.failure; f != nil && f.StatusCode() == code {
			// The carrier's failure reaches the caller as it is, with the
			// headers the policy relays: a 422's Min-SE (RFC 4028 6), a
			// Retry-After, a Reason (RFC 3326). Not its body: an error
			// text may name the carrier's network.
			b := parser.AppendResponse(e.out[:0], req, code, string(f.ReasonPhrase()), c.a.localTag)
			b = e.policy.appendAllowed(b, f)
			e.out = parser.AppendBody(b, "", nil)
			if e.txns.Respond(c.aTxn, e.out, e.now) == nil {
				e.after()
			}
		} else {
			e.respond(c.aTxn, req, code, reason, c.a.localTag)
		}
	}
	e.end(c, cdr.HangupNone)
}

// onBInviteResponse handles a response to a B-leg INVITE: the current
// carrier's feeds the failover sequence; a burned carrier's 2xx is ACKed
// and BYEd (RFC 3261 13.2.2.4 leaves it a dialog to end), the rest ignored.
func (e *Engine) onBInviteResponse(c *Call, m *parser.Message, h txn.Handle, peer transport.Peer) {
	code := m.StatusCode()
	if h != c.bTxn || c.canceled {
		if code >= 200 && code < 300 {
			e.endUnwanted(c, m, peer, false)
		}
		if h == c.bTxn && code >= 200 {
			e.end(c, cdr.HangupCaller) // the caller cancelled; the carrier has answered
		}
		return
	}
	var to parser.Address
	_ = m.To(&to)
	switch {
	case code == 100: // hop by hop: not progress (RFC 3261 16.7 step 2)
		c.att.trying = true // but the gateway is alive
		return
	case code < 200:
		if c.tProvisional == 0 {
			c.tProvisional = e.now
		}
		if len(to.Tag) > 0 && string(to.Tag) != string(c.b.remoteTag) {
			// A new early dialog: its remote target and route set are the
			// 1xx's (RFC 3261 12.1.2), for requests sent in it (UPDATE).
			e.confirmLeg(&c.b, m)
		}
		c.att.progress = true
		e.relayToCaller(c, m)
		e.carryOut(c, c.seq.Progress(e.now, code))
	case code < 300:
		if c.answered {
			if string(to.Tag) == string(c.b.remoteTag) {
				// A retransmission of the 2xx (RFC 6026 Timer M): the ACK
				// was lost, or the caller has not ACKed yet.
				if cseq, err := m.CSeq(); err == nil {
					e.ackAgain(&c.b, cseq.Num)
				}
				return
			}
			// A second dialog from a forking carrier: ACK and BYE it.
			e.endUnwanted(c, m, peer, false)
			return
		}
		e.confirmLeg(&c.b, m)
		e.report(c, code, 0)
		c.answered = true
		c.state = stateConfirmed
		c.tAnswer = e.now
		if c.tProvisional == 0 {
			c.tProvisional = e.now
		}
		c.finalCode, c.finalReason = code, append(c.finalReason[:0], m.ReasonPhrase()...)
		e.carryOut(c, c.seq.Final(e.now, code, ""))
		e.relayToCaller(c, m)
		if e.cfg.MaxDuration > 0 {
			c.maxDur = e.env.Clock.StartAt(e.now+e.cfg.MaxDuration, timerMaxDuration, e.arg(c))
		}
		e.m.answered.Inc()
	default:
		// The transaction layer ACKs the failure (RFC 3261 17.1.1.3); the
		// sequence decides between the next carrier and the caller.
		c.bTxn = 0
		if (code == 401 || code == 407) && e.answerChallenge(c, m, code) {
			return
		}
		cpsReject := false
		// After a 101-199 the carrier had taken the call: its failure is
		// no CPS reject, and a retry would ring the callee again from a
		// sequence that has moved on from dialling (route.Sequence).
		if !c.att.progress {
			delay, ok := e.env.Carriers.CPSReject(&c.att.dial, code, m.ReasonPhrase(), m.Get(parser.HeaderReason))
			cpsReject = ok
			if ok && c.att.cpsRetries < MaxCPSRetries {
				// The carrier refused the call over its CPS limit: not its
				// fault; retry it after the delay on a fresh B-leg.
				c.att.cpsRetries++
				c.att.trying = false // the retry's fresh B-leg has sent no 100 yet
				e.m.cpsRejects.Inc()
				c.att.paceTimer = e.env.Clock.StartAt(e.now+delay, timerPace, e.arg(c))
				return
			}
		}
		var retry time.Duration
		if ra, ok, err := m.RetryAfter(); ok && err == nil {
			retry = time.Duration(ra.Seconds) * time.Second
		}
		if cpsReject {
			// Retries used up: the carrier's CPS limit, not its health (a
			// 503 would put the gateway in cooldown).
			e.report(c, carrier.OutcomeAbandoned, 0)
		} else {
			e.report(c, code, retry)
		}
		e.failure = m
		e.carryOut(c, c.seq.Final(e.now, code, phrase(code, m.ReasonPhrase())))
		e.failure = nil
	}
}

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
			e.scratch.reset()
			e.legFromResponse(&e.scratch, m, peer)
			e.ack(&e.scratch, nil) // a retransmission: ACKed again, not BYEd again
			return
		}
	}
	if free < 0 && stray {
		e.m.teardownsOverCap.Inc()
		return
	}
	e.scratch.reset()
	e.legFromResponse(&e.scratch, m, peer)
	if len(e.scratch.target) == 0 {
		return // no SIP Contact: nowhere to address the ACK and BYE
	}
	e.m.lateAnswers.Inc()
	if stray {
		e.m.strayAnswers.Inc()
	}
	e.ack(&e.scratch, nil)
	if h := e.sendBye(c, &e.scratch, nil); h != 0 && free >= 0 {
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

// confirmLeg records the B-leg dialog a 2xx, or a 1xx for an early
// dialog, establishes (RFC 3261 12.1.2).
func (e *Engine) confirmLeg(B *leg, m *parser.Message) {
	var to parser.Address
	_ = m.To(&to)
	B.remoteTag = append(B.remoteTag[:0], to.Tag...)
	refreshTarget(B, m) // without a SIP Contact the Request-URI stays the target
	B.routes = appendRouteSet(B.routes[:0], m, true)
}

// relayToCaller answers the caller's INVITE with the B-leg's response.
func (e *Engine) relayToCaller(c *Call, resp *parser.Message) {
	req := e.aInviteCopy(c)
	if req == nil {
		return
	}
	e.out = e.appendRelayedResponse(e.out[:0], req, resp, c.a.localTag, &c.a)
	if resp.StatusCode() >= 200 && resp.StatusCode() < 300 {
		if c.ok2xx == nil {
			c.ok2xx = e.getBuf()
		}
		c.ok2xx = append(c.ok2xx[:0], e.out...)
		e.start2xx(c, sideA, req)
	}
	if err := e.txns.Respond(c.aTxn, e.out, e.now); err == nil {
		e.after()
	}
}

// aInviteCopy returns the caller's INVITE, parsed when the call began (nil
// once the caller has ACKed the 2xx and it is no longer needed).
func (e *Engine) aInviteCopy(c *Call) *parser.Message { return c.ainv }

// releaseInvite returns the call's copy of the caller's INVITE to the pools.
func (e *Engine) releaseInvite(c *Call) {
	e.putBuf(c.aInvite)
	if c.ainv != nil {
		e.msgs = append(e.msgs, c.ainv)
	}
	c.aInvite, c.ainv = nil, nil
}

// getMsg takes a parsed-message holder from the engine's pool.
func (e *Engine) getMsg() *parser.Message {
	if n := len(e.msgs); n > 0 {
		m := e.msgs[n-1]
		e.msgs = e.msgs[:n-1]
		return m
	}
	return new(parser.Message)
}

// start2xx begins retransmitting the 2xx in c.ok2xx to side to, which sent
// invite, until its ACK (RFC 3261 13.3.1.4): from T1, doubling up to
// T2, for 64*T1.
func (e *Engine) start2xx(c *Call, to side, invite *parser.Message) {
	if c.rtx != 0 {
		e.env.Clock.Stop(c.rtx)
	}
	c.rtxTo = to
	if cseq, err := invite.CSeq(); err == nil {
		c.rtxCSeq = cseq.Num
	}
	c.rtxWait = e.t1()
	c.rtxEnd = e.now + 64*e.t1()
	c.rtx = e.env.Clock.StartAt(e.now+c.rtxWait, timer2xx, e.arg(c))
}

func (e *Engine) retransmit2xx(c *Call) {
	c.rtx = 0
	if len(c.ok2xx) == 0 {
		return
	}
	if e.now >= c.rtxEnd {
		// No ACK: "the session SHOULD be terminated" (RFC 3261 13.3.1.4).
		e.env.Log.Info("no ACK for the 2xx; ending the call", "call_id", string(c.a.callID))
		if c.byeOnAck { // the other side has hung up already
			e.sendBye(c, c.leg(c.rtxTo), nil)
			e.end(c, cdr.HangupNone)
			return
		}
		e.hangup(c, cdr.HangupSystem)
		return
	}
	e.m.retransmitted2xx.Inc()
	e.env.Send(c.leg(c.rtxTo).peer, c.ok2xx)
	c.rtxWait = min(2*c.rtxWait, e.t2())
	c.rtx = e.env.Clock.StartAt(e.now+c.rtxWait, timer2xx, e.arg(c))
}

func (e *Engine) t1() (d time.Duration) {
	if d = e.cfg.Txn.T1; d == 0 {
		d = txn.DefaultT1
	}
	return d
}

func (e *Engine) t2() (d time.Duration) {
	if d = e.cfg.Txn.T2; d == 0 {
		d = txn.DefaultT2
	}
	return d
}

// onAck handles the ACK for a 2xx (RFC 3261 13.2.2.4): the caller's ACK
// stops the 2xx retransmissions and sends the B-leg's ACK; an ACK from the
// B side for a 2xx it got from a relayed re-INVITE goes to the caller.
func (e *Engine) onAck(m *parser.Message, _ *txn.Action) {
	c, s := e.lookupCall(m.CallID())
	if c == nil || !c.answered {
		return // no 2xx of ours to acknowledge: a stray ACK (RFC 3261 17.2.3)
	}
	var to parser.Address
	if m.To(&to) != nil || string(to.Tag) != string(c.leg(s).localTag) {
		return // not in this dialog
	}
	if s == c.rtxTo && len(c.ok2xx) > 0 {
		if cseq, err := m.CSeq(); err != nil || cseq.Num != c.rtxCSeq {
			// An ACK is for the INVITE its CSeq names (RFC 3261 13.2.2.4):
			// a late duplicate of an earlier one's acknowledges nothing.
			return
		}
		// The 2xx sipedge retransmits went to s, which sent the INVITE: it
		// arrived. The INVITE and its 2xx are no longer needed, and a held
		// call keeps no copy of them.
		if c.rtx != 0 {
			e.env.Clock.Stop(c.rtx)
			c.rtx = 0
		}
		e.putBuf(c.ok2xx)
		c.ok2xx = nil
	}
	if s == sideA {
		e.releaseInvite(c)
	}
	// The other side's 2xx, which sipedge relayed, is ACKed on its leg.
	e.ack(c.leg(opposite(s)), m)
	if c.byeOnAck && s == c.rtxTo {
		// The other side hung up while this one's ACK was awaited.
		e.sendBye(c, c.leg(s), nil)
		e.end(c, cdr.HangupNone)
	}
}

// ack sends the ACK for the 2xx to leg l's last INVITE, with the body of
// from, the other side's ACK (a late SDP answer), when there is one. An ACK
// for a 2xx is a transaction of its own (RFC 3261 13.2.2.4, 17.1.1.3): a
// retransmitted 2xx is ACKed again with a rebuilt one.
func (e *Engine) ack(l *leg, from *parser.Message) {
	b := e.appendRequestHead(e.out[:0], "ACK", l, l.inviteCSeq, 70)
	auth := l.ackAuth
	if auth {
		b = append(b, l.ackCopy...) // the INVITE's credentials (RFC 3261 13.2.2.4)
	}
	e.out = appendBodyOf(b, from)
	l.acked, l.ackAuth = true, false
	e.keepAck(l, from, auth)
	e.env.Send(l.peer, e.out)
}

// ackAgain answers a retransmission of a 2xx to an INVITE of leg l's
// dialog with CSeq cseq, whose ACK was lost (RFC 3261 13.2.2.4): the ACK
// again once sipedge has sent it. The 2xx of an INVITE before l's last
// (a re-INVITE followed it, so it was ACKed, RFC 3261 14.1) gets an ACK
// of its own CSeq, which is what the peer matches it by.
func (e *Engine) ackAgain(l *leg, cseq uint32) {
	switch {
	case cseq == l.inviteCSeq:
		if l.acked {
			e.reack(l)
		}
	case cseq < l.inviteCSeq:
		b := e.appendRequestHead(e.out[:0], "ACK", l, cseq, 70)
		e.out = parser.AppendBody(b, "", nil)
		e.env.Send(l.peer, e.out)
	}
}

// reack ACKs again the retransmitted 2xx to leg l's last INVITE: the same
// ACK when it carried a body, since a 2xx with an offer must have its
// answer in the ACK (RFC 3261 13.2.2.4) and the peer missed the first, or
// the INVITE's credentials, which are not kept apart once sent. While
// ackAuth is set no ACK was built yet and ackCopy holds only the
// credentials: a challenged re-INVITE's late 2xx, after its relay failed,
// gets its first ACK here.
func (e *Engine) reack(l *leg) {
	if len(l.ackCopy) > 0 && !l.ackAuth {
		e.env.Send(l.peer, l.ackCopy)
		return
	}
	e.ack(l, nil)
}

// keepAck keeps the ACK in e.out for leg l when from, the other side's
// ACK it relays, had a body, or when it carried credentials (auth); else
// l keeps none.
func (e *Engine) keepAck(l *leg, from *parser.Message, auth bool) {
	switch {
	case auth || from != nil && len(from.Body()) > 0:
		if l.ackCopy == nil {
			l.ackCopy = e.getBuf()
		}
		l.ackCopy = append(l.ackCopy[:0], e.out...)
	case l.ackCopy != nil:
		e.putBuf(l.ackCopy)
		l.ackCopy = nil
	}
}

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
	// that has sent its final response and outlived its call.
	e.respond(a.Txn, m, 200, "OK", nil)
	if c == nil || role.kind != roleAInvite || c.answered || c.canceled {
		return
	}
	if c.state == stateRouting { // no carrier dialled yet
		c.hangup = cdr.HangupCaller
		e.failCall(c, 487, "Request Terminated")
		return
	}
	c.finalCode, c.finalReason = 487, append(c.finalReason[:0], "Request Terminated"...)
	c.hangup = cdr.HangupCaller
	if req := e.aInviteCopy(c); req != nil {
		e.respond(c.aTxn, req, 487, "Request Terminated", c.a.localTag)
	}
	e.abandon(c, m)
}

// cancelHeaders returns the header lines of cancel, the caller's CANCEL,
// that go on the CANCEL sipedge sends on the other leg: its Reason (RFC
// 3326 2; "Call completed elsewhere" keeps the callee from showing a missed
// call) when the header policy allows Reason. The rest of a CANCEL is its
// INVITE's (RFC 3261 9.1). The lines are in e.out, for CancelWith to copy.
func (e *Engine) cancelHeaders(cancel *parser.Message) []byte {
	if !e.policy.kinds.Has(parser.HeaderReason) {
		return nil
	}
	e.out = e.out[:0]
	for i := 0; i < cancel.Count(parser.HeaderReason); i++ {
		e.out = append(e.out, "Reason: "...)
		e.out = appendUnfolded(e.out, cancel.Nth(parser.HeaderReason, i))
		e.out = append(e.out, "\r\n"...)
	}
	return e.out
}

// abandon stops the sequence because the caller gave up with cancel, its
// CANCEL: the carrier in flight is cancelled (RFC 3261 9.1) and the call
// ends with its final response, so that a 2xx crossing the CANCEL is ACKed
// and BYEd.
func (e *Engine) abandon(c *Call, cancel *parser.Message) {
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
	if c.bTxn != 0 {
		if err := e.txns.CancelWith(c.bTxn, e.cancelHeaders(cancel), e.now); err == nil {
			e.after()
			return
		}
	}
	e.end(c, cdr.HangupCaller)
}

// phrase returns a carrier's reason phrase as a string, without a copy when
// it is the usual one for its code (RFC 3261 21): the failures a failover
// sees are mostly those, and the sequence keeps the phrase for the CDR.
func phrase(code int, b []byte) string {
	var usual string
	switch code {
	case 403:
		usual = "Forbidden"
	case 404:
		usual = "Not Found"
	case 408:
		usual = "Request Timeout"
	case 480:
		usual = "Temporarily Unavailable"
	case 486:
		usual = "Busy Here"
	case 487:
		usual = "Request Terminated"
	case 500:
		usual = "Server Internal Error"
	case 502:
		usual = "Bad Gateway"
	case 503:
		usual = "Service Unavailable"
	case 504:
		usual = "Server Time-out"
	case 603:
		usual = "Decline"
	}
	if string(b) == usual {
		return usual
	}
	return string(b)
}
