package b2bua

import (
	"bytes"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// Clock arms timers on the shard's wheel. When one fires, the shard calls
// Engine.Timer with its kind and arg.
type Clock interface {
	StartAt(at time.Duration, kind uint8, arg uint64) uint64
	Stop(h uint64) bool
}

// Env is what an Engine needs from its shard.
type Env struct {
	Send       func(to txn.Peer, b []byte)    // b may be reused once Send returns
	Clock      Clock                          // the shard's timer wheel
	MintCallID func(dst []byte) []byte        // a Call-ID that hashes to this shard
	Finished   func(c *Call)                  // a call ended; c is valid during the call only (CDR)
	Router     func(r *RouteRequest) Decision // where a new call goes
	// Resolve turns a route into the place its INVITE goes: a healthy
	// member of its gateway group, or its next hop. A non-empty reason
	// (a route.Reason constant) means the carrier cannot be dialled; the
	// sequence then burns it at once. key spreads hash selection per call.
	Resolve func(r *route.Route, key uint64) (Target, string)
	// Admit applies a trunk's ingress calls-per-second limit to a new call,
	// before any routing work (optional): false refuses it with 503 and
	// Retry-After.
	Admit func(t *Trunk) (retryAfter time.Duration, ok bool)
	// Pace reserves a calls-per-second slot for dialling t (optional): the
	// route's carrier account. ref names the call to Engine.Paced.
	Pace func(r *route.Route, t *Target, ref uint64) PaceResult
	// CPSReject tells whether a final response to the dial of route r at t
	// is the carrier refusing the call over its CPS limit (the group's
	// cps_reject matchers: the code, and text in the reason phrase or the
	// Reason header) and, if the call should retry the same carrier, after
	// how long. The engine retries at most MaxCPSRetries times, then fails
	// over; a CPS reject never counts against the gateway's health.
	CPSReject func(r *route.Route, t *Target, code int, phrase, reason []byte) (time.Duration, bool)
	// Outcome reports what a B-leg attempt said about its gateway, once
	// per dialled target: a final status, or an Outcome constant, with the
	// response's Retry-After (optional).
	Outcome func(t *Target, code int, retryAfter time.Duration)
	// TakeChannel counts a call about to be dialled on a route naming
	// group (route.Route.GatewayGroup) against its carrier's concurrent-call
	// limit, before a member is picked: ok false when the limit is reached,
	// and the carrier is skipped (route.ReasonCallsLimited); counted false
	// when nothing counts the group's calls (no such group: the route's
	// next hop). A call counted gives its channel back through
	// ReleaseChannel once, when it moves on to another carrier or ends
	// (optional, both or neither).
	TakeChannel    func(group string) (counted, ok bool)
	ReleaseChannel func(group string)
	// Credentials returns the account sipedge holds with t's carrier, to
	// answer its Digest challenges to the INVITE, to the requests relayed
	// in the dialog and to sipedge's BYE (RFC 3261 22.2): ok false
	// when it holds none. A non-empty realm is the only one it answers
	// (optional).
	Credentials func(t *Target) (cr digest.Credentials, realm string, ok bool)
	// Policy holds the optional hooks of a routing policy.
	Policy   Policy
	Draining func() bool // new calls get 503 while true (optional)
	Log      *slog.Logger
}

// Timer kinds the Engine starts: TimerTxn for the transaction layer, the
// others its own. A shard passes them back to Engine.Timer.
const (
	TimerTxn uint8 = iota + 1
	timer2xx       // retransmit the 2xx to the caller (RFC 3261 13.3.1.4)
	timerMaxDuration
	timerSequence // the failover sequence's deadline for the carrier in flight
	timerProbe    // a gateway probe's deadline
	timerPace     // a CPS slot has come (or a CPS reject's retry delay passed)
)

// MaxCPSRetries bounds the retries of one carrier after CPS rejects.
const MaxCPSRetries = 2

// PaceResult is a CPS reservation for a dial: go now, wait, over the
// limit, or Pending (the answer comes through Engine.Paced).
type PaceResult struct {
	Wait    time.Duration
	Over    bool
	Pending bool
}

// RouteRequest describes a new call to the Router.
type RouteRequest struct {
	Ref    uint64 // names the call to Engine.Decided
	CallID []byte // A-leg
	Trunk  *Trunk
	Dialed []byte // the dialled number: the Request-URI user, normalised by the trunk's policy
	From   []byte // the caller's From URI
	To     []byte // the caller's To URI
	Source txn.Peer
}

// Target is one carrier to try.
type Target struct {
	CarrierID string
	Group     string // gateway group, recorded as the route taken
	// URI is the Request-URI without user ("sip:host:port;params"); the
	// dialled number becomes its user.
	URI  string
	Peer txn.Peer // where the INVITE is sent
	// Rate and Currency are the carrier's price, for the CDR.
	Rate     float64
	Currency string
	// Gateway is the health member Resolve picked; the engine reports the
	// attempt's outcome for it through Env.Outcome, once.
	Gateway health.Member
}

// Outcome codes other than a final response's status, for Env.Outcome.
const (
	OutcomeNoResponse = 0  // no final response in time (Timer B, or the carrier's deadline without progress)
	OutcomeTransport  = -1 // the INVITE could not be sent or the transport failed
	OutcomeAbandoned  = -2 // the caller gave up first: says nothing about the gateway
)

// Decision is the Router's answer: the carriers to try in order, or a code
// to reject the call with.
type Decision struct {
	Routes []route.Route
	Code   int // when no route: the response to the caller (503 when 0)
	Reason string
	Source string // "lcr", "static", "fallback": for the CDR
	// NoDecision says the Router had no decision to give (the LCR API
	// failed and no fallback applied), as against one that rejects the
	// call: Code and Reason then hold the default answer, 503 Route
	// Unavailable, which Policy.OnInvite may replace, or clear to route.
	NoDecision bool
	// Pending says the decision comes later, through Engine.Decided: the
	// Router started a lookup off the shard (RouteRequest.Ref names the
	// call). RouteRequest's byte slices are valid only during the Router
	// call: copy what the lookup needs.
	Pending bool
}

// Policy is a routing policy's hooks: the Go form of the seed's script
// handlers. Each is optional and runs on the shard's goroutine, in the
// middle of the call's processing: a hook must not block (no I/O, no
// locks held long), and must not keep the *Call, *RouteRequest or *Route
// it is given past its return; all are valid only during the hook.
type Policy struct {
	// OnInvite runs once per new call, with the Router's decision. It may
	// filter or reorder d.Routes, set d.Code (and d.Reason) to reject, or
	// clear d.Code and set d.Routes to route a call the Router rejected.
	// d.Routes may be shared with other calls (a cache entry, the static
	// table): never change it in place; assign a new slice, which the call
	// then keeps, unmodified, until it ends.
	OnInvite func(r *RouteRequest, d *Decision)
	// OnAnswer runs when a carrier answers.
	OnAnswer func(c *Call, r *route.Route)
	// OnRouteFailure runs once per failed attempt, including the last; it
	// is a notification only.
	OnRouteFailure func(c *Call, r *route.Route, a route.Attempt)
	// OnFailure runs once per call, when every carrier failed, with the
	// code and reason the caller would get; its FailureAction says what
	// happens instead, if anything. If it routes again and those carriers
	// fail too, the caller gets their failure: OnFailure does not run a
	// second time, so a policy cannot loop a call for ever.
	OnFailure func(c *Call, code int, reason string) FailureAction
}

// FailureAction is Policy.OnFailure's answer. The zero value keeps the
// default: the caller gets the sequence's code and reason.
type FailureAction struct {
	// Routes, when not empty, are tried next, in order (a backup trunk):
	// the call's attempts so far stay in its CDR's lcr_attempts. The
	// slice is kept, unmodified, until the call ends.
	Routes []route.Route
	// Code, when Routes is empty, is the caller's final response instead,
	// with Reason (the code's standard phrase when empty). Only failure
	// codes (300-699) are taken; any other is ignored.
	Code   int
	Reason string
}

// Engine is one shard's B2BUA. See the package documentation.
type Engine struct {
	cfg    Config
	env    Env
	policy headerPolicy
	trunks *atomic.Pointer[TrunkSet] // Config.TrunkSet, or the fixed Config.Trunks
	// set is the trunks loaded for the request being handled (Receive):
	// one snapshot for its admission, its reply address and its call.
	set  *TrunkSet
	txns *txn.Table
	now  time.Duration

	calls  []*Call
	free   int32 // head of the free list of calls, -1 if none
	live   int
	shared atomic.Int64 // live, readable from other goroutines (drain, admin)
	// Transaction counts published for metrics (Publish); publishAt is
	// when publishDue publishes next.
	sharedTxns, sharedRtx, sharedAbsorbed atomic.Int64
	publishAt                             time.Duration
	byCallID                              callIndex              // Call-ID of either leg -> call
	roles                                 []txnRole              // by txn.Handle.Index: the transactions the engine is waiting on
	probes                                map[txn.Handle]*probe  // gateway probes in flight
	sentBy                                []sentBy               // what sipedge writes as its Vias' sent-by
	teardowns                             [maxTeardowns]teardown // dialogs endUnwanted is ending
	byes                                  []carrierBye           // BYEs to carriers in flight (roleCarrierBye)
	byeFree                               int32                  // head of byes' free list, -1 if none

	// The transaction table's memory budget (txn.Config.MaxStoredBytes),
	// published the same way; budgetLogged and budgetLogAt pace its log.
	sharedStored, sharedShortcuts, sharedRefused atomic.Int64
	sharedPooled                                 atomic.Int64 // the part of sharedStored free slots keep
	budgetLogged                                 uint64
	budgetLogAt                                  time.Duration
	// forcedCalls are the live calls whose trunk has ForceRPort (replyTo).
	forcedCalls int
	// warnAuth's pacing.
	authLogged     bool
	authLogAt      time.Duration
	authSuppressed uint64

	acts    []txn.Action      // the table's spare action list (see runActions)
	req     txn.Built         // the request being built: where appendRequestHead wrote what
	areq    parser.Message    // scratch for requests the engine re-reads to answer them
	scratch leg               // a dialog the engine ends without keeping (a forked 2xx)
	id      identity          // the identity of the B-leg being dialled
	auth    challenge         // the carrier's challenge being answered (answerChallenge)
	failure *parser.Message   // the carrier's final failure being handled, for failCall
	out     []byte            // scratch for outgoing messages
	tag     []byte            // scratch for the To tag of a response that ends no dialog (tagFor)
	bufs    [][]byte          // message buffers calls borrow (getBuf)
	msgs    []*parser.Message // parsed INVITEs calls borrow
	rr      RouteRequest      // the Router's request, reused
	dec     Decision          // the decision being carried out, reused
	m       engineMetrics
}

// txnRole says what a transaction is to its call. An entry of Engine.roles
// whose txn is not the Handle looked up, or whose kind is 0, is no role.
type txnRole struct {
	txn  txn.Handle
	peer txn.Handle // relays: the transaction on the other leg
	call int32
	gen  uint32
	bye  int32 // roleCarrierBye: its entry in Engine.byes
	kind roleKind
	slot int8 // relays: the call's relay slot
}

type roleKind uint8

const (
	roleAInvite  roleKind = iota + 1 // the caller's INVITE server transaction
	roleBInvite                      // the B-leg INVITE client transaction
	roleRelayIn                      // an in-dialog server transaction being relayed
	roleRelayOut                     // its client transaction on the other leg
	roleBye                          // a BYE the engine sent on its own to the caller, or ending a dialog no call keeps
	// roleCarrierBye is a BYE the engine sent on its own to the carrier,
	// which may challenge it: not its call's, which ended as it went
	// (txnRole.bye names what an answer needs).
	roleCarrierBye
)

// New returns an Engine; env's functions must be set.
func New(cfg Config, env Env) (*Engine, error) {
	if cfg.ReferCode == 0 {
		cfg.ReferCode = 603
	}
	if cfg.User == "" {
		cfg.User = "sipedge"
	}
	if env.Log == nil {
		env.Log = slog.Default()
	}
	e := &Engine{cfg: cfg, env: env, policy: compilePolicy(cfg.HeaderAllow), free: -1, byeFree: -1,
		probes: make(map[txn.Handle]*probe)}
	e.byCallID.seed = maphash.MakeSeed()
	if e.trunks = cfg.TrunkSet; e.trunks == nil {
		e.trunks = new(atomic.Pointer[TrunkSet])
		e.trunks.Store(NewTrunkSet(cfg.Trunks))
	}
	e.set = e.trunks.Load()
	var err error
	if e.txns, err = txn.New(cfg.Txn, txnClock{env.Clock}); err != nil {
		return nil, err
	}
	for _, local := range []string{cfg.LocalUDP, cfg.LocalTCP} {
		if local != "" {
			e.sentBy = append(e.sentBy, parseSentBy(local))
		}
	}
	e.m = newMetrics(cfg.Metrics, cfg.Shard)
	registerTxnMetrics(cfg.Metrics, cfg.Shard, e)
	return e, nil
}

// sentBy is a host and port sipedge writes into its Vias.
type sentBy struct {
	host []byte // as written: an IPv6 address in brackets
	port int
}

// parseSentBy splits host:port; a missing or bad port is SIP's 5060.
func parseSentBy(hostPort string) sentBy {
	host, port := hostPort, 5060
	if i := strings.LastIndexByte(hostPort, ':'); i >= 0 && !strings.HasSuffix(hostPort, "]") {
		if p, err := strconv.Atoi(hostPort[i+1:]); err == nil {
			host, port = hostPort[:i], p
		}
	}
	return sentBy{host: []byte(host), port: port}
}

// ownVia reports whether the top Via of response m is one sipedge wrote,
// its sent-by LocalUDP's or LocalTCP's. Every request sipedge sends is its
// own, so every response meant for it carries one: RFC 3261 18.1.2 has
// any other silently discarded.
func (e *Engine) ownVia(m *parser.Message) bool {
	var via parser.Via
	if m.TopVia(&via) != nil {
		return false
	}
	port := via.Port
	if port == 0 {
		port = 5060 // RFC 3261 18.2.2: the default port (no TLS here)
	}
	for i := range e.sentBy {
		// Echoed as written, so compared as such first (EqualFold, for a
		// host name's case, costs ten times more).
		if s := &e.sentBy[i]; s.port == port && (string(via.Host) == string(s.host) || bytes.EqualFold(via.Host, s.host)) {
			return true
		}
	}
	return false
}

// txnClock adapts the shard's Clock to the transaction layer's Timers.
type txnClock struct{ c Clock }

func (c txnClock) StartAt(at time.Duration, arg uint64) uint64 { return c.c.StartAt(at, TimerTxn, arg) }
func (c txnClock) Stop(h uint64) bool                          { return c.c.Stop(h) }

// Calls returns the number of live calls.
func (e *Engine) Calls() int { return e.live }

// LiveCalls returns the number of live calls; safe from any goroutine.
func (e *Engine) LiveCalls() int { return int(e.shared.Load()) }

// Transactions returns the number of live transactions.
func (e *Engine) Transactions() int { return e.txns.Len() }

// StoredBytes returns the bytes the transaction table keeps (txn.Stats'
// StoredBytes) as last published; safe from any goroutine.
func (e *Engine) StoredBytes() int64 { return e.sharedStored.Load() }

// Receive handles a message the shard parsed and validated. m is valid only
// during the call.
func (e *Engine) Receive(m *parser.Message, from txn.Peer, now time.Duration) {
	e.now = now
	if m.IsResponse() {
		if !e.ownVia(m) {
			e.m.foreignVia.Inc()
			return
		}
		if err := e.txns.ReceiveResponse(m, now); err != nil {
			e.strayResponse(m, from, err)
			return
		}
	} else if e.set = e.trunks.Load(); !e.admit(m, from) {
		return
	} else if err := e.txns.ReceiveRequestTo(m, from, e.replyTo(m, from), now); err != nil {
		e.rejectStateless(m, from, err)
		return
	}
	e.runActions(m)
}

// PeerFailed tells the engine that nothing can be sent to peer: the
// transport could not open a connection to it, and what was queued for it
// is lost. The client transactions to it fail at once (RFC 3261 17.1.4)
// rather than when their timers run out: a carrier's INVITE fails over to
// the next carrier as a 503 would (RFC 3261 8.1.3.1).
func (e *Engine) PeerFailed(peer txn.Peer, now time.Duration) {
	e.now = now
	if e.txns.PeerFailed(peer, now) > 0 {
		e.runActions(nil)
	}
}

// Timer handles a timer the engine started.
func (e *Engine) Timer(kind uint8, arg uint64, now time.Duration) {
	e.now = now
	switch kind {
	case TimerTxn:
		e.txns.Timeout(arg, now)
		e.runActions(nil)
	case timer2xx:
		if c := e.callByArg(arg); c != nil {
			e.retransmit2xx(c)
		}
	case timerSequence:
		if c := e.callByArg(arg); c != nil && c.state == stateEarly && !c.canceled {
			c.seqTimer = 0
			e.carryOut(c, c.seq.Timeout(now))
		}
	case timerPace:
		if c := e.callByArg(arg); c != nil && c.state == stateEarly && !c.canceled {
			c.paceTimer = 0
			if c.pacing {
				e.paced(c)
			} else { // a CPS reject's retry: a fresh B-leg to the same carrier
				if st, ok := e.pace(c); !ok {
					e.carryOut(c, st)
				}
			}
		}
	case timerProbe:
		e.probeTimeout(txn.Handle(arg))
	case timerMaxDuration:
		if c := e.callByArg(arg); c != nil && c.state == stateConfirmed {
			e.env.Log.Info("call reached its maximum duration", "call_id", string(c.a.callID))
			e.hangup(c, hangupSystem)
		}
	}
}

// publishEvery paces publish after messages: its six atomic stores (each a
// locked instruction on amd64) after every message cost a call several
// percent of its time, for gauges scraped every few seconds.
const publishEvery = time.Millisecond

// publishDue publishes unless the engine did less than publishEvery ago.
func (e *Engine) publishDue() {
	if e.now >= e.publishAt {
		e.Publish()
	}
}

// Publish copies the transaction counts where metrics can read them. The
// engine does after its inputs, at most every publishEvery; its owner calls
// it on every run of the shard's loop (Handler.Tick), so that the counts of
// an engine gone quiet are no older than that run.
func (e *Engine) Publish() {
	e.publishAt = e.now + publishEvery
	st := e.txns.Stats()
	e.sharedTxns.Store(int64(e.txns.Len()))
	e.sharedRtx.Store(int64(st.Retransmissions))
	e.sharedAbsorbed.Store(int64(st.Absorbed))
	e.sharedStored.Store(int64(st.StoredBytes))
	e.sharedPooled.Store(int64(st.PooledBytes))
	e.sharedShortcuts.Store(int64(st.BudgetShortcuts))
	e.sharedRefused.Store(int64(st.BudgetRefused))
	if n := st.BudgetShortcuts + st.BudgetRefused; n != e.budgetLogged &&
		(e.budgetLogged == 0 || e.now-e.budgetLogAt >= budgetLogInterval) {
		e.logBudget(st, n)
	}
}

// budgetLogInterval paces the warning that the transaction table is over
// its memory budget: once a minute at most, however hard the flood.
const budgetLogInterval = time.Minute

// logBudget warns that the transaction table went over its memory budget
// since the last warning: a flood, most likely from spoofed sources.
func (e *Engine) logBudget(st txn.Stats, n uint64) {
	e.env.Log.Warn("transaction table over its memory budget: non-INVITE transactions end without Timer J, new requests beyond twice the budget are refused 503",
		"shard", e.cfg.Shard, "stored_bytes", st.StoredBytes,
		"shortcuts", st.BudgetShortcuts, "refused", st.BudgetRefused,
		"since_last", n-e.budgetLogged)
	e.budgetLogged, e.budgetLogAt = n, e.now
}

// runActions carries out what the transaction layer asked for. m is the
// message just received, nil after a timer.
func (e *Engine) runActions(m *parser.Message) {
	defer e.publishDue()
	// Handling an action may call into the table again, which clears its
	// action list: take the list, the table recording into e.acts, which
	// is taken while in use so that a nested call (a Send that delivers
	// at once) gives the table storage of its own.
	list := e.txns.TakeActions(e.acts)
	defer e.txns.ReturnActions()
	e.acts = nil
	for i := range list {
		a := &list[i]
		switch a.Kind {
		case txn.ActSend:
			e.env.Send(a.Peer, a.Data)
		case txn.ActRequest:
			e.onRequest(m, a)
		case txn.ActAck:
			e.onAck(m, a)
		case txn.ActResponse:
			if p, ok := e.probes[a.Txn]; ok {
				e.onProbeResponse(a.Txn, p, m)
				continue
			}
			e.onResponse(m, a)
		case txn.ActTimeout, txn.ActTransportError:
			if p, ok := e.probes[a.Txn]; ok {
				e.finishProbe(a.Txn, p, 0, 0, ErrProbeTransport)
				continue
			}
			e.onTxnFailure(a.Txn, a.Kind == txn.ActTransportError)
		case txn.ActTerminated:
			e.unwatch(a.Txn)
		}
	}
	e.acts = list[:0]
}

// after runs the actions of a table call the engine made itself.
func (e *Engine) after() {
	acts := e.txns.Actions()
	for i := range acts {
		// By pointer: copying the Action out would load it wider than the
		// table just stored it, a store-forwarding stall per action.
		switch a := &acts[i]; a.Kind {
		case txn.ActSend:
			e.env.Send(a.Peer, a.Data)
		case txn.ActTerminated:
			e.unwatch(a.Txn)
		}
	}
}

// strayResponse handles a response no client transaction matches, its top
// Via sipedge's own (Receive checked it): a 2xx to an INVITE that outlived
// the transaction (RFC 6026 Timer M, or the 64*T1 after a CANCEL) is ACKed
// again in a live dialog, or ACKed and BYEd where it came from when no call
// keeps its dialog (orphan2xx). Nothing else is answered.
func (e *Engine) strayResponse(m *parser.Message, from txn.Peer, _ error) {
	e.orphan2xx(m, true, from)
}

// orphan2xx handles a 2xx to an INVITE no call watches: its transaction
// ended (stray, from peer), or the call or re-INVITE it answered is done
// with it (its transaction's peer). In a live dialog it is a
// retransmission, ACKed again once sipedge has ACKed it (RFC 3261
// 13.2.2.4). Otherwise one of sipedge's INVITEs established a dialog nobody
// keeps, as when a carrier's 200 crosses the call's CANCEL or end, or comes
// after its transaction: it is ACKed and BYEd (RFC 3261 13.2.2.4, 15).
func (e *Engine) orphan2xx(m *parser.Message, stray bool, peer txn.Peer) {
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
			e.ackAgain(l, cseq.Num)
			return
		}
	}
	e.endUnwanted(c, m, peer, stray)
}

// rejectStateless answers a request the transaction layer refused.
func (e *Engine) rejectStateless(m *parser.Message, from txn.Peer, err error) {
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
	b := parser.AppendResponse(e.out[:0], m, code, reason, e.tagFor(nil))
	e.out = parser.AppendBody(b, "", nil)
	e.env.Send(e.replyTo(m, from), e.out)
}

// replyTo is where responses to request m from peer from go: where RFC
// 3261 18.2.2 says (txn.ReplyTo), or back to the source port for a trunk
// with ForceRPort.
func (e *Engine) replyTo(m *parser.Message, from txn.Peer) txn.Peer {
	var via parser.Via
	if m.TopVia(&via) != nil {
		return from // the transaction layer refuses it
	}
	if e.set.forceRPort {
		if t := e.trunkOf(from); t != nil && t.ForceRPort {
			return from
		}
	}
	if e.forcedCalls > 0 {
		// A call keeps its trunk: one removed or replaced since the call
		// began still answers its dialog at the source port.
		if c, s := e.lookupCall(m.CallID()); c != nil && s == sideA && c.trunk != nil && c.trunk.ForceRPort {
			return from
		}
	}
	return txn.ReplyTo(&via, from)
}

// lookupCall finds the call a Call-ID belongs to and which leg it names.
func (e *Engine) lookupCall(callID []byte) (*Call, side) {
	i, ok := e.byCallID.get(e.byCallID.hash(callID))
	if !ok {
		return nil, 0
	}
	c := e.calls[i]
	switch {
	case string(c.a.callID) == string(callID):
		return c, sideA
	case string(c.b.callID) == string(callID):
		return c, sideB
	}
	return nil, 0
}

// getBuf takes a message buffer from the engine's pool: calls borrow one
// for the caller's INVITE and their 2xx while they need them, so a warm
// engine allocates none and a held call keeps none.
func (e *Engine) getBuf() []byte {
	if n := len(e.bufs); n > 0 {
		b := e.bufs[n-1]
		e.bufs = e.bufs[:n-1]
		return b[:0]
	}
	return make([]byte, 0, 1024)
}

func (e *Engine) putBuf(b []byte) {
	if cap(b) > 0 && cap(b) <= 64<<10 {
		e.bufs = append(e.bufs, b[:0])
	}
}

// randomToken appends n random token characters (RFC 3261 25.1): tags and
// branches. Six random bits per character, ten characters per draw: a tag
// of 10 carries 60 bits, beyond the 32 RFC 3261 19.3 asks for.
func randomToken(dst []byte, n int) []byte {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-."
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	b := dst[start:] // written by index: an append per character costs more than the draw
	for ; len(b) >= 10; b = b[10:] {
		// A whole draw, unrolled: tags are one, branches one and a part.
		r := rand.Uint64()
		b[0], b[1], b[2], b[3], b[4] = chars[r&63], chars[r>>6&63], chars[r>>12&63], chars[r>>18&63], chars[r>>24&63]
		b[5], b[6], b[7], b[8], b[9] = chars[r>>30&63], chars[r>>36&63], chars[r>>42&63], chars[r>>48&63], chars[r>>54&63]
	}
	if len(b) > 0 {
		r := rand.Uint64()
		for i := range b {
			b[i] = chars[r&63]
			r >>= 6
		}
	}
	return dst
}
