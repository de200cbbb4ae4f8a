package bench

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// The rig runs one shard's b2bua.Engine over an in-memory network with a
// fake clock, between two scripted peers: a caller on a trunk (the A-leg)
// and a carrier (the B-leg). What a peer sends is built as wire bytes and
// goes through parser Parse, Validate(nil) and Engine.Receive, as the shard
// does; what the engine sends is copied into the addressee's queue and
// parsed by it, since it needs the B-leg Call-ID, tags and Vias to answer.
// Every buffer is reused from call to call, so a warm rig allocates nothing
// of its own: what allocates per call is the code under test.

var (
	callerAddr  = netip.MustParseAddrPort("192.0.2.10:5061")
	carrierAddr = netip.MustParseAddrPort("198.51.100.20:5070")
)

// The SDP offer and answer pass through sipedge unchanged.
const (
	offerSDP = "v=0\r\no=- 1 1 IN IP4 192.0.2.200\r\ns=-\r\nc=IN IP4 192.0.2.200\r\nt=0 0\r\n" +
		"m=audio 4000 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\n"
	answerSDP = "v=0\r\no=- 2 2 IN IP4 198.51.100.200\r\ns=-\r\nc=IN IP4 198.51.100.200\r\nt=0 0\r\n" +
		"m=audio 5000 RTP/AVP 0 101\r\na=rtpmap:101 telephone-event/8000\r\n"
)

// The caller's requests: $n is the call number, $t the To tag sipedge gave
// the A-leg dialog. Every identifier of the caller contains "caller", which
// must never reach the carrier; every one of the carrier's contains
// "carrier", which must never reach the caller.
var (
	inviteTmpl = compile("INVITE sip:15551234@203.0.113.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bK-caller-i$n;rport\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=caller-$n\r\n" +
		"To: <sip:15551234@203.0.113.1>\r\n" +
		"Call-ID: caller-$n@caller.example.org\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Contact: <sip:alice@caller.example.org:5061>\r\n" +
		"Allow: INVITE, ACK, CANCEL, BYE, OPTIONS\r\n" +
		"Supported: timer\r\n" +
		"User-Agent: caller-softphone\r\n" +
		"Content-Type: application/sdp\r\n" +
		"Content-Length: " + strconv.Itoa(len(offerSDP)) + "\r\n\r\n" + offerSDP)
	ackTmpl = compile("ACK sip:sipedge@203.0.113.1:5060 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bK-caller-a$n;rport\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=caller-$n\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=$t\r\n" +
		"Call-ID: caller-$n@caller.example.org\r\n" +
		"CSeq: 1 ACK\r\n" +
		"Content-Length: 0\r\n\r\n")
	byeTmpl = compile("BYE sip:sipedge@203.0.113.1:5060 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bK-caller-b$n;rport\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=caller-$n\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=$t\r\n" +
		"Call-ID: caller-$n@caller.example.org\r\n" +
		"CSeq: 2 BYE\r\n" +
		"Content-Length: 0\r\n\r\n")
)

// What the carrier adds to the responses parser.AppendResponse builds from
// sipedge's requests.
var (
	carrierContact = []byte("Contact: <sip:gw@carrier.example.net:5070>\r\n")
	carrierAnswer  = []byte("Contact: <sip:gw@carrier.example.net:5070>\r\n" +
		"Allow: INVITE, ACK, CANCEL, BYE\r\n" +
		"Server: carrier-gw\r\n" +
		"Content-Type: application/sdp\r\n")
	answerBody = []byte(answerSDP)
)

// template is a message with holes, filled into a caller-owned buffer.
type template struct {
	parts []string
	holes []byte // holes[i] follows parts[i]: 'n' the call number, 't' a tag
}

func compile(s string) template {
	var t template
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			t.parts = append(t.parts, s)
			return t
		}
		t.parts = append(t.parts, s[:i])
		t.holes = append(t.holes, s[i+1])
		s = s[i+2:]
	}
}

// append appends the message for call n with To tag tag.
func (t *template) append(dst []byte, n uint64, tag []byte) []byte {
	for i, p := range t.parts {
		dst = append(dst, p...)
		if i == len(t.holes) {
			break
		}
		switch t.holes[i] {
		case 'n':
			dst = strconv.AppendUint(dst, n, 10)
		case 't':
			dst = append(dst, tag...)
		}
	}
	return dst
}

// peer is a scripted endpoint. Env.Send appends what sipedge sends it to q,
// ends marking where each message stops; the script reads the messages in
// order. q is truncated at the start of each step, so views of what the
// peer read stay valid until then.
type peer struct {
	tb     testing.TB
	addr   transport.Peer
	name   string
	secret string // strict: what of the other side must never reach this peer
	strict bool

	q    []byte
	ends []int
	read int
	m    parser.Message // the message read last
	out  []byte         // the message the peer sends
}

func (p *peer) push(b []byte) {
	p.q = append(p.q, b...)
	p.ends = append(p.ends, len(p.q))
}

// clear starts a step: every message sipedge sent must have been read.
func (p *peer) clear() {
	p.done()
	p.q, p.ends, p.read = p.q[:0], p.ends[:0], 0
}

// done fails when sipedge sent the peer a message the script did not read.
func (p *peer) done() {
	if p.read != len(p.ends) {
		p.fatalf("%s got %d unexpected messages:\n%s", p.name, len(p.ends)-p.read, p.q[p.start(p.read):])
	}
}

// fatalf fails the test or benchmark. testing.TB.Helper walks the stack,
// which costs more than a message: the hot path leaves it to failures.
func (p *peer) fatalf(format string, args ...any) {
	p.tb.Helper()
	p.tb.Fatalf(format, args...)
}

func (p *peer) start(i int) int {
	if i == 0 {
		return 0
	}
	return p.ends[i-1]
}

// pop returns the next message sipedge sent the peer.
func (p *peer) pop() []byte {
	if p.read == len(p.ends) {
		p.fatalf("%s got no message", p.name)
	}
	b := p.q[p.start(p.read):p.ends[p.read]]
	p.read++
	return b
}

// expect reads the next message, which must begin with start: "SIP/2.0 180 "
// or "ACK ". It is for messages the peer neither answers nor reads anything
// from, which a load generator only counts: only a strict peer parses them.
func (p *peer) expect(start string) {
	b := p.pop()
	if !bytes.HasPrefix(b, []byte(start)) {
		p.fatalf("%s got %q, want %q", p.name, firstLine(b), start)
	}
	if p.strict {
		p.parse(&p.m, b)
	}
}

// next parses the next message sipedge sent the peer into m.
func (p *peer) next(m *parser.Message) *parser.Message { return p.parse(m, p.pop()) }

func (p *peer) parse(m *parser.Message, b []byte) *parser.Message {
	if err := m.Parse(b); err != nil {
		p.fatalf("sipedge sent %s a message that does not parse: %v\n%s", p.name, err, b)
	}
	if p.strict {
		if err := m.Validate(nil); err != nil {
			p.fatalf("sipedge sent %s a message that does not validate: %v\n%s", p.name, err, b)
		}
		if bytes.Contains(b, []byte(p.secret)) {
			p.fatalf("topology leak: %q reached the %s:\n%s", p.secret, p.name, b)
		}
	}
	return m
}

// response reads the next message, which must be a response with code.
func (p *peer) response(code int) *parser.Message {
	m := p.next(&p.m)
	if !m.IsResponse() || m.StatusCode() != code {
		p.fatalf("%s got %q, want a %d", p.name, firstLine(m.Bytes()), code)
	}
	return m
}

// request reads the next message into m, which must be a method request.
func (p *peer) request(m *parser.Message, method parser.Method) *parser.Message {
	p.next(m)
	if !m.IsRequest() || m.Method() != method {
		p.fatalf("%s got %q, want a %v", p.name, firstLine(m.Bytes()), method)
	}
	return m
}

func firstLine(b []byte) []byte {
	if i := bytes.Index(b, []byte("\r\n")); i >= 0 {
		return b[:i]
	}
	return b
}

// clock is the shard's timer wheel reduced to a list of timers in the order
// they were started. A handle is base plus the timer's position plus one;
// advance fires what is due, in order of time, then drops the prefix of
// fired and stopped timers and moves base past it, so Stop is O(1) and the
// list only spans the timers still pending.
type clock struct {
	now   time.Duration
	ts    []timer
	base  uint64
	e     *b2bua.Engine
	fired int
}

type timer struct {
	at   time.Duration
	arg  uint64
	kind uint8
	live bool
}

// StartAt implements b2bua.Clock.
func (c *clock) StartAt(at time.Duration, kind uint8, arg uint64) uint64 {
	// In place: a timer literal appended is built on the stack and copied
	// with loads wider than its stores, a stall the shard's wheel does not
	// have and the benchmarks would measure.
	c.ts = append(c.ts, timer{})
	t := &c.ts[len(c.ts)-1]
	t.at, t.arg, t.kind, t.live = at, arg, kind, true
	return c.base + uint64(len(c.ts))
}

// Wall implements b2bua.Clock.
func (c *clock) Wall(at time.Duration) time.Time { return time.Unix(0, 0).Add(at) }

// Stop implements b2bua.Clock.
func (c *clock) Stop(h uint64) bool {
	if h <= c.base || h-c.base > uint64(len(c.ts)) {
		return false
	}
	t := &c.ts[h-c.base-1]
	was := t.live
	t.live = false
	return was
}

// advance moves the clock d ahead, firing the timers due by then: the
// earliest first, those due at one time in the order they were started,
// including timers a fire starts.
func (c *clock) advance(d time.Duration) {
	end := c.now + d
	for {
		next, due := end, false
		for i := range c.ts {
			if t := &c.ts[i]; t.live && t.at <= next {
				next, due = t.at, true
			}
		}
		if !due {
			break
		}
		c.now = max(c.now, next)
		for i := 0; i < len(c.ts); i++ { // a fire may append
			if t := c.ts[i]; t.live && t.at <= c.now {
				c.ts[i].live = false
				c.fired++
				c.e.Timer(t.kind, t.arg, c.now)
			}
		}
	}
	c.now = end
	k := 0
	for k < len(c.ts) && !c.ts[k].live {
		k++
	}
	c.ts = c.ts[:copy(c.ts, c.ts[k:])]
	c.base += uint64(k)
}

// pending returns the number of timers neither fired nor stopped.
func (c *clock) pending() int {
	n := 0
	for i := range c.ts {
		if c.ts[i].live {
			n++
		}
	}
	return n
}

// release drops the list's storage when no timer is pending.
func (c *clock) release() {
	if len(c.ts) == 0 {
		c.ts = nil
	}
}

type rigOptions struct {
	// strict validates every message sipedge sends and checks topology
	// hiding on it.
	strict bool
	// trusted skips Validate on what the peers send: it only reads the
	// message, so the engine ends in the same state, sooner. For setups
	// that measure memory, not time; the tests validate the same messages.
	trusted bool
	// maxDuration is the engine's maximum call duration (0: unlimited).
	maxDuration time.Duration
	// period is the number of calls between two advances of the clock by
	// idle (see tick).
	period uint64
	// failover routes every call to two carriers, the first of which
	// answers 503: one failover per call.
	failover bool
	// journal gives the engine a journal (Env.Journal) that counts what it
	// hears: the record each answered call hands over, built as the CDR is.
	journal bool
	// plane puts the server's carrier plane between the engine and the
	// carriers (carrier.Plane, no gateway groups: each route to its next
	// hop, per-carrier metrics), instead of the call core's own
	// carrier.NextHops; quality adds its quality statistics in that mode
	// (off, demote, sort), judging PDD, AST and ACD only: ASR and CCR
	// would demote the failing carrier and end the failovers. The rig
	// ticks the shard's collector after each call, as the shard loop
	// does, and runs the reader (Monitor.Update, another goroutine in the
	// server) as the clock advances, its work counted in the calls'.
	plane   bool
	quality string
	// reorder (with failover and quality demote) lists the answering
	// carrier first: its calls last 0 s, so its ACD demotes it behind the
	// failing one, and every call's routes are reordered, the failover
	// kept.
	reorder bool
	// trim lets the transaction table give back the buffers of slots free
	// for txn.DefaultIdleRelease. Off by default: tick idles the rig for
	// 40 s, which a steady load never does, and the table would give its
	// buffers back at every tick.
	trim bool
}

// countingJournal is an Env.Journal that counts the calls answered and
// ended, and gives the records back to the pool.
type countingJournal struct{ answered, ended int }

func (j *countingJournal) Answered(_ uint64, rec *cdr.Record) bool {
	j.answered++
	cdr.ReleaseRecord(rec)
	return true
}

func (j *countingJournal) Ended(uint64) { j.ended++ }

// idle is how far tick moves the clock: beyond 64*T1 = 32 s, the longest
// transaction timer (B, F, H, J, L, M), so that every transaction of the
// calls made before has ended.
const idle = 40 * time.Second

type rig struct {
	tb       testing.TB
	e        *b2bua.Engine
	carriers *carrier.Shard   // with rigOptions.plane
	monitor  *quality.Monitor // with rigOptions.quality
	clk      clock
	period   uint64
	trusted  bool
	failover bool
	caller   peer
	carrier  peer
	in       parser.Message // the shard's: what a peer sends, parsed
	inv      parser.Message // the carrier's: the B-leg INVITE it answers

	n      uint64 // the current call
	aTag   []byte // the caller's: sipedge's To tag of the A-leg dialog
	bTag   []byte // the carrier's To tag
	minted uint64
	want   []byte // scratch: the A-leg Call-ID of the current call

	journal countingJournal // with rigOptions.journal

	// What the CDRs said: calls ended, and those that did not end as a
	// call answered 200 and hung up by the caller should (the first of
	// them in bad).
	ended, wrong int
	bad          string
}

func newRig(tb testing.TB, o rigOptions) *rig {
	r := &rig{tb: tb, period: o.period, trusted: o.trusted, failover: o.failover}
	if r.period == 0 {
		r.period = 1024
	}
	r.clk.now = time.Second // times of 0 read as "did not happen" in a Summary
	r.caller = peer{tb: tb, addr: transport.Peer{Addr: callerAddr, Transport: transport.UDP},
		name: "caller", secret: "carrier", strict: o.strict}
	r.carrier = peer{tb: tb, addr: transport.Peer{Addr: carrierAddr, Transport: transport.UDP},
		name: "carrier", secret: "caller", strict: o.strict}
	for _, p := range []*peer{&r.caller, &r.carrier} {
		p.q, p.ends, p.out = make([]byte, 0, 8<<10), make([]int, 0, 8), make([]byte, 0, 2<<10)
	}
	r.aTag, r.bTag, r.want = make([]byte, 0, 64), make([]byte, 0, 64), make([]byte, 0, 64)
	// Every call to the one carrier, its next hop: the call core's own
	// carrier plane (carrier.NextHops), without gateway groups or limits.
	routes := b2bua.Routes{{CarrierID: "carrier-a", NextHop: "sip:198.51.100.20:5070", Rate: 0.004, Currency: "USD"}}
	if o.failover {
		failing := route.Route{CarrierID: "carrier-z", NextHop: "sip:198.51.100.20:5070", Rate: 0.003, Currency: "USD"}
		if o.reorder {
			routes = append(routes, failing)
		} else {
			routes = append(b2bua.Routes{failing}, routes...)
		}
	}
	cfg := b2bua.Config{
		Trunks: []b2bua.Trunk{{Name: "local", Group: "cust-trunks",
			Sources: []b2bua.Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}},
		HeaderAllow: []string{"Allow", "Supported"},
		LocalUDP:    "203.0.113.1:5060",
		MaxDuration: o.maxDuration,
		Txn:         txn.Config{IdleRelease: -1},
	}
	if o.trim {
		cfg.Txn.IdleRelease = 0 // the default
	}
	env := b2bua.Env{
		Send:       r.send,
		Clock:      &r.clk,
		MintCallID: r.mintCallID,
		Router:     routes,
		CDR:        r,
		Log:        slog.New(slog.DiscardHandler), // a failover per call logs at info
	}
	if o.journal {
		env.Journal = &r.journal
	}
	if o.plane {
		r.newPlane(o.quality)
		env.Carriers = r.carriers
		if o.reorder {
			// carrier-a's first calls, as short as the rig's: demoted
			// (ACD) before the first call.
			for range 30 {
				r.carriers.Report(&carrier.Report{Event: carrier.CallEnded, CarrierID: "carrier-a", Number: []byte("15551234"),
					Code: 200, Dialed: true, At: r.clk.now})
			}
			r.clk.now += idle
			r.carriers.Tick(r.clk.now)
			r.monitor.Update(r.clk.now)
		}
	}
	e, err := b2bua.New(cfg, env)
	if err != nil {
		tb.Fatal(err)
	}
	r.e, r.clk.e = e, e
	return r
}

// newPlane makes the carrier plane of rigOptions.plane, with quality
// statistics in mode (none when "").
func (r *rig) newPlane(mode string) {
	opts := carrier.Options{Log: slog.New(slog.DiscardHandler)}
	if mode != "" {
		off := quality.Limits{Warning: quality.Off}
		opts.Quality = &quality.Config{Mode: mode, Profiles: []quality.Profile{{Name: "default", ASR: off, CCR: off}}}
		opts.QualityOptions = quality.Options{Shards: 1}
	}
	p, err := carrier.New(opts)
	if err != nil {
		r.tb.Fatal(err)
	}
	r.tb.Cleanup(p.Close)
	r.carriers = p.NewShard(carrier.ShardOptions{Now: func() time.Duration { return r.clk.now }})
	r.monitor = p.Quality()
}

// send is Env.Send: a copy into the addressee's queue.
func (r *rig) send(to transport.Peer, b []byte) {
	switch to.Addr {
	case callerAddr:
		r.caller.push(b)
	case carrierAddr:
		r.carrier.push(b)
	default:
		r.tb.Fatalf("sipedge sent to %v:\n%s", to.Addr, b)
	}
}

// mintCallID is Env.MintCallID; with one shard every Call-ID hashes to it.
func (r *rig) mintCallID(dst []byte) []byte {
	r.minted++
	dst = append(dst, 'b')
	dst = strconv.AppendUint(dst, r.minted, 10)
	return append(dst, "@sipedge"...)
}

// Write is Env.CDR's: the call's record, checked.
func (r *rig) Write(rec *cdr.Record) bool {
	r.ended++
	r.want = strconv.AppendUint(append(r.want[:0], "caller-"...), r.n, 10)
	r.want = append(r.want, "@caller.example.org"...)
	// With a failover, the first carrier's attempt names the B-leg it saw.
	failedOver := len(rec.Attempts) == 1 && rec.Attempts[0].BCallID != "" && !rec.Attempts[0].TimeInvite.IsZero()
	if rec.FinalCode != 200 || rec.HangupSide != cdr.HangupCaller || rec.ACallID != string(r.want) ||
		rec.TimeAnswer.IsZero() || rec.TimeEnd.IsZero() || rec.CarrierID != "carrier-a" || r.failover != failedOver {
		if r.wrong == 0 {
			r.bad = string(rec.AppendJSON(nil))
		}
		r.wrong++
	}
	cdr.ReleaseRecord(rec)
	return true
}

// deliver hands the message p built to the engine as the shard would.
func (r *rig) deliver(p *peer) {
	if err := r.in.Parse(p.out); err != nil {
		r.tb.Fatalf("the %s's message does not parse: %v\n%s", p.name, err, p.out)
	}
	if !r.trusted { // see rigOptions.trusted
		if err := r.in.Validate(nil); err != nil {
			r.tb.Fatalf("the %s's message does not validate: %v\n%s", p.name, err, p.out)
		}
	}
	r.e.Receive(&r.in, p.addr, r.clk.now)
}

// call makes one complete call: answered, then hung up by the caller.
func (r *rig) call() {
	r.answer()
	r.hangup()
}

// answer makes the next call up to its confirmation: the caller's INVITE
// (100 to the caller, INVITE to the carrier), the carrier's 100, 180 and
// 200 (180 and 200 to the caller), the caller's ACK (ACK to the carrier).
func (r *rig) answer() {
	r.n++
	n := r.n
	a, b := &r.caller, &r.carrier
	a.clear()
	b.clear()

	a.out = inviteTmpl.append(a.out[:0], n, nil)
	r.deliver(a)
	a.expect("SIP/2.0 100 ")
	inv := b.request(&r.inv, parser.MethodInvite)
	if r.failover { // the cheapest carrier is out of circuits
		r.bTag = strconv.AppendUint(append(r.bTag[:0], "busy-"...), n, 10)
		b.out = parser.AppendBody(parser.AppendResponse(b.out[:0], inv, 503, "Service Unavailable", r.bTag), "", nil)
		r.deliver(b)
		b.expect("ACK ") // the transaction layer's (RFC 3261 17.1.1.3)
		inv = b.request(&r.inv, parser.MethodInvite)
	}

	r.bTag = strconv.AppendUint(append(r.bTag[:0], "carrier-"...), n, 10)
	b.out = parser.AppendBody(parser.AppendResponse(b.out[:0], inv, 100, "Trying", nil), "", nil)
	r.deliver(b)
	b.out = parser.AppendResponse(b.out[:0], inv, 180, "Ringing", r.bTag)
	b.out = parser.AppendBody(append(b.out, carrierContact...), "", nil)
	r.deliver(b)
	a.expect("SIP/2.0 180 ")
	b.out = parser.AppendResponse(b.out[:0], inv, 200, "OK", r.bTag)
	b.out = parser.AppendBody(append(b.out, carrierAnswer...), "", answerBody)
	r.deliver(b)
	ok := a.response(200)
	var to parser.Address
	if err := ok.To(&to); err != nil || len(to.Tag) == 0 {
		r.tb.Fatalf("the caller's 200 has no To tag:\n%s", ok.Bytes())
	}
	r.aTag = append(r.aTag[:0], to.Tag...)

	a.out = ackTmpl.append(a.out[:0], n, r.aTag)
	r.deliver(a)
	b.expect("ACK ")
	a.done()
	b.done()
}

// hangup ends the current call with the caller's BYE (200 to the caller,
// BYE to the carrier) and the carrier's 200.
func (r *rig) hangup() {
	a, b := &r.caller, &r.carrier
	a.clear()
	b.clear()
	a.out = byeTmpl.append(a.out[:0], r.n, r.aTag)
	r.deliver(a)
	a.expect("SIP/2.0 200 ")
	bye := b.request(&b.m, parser.MethodBye)
	b.out = parser.AppendBody(parser.AppendResponse(b.out[:0], bye, 200, "OK", nil), "", nil)
	r.deliver(b)
	a.done()
	b.done()
}

// tick advances the clock by idle once every period calls, so the
// transactions of the calls made before end and the rig reaches a steady
// state.
func (r *rig) tick() {
	if r.n%r.period == 0 {
		r.clk.advance(idle)
		if r.monitor != nil {
			r.carriers.Tick(r.clk.now)
			r.monitor.Update(r.clk.now)
		}
	}
	if r.carriers != nil {
		r.carriers.Tick(r.clk.now) // the shard loop's, once a call here
	}
}

// check fails unless every call ended answered and hung up by the caller.
func (r *rig) check(wantEnded int) {
	r.tb.Helper()
	if r.wrong != 0 {
		r.tb.Fatalf("%d of %d calls ended wrong; the first: %s", r.wrong, r.ended, r.bad)
	}
	if r.ended != wantEnded {
		r.tb.Fatalf("%d calls ended, want %d", r.ended, wantEnded)
	}
	if live := r.e.Calls(); live != int(r.n)-wantEnded {
		r.tb.Fatalf("%d live calls, want %d", live, int(r.n)-wantEnded)
	}
}
