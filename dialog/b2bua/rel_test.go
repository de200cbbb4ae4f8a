package b2bua

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// recvExt delivers a message as the runtime does, Validate knowing the
// option tags sipedge implements: a request requiring 100rel passes.
func (r *rig) recvExt(from string, msg string) {
	r.t.Helper()
	var m parser.Message
	if err := m.Parse([]byte(msg)); err != nil {
		r.t.Fatalf("test message does not parse: %v\n%s", err, msg)
	}
	if err := m.Validate(OptionTags()); err != nil {
		r.t.Fatalf("test message does not validate: %v\n%s", err, msg)
	}
	addr := caller
	if from == "carrier" {
		addr = carrierA
	}
	r.e.Receive(&m, transport.Peer{Addr: addr, Transport: transport.UDP}, r.Clock.Now)
}

// inviteRel is the caller's INVITE with the 100rel header line rel, and
// its SDP offer unless late.
func inviteRel(rel string, late bool) string {
	inv := strings.Replace(callerInvite("1", "a-call-1", "15551234"), "X-Keep: kept\r\n", "X-Keep: kept\r\n"+rel+"\r\n", 1)
	if late {
		inv = inv[:strings.Index(inv, "Content-Type")] + "Content-Length: 0\r\n\r\n"
	}
	return inv
}

// reliable is the carrier's provisional to binv, sent reliably with rseq
// (RFC 3262 3); 0 for an ordinary one.
func reliable(binv *parser.Message, code int, reason string, rseq int, body string) string {
	s := carrierResponse(binv, code, reason, body)
	if rseq == 0 {
		return s
	}
	return strings.Replace(s, "Content-Length", fmt.Sprintf("Require: 100rel\r\nRSeq: %d\r\nContent-Length", rseq), 1)
}

// prack is the caller's PRACK in the early dialog aTag for rseq (RFC
// 3262 7.2: RAck names the INVITE's CSeq, 10).
func prack(aTag string, cseq int, rseq, body string) string {
	s := inDialogFromCaller("PRACK", fmt.Sprintf("prack%d", cseq), cseq, aTag, body)
	return strings.Replace(s, "Contact:", "RAck: "+rseq+" 10 INVITE\r\nContact:", 1)
}

func rseqOf(t *testing.T, m *parser.Message) string {
	t.Helper()
	if !m.HasOptionTag(parser.HeaderRequire, "100rel") || m.Get(parser.HeaderRSeq) == nil {
		t.Fatalf("not a reliable provisional (Require: 100rel, RSeq; RFC 3262 3):\n%s", m.Bytes())
	}
	return string(m.Get(parser.HeaderRSeq))
}

// sipedge PRACKs each reliable provisional of the carrier's early dialog
// once, in order (RFC 3262 4): a retransmission, or one whose RSeq is not
// the next, gets no PRACK and goes no further; a caller that supports
// 100rel gets the reliable ones reliably.
func TestPrackCarrier(t *testing.T) {
	r := newRig(t, nil)
	r.recvExt("caller", inviteRel("Supported: 100rel", false))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	if !binv.HasOptionTag(parser.HeaderSupported, "100rel") {
		t.Fatalf("the carrier's INVITE does not support 100rel:\n%s", binv.Bytes())
	}
	r.recvExt("carrier", reliable(binv, 180, "Ringing", 5, ""))
	p := r.expect(carrierA, "PRACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	c1, _ := binv.CSeq()
	c2, _ := p.CSeq()
	if hdr(p, parser.HeaderRAck) != fmt.Sprintf("5 %d INVITE", c1.Num) || tagOf(t, p, parser.HeaderTo) != "btag9" ||
		hdr(p, parser.HeaderCallID) != hdr(binv, parser.HeaderCallID) || c2.Num != c1.Num+1 {
		t.Fatalf("PRACK not in the early dialog, or its RAck wrong:\n%s", p.Bytes())
	}
	rseqOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0])
	r.recvExt("carrier", reliable(binv, 180, "Ringing", 5, "")) // a retransmission
	r.recvExt("carrier", reliable(binv, 183, "Session Progress", 7, sdp))
	r.expect(carrierA)
	r.expect(caller)
	r.recv(carrierA, carrierResponse(p, 200, "OK", ""))
	r.recvExt("carrier", reliable(binv, 183, "Session Progress", 6, sdp))
	if got := hdr(r.expect(carrierA, "PRACK sip:gw@carrier.example.net:5070 SIP/2.0")[0], parser.HeaderRAck); got != fmt.Sprintf("6 %d INVITE", c1.Num) {
		t.Errorf("second PRACK's RAck %q", got)
	}
}

// A caller that supports 100rel without requiring it gets reliably what
// the carrier sent reliably, and the rest as it came (RFC 3262 3: the UAS
// MAY); one that supports nothing gets none reliably.
func TestReliableMirrorsCarrier(t *testing.T) {
	r := newRig(t, nil)
	r.recvExt("caller", inviteRel("Supported: 100rel", false))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recvExt("carrier", reliable(binv, 180, "Ringing", 0, ""))
	if m := r.expect(caller, "SIP/2.0 180 Ringing")[0]; m.Get(parser.HeaderRSeq) != nil {
		t.Errorf("an unreliable 180 went reliably to a caller that only supports 100rel:\n%s", m.Bytes())
	}

	r = newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	binv = r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	if binv.HasOptionTag(parser.HeaderSupported, "100rel") {
		t.Errorf("100rel offered to the carrier for a caller without it:\n%s", binv.Bytes())
	}
	r.recvExt("carrier", reliable(binv, 180, "Ringing", 1, "")) // not asked for: PRACKed all the same
	r.expect(carrierA, "PRACK sip:gw@carrier.example.net:5070 SIP/2.0")
	if m := r.expect(caller, "SIP/2.0 180 Ringing")[0]; m.Get(parser.HeaderRSeq) != nil || m.Get(parser.HeaderRequire) != nil {
		t.Errorf("a caller without 100rel got a reliable provisional:\n%s", m.Bytes())
	}
}

// A caller that requires 100rel gets every provisional reliably, one at a
// time, each retransmitted from T1 until its PRACK; the 2xx waits for the
// PRACK of one with SDP (RFC 3262 3); each PRACK gets 200 from sipedge and
// none reaches the carrier.
func TestReliableToCaller(t *testing.T) {
	r := newRig(t, nil)
	r.recvExt("caller", inviteRel("Require: 100rel", false))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	if binv.Get(parser.HeaderRequire) != nil || !binv.HasOptionTag(parser.HeaderSupported, "100rel") {
		t.Fatalf("the caller's Require reached the carrier, or sipedge's Supported did not:\n%s", binv.Bytes())
	}
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	ring := r.expect(caller, "SIP/2.0 180 Ringing")[0]
	rs1 := rseqOf(t, ring)
	aTag := tagOf(t, ring, parser.HeaderTo)
	r.advance(500 * time.Millisecond)
	r.expect(caller, "SIP/2.0 180 Ringing") // T1
	r.recv(carrierA, carrierResponse(binv, 183, "Session Progress", sdp))
	r.expect(caller) // one reliable provisional at a time
	r.advance(time.Second)
	r.expect(caller, "SIP/2.0 180 Ringing") // 2*T1

	r.recvExt("caller", prack(aTag, 11, rs1, ""))
	got := r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 183 Session Progress")
	if m, _ := got[0].CSeq(); m.Method != parser.MethodPrack {
		t.Fatalf("200 not for the PRACK:\n%s", got[0].Bytes())
	}
	rs2 := rseqOf(t, got[1])
	if rs1 == rs2 || string(got[1].Body()) != sdp || tagOf(t, got[1], parser.HeaderTo) != aTag {
		t.Fatalf("the 183 after the PRACK (RSeq %s, first %s):\n%s", rs2, rs1, got[1].Bytes())
	}
	r.expect(carrierA) // the PRACK is sipedge's

	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	r.expect(caller) // the 183 had SDP: its PRACK first
	r.recvExt("caller", prack(aTag, 12, rs2, ""))
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 200 OK")
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	r.advance(time.Minute)
	r.expect(caller) // nothing retransmitted once PRACKed and ACKed
}

// A PRACK that acknowledges nothing awaiting one gets 481 (RFC 3262 3);
// one carrying an offer acknowledges its provisional but gets 488.
func TestPrackFromCaller(t *testing.T) {
	r := newRig(t, nil)
	r.recvExt("caller", inviteRel("Require: 100rel", false))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	ring := r.expect(caller, "SIP/2.0 180 Ringing")[0]
	rs, aTag := rseqOf(t, ring), tagOf(t, ring, parser.HeaderTo)
	r.recvExt("caller", prack(aTag, 11, "1"+rs, ""))
	r.expect(caller, "SIP/2.0 481 Call/Transaction Does Not Exist")
	r.recvExt("caller", prack(aTag, 12, rs, sdp))
	r.expect(caller, "SIP/2.0 488 Not Acceptable Here")
	r.advance(2 * time.Second)
	r.expect(caller) // acknowledged: no more retransmissions
	r.recvExt("caller", prack(aTag, 13, rs, ""))
	r.expect(caller, "SIP/2.0 481 Call/Transaction Does Not Exist")
	r.expect(carrierA)
}

// Without its PRACK for 64*T1 a reliable provisional fails the call:
// 500 to the caller (RFC 3262 3), the carrier cancelled.
func TestReliableNotAcknowledged(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Sequence.RingTimeout = time.Minute })
	r.recvExt("caller", inviteRel("Require: 100rel", false))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	r.advance(32200 * time.Millisecond) // 64*T1 after the 180, not yet T1 after the 500
	got := r.take(caller)
	if n := len(got); n != 8 || !strings.HasPrefix(got[n-1], "SIP/2.0 500 ") {
		t.Fatalf("the 180 and its 6 retransmissions (0.5 s doubling, for 32 s), then a 500: %d messages, last %q", n, firstLine(got[n-1]))
	}
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.recv(carrierA, carrierResponse(binv, 487, "Request Terminated", ""))
	r.take(carrierA)
	if s := r.summary(); s.FinalCode != 500 || s.HangupSide.String() != "system" {
		t.Errorf("CDR final %d hangup %q", s.FinalCode, s.HangupSide)
	}
}

// In a caller's dialog without an offer, a reliable provisional carries no
// SDP: it would be an offer, answered in a PRACK the carrier's dialog has
// no place for (RFC 3262 5); nor is 100rel offered to the carrier then.
func TestReliableLateOffer(t *testing.T) {
	r := newRig(t, nil)
	r.recvExt("caller", inviteRel("Require: 100rel", true))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	if binv.HasOptionTag(parser.HeaderSupported, "100rel") {
		t.Errorf("100rel offered to the carrier for a late offer:\n%s", binv.Bytes())
	}
	r.recv(carrierA, carrierResponse(binv, 183, "Session Progress", sdp))
	m := r.expect(caller, "SIP/2.0 183 Session Progress")[0]
	rseqOf(t, m)
	if len(m.Body()) != 0 || m.Get(parser.HeaderContentType) != nil {
		t.Errorf("a reliable provisional in a late offer carries SDP:\n%s", m.Bytes())
	}
}

// A failover starts a new early dialog for the caller, under another To
// tag: the first carrier's provisional awaiting its PRACK is forgotten, and
// the next carrier's goes at once.
func TestReliableAcrossFailover(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	r.recvExt("caller", inviteRel("Require: 100rel", false))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	t1 := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
	r.recv(carrierA, carrierResponse(binv, 503, "Service Unavailable", ""))
	r.take(carrierA)
	binv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(binv2, 180, "Ringing", ""))
	m := r.expect(caller, "SIP/2.0 180 Ringing")[0]
	rseqOf(t, m)
	if tagOf(t, m, parser.HeaderTo) == t1 {
		t.Errorf("the second carrier's 180 in the first one's early dialog")
	}
}
