package b2bua

import (
	"net/netip"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

type side uint8

const (
	sideA side = iota + 1
	sideB
)

type callState uint8

const (
	stateFree      callState = iota
	stateRouting             // waiting for the routing decision
	stateEarly               // INVITE sent on the B-leg, no final response yet
	stateConfirmed           // answered
	stateEnding              // BYE sent; waiting for the other side
)

// leg is one dialog of a call, seen from sipedge.
type leg struct {
	callID    []byte
	localTag  []byte
	remoteTag []byte
	localURI  []byte // our side's name-addr, without tag (B: From; A: the caller's To)
	remoteURI []byte // the peer's name-addr, without tag
	target    []byte // the peer's Contact URI: the Request-URI of requests on this leg
	routes    []byte // the route set, as Route header values joined with ", "
	ackCopy   []byte // the ACK below when it carried a body (an SDP answer) or credentials, to send again; or see ackAuth (a pooled buffer)
	// peer is where requests on the leg go: the carrier's gateway; on the
	// caller's leg, where responses to its INVITE went (txn.ReplyTo), and
	// requests only when callerDest can do no better.
	peer       transport.Peer
	cseq       uint32 // the CSeq of the last request sipedge sent on this leg
	inviteCSeq uint32 // the CSeq of the last INVITE sipedge sent on this leg, for its ACK
	remoteCSeq uint32 // the CSeq of the last request the peer sent on this leg; 0: none yet
	firstRoute uint16 // the caller's leg: the length of the first value in routes (callerDest)
	acked      bool   // sipedge has ACKed the 2xx to that INVITE; its retransmissions are ACKed again
	ackAuth    bool   // ackCopy holds the credentials lines of that INVITE, not yet ACKed: its ACK repeats them (RFC 3261 13.2.2.4)
}

func (l *leg) reset() {
	l.callID, l.localTag, l.remoteTag = l.callID[:0], l.localTag[:0], l.remoteTag[:0]
	l.localURI, l.remoteURI, l.target, l.routes = l.localURI[:0], l.remoteURI[:0], l.target[:0], l.routes[:0]
	l.cseq, l.inviteCSeq, l.peer, l.acked, l.ackAuth, l.firstRoute = 0, 0, transport.Peer{}, false, false, 0
	l.remoteCSeq = 0 // empty: the next dialog's first request sets it (RFC 3261 12.2.2)
}

// relay is an in-dialog request in flight from one leg to the other.
type relay struct {
	in, out txn.Handle
	req     []byte // the request as received, to answer it
	// Where req came from, for the answer's Via (parser.Message.SetSource);
	// a port of 0 when unknown. Not a netip.AddrPort, which takes more
	// room with its padding: every call holds its relays.
	srcIP     [16]byte
	srcPort   uint16
	from      side
	method    parser.Method
	authTries uint8 // the carrier's challenges to it answered (answerRelayChallenge)
}

// setRelayed records m, a request received, in r.
func (r *relay) setRelayed(m *parser.Message) {
	src := m.Source()
	r.req, r.method, r.authTries = append(r.req[:0], m.Bytes()...), m.Method(), 0
	r.srcIP, r.srcPort = src.Addr().As16(), src.Port()
}

// parseRelayed parses r's request into e.tmp.areq, to answer it.
func (e *Engine) parseRelayed(r *relay) error {
	if err := e.tmp.areq.Parse(r.req); err != nil {
		return err
	}
	if r.srcPort != 0 {
		e.tmp.areq.SetSource(netip.AddrPortFrom(netip.AddrFrom16(r.srcIP), r.srcPort))
	}
	return nil
}

const maxRelays = 2 // in-dialog requests in flight per call; more get 500 (RFC 3261 14.2)

// Call is one call: the caller's dialog (A) and the carrier's (B). Its
// byte slices keep their capacity across reuse, so a warm engine allocates
// nothing per call.
type Call struct {
	// What a call's end keeps for the next call in the slot: its place,
	// and the byte slices, reset in place (end).
	idx    int32 // in Engine.calls
	gen    uint32
	a, b   leg
	seq    route.Sequence // the carriers to try (docs/design/lcr.md 3)
	relays [maxRelays]relay
	// CDR facts (with those in callVars).
	finalReason    []byte
	caller, callee []byte
	fromURI        []byte

	callVars // the rest, zeroed by end in one store
}

// callVars are the fields of a Call that start each call zeroed.
type callVars struct {
	next    int32
	state   callState
	hangup  cdr.HangupSide // who ended the call, for the CDR
	srcPort uint16         // the caller's INVITE's source port (a.peer has the reply port)
	trunk   *Trunk
	att     attempt      // the carrier in flight, or the last one dialled
	source  route.Source // where the decision came from
	ended   endReason    // why sipedge ended the call itself, for the CDR
	// Of the carrier in flight too, reset with att (Engine.carryOut), but
	// here: in attempt they would take the Call past its size class.
	attRedirected      bool   // a 3xx sent it on to another member of its group (followRedirect)
	attIntervalRetried bool   // its 422 was answered with a longer session interval (retryInterval)
	key                uint64 // spreads hash selection of gateways per call

	// The small fields, together: each Call is a heap object of its own,
	// and its size class decides ConcurrentCalls' bytes per call.
	canceled     bool    // the caller cancelled, or the call no longer wants the B-leg
	answered     bool    //
	byeOnAck     bool    // the other side hung up before rtxTo ACKed ok2xx: its BYE waits for the ACK
	rtxTo        side    // where ok2xx goes: the side that sent the INVITE it answers
	reinvite     [2]bool // a re-INVITE is in flight from A, from B (glare: 491)
	maxFwd       uint8   // Max-Forwards for B-leg INVITEs
	onFailureRan bool    // Policy.OnFailure ran: it runs once per call
	rtxCSeq      uint32  // the CSeq of the INVITE ok2xx answers, which its ACK carries
	journal      uint32  // the call's number in Env.Journal (journalID); 0: not journalled

	aInvite []byte          // the caller's INVITE, to build responses from (a pooled buffer)
	ainv    *parser.Message // it, parsed once (a pooled message); nil once the caller ACKs
	aTxn    txn.Handle      // its server transaction
	bTxn    txn.Handle      // the B-leg INVITE client transaction

	ok2xx   []byte        // the last 2xx sipedge relayed to an INVITE, retransmitted until its ACK
	rtx     uint64        // its retransmission timer, 0 when none
	rtxWait time.Duration // the current interval
	rtxEnd  time.Duration // when to give up (64*T1)
	maxDur  uint64        // the maximum-duration timer

	byeHdrs []byte     // the headers the policy relays of the BYE byeOnAck holds, for the one it waits to send (a pooled buffer)
	extra   *callExtra // what few calls need (reordered routes, failed attempts' B-legs, SIP extensions); nil until then (a pooled object)

	// CDR facts.
	tInvite, tProvisional, tAnswer, tEnd time.Duration
	finalCode                            int
}

// callExtra is what a call holds beyond the common case, taken from the
// engine's pool when first needed (extraOf) and given back as the call
// ends: a Call fits its size class, and most calls need none of this.
type callExtra struct {
	// orders hold the call's routes when the carrier plane reordered them
	// (Carriers.Order): the decision's (0) and OnFailure's (1), kept until
	// the call ends: the sequence reads them, a dial points into them.
	orders [2][]route.Route
	// legs are the B-legs of the failed attempts, by their index in the
	// sequence's Attempts (a zero entry, or none past the end, for one
	// not dialled): for lcr_attempts' b_call_id and time_invite.
	legs []attemptLeg
	ids  []byte // the legs' Call-IDs

	// The SIP extensions the call uses: reliable provisional responses
	// (RFC 3262, rel.go) and, in uphold, the legs' session timers (RFC
	// 4028, sessiontimer.go). Their zero values are a call that uses none.
	rel     relState
	session [2]sessionLeg // by sessionSide
}

// attemptLeg is a failed attempt's B-leg: its Call-ID, ids[start:end],
// and when its INVITE left.
type attemptLeg struct {
	start, end int32
	invite     time.Duration
}

// extraOf returns c's extra, taking one from the pool if it has none.
func (e *Engine) extraOf(c *Call) *callExtra {
	if c.extra == nil {
		if n := len(e.pool.extras); n > 0 {
			c.extra = e.pool.extras[n-1]
			e.pool.extras = e.pool.extras[:n-1]
		} else {
			c.extra = new(callExtra)
		}
	}
	return c.extra
}

// putExtra gives x back to the pool, emptied: the routes it held dropped
// (they may name a large decision's maps), its capacity kept, the
// extensions' timers stopped and their buffers given back.
func (e *Engine) putExtra(x *callExtra) {
	e.stopRel(x)
	e.stopSessions(x)
	e.putBuf(x.rel.sent)
	e.putBuf(x.rel.pending)
	x.rel, x.session = relState{}, [2]sessionLeg{}
	for i := range x.orders {
		clear(x.orders[i])
		x.orders[i] = x.orders[i][:0]
	}
	x.legs, x.ids = x.legs[:0], x.ids[:0]
	e.pool.extras = append(e.pool.extras, x)
}

// order has the carrier plane order routes for call c (Carriers.Order,
// quality.mode) into the engine's scratch; a reordered copy becomes the
// call's own, its extra's orders[i], whose old buffer becomes the
// scratch. A call whose routes keep their order holds no copy.
func (e *Engine) order(c *Call, routes []route.Route, i int) []route.Route {
	out := e.env.Carriers.Order(routes, c.callee, &e.tmp.order)
	if len(out) == 0 || len(routes) > 0 && &out[0] == &routes[0] {
		return out
	}
	x := e.extraOf(c)
	x.orders[i], e.tmp.order = e.tmp.order, x.orders[i][:0]
	return out
}

// attemptLeg records the B-leg of the attempt that just failed, the
// carrier in flight's, dialled: its Call-ID and when its INVITE left.
func (e *Engine) attemptLeg(c *Call) {
	x := e.extraOf(c)
	i := len(c.seq.Attempts()) - 1
	for len(x.legs) < i {
		x.legs = append(x.legs, attemptLeg{})
	}
	start := len(x.ids)
	x.ids = append(x.ids, c.b.callID...)
	x.legs = append(x.legs[:i], attemptLeg{start: int32(start), end: int32(len(x.ids)), invite: c.att.dialed})
}

// Summary is what a call reports of itself (Call.Summary): the facts of its
// CDR, on the shard's clock. Byte slices are views into the call, valid
// only during the hook that asked.
type Summary struct {
	ACallID, BCallID []byte
	Trunk            *Trunk
	Caller, Callee   []byte
	Source           netip.AddrPort  // where the caller's INVITE came from
	Target           carrier.Dial    // the carrier that answered, or the last one dialled
	Route            *route.Route    // Target's route; nil when none was dialled
	Attempts         []route.Attempt // failed attempts, oldest first (lcr_attempts)
	RouteSource      route.Source
	// Times on the shard clock; 0 when the event did not happen.
	Invite, FirstProvisional, Answer, End time.Duration
	// Dialed and Progress are the answering carrier's: when its INVITE
	// left and when it first sent 101-199 (FirstProvisional may be an
	// earlier carrier's); 0 unless a carrier answered.
	Dialed, Progress time.Duration
	FinalCode        int
	FinalReason      []byte
	HangupSide       cdr.HangupSide
}

// Summary describes the call for its CDR.
func (c *Call) Summary() Summary {
	var dialed, progress time.Duration
	if c.answered {
		dialed, progress = c.seq.Timing()
	}
	return Summary{Dialed: dialed, Progress: progress, Route: c.att.route, ACallID: c.a.callID, BCallID: c.b.callID, Trunk: c.trunk, Caller: c.caller, Callee: c.callee,
		Source: c.sourceAddr(), Target: c.att.dial, Attempts: c.seq.Attempts(), RouteSource: c.source, Invite: c.tInvite, FirstProvisional: c.tProvisional, Answer: c.tAnswer, End: c.tEnd,
		FinalCode: c.finalCode, FinalReason: c.finalReason, HangupSide: c.hangup}
}

// allocCall takes a call from the free list.
func (e *Engine) allocCall() (int32, *Call) {
	var i int32
	if e.calls.free >= 0 {
		i = e.calls.free
		e.calls.free = e.calls.list[i].next
	} else {
		i = int32(len(e.calls.list))
		e.calls.list = append(e.calls.list, &Call{idx: i})
	}
	c := e.calls.list[i]
	c.gen++
	c.next = -1
	c.seq.Reset(nil, e.cfg.Sequence)
	e.calls.live++
	e.calls.shared.Store(int64(e.calls.live))
	e.m.active.Set(float64(e.calls.live))
	return i, c
}

// arg packs a call's index and generation for its timers.
func (e *Engine) arg(c *Call) uint64 { return uint64(c.gen)<<32 | uint64(uint32(c.idx)) }

func (e *Engine) callByArg(arg uint64) *Call {
	i := int(uint32(arg))
	if i >= len(e.calls.list) {
		return nil
	}
	c := e.calls.list[i]
	if c.gen != uint32(arg>>32) || c.state == stateFree {
		return nil
	}
	return c
}

// indexLeg makes a leg's Call-ID find its call.
func (e *Engine) indexLeg(c *Call, l *leg) {
	e.calls.index.set(e.calls.index.hash(l.callID), c.idx)
}

func (e *Engine) unindexLeg(c *Call, l *leg) {
	if len(l.callID) == 0 {
		return
	}
	e.calls.index.delete(e.calls.index.hash(l.callID), c.idx)
}

func (e *Engine) watch(h txn.Handle, c *Call, kind roleKind, peer txn.Handle, slot int8) {
	// Field by field: a txnRole literal is built on the stack and copied
	// with wider loads than its stores, which stall on every watch.
	r := e.setRole(h, kind)
	r.call, r.gen, r.peer, r.slot = c.idx, c.gen, peer, slot
}

// setRole returns transaction h's entry, cleared but for h and kind, for
// the caller to fill. A carrier's BYE whose role is still there, its
// transaction's slot reused unbeknown to the engine (a table call whose
// actions went unread), gives its entry back.
func (e *Engine) setRole(h txn.Handle, kind roleKind) *txnRole {
	i := h.Index()
	if i >= len(e.roles) {
		e.roles = append(e.roles, make([]txnRole, i+1-len(e.roles))...)
	}
	r := &e.roles[i]
	if r.kind == roleCarrierBye {
		e.freeCarrierBye(r.bye)
	}
	*r = txnRole{}
	r.txn, r.kind = h, kind
	return r
}

// unwatch forgets transaction h.
func (e *Engine) unwatch(h txn.Handle) {
	if i := h.Index(); i < len(e.roles) && e.roles[i].txn == h {
		if e.roles[i].kind == roleCarrierBye {
			e.freeCarrierBye(e.roles[i].bye)
		}
		e.roles[i] = txnRole{}
	}
}

// roleOf returns the call of a transaction the engine watches and copies
// its role to r (the zero role if none). Through r, not a result: a
// returned txnRole is spilled field by field and copied whole, a stall.
func (e *Engine) roleOf(h txn.Handle, r *txnRole) *Call {
	*r = txnRole{}
	if i := h.Index(); i < len(e.roles) && e.roles[i].txn == h {
		*r = e.roles[i]
	}
	if r.kind == 0 || r.kind == roleCarrierBye { // no call: see roleCarrierBye
		return nil
	}
	c := e.calls.list[r.call]
	if c.gen != r.gen || c.state == stateFree {
		e.unwatch(h)
		return nil
	}
	return c
}

// settle closes what a call still has in flight when it ends, so no
// transaction outlives it waiting for a TU that is gone: in-dialog requests
// being relayed get 487 (RFC 3261 15.1.2: a request pending when the
// dialog ends), a B-leg INVITE still without a final response is cancelled
// (RFC 3261 9.1), and a caller's INVITE still without one gets it; the
// transactions then end on their own timers.
func (e *Engine) settle(c *Call) {
	c.state = stateEnding
	for k := range c.relays {
		r := &c.relays[k]
		if r.in == 0 {
			continue
		}
		in, out := r.in, r.out
		e.unwatch(r.in)
		e.unwatch(r.out)
		r.in, r.out = 0, 0
		if r.method == parser.MethodInvite && out != 0 && e.txns.Cancel(out, e.now) == nil {
			e.after() // a re-INVITE after a provisional waits on no timer of its own
		}
		if e.parseRelayed(r) == nil {
			e.respond(in, &e.tmp.areq, 487, "Request Terminated", nil)
		}
	}
	if c.bTxn != 0 && !c.answered {
		if e.txns.Cancel(c.bTxn, e.now) == nil {
			e.after()
		}
	}
	if c.att.route != nil && !c.answered {
		// The gateway picked for the carrier in flight hears of its
		// attempt once (a half-open one's trial call goes back): the call
		// ended without a word from it (a BYE in the early dialog, a drain).
		e.report(c, carrier.OutcomeAbandoned, 0)
	}
	// The caller's INVITE must get a final response before the call goes
	// (RFC 3261 13.3.1): a carrier that ended its early dialog leaves the
	// caller with nothing else.
	if _, st, ok := e.txns.State(c.aTxn); ok && st == txn.StateProceeding && c.ainv != nil {
		code, reason := c.finalCode, string(c.finalReason)
		if code < 300 {
			code, reason = 480, "Temporarily Unavailable"
		}
		e.respond(c.aTxn, c.ainv, code, reason, c.a.localTag)
	}
}

// sideOf returns the side of c whose leg l is; 0 for a leg that is not
// c's (a dialog no call keeps).
func (c *Call) sideOf(l *leg) side {
	switch l {
	case &c.a:
		return sideA
	case &c.b:
		return sideB
	}
	return 0
}

// sourceAddr is where the caller's INVITE came from.
func (c *Call) sourceAddr() netip.AddrPort {
	return netip.AddrPortFrom(c.a.peer.Addr.Addr(), c.srcPort)
}

// EndAll ends every live call, as at the end of a drain: an answered call
// gets a BYE on both legs (its carrier's 2xx ACKed first if it is not
// yet), a call still ringing is cancelled toward the carrier and answered
// 503 toward the caller. Every call gets its CDR, hung up by "system".
// It returns the number of calls ended.
func (e *Engine) EndAll(now time.Duration) int {
	e.now = now
	n := 0
	for _, c := range e.calls.list {
		if c.state != stateFree {
			if c.answered {
				c.ended = endShutdown // the CDR's end_reason
			}
			e.endCall(c, cdr.HangupSystem)
			n++
		}
	}
	return n
}

// end finishes a call: CDR, timers, indexes, and back to the free list.
func (e *Engine) end(c *Call, hangup cdr.HangupSide) {
	if c.state == stateFree {
		return
	}
	if c.tEnd == 0 { // else the call ended earlier, its last BYE waiting for an ACK
		c.tEnd = e.now
	}
	if c.hangup == cdr.HangupNone {
		c.hangup = hangup
	}
	e.settle(c)
	e.env.Carriers.Release(&c.att.dial)
	if c.rtx != 0 {
		e.env.Clock.Stop(c.rtx)
	}
	if c.maxDur != 0 {
		e.env.Clock.Stop(c.maxDur)
	}
	if c.att.timer != 0 {
		e.env.Clock.Stop(c.att.timer)
	}
	if c.att.paceTimer != 0 {
		e.env.Clock.Stop(c.att.paceTimer)
	}
	e.finished(c)
	e.m.ended.Inc()
	if c.trunk != nil {
		c.trunk.releaseCall()
		if c.trunk.ForceRPort {
			e.trunks.forced--
		}
	}
	e.unindexLeg(c, &c.a)
	e.unindexLeg(c, &c.b)
	e.keepAck(&c.a, nil, false)
	e.keepAck(&c.b, nil, false)
	e.releaseInvite(c)
	e.putBuf(c.ok2xx)
	e.putBuf(c.byeHdrs)
	if c.extra != nil {
		e.putExtra(c.extra)
	}
	// Reset in place: a Call is over a kilobyte, its legs half of it.
	c.a.reset()
	c.b.reset()
	for k := range c.relays {
		c.relays[k].req = c.relays[k].req[:0]
		c.relays[k].in, c.relays[k].out = 0, 0
	}
	c.caller, c.callee, c.fromURI, c.finalReason = c.caller[:0], c.callee[:0], c.fromURI[:0], c.finalReason[:0]
	c.callVars = callVars{next: e.calls.free}
	e.calls.free = c.idx
	e.calls.live--
	e.calls.shared.Store(int64(e.calls.live))
	e.m.active.Set(float64(e.calls.live))
}

// failCall answers the caller with code and ends the call: with the
// carrier's response failure, when it has that code, relayed.
func (e *Engine) failCall(c *Call, code int, reason string, failure *parser.Message) {
	switch {
	case code == 401 || code == 407:
		// A carrier's challenge was for sipedge's account with it, which
		// the caller cannot answer; and a 401 or 407 without its challenge
		// would break RFC 3261 22.1. sipedge does not challenge callers.
		code, reason = 403, "Forbidden"
	case code >= 300 && code < 400:
		// A 3xx names where to go in its Contact (RFC 3261 21.3), which
		// sipedge never relays: a policy's 3xx is a 480, as the
		// sequence's are (route.Sequence).
		code, reason = 480, "Temporarily Unavailable"
	}
	c.finalCode, c.finalReason = code, append(c.finalReason[:0], reason...)
	if req := c.ainv; req != nil && !c.canceled {
		if f := failure; f != nil && f.StatusCode() == code {
			// The carrier's failure reaches the caller as it is, with the
			// headers the policy relays: a Retry-After, a Reason (RFC
			// 3326), and a 422's Min-SE, which it must carry (RFC 4028 6)
			// whatever the policy. Not its body: an error text may name the
			// carrier's network.
			b := parser.AppendResponse(e.tmp.out[:0], req, code, string(f.ReasonPhrase()), c.a.localTag)
			b = e.policy.appendAllowed(b, f)
			if v := f.Get(parser.HeaderMinSE); code == 422 && v != nil && !e.policy.kinds.Has(parser.HeaderMinSE) {
				b = parser.AppendHeader(b, "Min-SE", v)
			}
			e.tmp.out = parser.AppendBody(b, "", nil)
			if e.txns.Respond(c.aTxn, e.tmp.out, e.now) == nil {
				e.after()
			}
		} else {
			e.respond(c.aTxn, req, code, reason, c.a.localTag)
		}
	}
	e.end(c, cdr.HangupNone)
}
