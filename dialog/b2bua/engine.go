package b2bua

import (
	"bytes"
	"errors"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// Engine is one shard's B2BUA. See the package documentation.
type Engine struct {
	cfg    Config
	env    Env
	policy headerPolicy
	txns   *txn.Table
	now    time.Duration // the time of the input being handled

	trunks trunkState
	calls  callTable
	roles  []txnRole             // by txn.Handle.Index: the transactions the engine is waiting on
	probes map[txn.Handle]*probe // gateway probes in flight
	sentBy []sentBy              // what sipedge writes as its Vias' sent-by

	teardowns [maxTeardowns]teardown // dialogs endUnwanted is ending
	byes      byeTable               // BYEs to carriers in flight (roleCarrierBye)

	published published // the counts metrics read from other goroutines
	authLog   logPacing // warnAuth's

	tmp  scratch
	pool pools
	m    engineMetrics
}

// trunkState is what the engine keeps of the trunks.
type trunkState struct {
	all *atomic.Pointer[TrunkSet] // Config.TrunkSet, or the fixed Config.Trunks
	// set is the trunks loaded for the request being handled (Receive):
	// one snapshot for its admission, its reply address and its call.
	set *TrunkSet
	// forced are the live calls whose trunk has ForceRPort (replyTo).
	forced int
}

// callTable holds the calls: a slab reused through a free list, and the
// index of their legs' Call-IDs.
type callTable struct {
	journaled uint32 // the last call number given Env.Journal (journalAnswered)
	list      []*Call
	free      int32 // head of the free list, -1 if none
	live      int
	shared    atomic.Int64 // live, readable from other goroutines (drain, admin)
	index     callIndex    // Call-ID of either leg -> call
}

// byeTable are the BYEs to carriers in flight, reused through a free
// list (watchCarrierBye).
type byeTable struct {
	list []carrierBye
	free int32 // head of the free list, -1 if none
}

// published are the transaction table's counts, copied where metrics read
// them from other goroutines (Publish), and the pacing of its budget's
// warning (logBudget).
type published struct {
	txns, rtx, absorbed        atomic.Int64
	stored, shortcuts, refused atomic.Int64  // the memory budget (txn.Config.MaxStoredBytes)
	pooled                     atomic.Int64  // the part of stored free slots keep
	at                         time.Duration // when publishDue publishes next
	budgetLogged               uint64
	budgetLogAt                time.Duration
}

// logPacing paces a warning: once per interval at most, the lines left
// out counted in the next.
type logPacing struct {
	logged     bool
	at         time.Duration
	suppressed uint64
}

// scratch is storage the engine reuses from one input to the next, so that
// a warm engine allocates nothing. Each part holds what one step builds for
// the next, to which it goes as a parameter: none carries anything from one
// input to another.
type scratch struct {
	acts []txn.Action   // the table's spare action list (see runActions)
	req  txn.Built      // the request being built: where appendRequestHead wrote what
	hop  transport.Peer // the next hop of a request to a caller (callerDest)
	// routes is the Route of a request to a caller behind a strict router
	// (strictRoute).
	routes []byte
	areq   parser.Message // a request the engine re-reads to answer it
	prov   parser.Message // a carrier's provisional kept to go reliably later (onPrack)
	resp   parser.Message // a response of sipedge's own it reads again (cancelTag)
	leg    leg            // a dialog the engine ends without keeping (a forked 2xx)
	id     identity       // the identity of the B-leg being dialled
	auth   challenge      // the carrier's challenge being answered (answerChallenge)
	out    []byte         // an outgoing message
	tag    []byte         // the To tag of a response that ends no dialog (tagFor)
	rr     route.Request  // the Router's request
	dec    route.Decision // the decision being carried out
	rep    carrier.Report // the report being made to the carrier plane
	// order is where the carrier plane reorders a call's routes
	// (Engine.order), which the call then takes over.
	order []route.Route
}

// pools are the buffers calls borrow while they need them (getBuf,
// getMsg): a warm engine allocates none, and a held call keeps none.
type pools struct {
	bufs   [][]byte          // message buffers
	msgs   []*parser.Message // parsed INVITEs
	extras []*callExtra      // what few calls need (Call.extra)
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
	roleRefresh                      // a session refresh the engine sent on its own, on the leg txnRole.slot names (sessiontimer.go)
	// roleCarrierBye is a BYE the engine sent on its own to the carrier,
	// which may challenge it: not its call's, which ended as it went
	// (txnRole.bye names what an answer needs).
	roleCarrierBye
)

// New returns an Engine; env's Send, Clock and MintCallID must be set, and
// the rest takes its defaults (see Env).
func New(cfg Config, env Env) (*Engine, error) {
	if env.Send == nil || env.Clock == nil || env.MintCallID == nil {
		return nil, errors.New("b2bua: Env.Send, Env.Clock and Env.MintCallID must be set")
	}
	if env.Carriers == nil {
		env.Carriers = new(carrier.NextHops)
	}
	if env.Router == nil {
		env.Router = Routes(nil)
	}
	if env.Draining == nil {
		env.Draining = neverDraining
	}
	if cfg.ReferCode == 0 {
		cfg.ReferCode = 603
	}
	if cfg.User == "" {
		cfg.User = "sipedge"
	}
	cfg.SessionTimer = cfg.SessionTimer.withDefaults()
	if env.Log == nil {
		env.Log = slog.Default()
	}
	e := &Engine{cfg: cfg, env: env, policy: compilePolicy(cfg.HeaderAllow), probes: make(map[txn.Handle]*probe)}
	if cfg.SessionTimer.Uphold {
		// Each leg's session timer is sipedge's own (appendSessionRequest,
		// appendSession2xx): neither side's crosses.
		e.policy.kinds &^= parser.NewHeaderSet(parser.HeaderSessionExpires, parser.HeaderMinSE)
		e.policy.noTimer = true
	}
	e.calls.free, e.byes.free = -1, -1
	e.calls.index.seed = maphash.MakeSeed()
	if e.trunks.all = cfg.TrunkSet; e.trunks.all == nil {
		e.trunks.all = new(atomic.Pointer[TrunkSet])
		e.trunks.all.Store(NewTrunkSet(cfg.Trunks))
	}
	e.trunks.set = e.trunks.all.Load()
	var err error
	if e.txns, err = txn.New(cfg.Txn, txnClock{env.Clock}); err != nil {
		return nil, err
	}
	for i, local := range cfg.Local {
		if local != "" && !slices.Contains(cfg.Local[:i], local) {
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
// its sent-by one of Config.Local's. Every request sipedge sends is its
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
func (e *Engine) Calls() int { return e.calls.live }

// LiveCalls returns the number of live calls; safe from any goroutine.
func (e *Engine) LiveCalls() int { return int(e.calls.shared.Load()) }

// Transactions returns the number of live transactions.
func (e *Engine) Transactions() int { return e.txns.Len() }

// Unsettled returns how many of the engine's transactions still wait on
// their peer (txn.Table.Unsettled): after EndAll, the BYEs and CANCELs
// ending the calls (retransmitted per Timer E, Timer A for the INVITE a
// CANCEL waits on), the BYEs answering a carrier's Digest challenge to
// them, the 503s awaiting the caller's ACK. OPTIONS are left out: a
// gateway probe never needs to finish. A drain keeps the shard running
// until none is left. Call it on the shard's goroutine; it scans the
// transaction table, which is for a drain, not for every message.
func (e *Engine) Unsettled() int { return e.txns.Unsettled("OPTIONS") }

// StoredBytes returns the bytes the transaction table keeps (txn.Stats'
// StoredBytes) as last published; safe from any goroutine.
func (e *Engine) StoredBytes() int64 { return e.published.stored.Load() }

// Receive handles a message the shard parsed and validated. m is valid only
// during the call.
func (e *Engine) Receive(m *parser.Message, from transport.Peer, now time.Duration) {
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
	} else if e.trunks.set = e.trunks.all.Load(); !e.admit(m, from) {
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
func (e *Engine) PeerFailed(peer transport.Peer, now time.Duration) {
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
			c.att.timer = 0
			e.carryOut(c, c.seq.Timeout(now), nil)
		}
	case timerPace:
		if c := e.callByArg(arg); c != nil && c.state == stateEarly && !c.canceled {
			c.att.paceTimer = 0
			if c.att.pacing {
				e.paced(c)
			} else { // a CPS reject's retry: a fresh B-leg to the same carrier
				if st, ok := e.pace(c); !ok {
					e.carryOut(c, st, nil)
				}
			}
		}
	case timerProbe:
		e.probeTimeout(txn.Handle(arg))
	case timerSessionA, timerSessionB:
		if c := e.callByArg(arg); c != nil && c.extra != nil {
			s := sideA
			if kind == timerSessionB {
				s = sideB
			}
			e.sessionTimer(c, s)
		}
	case timerRel:
		if c := e.callByArg(arg); c != nil && c.extra != nil {
			e.retransmitRel(c)
		}
	case timerMaxDuration:
		if c := e.callByArg(arg); c != nil && c.state == stateConfirmed {
			e.env.Log.Info("call reached its maximum duration", "call_id", string(c.a.callID))
			c.ended = endMaxDuration
			e.hangup(c, cdr.HangupSystem)
		}
	}
}

// publishEvery paces publish after messages: its six atomic stores (each a
// locked instruction on amd64) after every message cost a call several
// percent of its time, for gauges scraped every few seconds.
const publishEvery = time.Millisecond

// publishDue publishes unless the engine did less than publishEvery ago.
func (e *Engine) publishDue() {
	if e.now >= e.published.at {
		e.Publish()
	}
}

// Publish copies the transaction counts where metrics can read them. The
// engine does after its inputs, at most every publishEvery; its owner calls
// it on every run of the shard's loop (Handler.Tick), so that the counts of
// an engine gone quiet are no older than that run.
func (e *Engine) Publish() {
	e.published.at = e.now + publishEvery
	st := e.txns.Stats()
	e.published.txns.Store(int64(e.txns.Len()))
	e.published.rtx.Store(int64(st.Retransmissions))
	e.published.absorbed.Store(int64(st.Absorbed))
	e.published.stored.Store(int64(st.StoredBytes))
	e.published.pooled.Store(int64(st.PooledBytes))
	e.published.shortcuts.Store(int64(st.BudgetShortcuts))
	e.published.refused.Store(int64(st.BudgetRefused))
	if n := st.BudgetShortcuts + st.BudgetRefused; n != e.published.budgetLogged &&
		(e.published.budgetLogged == 0 || e.now-e.published.budgetLogAt >= budgetLogInterval) {
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
		"since_last", n-e.published.budgetLogged)
	e.published.budgetLogged, e.published.budgetLogAt = n, e.now
}

// runActions carries out what the transaction layer asked for. m is the
// message just received, nil after a timer.
func (e *Engine) runActions(m *parser.Message) {
	defer e.publishDue()
	// Handling an action may call into the table again, which clears its
	// action list: take the list, the table recording into e.tmp.acts, which
	// is taken while in use so that a nested call (a Send that delivers
	// at once) gives the table storage of its own.
	list := e.txns.TakeActions(e.tmp.acts)
	defer e.txns.ReturnActions()
	e.tmp.acts = nil
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
	e.tmp.acts = list[:0]
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

// lookupCall finds the call a Call-ID belongs to and which leg it names.
func (e *Engine) lookupCall(callID []byte) (*Call, side) {
	i, ok := e.calls.index.get(e.calls.index.hash(callID))
	if !ok {
		return nil, 0
	}
	c := e.calls.list[i]
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
	if n := len(e.pool.bufs); n > 0 {
		b := e.pool.bufs[n-1]
		e.pool.bufs = e.pool.bufs[:n-1]
		return b[:0]
	}
	return make([]byte, 0, 1024)
}

func (e *Engine) putBuf(b []byte) {
	if cap(b) > 0 && cap(b) <= 64<<10 {
		e.pool.bufs = append(e.pool.bufs, b[:0])
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

// getMsg takes a parsed-message holder from the engine's pool.
func (e *Engine) getMsg() *parser.Message {
	if n := len(e.pool.msgs); n > 0 {
		m := e.pool.msgs[n-1]
		e.pool.msgs = e.pool.msgs[:n-1]
		return m
	}
	return new(parser.Message)
}
