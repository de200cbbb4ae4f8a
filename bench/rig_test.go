package bench

import (
	"log/slog"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// The rig runs one shard's b2bua.Engine on internal/enginerig, between two
// scripted peers: a caller on a trunk (the A-leg) and a carrier (the
// B-leg). What a peer sends is built as wire bytes from the templates
// below; what the engine sends the carrier is parsed by it, since it needs
// the B-leg Call-ID, tags and Vias to answer. Every buffer is reused from
// call to call, so a warm rig allocates nothing of its own: what allocates
// per call is the code under test.

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
	inviteTmpl = enginerig.Compile("INVITE sip:15551234@203.0.113.1 SIP/2.0\r\n" +
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
	ackTmpl = enginerig.Compile("ACK sip:sipedge@203.0.113.1:5060 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bK-caller-a$n;rport\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=caller-$n\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=$t\r\n" +
		"Call-ID: caller-$n@caller.example.org\r\n" +
		"CSeq: 1 ACK\r\n" +
		"Content-Length: 0\r\n\r\n")
	byeTmpl = enginerig.Compile("BYE sip:sipedge@203.0.113.1:5060 SIP/2.0\r\n" +
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
	// hooks sets a routing policy whose hooks do nothing: what running
	// them costs a call.
	hooks bool
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
	*enginerig.Rig
	e        *b2bua.Engine
	carriers *carrier.Shard   // with rigOptions.plane
	monitor  *quality.Monitor // with rigOptions.quality
	period   uint64
	failover bool
	caller   *enginerig.Peer
	carrier  *enginerig.Peer
	inv      parser.Message // the carrier's: the B-leg INVITE it answers

	n    uint64 // the current call
	aTag []byte // the caller's: sipedge's To tag of the A-leg dialog
	bTag []byte // the carrier's To tag
	want []byte // scratch: the A-leg Call-ID of the current call

	journal countingJournal // with rigOptions.journal

	// What the CDRs said: calls ended, and those that did not end as a
	// call answered 200 and hung up by the caller should (the first of
	// them in bad).
	ended, wrong int
	bad          string
}

func newRig(tb testing.TB, o rigOptions) *rig {
	r := &rig{Rig: enginerig.New(tb), period: o.period, failover: o.failover}
	r.Trusted = o.trusted
	if r.period == 0 {
		r.period = 1024
	}
	r.caller = r.NewPeer("caller", enginerig.Caller)
	r.carrier = r.NewPeer("carrier", enginerig.CarrierA)
	r.caller.Strict, r.caller.Secret = o.strict, "carrier"
	r.carrier.Strict, r.carrier.Secret = o.strict, "caller"
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
		Local:       b2bua.LocalAddrs{transport.UDP: enginerig.Local},
		MaxDuration: o.maxDuration,
		Txn:         txn.Config{IdleRelease: -1},
	}
	if o.trim {
		cfg.Txn.IdleRelease = 0 // the default
	}
	env := b2bua.Env{
		Send:       r.Wire.Send,
		Clock:      &r.Clock,
		MintCallID: r.MintCallID,
		Router:     routes,
		CDR:        enginerig.CDRFunc(r.checkCDR),
		Log:        slog.New(slog.DiscardHandler), // a failover per call logs at info
	}
	if o.hooks {
		env.Policy = b2bua.Policy{
			OnInvite:       func(*route.Request, *route.Decision) {},
			OnAnswer:       func(*b2bua.Call, *route.Route) {},
			OnRouteFailure: func(*b2bua.Call, *route.Route, route.Attempt) {},
			OnFailure:      func(*b2bua.Call, int, string) b2bua.FailureAction { return b2bua.FailureAction{} },
		}
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
					Code: 200, Dialed: true, At: r.Clock.Now})
			}
			r.Clock.Now += idle
			r.carriers.Tick(r.Clock.Now)
			r.monitor.Update(r.Clock.Now)
		}
	}
	e, err := b2bua.New(cfg, env)
	if err != nil {
		tb.Fatal(err)
	}
	r.e = e
	r.Attach(e)
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
		r.TB.Fatal(err)
	}
	r.TB.Cleanup(p.Close)
	r.carriers = p.NewShard(carrier.ShardOptions{Now: func() time.Duration { return r.Clock.Now }})
	r.monitor = p.Quality()
}

// checkCDR is Env.CDR's: the call's record, checked.
func (r *rig) checkCDR(rec *cdr.Record) {
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
	a, b := r.caller, r.carrier
	r.Clear()

	a.Out = inviteTmpl.Append(a.Out[:0], n, nil)
	a.Send()
	a.Expect("SIP/2.0 100 ")
	inv := b.Request(&r.inv, parser.MethodInvite)
	if r.failover { // the cheapest carrier is out of circuits
		r.bTag = strconv.AppendUint(append(r.bTag[:0], "busy-"...), n, 10)
		b.Out = parser.AppendBody(parser.AppendResponse(b.Out[:0], inv, 503, "Service Unavailable", r.bTag), "", nil)
		b.Send()
		b.Expect("ACK ") // the transaction layer's (RFC 3261 17.1.1.3)
		inv = b.Request(&r.inv, parser.MethodInvite)
	}

	r.bTag = strconv.AppendUint(append(r.bTag[:0], "carrier-"...), n, 10)
	b.Out = parser.AppendBody(parser.AppendResponse(b.Out[:0], inv, 100, "Trying", nil), "", nil)
	b.Send()
	b.Out = parser.AppendResponse(b.Out[:0], inv, 180, "Ringing", r.bTag)
	b.Out = parser.AppendBody(append(b.Out, carrierContact...), "", nil)
	b.Send()
	a.Expect("SIP/2.0 180 ")
	b.Out = parser.AppendResponse(b.Out[:0], inv, 200, "OK", r.bTag)
	b.Out = parser.AppendBody(append(b.Out, carrierAnswer...), "", answerBody)
	b.Send()
	ok := a.Response(200)
	var to parser.Address
	if err := ok.To(&to); err != nil || len(to.Tag) == 0 {
		r.TB.Fatalf("the caller's 200 has no To tag:\n%s", ok.Bytes())
	}
	r.aTag = append(r.aTag[:0], to.Tag...)

	a.Out = ackTmpl.Append(a.Out[:0], n, r.aTag)
	a.Send()
	b.Expect("ACK ")
	r.Done()
}

// hangup ends the current call with the caller's BYE (200 to the caller,
// BYE to the carrier) and the carrier's 200.
func (r *rig) hangup() {
	a, b := r.caller, r.carrier
	r.Clear()
	a.Out = byeTmpl.Append(a.Out[:0], r.n, r.aTag)
	a.Send()
	a.Expect("SIP/2.0 200 ")
	bye := b.Request(&b.M, parser.MethodBye)
	b.Out = parser.AppendBody(parser.AppendResponse(b.Out[:0], bye, 200, "OK", nil), "", nil)
	b.Send()
	r.Done()
}

// tick advances the clock by idle once every period calls, so the
// transactions of the calls made before end and the rig reaches a steady
// state.
func (r *rig) tick() {
	if r.n%r.period == 0 {
		r.Advance(idle)
		if r.monitor != nil {
			r.carriers.Tick(r.Clock.Now)
			r.monitor.Update(r.Clock.Now)
		}
	}
	if r.carriers != nil {
		r.carriers.Tick(r.Clock.Now) // the shard loop's, once a call here
	}
}

// check fails unless every call ended answered and hung up by the caller.
func (r *rig) check(wantEnded int) {
	r.TB.Helper()
	if r.wrong != 0 {
		r.TB.Fatalf("%d of %d calls ended wrong; the first: %s", r.wrong, r.ended, r.bad)
	}
	if r.ended != wantEnded {
		r.TB.Fatalf("%d calls ended, want %d", r.ended, wantEnded)
	}
	if live := r.e.Calls(); live != int(r.n)-wantEnded {
		r.TB.Fatalf("%d live calls, want %d", live, int(r.n)-wantEnded)
	}
}
