package txn

import (
	"net/netip"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Requests as a B2BUA receives them: two Vias, the usual headers.
var (
	benchOptions = []byte("OPTIONS sip:bob@biloxi.example.com SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP pc33.atlanta.example.com:5060;branch=z9hG4bK776asdhds;rport\r\n" +
		"Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKnashds8;received=192.0.2.1\r\n" +
		"Max-Forwards: 70\r\n" +
		"To: \"Bob\" <sip:bob@biloxi.example.com>\r\n" +
		"From: \"Alice\" <sip:alice@atlanta.example.com>;tag=1928301774\r\n" +
		"Call-ID: a84b4c76e66710@pc33.atlanta.example.com\r\n" +
		"CSeq: 63104 OPTIONS\r\n" +
		"Contact: <sip:alice@pc33.atlanta.example.com>\r\n" +
		"Accept: application/sdp\r\n" +
		"Content-Length: 0\r\n\r\n")
	benchInvite = []byte("INVITE sip:bob@biloxi.example.com SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP pc33.atlanta.example.com:5060;branch=z9hG4bK776asdhds;rport\r\n" +
		"Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKnashds8;received=192.0.2.1\r\n" +
		"Max-Forwards: 70\r\n" +
		"To: \"Bob\" <sip:bob@biloxi.example.com>\r\n" +
		"From: \"Alice\" <sip:alice@atlanta.example.com>;tag=1928301774\r\n" +
		"Call-ID: a84b4c76e66710@pc33.atlanta.example.com\r\n" +
		"CSeq: 314159 INVITE\r\n" +
		"Contact: <sip:alice@pc33.atlanta.example.com:5060;transport=udp>\r\n" +
		"Content-Type: application/sdp\r\n" +
		"Content-Length: 0\r\n\r\n")
	// The ACK for the 2xx: a branch of its own, so no transaction matches it.
	benchAck = []byte("ACK sip:bob@192.0.2.4 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP pc33.atlanta.example.com:5060;branch=z9hG4bKnashds9;rport\r\n" +
		"Max-Forwards: 70\r\n" +
		"To: \"Bob\" <sip:bob@biloxi.example.com>;tag=a6c85cf\r\n" +
		"From: \"Alice\" <sip:alice@atlanta.example.com>;tag=1928301774\r\n" +
		"Call-ID: a84b4c76e66710@pc33.atlanta.example.com\r\n" +
		"CSeq: 314159 ACK\r\n" +
		"Content-Length: 0\r\n\r\n")
	benchUAC = []byte("OPTIONS sip:carol@chicago.example.com SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bKb2b1a\r\n" +
		"Max-Forwards: 70\r\n" +
		"To: <sip:carol@chicago.example.com>\r\n" +
		"From: <sip:b2bua@example.org>;tag=88sja8x\r\n" +
		"Call-ID: 3848276298220188511@b2bua.example.org\r\n" +
		"CSeq: 1 OPTIONS\r\n" +
		"Content-Length: 0\r\n\r\n")
	// An INVITE the TU built, and the carrier's 486 to it.
	benchUACInvite = []byte("INVITE sip:carol@chicago.example.com SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bKb2b1i\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: <sip:b2bua@example.org>;tag=88sja8y\r\n" +
		"To: <sip:carol@chicago.example.com>\r\n" +
		"Call-ID: 3848276298220188512@b2bua.example.org\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Content-Length: 0\r\n\r\n")
	benchUACBusy = []byte("SIP/2.0 486 Busy Here\r\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bKb2b1i;received=198.51.100.1\r\n" +
		"To: <sip:carol@chicago.example.com>;tag=8321234357\r\n" +
		"From: <sip:b2bua@example.org>;tag=88sja8y\r\n" +
		"Call-ID: 3848276298220188512@b2bua.example.org\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Content-Length: 0\r\n\r\n")
	benchUACResponse = []byte("SIP/2.0 200 OK\r\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bKb2b1a;received=198.51.100.1\r\n" +
		"To: <sip:carol@chicago.example.com>;tag=8321234356\r\n" +
		"From: <sip:b2bua@example.org>;tag=88sja8x\r\n" +
		"Call-ID: 3848276298220188511@b2bua.example.org\r\n" +
		"CSeq: 1 OPTIONS\r\n" +
		"Content-Length: 0\r\n\r\n")
)

var benchPeer = transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5060"), Transport: transport.UDP}

// seq is one complete transaction driven the way a shard drives it: parse,
// table input, read actions, fire timers.
type seq struct {
	tb    testing.TB
	tab   *Table
	clock *fakeTimers
	m     parser.Message
	resp  []byte
	now   time.Duration
	sent  int // ActSend seen, so the work is not optimised away
	built *Built
}

func newSeq(tb testing.TB) *seq {
	s := &seq{tb: tb, clock: &fakeTimers{}, resp: make([]byte, 0, 1024)}
	var err error
	if s.tab, err = New(Config{}, s.clock); err != nil {
		tb.Fatal(err)
	}
	return s
}

func (s *seq) parse(buf []byte) *parser.Message {
	if err := s.m.Parse(buf); err != nil {
		s.tb.Fatal(err)
	}
	return &s.m
}

// expect checks that the last call output want actions, the last of kind
// last, and returns the transaction of the last.
func (s *seq) expect(err error, want int, last ActionKind) Handle {
	if err != nil {
		s.tb.Fatal(err)
	}
	acts := s.tab.Actions()
	if len(acts) != want || acts[want-1].Kind != last {
		s.tb.Fatalf("actions %v, want %d ending in %v", acts, want, last)
	}
	for _, a := range acts {
		if a.Kind == ActSend {
			s.sent += len(a.Data)
		}
	}
	return acts[want-1].Txn
}

// fire advances the clock by d and delivers the one transaction timer
// due, and the table's trim timer before it if that is due too.
func (s *seq) fire(d time.Duration) {
	s.now += d
	for {
		ft, ok := s.clock.next(s.now)
		if !ok {
			s.tb.Fatal("no timer due")
		}
		s.tab.Timeout(ft.arg, s.now)
		if ft.arg != trimArg {
			return
		}
	}
}

// respond has the TU answer server transaction h.
func (s *seq) respond(h Handle, code int, reason string) {
	s.resp = parser.AppendResponse(s.resp[:0], &s.m, code, reason, []byte("a6c85cf"))
	s.resp = parser.AppendBody(s.resp, "", nil)
	s.expect(s.tab.Respond(h, s.resp, s.now), 1, ActSend)
}

// nonInviteServer: OPTIONS in, TU 200, Timer J fires, Terminated
// (RFC 3261 17.2.2).
func (s *seq) nonInviteServer() {
	h := s.expect(s.tab.ReceiveRequest(s.parse(benchOptions), benchPeer, s.now), 1, ActRequest)
	s.respond(h, 200, "OK")
	s.fire(64 * DefaultT1) // J
	s.expect(nil, 1, ActTerminated)
}

// inviteServer: INVITE in, 100 Trying at once, TU 200, the ACK for the 2xx
// to the TU, Timer L fires, Terminated (RFC 3261 17.2.1, RFC 6026 7.1).
func (s *seq) inviteServer() {
	h := s.expect(s.tab.ReceiveRequest(s.parse(benchInvite), benchPeer, s.now), 2, ActRequest)
	s.respond(h, 200, "OK")
	s.expect(s.tab.ReceiveRequest(s.parse(benchAck), benchPeer, s.now), 1, ActAck)
	s.fire(64 * DefaultT1) // L
	s.expect(nil, 1, ActTerminated)
}

// nonInviteClient: OPTIONS out, 200 in, Timer K fires, Terminated
// (RFC 3261 17.1.2).
func (s *seq) nonInviteClient() {
	h, err := s.tab.SendRequest(s.parse(benchUAC), benchPeer, s.now)
	s.expect(err, 1, ActSend)
	if got := s.expect(s.tab.ReceiveResponse(s.parse(benchUACResponse), s.now), 1, ActResponse); got != h {
		s.tb.Fatalf("response went to %v, want %v", got, h)
	}
	s.fire(DefaultT4) // K
	s.expect(nil, 1, ActTerminated)
}

// inviteClientBuilt: an INVITE sent with SendBuilt, a 486 in (ACKed from
// the spans kept for it), Timer D fires, Terminated (RFC 3261 17.1.1).
func (s *seq) inviteClientBuilt() {
	if s.built == nil {
		s.built = describe(benchUACInvite, "INVITE")
	}
	h, err := s.tab.SendBuilt(s.built, benchPeer, s.now)
	s.expect(err, 1, ActSend)
	if got := s.expect(s.tab.ReceiveResponse(s.parse(benchUACBusy), s.now), 2, ActResponse); got != h {
		s.tb.Fatalf("response went to %v, want %v", got, h)
	}
	s.fire(64 * DefaultT1) // D
	s.expect(nil, 1, ActTerminated)
}

func benchSeq(b *testing.B, bytes int, run func(*seq)) {
	s := newSeq(b)
	b.ReportAllocs()
	b.SetBytes(int64(bytes))
	for b.Loop() {
		run(s)
	}
	if s.tab.Len() != 0 {
		b.Fatalf("%d transactions left", s.tab.Len())
	}
}

// BenchmarkNonInviteTransaction is a complete non-INVITE server transaction
// through the pure transaction layer, parsing included.
func BenchmarkNonInviteTransaction(b *testing.B) {
	benchSeq(b, len(benchOptions), (*seq).nonInviteServer)
}

// BenchmarkNonInviteBaseline is the same work without the transaction
// layer: parse the request, build the 200. The difference to
// BenchmarkNonInviteTransaction is what the layer costs.
func BenchmarkNonInviteBaseline(b *testing.B) {
	s := newSeq(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchOptions)))
	for b.Loop() {
		m := s.parse(benchOptions)
		s.resp = parser.AppendResponse(s.resp[:0], m, 200, "OK", []byte("a6c85cf"))
		s.resp = parser.AppendBody(s.resp, "", nil)
	}
}

// BenchmarkInviteTransaction is an INVITE server transaction answered 2xx:
// INVITE, 100, 200, ACK, Timer L.
func BenchmarkInviteTransaction(b *testing.B) {
	benchSeq(b, len(benchInvite)+len(benchAck), (*seq).inviteServer)
}

// BenchmarkNonInviteClientTransaction is a non-INVITE client transaction:
// request, 200, Timer K.
func BenchmarkNonInviteClientTransaction(b *testing.B) {
	benchSeq(b, len(benchUAC)+len(benchUACResponse), (*seq).nonInviteClient)
}
