package shard

import (
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/panjf2000/gnet/v2"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/shard/timer"
	"github.com/sipedge/sipedge/transport"
)

// ConnID names a stream connection: the loop it lives on and a sequence
// number, so any shard can route bytes to it.
type ConnID uint64

func newConnID(shard int, seq uint64) ConnID { return ConnID(uint64(shard)<<56 | seq&(1<<56-1)) }

func (id ConnID) shard() int { return int(id >> 56) }

// packet is a message crossing from one shard to another: a parsed copy for
// its owner, or bytes for a stream connection living on another loop.
type packet struct {
	out  bool // bytes to write on Conn, not a message to handle
	buf  []byte
	msg  parser.Message
	peer transport.Peer
}

var packetPool = sync.Pool{New: func() any { return new(packet) }}

// Shard is one event loop's share of the work. Its methods other than the
// ones documented as safe run on its own loop only.
type Shard struct {
	idx     int
	srv     *Server
	handler Handler
	loop    gnet.EventLoop
	waker   gnet.Conn
	wheel   *timer.Wheel
	inbox   []*ring // inbox[i] is written by shard i
	woken   atomic.Bool
	polling atomic.Bool // the loop polls: it runs often enough without wakes
	// dialFailed is set by a dialling goroutine whose dial failed, so that
	// the loop drops the dial and reports it at once, not at the sweep.
	dialFailed atomic.Bool
	pending    atomic.Int64 // timers pending on the wheel, published for the ticker
	idle       int          // ticks skipped since the last run (the ticker's goroutine only)

	msg        parser.Message // the message being parsed on this loop
	out        []byte         // scratch for stateless replies
	tag        []byte         // scratch for their To tag
	udp        udpIO
	udpSockets []udpSocket   // this loop's UDP sockets, as gnet first reads them
	received   uint64        // datagrams and hand-overs taken (poll.go)
	lastUDP    time.Duration // when a datagram last woke the loop, or it last polled
	yielded    time.Duration // when the loop, polling, last went through the scheduler (sleep)
	every      time.Duration // the batch interval, as the load adapted it (poll.go)
	conns      map[ConnID]*tcpConn
	tcpOut     []*tcpConn // connections with bytes to write (flushTCP)
	seq        uint64
	dials      map[netip.AddrPort]*tcpConn // outbound TCP connections by address
	lastSweep  time.Duration
	flood      floodGuard

	postMu sync.Mutex // guards posted: taken once per Post and per drain, not per message
	posted []func()
	drain  []func()

	m shardMetrics
}

// Post runs fn on the shard's loop soon; safe from any goroutine. It is how
// blocking work done elsewhere (an LCR API call, a Redis round trip) hands
// its result back to the shard that owns the call.
func (sh *Shard) Post(fn func()) {
	sh.postMu.Lock()
	sh.posted = append(sh.posted, fn)
	sh.postMu.Unlock()
	sh.wake()
}

func newShard(s *Server, idx int) *Shard {
	sh := &Shard{idx: idx, srv: s, conns: make(map[ConnID]*tcpConn), dials: make(map[netip.AddrPort]*tcpConn)}
	sh.inbox = make([]*ring, s.cfg.Shards)
	for i := range sh.inbox {
		sh.inbox[i] = newRing(s.cfg.HandoffQueue)
	}
	sh.udp.init(s.cfg.Limits.MaxMessageSize)
	sh.wheel = timer.New(timer.Config{Tick: s.cfg.Tick}, sh.fire)
	sh.flood = floodGuard{cfg: &s.cfg.Flood, entries: make(map[netip.Addr]*floodEntry)}
	sh.m = newShardMetrics(s.metrics, idx)
	sh.handler = s.newHander(sh)
	return sh
}

// Index returns the shard's number.
func (sh *Shard) Index() int { return sh.idx }

// Timers returns the shard's timer wheel. Its timers fire into Handler.Timer.
func (sh *Shard) Timers() *timer.Wheel { return sh.wheel }

// Now returns the runtime clock, the one the wheel runs on.
func (sh *Shard) Now() time.Duration { return sh.srv.now() }

// Draining reports whether the server is shutting down.
func (sh *Shard) Draining() bool { return sh.srv.draining.Load() }

func (sh *Shard) fire(p timer.Payload) {
	if sh.handler.Timer != nil {
		sh.handler.Timer(sh, p)
	}
}

// wake makes the shard run soon; safe from any goroutine. Wakes coalesce:
// one is pending at most, so handing over a batch costs one wake.
func (sh *Shard) wake() {
	if sh.polling.Load() {
		return // it runs every batch interval (poll.go)
	}
	if sh.waker != nil && sh.woken.CompareAndSwap(false, true) {
		if err := sh.waker.Wake(nil); err != nil {
			sh.woken.Store(false)
		}
	}
}

// run drains the inbox and advances the timers; on the shard's loop.
func (sh *Shard) run() {
	sh.woken.Store(false) // before draining, so a later push wakes again
	for _, r := range sh.inbox {
		for p := r.pop(); p != nil; p = r.pop() {
			sh.received++
			if p.out { // a message for a connection of this loop
				sh.sendTCP(p.peer, p.buf)
			} else {
				sh.m.handoffsIn.Inc()
				sh.deliver(&p.msg, p.peer)
			}
			packetPool.Put(p)
		}
	}
	sh.postMu.Lock()
	sh.drain, sh.posted = sh.posted, sh.drain[:0]
	sh.postMu.Unlock()
	for i, fn := range sh.drain {
		fn()
		sh.drain[i] = nil
	}
	now := sh.Now()
	sh.wheel.Advance(now)
	if sh.handler.Tick != nil {
		sh.handler.Tick(sh, now)
	}
	if sh.dialFailed.Swap(false) {
		sh.dropFailedDials()
	}
	sh.sweepTCP(now)
	// Last: Tick and SendFailed (a failover's new attempt) start timers too.
	sh.m.timers.Set(float64(sh.wheel.Len()))
	sh.pending.Store(int64(sh.wheel.Len()))
}

// OwnerOf returns the shard that owns a Call-ID (xxhash64 modulo the shard
// count).
func (s *Server) OwnerOf(callID []byte) int {
	return int(xxhash.Sum64(callID) % uint64(len(s.shards)))
}

// Inspect runs what the server runs on every message it receives before
// it reaches a handler: Parse with the limits, then Validate with the
// option tags the server supports. A message it fails is answered or
// dropped as Reply says. `sipedge check-msg` runs it too, so that its
// verdict is the server's.
func Inspect(m *parser.Message, buf []byte, lim *parser.Limits, supported []string) error {
	if err := m.ParseLimits(buf, lim); err != nil {
		return err
	}
	return m.Validate(supported)
}

// receive handles one received message (a datagram, or a framed stream
// message) on this loop: Inspect, then delivery here or hand-over to the
// Call-ID's owner, or the stateless answer to a malformed request.
func (sh *Shard) receive(buf []byte, from transport.Peer) {
	m := &sh.msg
	if err := Inspect(m, buf, &sh.srv.cfg.Limits, sh.srv.cfg.Supported); err != nil {
		sh.reject(m, err, from)
		return
	}
	m.SetSource(from.Addr) // responses stamp it on the top Via (RFC 3261 18.2.1)
	sh.m.countIn(m)
	sh.dispatch(m, from)
}

// dispatch runs m here if this shard owns its Call-ID, else hands a copy to
// the owner.
func (sh *Shard) dispatch(m *parser.Message, from transport.Peer) {
	owner := sh.srv.OwnerOf(m.CallID())
	if owner == sh.idx {
		sh.deliver(m, from)
		return
	}
	p := packetPool.Get().(*packet)
	p.out, p.peer = false, from
	p.buf = m.CopyTo(&p.msg, p.buf)
	dst := sh.srv.shards[owner]
	if !dst.inbox[sh.idx].push(p) {
		packetPool.Put(p)
		sh.m.handoffDrops.Inc()
		return
	}
	sh.m.handoffsOut.Inc()
	dst.wake()
}

func (sh *Shard) deliver(m *parser.Message, from transport.Peer) {
	if sh.handler.Message != nil {
		sh.handler.Message(sh, m, from)
	}
	sh.pending.Store(int64(sh.wheel.Len()))
}

// reject answers a malformed request statelessly with the parser's code, or
// drops a malformed response (RFC 3261 18.1.2) or ACK (parser.Answer). A
// request whose top Via cannot be read cannot be answered either, and is
// dropped.
func (sh *Shard) reject(m *parser.Message, err error, from transport.Peer) {
	m.SetSource(from.Addr) // as in receive
	code, reason, reply := Reply(m, err)
	sh.m.countParseError(code, m.IsResponse())
	if !reply {
		return
	}
	// A To tag, as on every response but a 100 (RFC 3261 8.2.6.2).
	sh.tag = strconv.AppendUint(sh.tag[:0], rand.Uint64(), 36)
	sh.out = AppendReject(sh.out[:0], m, code, reason, sh.tag, sh.srv.cfg.Supported)
	sh.Send(RejectTarget(m, from), sh.out)
}

// AppendReject appends the stateless answer Reply decided on to dst: the
// response to m with code and reason, To-tagged with tag; a 420 names the
// unsupported option tags (RFC 3261 8.2.2.3).
func AppendReject(dst []byte, m *parser.Message, code int, reason string, tag []byte, supported []string) []byte {
	dst = parser.AppendResponse(dst, m, code, reason, tag)
	if code == 420 {
		dst = append(dst, "Unsupported: "...)
		dst = parser.AppendUnsupported(dst, m, supported)
		dst = append(dst, "\r\n"...)
	}
	return parser.AppendBody(dst, "", nil)
}

// RejectTarget returns where the stateless answer to m, from peer, goes:
// where its top Via says (ResponseTarget); for a 505, whose top Via is of
// another SIP version that this one cannot read, the address and port the
// request came from.
func RejectTarget(m *parser.Message, from transport.Peer) transport.Peer {
	var via parser.Via
	if m.TopVia(&via) != nil {
		return from
	}
	return ResponseTarget(&via, from)
}

// Reply tells what the runtime does with a message that failed Parse or
// Validate: answer it statelessly with code and reason (reply true), or
// drop it: a response or an ACK (parser.Answer), a request whose top Via
// cannot be read (there is nowhere to send the answer, RFC 3261 18.2.2)
// but for a 505 (RejectTarget), or one whose answer would echo a control
// character (echoable).
func Reply(m *parser.Message, err error) (code int, reason string, reply bool) {
	code, reason, drop := parser.Answer(m, err)
	if drop || m.Get(parser.HeaderVia) == nil || !echoable(m) {
		return code, reason, false
	}
	var via parser.Via
	if m.TopVia(&via) != nil && code != 505 {
		return code, reason, false
	}
	return code, reason, true
}

// echoKinds are the headers a response copies from its request
// (parser.AppendResponse).
var echoKinds = [...]parser.HeaderKind{parser.HeaderVia, parser.HeaderFrom, parser.HeaderTo,
	parser.HeaderCallID, parser.HeaderCSeq, parser.HeaderTimestamp}

// echoable reports whether the headers a stateless reply would copy from
// m hold no control byte but HTAB and the CRLF of a fold. A message that
// failed to parse may have stored values with a bare CR or LF, or a NUL:
// copied into the reply, they would forge headers at a peer that splits
// lines differently, at an address anyone can spoof over UDP. Such a
// message gets no reply.
func echoable(m *parser.Message) bool {
	for _, kind := range echoKinds {
		for i := 0; i < m.Count(kind); i++ {
			if parser.HasControl(m.Nth(kind, i)) {
				return false
			}
		}
	}
	return true
}

// ResponseTarget returns where a response to a request from peer goes
// (RFC 3261 18.2.2, RFC 3581 4): the source address, with the port
// parser.Via.ResponsePort names. On a stream the request's connection
// comes first; the address is for a new one if it is gone.
func ResponseTarget(via *parser.Via, from transport.Peer) transport.Peer {
	port := via.ResponsePort(from.Addr.Port(), from.Transport.Reliable())
	from.Addr = netip.AddrPortFrom(from.Addr.Addr(), port)
	return from
}

// Send transmits b to peer from the shard's loop. b may be reused as soon as
// Send returns. A datagram leaves from the listening socket's port; a
// stream message (transport.Kind.Stream) goes on peer.Conn when it is set
// and open, else on a connection to peer.Addr, dialled if needed.
func (sh *Shard) Send(peer transport.Peer, b []byte) {
	sh.m.countOut(b)
	if peer.Transport.Stream() {
		sh.sendTCP(peer, b)
		return
	}
	sh.sendUDP(peer, b)
}

// MintCallID appends to dst a new random Call-ID that hashes to this shard,
// so that responses and in-dialog requests for it arrive at the shard that
// made it: random candidates are drawn until one hashes here (on average
// as many draws as there are shards). suffix (e.g. "@host") is appended.
func (sh *Shard) MintCallID(dst []byte, suffix string) []byte {
	n := len(dst)
	for {
		dst = appendRandomToken(dst[:n], 20)
		dst = append(dst, suffix...)
		if sh.srv.OwnerOf(dst[n:]) == sh.idx {
			return dst
		}
	}
}

const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// appendRandomToken appends n random token characters.
func appendRandomToken(dst []byte, n int) []byte {
	for n > 0 {
		r := rand.Uint64()
		for i := 0; i < 10 && n > 0; i++ {
			dst = append(dst, tokenChars[r%uint64(len(tokenChars))])
			r /= uint64(len(tokenChars))
			n--
		}
	}
	return dst
}
