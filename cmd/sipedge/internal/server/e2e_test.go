package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// End-to-end tests over real loopback sockets: a scripted caller and
// carrier around a Server built from YAML. Every message either peer
// receives is checked for topology leaks (see e2e_helpers_test.go).

func TestE2EAnsweredCallByeFromCaller(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.answered()
	c.byeFromCaller(11)
	e.caller.expectNothing(quiet)
	r := e.cdrOf(c.u.callID)
	checkCDR(t, r, 200, "caller")
	if r["b_call_id"] != hdr(c.binv, parser.HeaderCallID) || r["trunk"] != "local" || r["route"] != "carrier-a" ||
		r["carrier_id"] != "carrier-a" || r["callee"] != dialed {
		t.Errorf("CDR %v", r)
	}
}

func TestE2EAnsweredCallByeFromCallee(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.answered()
	e.carrier.send(uasRequest(t, e.carrier, c.binv, "BYE", 1))
	e.carrier.expect("SIP/2.0 200 OK", waitMsg)
	bye := e.caller.expect("BYE sip:alice@caller.example.org:5061", waitMsg)
	if tagOf(t, bye, parser.HeaderFrom) != c.u.toTag || tagOf(t, bye, parser.HeaderTo) != "atag1" ||
		hdr(bye, parser.HeaderCallID) != c.u.callID {
		t.Fatalf("BYE not in the A dialog:\n%s", bye.Bytes())
	}
	if r := hdr(bye, parser.HeaderRoute); r != "<sip:rr.caller.example.org;lr>" {
		t.Fatalf("BYE does not follow the caller's route set (Route %q):\n%s", r, bye.Bytes())
	}
	e.caller.send(c.u.answer(bye, 200, "OK"))
	e.carrier.expectNothing(quiet)
	checkCDR(t, e.cdrOf(c.u.callID), 200, "callee")
}

func TestE2ECancelBeforeAnswer(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.start()
	c.provisional(180, "Ringing", "")
	e.caller.send(c.u.cancel())
	ok := e.caller.expect("SIP/2.0 200 OK", waitMsg)
	if cseqOf(t, ok).Method != parser.MethodCancel {
		t.Fatalf("200 is not for the CANCEL:\n%s", ok.Bytes())
	}
	term := e.caller.expect("SIP/2.0 487 Request Terminated", waitMsg)
	e.caller.send(c.u.ackFailure(term))

	bc := e.carrier.expect(fmt.Sprintf("CANCEL sip:%s@127.0.0.1:%d", dialed, e.carrier.addr().Port()), waitMsg)
	if hdr(bc, parser.HeaderCallID) != hdr(c.binv, parser.HeaderCallID) || hdr(bc, parser.HeaderVia) != hdr(c.binv, parser.HeaderVia) {
		t.Fatalf("CANCEL does not match the B-leg INVITE (RFC 3261 9.1):\n%s", bc.Bytes())
	}
	e.carrier.send(uasResponse(e.carrier, bc, 200, "OK", ""))
	e.carrier.send(uasResponse(e.carrier, c.binv, 487, "Request Terminated", ""))
	e.carrier.expect(fmt.Sprintf("ACK sip:%s@127.0.0.1:%d", dialed, e.carrier.addr().Port()), waitMsg)
	e.caller.expectNothing(quiet)
	e.carrier.expectNothing(0)
	checkCDR(t, e.cdrOf(c.u.callID), 487, "caller")
}

func TestE2EBusyRelayed(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.start()
	e.carrier.send(uasResponse(e.carrier, c.binv, 486, "Busy Here", ""))
	ack := e.carrier.expect(fmt.Sprintf("ACK sip:%s@127.0.0.1:%d", dialed, e.carrier.addr().Port()), waitMsg)
	if cseqOf(t, ack).Num != 1 || hdr(ack, parser.HeaderVia) != hdr(c.binv, parser.HeaderVia) {
		t.Fatalf("ACK for the 486 (RFC 3261 17.1.1.3):\n%s", ack.Bytes())
	}
	busy := e.caller.expect("SIP/2.0 486 Busy Here", waitMsg)
	if hdr(busy, parser.HeaderContact) != "" {
		t.Fatalf("a failure carries a Contact:\n%s", busy.Bytes())
	}
	e.caller.send(c.u.ackFailure(busy))
	e.caller.expectNothing(quiet)
	e.carrier.expectNothing(0)
	// A call that never connected has no hangup side (dialog/cdr HangupNone).
	checkCDR(t, e.cdrOf(c.u.callID), 486, "")
}

func TestE2EEarlyMediaThenAnswer(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.start()
	p := c.provisional(183, "Session Progress", carrierSDP)
	if string(p.Body()) != carrierSDP || hdr(p, parser.HeaderContentType) != "application/sdp" {
		t.Fatalf("early media SDP not relayed:\n%s", p.Bytes())
	}
	c.answer() // checks the 200's tag is the 183's
	c.byeFromCaller(11)
	checkCDR(t, e.cdrOf(c.u.callID), 200, "caller")
}

func TestE2EReInviteInDialog(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.answered()
	e.caller.send(c.u.request("INVITE", 11, reinvSDP))
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	re := e.carrier.expect("INVITE sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(re, 2)
	if string(re.Body()) != reinvSDP {
		t.Fatalf("re-INVITE SDP:\n%s", re.Bytes())
	}
	e.carrier.send(uasResponse(e.carrier, re, 200, "OK", carrierSDP))
	ok := e.caller.expect("SIP/2.0 200 OK", waitMsg)
	if cs := cseqOf(t, ok); cs.Num != 11 || cs.Method != parser.MethodInvite || string(ok.Body()) != carrierSDP {
		t.Fatalf("re-INVITE 200 to the caller:\n%s", ok.Bytes())
	}
	e.caller.send(c.u.request("ACK", 11, ""))
	ack := e.carrier.expect("ACK sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(ack, 2)
	e.caller.send(c.u.request("BYE", 12, ""))
	e.caller.expect("SIP/2.0 200 OK", waitMsg)
	bye := e.carrier.expect("BYE sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(bye, 3)
	e.carrier.send(uasResponse(e.carrier, bye, 200, "OK", ""))
	e.caller.expectNothing(quiet)
}

func TestE2EInviteRetransmissionAbsorbed(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.start()
	e.caller.send(c.u.invite()) // the same INVITE again
	// The server transaction re-sends its last response (RFC 3261 17.2.1).
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	e.carrier.expectNothing(quiet) // and no second B-leg
	c.provisional(180, "Ringing", "")
	c.answer()
	c.byeFromCaller(11)
	e.carrier.expectNothing(quiet)
	if recs := e.cdrs(); len(recs) != 1 {
		t.Fatalf("%d CDRs, want 1: %v", len(recs), recs)
	}
}

func TestE2EB200RetransmissionReAcked(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.start()
	c.provisional(180, "Ringing", "")
	c.answer()
	// The carrier did not see the ACK and re-sends its 200 (RFC 3261 13.3.1.4).
	e.carrier.send(uasResponse(e.carrier, c.binv, 200, "OK", carrierSDP))
	ack := e.carrier.expect("ACK sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(ack, 1)
	e.caller.expectNothing(quiet)
	c.byeFromCaller(11)
}

func TestE2ELate200AfterCancel(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	c := e.start()
	c.provisional(180, "Ringing", "")
	e.caller.send(c.u.cancel())
	e.caller.expect("SIP/2.0 200 OK", waitMsg)
	term := e.caller.expect("SIP/2.0 487 Request Terminated", waitMsg)
	e.caller.send(c.u.ackFailure(term))
	bc := e.carrier.expect("CANCEL sip:", waitMsg)
	// The carrier answered the INVITE before the CANCEL reached it.
	e.carrier.send(uasResponse(e.carrier, bc, 200, "OK", ""))
	e.carrier.send(uasResponse(e.carrier, c.binv, 200, "OK", carrierSDP))
	ack := e.carrier.expect("ACK sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(ack, 1)
	bye := e.carrier.expect("BYE sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(bye, 2)
	e.carrier.send(uasResponse(e.carrier, bye, 200, "OK", ""))
	e.caller.expectNothing(quiet) // one call never reaches the caller twice
	e.carrier.expectNothing(0)
	checkCDR(t, e.cdrOf(c.u.callID), 487, "caller")
}

func TestE2EMalformedInvite400(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	u := newUAC(e.caller, dialed)
	e.caller.send(strings.Replace(u.invite(), "CSeq: 10 INVITE", "CSeq: 10 BYE", 1))
	r := e.caller.expect("SIP/2.0 400 ", waitMsg) // no 100 Trying: answered statelessly
	if hdr(r, parser.HeaderCallID) != u.callID || cseqOf(t, r).Num != 10 {
		t.Fatalf("400:\n%s", r.Bytes())
	}
	e.caller.expectNothing(quiet)
	e.carrier.expectNothing(0)
}

func TestE2EUnknownSourceDropped(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{trunkSource: "127.0.0.2/32"})
	u := newUAC(e.caller, dialed)
	e.caller.send(u.invite())
	e.caller.expectNothing(quiet) // not even a 100 Trying
	e.carrier.expectNothing(0)
	if n := e.metric("sipedge_unknown_source_invites_total"); n != 1 {
		t.Fatalf("sipedge_unknown_source_invites_total %v, want 1", n)
	}
}

func TestE2EAnsweredCallTCP(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{callerTCP: true, carrierTCP: true})
	c := e.answered()
	if ct := contactURI(t, c.binv); !strings.Contains(ct, "transport=tcp") {
		t.Errorf("B-leg Contact %q lacks transport=tcp", ct)
	}
	c.byeFromCaller(11)
	e.caller.expectNothing(quiet)
	checkCDR(t, e.cdrOf(c.u.callID), 200, "caller")
}

func TestE2EHealthAndDrain(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{drainSecs: 5})
	if code, _ := e.httpGet("/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, _ := e.httpGet("/readyz"); code != 200 {
		t.Fatalf("/readyz %d", code)
	}
	c := e.answered()

	done := make(chan error, 1)
	go func() { done <- e.shutdown() }()
	deadline := time.Now().Add(waitMsg)
	for {
		code, _ := e.httpGet("/readyz")
		if code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d while draining", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _ := e.httpGet("/healthz"); code != 200 {
		t.Fatalf("/healthz %d while draining", code)
	}

	// A new call is refused.
	u2 := newUAC(e.caller, dialed)
	e.caller.send(u2.invite())
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	busy := e.caller.expect("SIP/2.0 503 Draining", waitMsg)
	e.caller.send(u2.ackFailure(busy))
	e.carrier.expectNothing(quiet)

	// The running call goes on and ends.
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with a call up: %v", err)
	default:
	}
	c.byeFromCaller(11)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(waitMsg):
		t.Fatal("Shutdown did not complete once the last call ended")
	}
	checkCDR(t, e.cdrOf(c.u.callID), 200, "caller")
	// The call refused while draining has its CDR, as one routing refuses.
	refused := e.cdrOf(u2.callID)
	checkCDR(t, refused, 503, "system")
	if refused["final_reason"] != "Draining" || refused["carrier_id"] != "" {
		t.Errorf("the refused call's CDR %v, want final_reason Draining and no carrier", refused)
	}
}

// TestE2EDrainTimeoutEndsCalls: a call still up when the drain timeout
// passes is ended by sipedge, a BYE on each leg, and gets its CDR
// (hangup_side "system") before the CDR file is closed. It used to vanish:
// no BYE (the carrier went on billing) and no CDR. sipedge then runs on
// until both BYEs are answered (b2bua.drain_linger_secs, 4 s by default),
// and stops once they are.
func TestE2EDrainTimeoutEndsCalls(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{drainSecs: 1})
	c := e.answered()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- e.shutdown() }()
	bye := e.caller.expect("BYE ", 3*time.Second)
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("BYE %v after the drain began, before its 1 s timeout", d)
	}
	if tagOf(t, bye, parser.HeaderFrom) != c.u.toTag {
		t.Errorf("the caller's BYE is not in its dialog:\n%s", bye.Bytes())
	}
	cbye := e.carrier.expect("BYE ", waitMsg)
	e.caller.send(c.u.answer(bye, 200, "OK"))
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with the carrier's BYE unanswered: %v", err)
	case <-time.After(quiet):
	}
	e.carrier.send(uasResponse(e.carrier, cbye, 200, "OK", ""))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(waitMsg):
		t.Fatal("Shutdown did not return once both BYEs were answered")
	}
	checkCDR(t, e.cdrOf(c.u.callID), 200, "system")
}

// TestE2EShutdownCancelledStopsAtOnce: Shutdown's context ending (a
// second SIGTERM) stops the drain at once: the call still up is ended all
// the same, a BYE on each leg that nobody waits on, and its CDR written;
// Shutdown returns without the 30 s drain timeout or the linger.
func TestE2EShutdownCancelledStopsAtOnce(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{drainSecs: 30})
	c := e.answered()
	ctx, hurry := context.WithCancel(context.Background())
	done := make(chan struct{})
	go e.stopOnce.Do(func() {
		e.stopErr = e.srv.Shutdown(ctx)
		close(done)
	})
	deadline := time.Now().Add(waitMsg)
	for code, _ := e.httpGet("/readyz"); code != 503; code, _ = e.httpGet("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d: not draining", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	hurry()
	start := time.Now()
	e.caller.expect("BYE ", waitMsg)
	e.carrier.expect("BYE ", waitMsg)
	select {
	case <-done:
	case <-time.After(waitMsg):
		t.Fatal("Shutdown still running after its context ended")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v after its context ended, want at once", d)
	}
	if e.stopErr != nil {
		t.Fatalf("shutdown: %v", e.stopErr)
	}
	checkCDR(t, e.cdrOf(c.u.callID), 200, "system")
}

// Listening on every address, sipedge writes the advertised one into its
// Via and Contact, and a call runs end to end: the carrier's responses and
// BYE reach it, and so does the caller's ACK at the advertised Contact.
func TestE2EListenOnEveryAddress(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{listenHost: "0.0.0.0", advertise: "127.0.0.1"})
	c := e.answered()
	e.carrier.send(uasRequest(t, e.carrier, c.binv, "BYE", 1))
	e.carrier.expect("SIP/2.0 200 OK", waitMsg)
	bye := e.caller.expect("BYE sip:alice@caller.example.org:5061", waitMsg)
	e.caller.send(c.u.answer(bye, 200, "OK"))
	checkCDR(t, e.cdrOf(c.u.callID), 200, "callee")
}

// Behind 1:1 NAT sipedge advertises the public address: its Via, Contact
// and From carry it, and the carrier's responses, whose Via is that
// address, are still sipedge's own.
func TestE2EAdvertisedAddress(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{advertise: "198.51.100.7:5080"})
	c := e.answered()
	var from parser.Address
	if err := c.binv.From(&from); err != nil || !strings.Contains(string(from.URI), "@198.51.100.7") {
		t.Fatalf("B-leg From %q (%v) is not on the advertised host", from.URI, err)
	}
	if id := hdr(c.binv, parser.HeaderCallID); !strings.HasSuffix(id, "@198.51.100.7") {
		t.Fatalf("B-leg Call-ID %q", id)
	}
	c.byeFromCaller(11)
	checkCDR(t, e.cdrOf(c.u.callID), 200, "caller")
}

// Over IPv6 a call runs end to end: sipedge's Via sent-by, Contact and
// Request-URIs carry the address in brackets (RFC 3261 25.1 IPv6reference),
// responses find their way back, and the carrier's BYE reaches the caller.
func TestE2EIPv6(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, tcp := range []bool{false, true} {
		t.Run(map[bool]string{false: "udp", true: "tcp caller"}[tcp], func(t *testing.T) { testE2EIPv6(t, tcp) })
	}
}

func testE2EIPv6(t *testing.T, callerTCP bool) {
	e := newE2E(t, e2eOpts{ipv6: true, callerTCP: callerTCP})
	c := e.answered()
	if via := hdr(c.binv, parser.HeaderVia); !strings.Contains(via, "[::1]:") {
		t.Fatalf("B-leg Via %q", via)
	}
	e.carrier.send(uasRequest(t, e.carrier, c.binv, "BYE", 1))
	e.carrier.expect("SIP/2.0 200 OK", waitMsg)
	bye := e.caller.expect("BYE sip:alice@caller.example.org:5061", waitMsg)
	e.caller.send(c.u.answer(bye, 200, "OK"))
	r := e.cdrOf(c.u.callID)
	checkCDR(t, r, 200, "callee")
	if r["source_ip"] != "::1" {
		t.Fatalf("CDR source_ip %v", r["source_ip"])
	}
}
