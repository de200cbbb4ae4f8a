package b2bua

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// carrierResponseTagged is carrierResponse with the To tag tag: another
// dialog of a forking carrier.
func carrierResponseTagged(req *parser.Message, code int, reason, body, tag string) string {
	b := parser.AppendResponse(nil, req, code, reason, []byte(tag))
	b = append(b, "Contact: <sip:gw@carrier.example.net:5070>\r\n"...)
	if body != "" {
		b = append(b, "Content-Type: application/sdp\r\n"...)
	}
	return string(parser.AppendBody(b, "", []byte(body)))
}

// ringAndAnswer starts a call the carrier rings and answers; the caller
// has not ACKed. It returns the B-leg INVITE and the A-leg's To tag.
func (r *rig) ringAndAnswer() (binv *parser.Message, aTag string) {
	r.t.Helper()
	binv = r.startCall()
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	aTag = tagOf(r.t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	return binv, aTag
}

// wantTag fails unless the To tag of every message is tag (requests from
// sipedge on the B-leg carry the carrier's tag in To).
func wantTag(t *testing.T, ms []*parser.Message, tag string) {
	t.Helper()
	for _, m := range ms {
		if got := tagOf(t, m, parser.HeaderTo); got != tag {
			t.Errorf("%s: To tag %q, want %q", firstLine(string(m.Bytes())), got, tag)
		}
	}
}

// A forking carrier's second 2xx is ACKed and BYEd on a dialog of its own
// (RFC 3261 13.2.2.4); the call's dialog is untouched: its ACK and BYE
// still carry the first 2xx's tag and the call's Call-ID. The engine's
// scratch dialog once shared the call's buffers, so this rewrote the call.
func TestForkedAnswerLeavesTheCallsDialog(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.ringAndAnswer()

	r.recv(carrierA, carrierResponseTagged(binv, 200, "OK", sdp, "fork1"))
	fork := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	wantTag(t, fork, "fork1")
	r.recv(carrierA, carrierResponseTagged(binv, 200, "OK", sdp, "fork1"))
	wantTag(t, r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0"), "fork1") // ACKed again, not BYEd again

	// A health probe reuses the scratch dialog.
	r.e.Probe(transport.Peer{Addr: carrierA, Transport: transport.UDP}, "sip:198.51.100.20:5070", time.Second, r.Clock.Now, func(int, time.Duration, time.Duration, error) {})
	r.expect(carrierA, "OPTIONS sip:198.51.100.20:5070 SIP/2.0")

	r.recv(caller, ackFromCaller(aTag))
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	wantTag(t, ack, "btag9")
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	bye := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	wantTag(t, bye, "btag9")
	if got, want := hdr(bye[0], parser.HeaderCallID), hdr(binv, parser.HeaderCallID); got != want {
		t.Errorf("the call's BYE has Call-ID %q, want the B-leg's %q", got, want)
	}
}

// A 2xx that arrives once the call has ended is one of sipedge's INVITEs
// establishing a dialog nobody keeps: it is ACKed and BYEd, however the
// call ended.
func TestAnswerAfterTheCallEndedIsAckedAndByed(t *testing.T) {
	cases := []struct {
		name string
		end  func(r *rig, binv *parser.Message, aTag string)
	}{
		{"ring timeout", func(r *rig, _ *parser.Message, _ string) {
			r.advance(45 * time.Second)
			r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
			r.expect(caller, "SIP/2.0 408 Request Timeout")
		}},
		{"caller BYE in the early dialog", func(r *rig, _ *parser.Message, aTag string) {
			r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
			r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated") // RFC 3261 15.1.2
			r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := routeA
			a.TimeoutSecs = 6
			r := newRig(t, func(c *Config) { c.Sequence.RingTimeout = 45 * time.Second })
			r.routes = []route.Route{a}
			binv := r.startCall()
			r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
			aTag := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
			tc.end(r, binv, aTag)
			if len(r.calls) != 1 {
				t.Fatalf("%d calls ended, want 1", len(r.calls))
			}
			late := r.e.m.lateAnswers.Get()
			r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
			ms := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
			wantTag(t, ms, "btag9")
			r.expect(caller) // the caller hears nothing more
			if got := r.e.m.lateAnswers.Get() - late; got != 1 {
				t.Errorf("late answers counted %d, want 1", got)
			}
		})
	}
}

// A 2xx to the carrier's re-INVITE is retransmitted to the carrier until
// its ACK (RFC 3261 13.3.1.4), which stops it and goes on to the caller.
func TestCarrierReinvite2xxRetransmittedUntilACK(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "INVITE", 1))
	r.expect(carrierA, "SIP/2.0 100 Trying")
	reinv := r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	r.recv(caller, callerResponse(reinv, 200, "OK"))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.advance(2 * time.Second) // T1, 2*T1: two retransmissions by 1.5 s
	if got := r.take(carrierA); len(got) != 2 || !strings.HasPrefix(got[0], "SIP/2.0 200 OK\r\n") {
		t.Fatalf("after 2 s the carrier got %d messages, want 2 retransmitted 200s", len(got))
	}
	ack := strings.Replace(inDialogFromCarrier(t, binv, "ACK", 1), "z9hG4bKCARRIERACK", "z9hG4bKCARRIERack2", 1)
	r.recv(carrierA, ack)
	r.expect(caller, "ACK sip:alice@caller.example.org:5061 SIP/2.0")
	r.advance(10 * time.Second)
	r.expect(carrierA) // no more retransmissions
}

// A carrier that did not hear sipedge's ACK for a re-INVITE's 2xx sends the
// 2xx again: it is ACKed again (RFC 3261 13.2.2.4), though the re-INVITE's
// transaction is no longer the call's.
func TestReinvite2xxRetransmissionACKedAgain(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "reinv", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	reinv := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	ok := carrierResponse(reinv, 200, "OK", sdp)
	r.recv(carrierA, ok)
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(carrierA, ok) // before the caller's ACK: nothing to repeat yet
	r.expect(carrierA)
	r.recv(caller, strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 11 ACK", 1))
	first := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, ok)
	again := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if got, want := hdr(again, parser.HeaderCSeq), hdr(first, parser.HeaderCSeq); got != want {
		t.Errorf("the repeated ACK has CSeq %q, want %q", got, want)
	}
	if hdr(again, parser.HeaderCSeq) != hdr(reinv, parser.HeaderCSeq)[:len(hdr(reinv, parser.HeaderCSeq))-len("INVITE")]+"ACK" {
		t.Errorf("the ACK's CSeq %q does not match the re-INVITE's %q", hdr(again, parser.HeaderCSeq), hdr(reinv, parser.HeaderCSeq))
	}
	if r.e.Calls() != 1 {
		t.Errorf("%d calls, want the call still up", r.e.Calls())
	}
}

// A caller that hangs up before ACKing the 2xx leaves the carrier's 2xx
// unacknowledged: sipedge ACKs it before the BYE, or the carrier would
// retransmit it for 32 s.
func TestByeBeforeACKAcknowledgesTheCarriers2xx(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.ringAndAnswer()
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	ms := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	wantTag(t, ms, "btag9")
}

// EndAll, at the end of a drain, ends an answered call with a BYE on each
// leg and a ringing one with a CANCEL to the carrier and a 503 to the
// caller; both get their CDR, hung up by the system.
func TestEndAll(t *testing.T) {
	r := newRig(t, nil)
	r.answerCall()
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv2 := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponseTagged(binv2, 180, "Ringing", "", "ring2"))
	r.expect(caller, "SIP/2.0 180 Ringing")
	if n := r.e.EndAll(r.Clock.Now); n != 2 {
		t.Fatalf("EndAll ended %d calls, want 2", n)
	}
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0", "SIP/2.0 503 Service Unavailable")
	r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0", "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	if r.e.Calls() != 0 || len(r.calls) != 2 {
		t.Fatalf("%d calls up, %d CDRs; want 0 and 2", r.e.Calls(), len(r.calls))
	}
	for _, s := range r.calls {
		if s.HangupSide != cdr.HangupSystem {
			t.Errorf("call %s hung up by %q, want %q", s.ACallID, s.HangupSide, cdr.HangupSystem)
		}
	}
}

// A carrier whose 2xx carries a Contact longer than the Request-URI limit
// of what sipedge receives still gets its ACK and BYE: no limit of what
// sipedge receives applies to what it builds.
func TestLongCarrierContact(t *testing.T) {
	r := newRig(t, nil)
	binv := r.startCall()
	long := "sip:gw-" + strings.Repeat("x", 700) + "@carrier.example.net:5070"
	ok := parser.AppendResponse(nil, binv, 200, "OK", []byte("btag9"))
	ok = append(ok, "Contact: <"+long+">\r\nContent-Type: application/sdp\r\n"...)
	r.recv(carrierA, string(parser.AppendBody(ok, "", []byte(sdp))))
	aTag := tagOf(t, r.expect(caller, "SIP/2.0 200 OK")[0], parser.HeaderTo)
	// What the carrier gets is taken raw: the harness parses within the
	// default limits, which the carrier's own URI exceeds.
	want := func(start string) {
		t.Helper()
		got := r.take(carrierA)
		if len(got) != 1 || firstLine(got[0]) != start {
			t.Fatalf("carrier got %d messages, want %.30q...", len(got), start)
		}
	}
	r.recv(caller, ackFromCaller(aTag))
	want("ACK " + long + " SIP/2.0")
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	want("BYE " + long + " SIP/2.0")
}

// The carrier's BYE before the caller has ACKed its 2xx: sipedge, the
// caller's callee, "MUST NOT send a BYE on a confirmed dialog until it has
// received an ACK for its 2xx response or until the server transaction
// times out" (RFC 3261 15). It keeps retransmitting the 2xx, which the
// caller may not have had (ended at once, a lost 2xx left the caller
// ringing), and sends the BYE when the ACK comes.
func TestCarrierByeBeforeCallersACKWaitsForIt(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.ringAndAnswer()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 1))
	byeAt := r.Clock.Now
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.expect(caller)
	r.advance(600 * time.Millisecond)
	r.expect(caller, "SIP/2.0 200 OK") // the 2xx goes on until its ACK
	r.recv(caller, ackFromCaller(aTag))
	r.take(carrierA) // its 2xx ACKed, as every 2xx is
	bye := r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	if tagOf(t, bye, parser.HeaderFrom) != aTag {
		t.Fatalf("BYE not in the A dialog:\n%s", bye.Bytes())
	}
	if len(r.calls) != 1 || r.calls[0].HangupSide.String() != "callee" || r.e.Calls() != 0 {
		t.Fatalf("CDRs %+v, %d calls left", r.calls, r.e.Calls())
	}
	if r.calls[0].End != byeAt {
		t.Fatalf("the call ended at %v, want the carrier's BYE at %v: the caller is not billed for the wait", r.calls[0].End, byeAt)
	}
}

// The caller's 2xx to a re-INVITE the carrier sent is ACKed before the
// caller gets a BYE, as every 2xx is (RFC 3261 13.2.2.4): the carrier hung
// up before its own ACK came.
func TestByeAfterReinvite2xxAcknowledgesIt(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "INVITE", 5))
	r.expect(carrierA, "SIP/2.0 100 Trying")
	reinv := r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	r.recv(caller, callerResponse(reinv, 200, "OK"))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.recv(carrierA, strings.Replace(inDialogFromCarrier(t, binv, "BYE", 6), "z9hG4bKCARRIERBYE", "z9hG4bKCARRIERbye6", 1))
	r.expect(carrierA, "SIP/2.0 200 OK")
	ms := r.expect(caller, "ACK sip:alice@caller.example.org:5061 SIP/2.0", "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	if got, want := hdr(ms[0], parser.HeaderCSeq), strings.Replace(hdr(reinv, parser.HeaderCSeq), "INVITE", "ACK", 1); got != want {
		t.Fatalf("ACK CSeq %q, want %q", got, want)
	}
}

// stray200 is the carrier's 200 to binv on a dialog of its own (To tag
// tag) behind two proxies, as it arrives once the INVITE's client
// transaction has ended: nothing but the response tells its dialog.
func stray200(binv *parser.Message, tag string) string {
	b := parser.AppendResponse(nil, binv, 200, "OK", []byte(tag))
	b = append(b, "Record-Route: <sip:rr1.carrier.example.net;lr>\r\nRecord-Route: <sip:rr2.carrier.example.net;lr>\r\n"...)
	b = append(b, "Contact: <sip:gw@carrier.example.net:5070>\r\nContent-Type: application/sdp\r\n"...)
	return string(parser.AppendBody(b, "", []byte(sdp)))
}

// cancelAndOutliveInvite starts a call the carrier rings, has the caller
// cancel it and the carrier never answer, and runs the clock until the
// B-leg INVITE's client transaction has ended (64*T1 after the CANCEL,
// RFC 3261 9.1). It returns the B-leg INVITE.
func (r *rig) cancelAndOutliveInvite() *parser.Message {
	r.t.Helper()
	inv := callerInvite("1", "a-call-1", "15551234")
	binv := r.startCall()
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.recv(caller, cancelOf(inv))
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.advance(40 * time.Second)
	r.take(carrierA) // the CANCEL's retransmissions
	r.take(caller)   // the 487's
	if len(r.calls) != 1 || r.e.Calls() != 0 {
		r.t.Fatalf("%d CDRs, %d calls up; want the call ended", len(r.calls), r.e.Calls())
	}
	return binv
}

// A 2xx that arrives after the INVITE's client transaction has ended, the
// call long gone, is still one of sipedge's INVITEs establishing a dialog
// nobody keeps (RFC 3261 13.2.2.4, 15): it is ACKed and BYEd from the 2xx
// alone, where it came from; its retransmissions are ACKed again, not
// BYEd again.
func TestAnswerAfterTheInviteTransactionEndedIsAckedAndByed(t *testing.T) {
	r := newRig(t, nil)
	binv := r.cancelAndOutliveInvite()
	var from parser.Address
	if err := binv.From(&from); err != nil {
		t.Fatal(err)
	}
	inviteCSeq, _ := binv.CSeq()

	late := stray200(binv, "late1")
	r.recv(carrierB, late) // the address it came from is where the ACK and BYE go
	ms := r.expect(carrierB, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	r.expect(carrierA)
	r.expect(caller)
	wantTag(t, ms, "late1")
	ack, bye := ms[0], ms[1]
	for _, m := range ms {
		if got := tagOf(t, m, parser.HeaderFrom); got != string(from.Tag) {
			t.Errorf("%s: From tag %q, want the INVITE's %q", firstLine(string(m.Bytes())), got, from.Tag)
		}
		if got, want := hdr(m, parser.HeaderCallID), hdr(binv, parser.HeaderCallID); got != want {
			t.Errorf("%s: Call-ID %q, want %q", firstLine(string(m.Bytes())), got, want)
		}
		if !strings.Contains(string(m.Bytes()), "\r\nRoute: <sip:rr2.carrier.example.net;lr>, <sip:rr1.carrier.example.net;lr>\r\n") {
			t.Errorf("%s: not routed by the reversed Record-Route (RFC 3261 12.1.2):\n%s", firstLine(string(m.Bytes())), m.Bytes())
		}
	}
	if got, want := hdr(ack, parser.HeaderCSeq), fmt.Sprintf("%d ACK", inviteCSeq.Num); got != want {
		t.Errorf("ACK CSeq %q, want %q", got, want)
	}
	if got, want := hdr(bye, parser.HeaderCSeq), fmt.Sprintf("%d BYE", inviteCSeq.Num+1); got != want {
		t.Errorf("BYE CSeq %q, want %q", got, want)
	}
	if n := r.e.m.strayAnswers.Get(); n != 1 {
		t.Errorf("stray answers counted %d, want 1", n)
	}

	r.recv(carrierB, late) // the ACK was lost: the carrier sends its 2xx again
	r.expect(carrierB, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	r.recv(carrierB, callerResponse(bye, 200, "OK"))
	r.recv(carrierB, late) // still within the BYE's transaction (Timer K)
	r.expect(carrierB, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	if n := r.e.m.strayAnswers.Get(); n != 1 {
		t.Errorf("stray answers counted %d after retransmissions, want 1", n)
	}

	// Nothing else is answered: a 2xx to another method, or one without a
	// dialog to end.
	r.recv(carrierB, strings.Replace(late, fmt.Sprintf("CSeq: %d INVITE", inviteCSeq.Num), "CSeq: 7 OPTIONS", 1))
	r.recv(carrierB, strings.Replace(late, ";tag=late1", "", 1))
	r.expect(carrierB)
}

// Stateless teardowns are bounded: at most maxTeardowns BYEs of dialogs
// known from a 2xx alone are in flight per engine. A 2xx beyond them is
// left unacknowledged (the carrier retransmits it, and ends the dialog
// itself after 64*T1, RFC 3261 13.3.1.4) until one of them has finished.
func TestStrayAnswerTeardownsCapped(t *testing.T) {
	r := newRig(t, nil)
	binv := r.cancelAndOutliveInvite()
	var byes []*parser.Message
	for i := range maxTeardowns {
		r.recv(carrierA, stray200(binv, fmt.Sprintf("fork%d", i)))
		byes = append(byes, r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[1])
	}
	over := stray200(binv, "one-too-many")
	r.recv(carrierA, over)
	r.expect(carrierA)
	if n := r.e.m.teardownsOverCap.Get(); n != 1 {
		t.Fatalf("teardowns over the cap counted %d, want 1", n)
	}
	r.recv(carrierA, callerResponse(byes[0], 200, "OK"))
	r.advance(6 * time.Second) // Timer K (T4) ends the answered BYE's transaction
	r.take(carrierA)           // the other BYEs' retransmissions
	r.recv(carrierA, over)
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// The cap on stateless teardowns is for 2xx responses no transaction of
// sipedge's matches, which anyone can send with sipedge's Via: a flood of
// them, from an address that never answers the BYEs, must not keep sipedge
// from ending a dialog its own INVITE established, such as a carrier's 200
// crossing the caller's CANCEL (RFC 3261 13.2.2.4, 15): unACKed, the carrier
// connects a callee nobody hears, and bills it.
func TestStrayAnswerFloodLeavesOwnTeardowns(t *testing.T) {
	r := newRig(t, nil)
	binv := r.cancelAndOutliveInvite()
	for i := range maxTeardowns {
		r.recv(stranger, stray200(binv, fmt.Sprintf("flood%d", i)))
	}
	r.take(stranger)

	inv := callerInvite("2", "a-call-2", "15551234")
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	binv2 := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv2, 180, "Ringing", ""))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.recv(caller, cancelOf(inv))
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.recv(carrierA, carrierResponse(binv2, 200, "OK", sdp)) // crossed the CANCEL
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// While the carrier's BYE waits for the caller's ACK, only the caller's
// own BYE ends the call at once: a second BYE from the carrier (a new
// transaction: its first's 200 lost over TCP, or a UA that re-sends) must
// not end it without a BYE to the caller, whose leg would stay up.
func TestCarrierSecondByeBeforeCallersACKStillWaits(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.ringAndAnswer()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 1))
	byeAt := r.Clock.Now
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.advance(100 * time.Millisecond)
	r.recv(carrierA, strings.Replace(inDialogFromCarrier(t, binv, "BYE", 2), "z9hG4bKCARRIERBYE", "z9hG4bKCARRIERbye2", 1))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.expect(caller)
	r.recv(caller, ackFromCaller(aTag))
	r.take(carrierA)
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	if len(r.calls) != 1 || r.calls[0].HangupSide.String() != "callee" || r.e.Calls() != 0 {
		t.Fatalf("CDRs %+v, %d calls left", r.calls, r.e.Calls())
	}
	if r.calls[0].End != byeAt {
		t.Fatalf("the call ended at %v, want the carrier's first BYE at %v", r.calls[0].End, byeAt)
	}
}

// The carrier's BYE that waits for the caller's ACK reaches the caller
// with the headers the policy relays, as one that does not wait does: its
// Reason (RFC 3326), the cause the caller's network bills and reports on.
func TestCarrierByeBeforeCallersACKKeepsItsReason(t *testing.T) {
	const reason = `Q.850;cause=16;text="Normal call clearing"`
	for _, how := range []string{"ack", "no ack"} {
		t.Run(how, func(t *testing.T) {
			r := newRig(t, func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Reason") })
			binv, aTag := r.ringAndAnswer()
			r.recv(carrierA, strings.Replace(inDialogFromCarrier(t, binv, "BYE", 1), "Content-Length: 0", "Reason: "+reason+"\r\nContent-Length: 0", 1))
			r.expect(carrierA, "SIP/2.0 200 OK")
			if how == "ack" {
				r.recv(caller, ackFromCaller(aTag))
			} else {
				r.advance(40 * time.Second)
				r.take(carrierA)
			}
			ms := r.take(caller)
			var bye string
			for _, m := range ms {
				if strings.HasPrefix(m, "BYE ") {
					bye = m
				}
			}
			if !strings.Contains(bye, "\r\nReason: "+reason+"\r\n") {
				t.Fatalf("the caller's BYE lacks the carrier's Reason:\n%s", bye)
			}
		})
	}
}

// A call ended by sipedge (a drain, the maximum duration) while a BYE
// waits for the caller's ACK: the carrier, who hung up, gets no BYE of its
// own back (it would answer 481), only the ACK of its 2xx; the caller gets
// the BYE it was owed.
func TestEndAllWhileByeWaitsForACK(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.ringAndAnswer()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 1))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.expect(caller)
	if n := r.e.EndAll(r.Clock.Now); n != 1 {
		t.Fatalf("EndAll ended %d calls, want 1", n)
	}
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0") // its 2xx, which the caller never ACKed
	if len(r.calls) != 1 || r.calls[0].HangupSide.String() != "callee" {
		t.Fatalf("CDRs %+v, want the carrier's hang-up", r.calls)
	}
}

// After EndAll the engine's transactions that end the calls are unsettled
// until their peers answer them (Unsettled, what a drain waits for): the
// BYEs on both legs of an answered call, retransmitted while unanswered;
// the ringing call's CANCEL and the INVITE it cancels, and its 503 until
// the caller's ACK; the BYE a carrier challenges, until the one that
// answers the challenge gets its 200. A gateway probe never counts.
func TestUnsettledAfterEndAll(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	r.answerCall()
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv2 := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponseTagged(binv2, 180, "Ringing", "", "ring2"))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.e.Probe(transport.Peer{Addr: carrierB, Transport: transport.UDP}, "sip:"+carrierB.String(), time.Second, r.Clock.Now,
		func(int, time.Duration, time.Duration, error) {})
	r.expect(carrierB, "OPTIONS sip:198.51.100.21:5070 SIP/2.0")
	if n := r.e.Unsettled(); n != 2 {
		t.Fatalf("%d transactions unsettled with a call up, one ringing and a probe out, want 2 (the ringing INVITEs)", n)
	}

	r.e.EndAll(r.Clock.Now)
	callerMsgs := r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0", "SIP/2.0 503 Service Unavailable")
	carrierMsgs := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0", "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	// Caller's BYE, its 503; carrier's BYE, CANCEL and the INVITE it cancels.
	if n := r.e.Unsettled(); n != 5 {
		t.Fatalf("%d transactions unsettled after EndAll, want 5", n)
	}
	r.advance(600 * time.Millisecond) // unanswered: retransmitted
	r.take(carrierB)
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0", "SIP/2.0 503 Service Unavailable")
	r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0", "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")

	r.recv(caller, callerResponse(callerMsgs[0], 200, "OK"))
	r.recv(caller, ackOfFailure("2", "a-call-2", tagOf(t, callerMsgs[1], parser.HeaderTo)))
	r.recv(carrierA, carrierResponseTagged(carrierMsgs[1], 200, "OK", "", "ring2"))
	r.recv(carrierA, carrierResponseTagged(binv2, 487, "Request Terminated", "", "ring2"))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	if n := r.e.Unsettled(); n != 1 {
		t.Fatalf("%d transactions unsettled with only the carrier's BYE unanswered, want 1", n)
	}
	r.recv(carrierA, challengeTo(carrierMsgs[0], 401, byeChallenge("n-bye", "")))
	again := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if n := r.e.Unsettled(); n != 1 {
		t.Fatalf("%d transactions unsettled with the challenged BYE sent again, want 1", n)
	}
	r.recv(carrierA, carrierResponse(again, 200, "OK", ""))
	if n := r.e.Unsettled(); n != 0 {
		t.Fatalf("%d transactions unsettled once every peer answered, want 0", n)
	}
}
