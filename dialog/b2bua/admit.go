package b2bua

import (
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// trunkOf returns the trunk a source address belongs to, nil if none, in
// the set loaded for the request being handled.
func (e *Engine) trunkOf(from transport.Peer) *Trunk { return e.trunks.set.Match(from.Addr) }

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
		e.tmp.out = appendResponse(e.tmp.out[:0], m, 403, "Forbidden", nil)
		e.env.Send(from, e.tmp.out)
	}
	return false
}

// sipScheme reports whether uri is a sip: or sips: URI (Validate parsed it
// whole already).
func sipScheme(uri []byte) bool {
	return len(uri) > 4 && equalFold(uri[:4], "sip:") || len(uri) > 5 && equalFold(uri[:5], "sips:")
}

// ReasonDraining is the reason phrase of the 503 that refuses a call
// while the engine drains (Env.Draining), and the final_reason of its CDR.
const ReasonDraining = "Draining"

// newCall takes an initial INVITE from a trunk (RFC 3261 13.3) and starts
// its B-leg.
func (e *Engine) newCall(m *parser.Message, a *txn.Action) {
	trunk := e.trunkOf(a.Peer)
	draining := e.env.Draining()
	switch {
	case trunk == nil: // admit let it through: RejectUnknown raced a config change
		e.respond(a.Txn, m, 403, "Forbidden", nil)
		return
	case e.calls.live > 0 && e.callOf(m.CallID()):
		// A Call-ID names one call: this INVITE is the live call's again on
		// another branch, a merged request (RFC 3261 8.2.2.2), or reuses a
		// Call-ID sipedge minted. A second call would dial the carrier
		// again and take the first one's Call-ID over.
		e.respond(a.Txn, m, 482, "Loop Detected", nil)
		return
	case e.cfg.MaxCalls > 0 && e.calls.live >= e.cfg.MaxCalls && !draining:
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
	if e.refuseInterval(a.Txn, m) { // a session interval below Min-SE: 422 (RFC 4028 9)
		return
	}
	// The trunk's concurrent calls, across the node's shards (or the
	// fleet's nodes): taken last, so that no refusal above has to give it
	// back.
	if !trunk.takeCall() {
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
		e.trunks.forced++
	}
	c.maxFwd = uint8(mf - 1) // Validate bounds Max-Forwards to 0-255; 0 was answered 483
	c.key = xxhash.Sum64(m.CallID())
	c.tInvite = e.now
	c.aTxn = a.Txn
	c.ainv = e.getMsg()
	c.aInvite = m.CopyTo(c.ainv, e.getBuf())
	// The trunk's numbers, in E.164 with a number policy: for routing, the
	// carriers (before their own policies) and the CDR.
	c.caller = trunk.Number(c.caller, fromURI.User)
	c.callee = trunk.Number(c.callee, ruri.User)
	c.fromURI = append(c.fromURI, from.URI...)
	e.callerRel(c, m)
	if e.cfg.SessionTimer.Uphold {
		e.sessionCall(c, m)
	}

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
	if m.Count(parser.HeaderRecordRoute) > 0 {
		A.firstRoute = uint16(len(m.Nth(parser.HeaderRecordRoute, 0))) // a header line is below 64 KiB
	}
	A.peer = e.replyTo(m, a.Peer)
	c.srcPort = a.Peer.Addr.Port()
	e.indexLeg(c, A)
	e.watch(a.Txn, c, roleAInvite, 0, -1)
	e.m.started.Inc()
	if draining {
		// Refused where routing would refuse it, with a CDR as those
		// calls get: 503 Draining, hung up by the system.
		e.m.rejected.Inc()
		c.hangup = cdr.HangupSystem
		e.failCall(c, 503, ReasonDraining, nil)
		return
	}

	// The request and the decision are the engine's scratch, not locals:
	// given to an interface's method, a local escapes, an allocation a call.
	rr, d := &e.tmp.rr, &e.tmp.dec
	e.routeRequest(rr, c, to.URI)
	if *d = e.env.Router.Route(rr); d.Pending {
		return // Decided carries on
	}
	e.decided(c, d)
}

// callOf reports whether callID names a live call's leg.
func (e *Engine) callOf(callID []byte) bool {
	c, _ := e.lookupCall(callID)
	return c != nil
}

// routeRequest describes call c, whose caller's To URI is to, in rr, for
// the Router and OnInvite. The dialled number is in E.164 when the trunk
// has a number policy (Trunk.Normalize), so that "+1202...", "1202..." and
// "001202..." find the same routes and cache entry.
func (e *Engine) routeRequest(rr *route.Request, c *Call, to []byte) {
	*rr = route.Request{Ref: e.arg(c), CallID: c.a.callID, Trunk: c.trunk.Name, TrunkGroup: c.trunk.Group,
		Attributes: c.trunk.Attributes, Dialed: c.callee, From: c.fromURI, To: to,
		Source: transport.Peer{Addr: c.sourceAddr(), Transport: c.a.peer.Transport}}
}

// Decided delivers the routing decision for the call Ref names, which the
// Router answered Pending: an LCR API lookup finished off the shard and was
// posted back. A call that ended meanwhile (the caller cancelled) ignores it.
func (e *Engine) Decided(ref uint64, d route.Decision, now time.Duration) {
	e.now = now
	if c := e.callByArg(ref); c != nil && c.state == stateRouting {
		e.tmp.dec = d
		e.decided(c, &e.tmp.dec)
	}
}

// decided carries out the routing decision d: reject, or start the
// carriers. d is the engine's scratch (see newCall); OnInvite may change it.
func (e *Engine) decided(c *Call, d *route.Decision) {
	if e.env.Policy.OnInvite != nil {
		var to parser.Address
		if ainv := e.aInviteCopy(c); ainv != nil {
			_ = ainv.To(&to)
		}
		rr := &e.tmp.rr
		e.routeRequest(rr, c, to.URI)
		if !e.onInvite(c, rr, d) {
			// The policy's verdict is unknown: the call routed without it
			// could go where the policy meant to refuse (a blocked
			// destination, a customer over its credit).
			*d = route.Decision{Code: 500, Reason: "Server Internal Error"}
		}
	}
	if d.Code != 0 || len(d.Routes) == 0 && d.Source == route.SourceNone {
		code, reason := d.Code, d.Reason
		if code == 0 {
			code, reason = 503, "Service Unavailable"
		}
		e.m.rejected.Inc()
		e.failCall(c, code, reason, nil)
		return
	}
	// The B-legs: the carriers one at a time, each a fresh dialog.
	c.state = stateEarly
	c.source = d.Source
	c.seq.Reset(e.order(c, d.Routes, 0), c.trunk.Sequence(e.cfg.Sequence, d))
	e.carryOut(c, c.seq.Next(e.now), nil)
}
