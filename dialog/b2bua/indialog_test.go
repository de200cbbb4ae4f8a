package b2bua

import (
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
)

// The caller's Supported reaches the carrier with its 100rel sipedge's own
// (RFC 3262, rel.go): offered when the caller supports it and its INVITE
// carries an offer, whose answer a reliable provisional then carries, and
// not otherwise: in a late offer, the carrier's reliable provisional would
// carry an offer to be answered in sipedge's PRACK.
func TestSupported100relPerLeg(t *testing.T) {
	f := func(supported string, body bool, want string) {
		t.Helper()
		r := newRig(t, func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Supported") })
		inv := strings.Replace(callerInvite("1", "a-call-1", "15551234"), "X-Keep: kept\r\n", "X-Keep: kept\r\nSupported: "+supported+"\r\n", 1)
		if !body {
			inv = inv[:strings.Index(inv, "Content-Type")] + "Content-Length: 0\r\n\r\n"
		}
		r.recv(caller, inv)
		r.expect(caller, "SIP/2.0 100 Trying")
		binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
		var tags []string
		for i := 0; i < binv.Count(parser.HeaderSupported); i++ {
			tags = append(tags, string(binv.Nth(parser.HeaderSupported, i)))
		}
		if got := strings.Join(tags, ", "); got != want {
			t.Errorf("caller Supported %q (body %v): carrier's %q, want %q", supported, body, got, want)
		}
	}
	f("100rel, timer", true, "100rel, timer")
	f("timer,100REL,replaces", true, "100rel, timer, replaces")
	f("100rel", true, "100rel")
	f("timer", true, "timer")
	f("100rel, timer", false, "timer")
	f("100rel", false, "")
}

// reinviteCancel is the caller's CANCEL of its re-INVITE "re1" (CSeq 11),
// with extra header lines.
func reinviteCancel(aTag, extra string) string {
	return "CANCEL sip:alice-contact@203.0.113.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bKCALLERre1\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=" + aTag + "\r\n" +
		"Call-ID: a-call-1\r\nCSeq: 11 CANCEL\r\n" + extra + "Content-Length: 0\r\n\r\n"
}

// CANCEL of a re-INVITE being relayed: 200 to the CANCEL, the relayed
// re-INVITE cancelled, and its 487 relayed back (RFC 3261 9).
func TestCancelReinvite(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(re, 100, "Trying", ""))
	r.recv(caller, reinviteCancel(aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	r.expect(carrierA, "CANCEL sip:gw@carrier.example.net:5070 SIP/2.0")
	r.recv(carrierA, carrierResponse(re, 487, "Request Terminated", ""))
	r.expect(caller, "SIP/2.0 487 Request Terminated")
	r.take(carrierA) // the ACK for the 487
	// The re-INVITE is over: the next one goes through.
	r.recv(caller, inDialogFromCaller("INVITE", "re2", 12, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// A request with a lower CSeq than the last from its side is out of order:
// 500, not relayed (RFC 3261 12.2.2).
func TestLowerCSeqRefused(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INFO", "i1", 12, aTag, ""))
	in1 := r.expect(carrierA, "INFO sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(in1, 200, "OK", ""))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, inDialogFromCaller("INFO", "i2", 5, aTag, ""))
	r.expect(caller, "SIP/2.0 500 Server Internal Error")
	r.expect(carrierA)
	r.recv(caller, inDialogFromCaller("INFO", "i3", 13, aTag, ""))
	r.expect(carrierA, "INFO sip:gw@carrier.example.net:5070 SIP/2.0")
}

// A re-INVITE that could not be relayed (no transaction slot) leaves no
// glare mark behind: the next one, once there is room, goes through.
func TestFailedReinviteLeavesNoGlare(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Txn.MaxTransactions = 3 })
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	got := r.take(caller)
	if len(got) == 0 || !strings.HasPrefix(firstLine(got[len(got)-1]), "SIP/2.0 5") {
		t.Fatalf("a re-INVITE with the table full: %q", got)
	}
	r.take(carrierA)
	r.advance(40 * time.Second) // every transaction ends
	r.take(caller)              // the 503's retransmissions: the test never ACKs it
	r.recv(caller, inDialogFromCaller("INVITE", "re2", 12, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// Out of a dialog, a method sipedge does not take gets 405 with Allow
// (RFC 3261 21.4.6).
func TestMethodNotAllowedCarriesAllow(t *testing.T) {
	r := newRig(t, nil)
	m := strings.Replace(strings.Replace(inDialogFromCaller("MESSAGE", "m1", 1, "x", ""), ";tag=x", "", 1),
		"Contact: <sip:alice@caller.example.org:5061>\r\n", "", 1)
	r.recv(caller, m)
	got := r.expect(caller, "SIP/2.0 405 Method Not Allowed")[0]
	if got.GetByName("Allow") == nil {
		t.Errorf("405 without Allow:\n%s", got.Bytes())
	}
}

// The carrier's re-INVITE before sipedge has ACKed its 2xx (the caller has
// not ACKed yet) gets 491 (RFC 3261 14.1, 14.2): relayed, it would replace
// the caller's 2xx still being retransmitted.
func TestCarrierReinviteBeforeACK(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.ringAndAnswer()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "INVITE", 2))
	r.expect(carrierA, "SIP/2.0 100 Trying", "SIP/2.0 491 Request Pending")
	r.expect(caller)
	r.advance(600 * time.Millisecond)
	r.expect(caller, "SIP/2.0 200 OK")                // the caller's 2xx goes on until its ACK
	r.expect(carrierA, "SIP/2.0 491 Request Pending") // and the 491 until the carrier's
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
}

// A call reuses a finished call's storage: the peer's CSeq of the call
// before is not this dialog's (RFC 3261 12.2.2 compares with the remote
// sequence number of this dialog only). A carrier that numbered its BYE
// high in one call must not have its next call's BYE refused with 500,
// which left the caller's leg up.
func TestRemoteCSeqIsPerDialog(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 7000))
	r.expect(carrierA, "SIP/2.0 200 OK")
	bye := r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	r.recv(caller, callerResponse(bye, 200, "OK"))
	r.advance(40 * time.Second) // every transaction of the first call ends
	r.take(caller)
	r.take(carrierA)

	binv, _ = r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 2))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
}

// The caller's re-INVITE before its ACK for the 2xx has arrived (the ACK
// lost or overtaken) gets 491, as the carrier's does (RFC 3261 14.1,
// 14.2): relayed, it went to the carrier before sipedge had ACKed the
// carrier's 2xx, and the ACK sent when the caller's came carried the
// re-INVITE's CSeq, leaving the carrier's 2xx unacknowledged.
func TestCallerReinviteBeforeACK(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.ringAndAnswer()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 491 Request Pending")
	r.expect(carrierA)
	r.recv(caller, ackFromCaller(aTag))
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if c, _ := ack.CSeq(); c.Num != 1 {
		t.Fatalf("ACK CSeq %d, want the INVITE's 1", c.Num)
	}
	// Once ACKed, the caller's retry goes through.
	r.recv(caller, inDialogFromCaller("INVITE", "re2", 12, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")
}

// The same on the other side: the carrier's re-INVITE whose 2xx the
// carrier has not ACKed yet keeps the caller's re-INVITE out (491), or the
// carrier's ACK would reach the caller with the wrong CSeq.
func TestCallerReinviteBeforeCarriersACK(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "INVITE", 5))
	r.expect(carrierA, "SIP/2.0 100 Trying")
	reinv := r.expect(caller, "INVITE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	r.recv(caller, callerResponse(reinv, 200, "OK"))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 491 Request Pending")
	r.expect(carrierA)
	r.recv(carrierA, strings.Replace(inDialogFromCarrier(t, binv, "ACK", 5), "z9hG4bKCARRIERACK", "z9hG4bKCARRIERack2", 1))
	ack := r.expect(caller, "ACK sip:alice@caller.example.org:5061 SIP/2.0")[0]
	if got, want := hdr(ack, parser.HeaderCSeq), strings.Replace(hdr(reinv, parser.HeaderCSeq), "INVITE", "ACK", 1); got != want {
		t.Fatalf("ACK CSeq %q, want %q", got, want)
	}
}

// A re-INVITE or UPDATE is a target refresh (RFC 3261 12.2, RFC 3311 5):
// once answered 2xx, the requester's Contact is its leg's new remote
// target, and the answerer's its own. Requests on each leg then carry the
// new Request-URI.
func TestTargetRefresh(t *testing.T) {
	for _, method := range []string{"INVITE", "UPDATE"} {
		t.Run(method, func(t *testing.T) {
			r := newRig(t, nil)
			binv, aTag := r.answerCall()
			req := strings.Replace(inDialogFromCaller(method, "tr1", 11, aTag, sdp),
				"Contact: <sip:alice@caller.example.org:5061>", "Contact: <sip:alice2@caller.example.org:5062>", 1)
			r.recv(caller, req)
			r.take(caller) // a 100 Trying for an INVITE
			out := r.expect(carrierA, method+" sip:gw@carrier.example.net:5070 SIP/2.0")[0]
			resp := strings.Replace(carrierResponse(out, 200, "OK", sdp), "sip:gw@carrier.example.net:5070", "sip:gw2@carrier.example.net:5070", 1)
			r.recv(carrierA, resp)
			r.expect(caller, "SIP/2.0 200 OK")
			if method == "INVITE" {
				r.recv(caller, strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 11 ACK", 1))
				r.expect(carrierA, "ACK sip:gw2@carrier.example.net:5070 SIP/2.0")
			}
			r.recv(caller, inDialogFromCaller("INFO", "tr2", 12, aTag, ""))
			info := r.expect(carrierA, "INFO sip:gw2@carrier.example.net:5070 SIP/2.0")[0]
			r.recv(carrierA, carrierResponse(info, 200, "OK", ""))
			r.expect(caller, "SIP/2.0 200 OK")
			r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 3))
			r.expect(carrierA, "SIP/2.0 200 OK")
			r.expect(caller, "BYE sip:alice2@caller.example.org:5062 SIP/2.0")
		})
	}
}

// A provisional response with a To tag creates the B-leg's early dialog
// (RFC 3261 12.1.2): its Contact is the remote target and its
// Record-Route, reversed, the route set. A request the caller sends in the
// early dialog (an UPDATE, RFC 3311 5.1) goes out with them.
func TestEarlyDialogTargetAndRouteSet(t *testing.T) {
	r := newRig(t, nil)
	binv := r.startCall()
	p := carrierResponse(binv, 183, "Session Progress", sdp)
	p = strings.Replace(p, "Contact: <sip:gw@carrier.example.net:5070>\r\n",
		"Contact: <sip:early@carrier.example.net:5070>\r\nRecord-Route: <sip:rr1.carrier.example.net;lr>, <sip:rr2.carrier.example.net;lr>\r\n", 1)
	r.recv(carrierA, p)
	aTag := tagOf(t, r.expect(caller, "SIP/2.0 183 Session Progress")[0], parser.HeaderTo)
	r.recv(caller, inDialogFromCaller("UPDATE", "up1", 11, aTag, sdp))
	up := r.expect(carrierA, "UPDATE sip:early@carrier.example.net:5070 SIP/2.0")[0]
	if got := string(up.Nth(parser.HeaderRoute, 0)) + ", " + string(up.Nth(parser.HeaderRoute, 1)); got != "<sip:rr2.carrier.example.net;lr>, <sip:rr1.carrier.example.net;lr>" {
		t.Fatalf("UPDATE Route %q, want the 183's Record-Route reversed", got)
	}
	if tagOf(t, up, parser.HeaderTo) != "btag9" {
		t.Fatal("UPDATE not in the early dialog")
	}
}

// A re-INVITE the caller sends in the early dialog, its INVITE still
// without a final response, is a second INVITE: 500 with Retry-After (RFC
// 3261 14.2), not the glare 491.
func TestEarlyReinviteFromCaller500(t *testing.T) {
	r := newRig(t, nil)
	binv := r.startCall()
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	aTag := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	got := r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 500 Server Internal Error")[1]
	if ra, ok, err := got.RetryAfter(); !ok || err != nil || ra.Seconds > 10 {
		t.Fatalf("500 without a Retry-After of 0 to 10 s:\n%s", got.Bytes())
	}
	r.expect(carrierA)
}

// A 481 to a request relayed in the call's dialog says the peer has no
// such dialog (a carrier that restarted and forgot the call): RFC 3261
// 12.2.1.2 has the dialog terminated. The call ends on both legs rather
// than staying up, billed, until the caller hangs up.
func TestRelayed481EndsTheCall(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("UPDATE", "up1", 11, aTag, sdp))
	up := r.expect(carrierA, "UPDATE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(up, 481, "Call/Transaction Does Not Exist", ""))
	r.expect(caller, "SIP/2.0 481 Call/Transaction Does Not Exist", "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	if len(r.calls) != 1 || r.e.Calls() != 0 {
		t.Fatalf("%d CDRs, %d calls left", len(r.calls), r.e.Calls())
	}
}

// A BYE from one side reaches the other with the headers the policy
// relays, as any request in the dialog does: the carrier's Reason (RFC
// 3326), the Q.850 cause the caller's network bills and reports on.
func TestByeRelaysAllowedHeaders(t *testing.T) {
	r := newRig(t, func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Reason") })
	binv, _ := r.answerCall()
	bye := strings.Replace(inDialogFromCarrier(t, binv, "BYE", 1), "Content-Length: 0",
		"Reason: Q.850;cause=16;text=\"Normal call clearing\"\r\nX-Keep: carrier\r\nX-Drop: no\r\nContent-Length: 0", 1)
	r.recv(carrierA, bye)
	r.expect(carrierA, "SIP/2.0 200 OK")
	got := r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	if hdr(got, parser.HeaderReason) != "Q.850;cause=16;text=\"Normal call clearing\"" || got.GetByName("X-Keep") == nil || got.GetByName("X-Drop") != nil {
		t.Fatalf("the BYE to the caller without the allowed headers of the carrier's:\n%s", got.Bytes())
	}
}

// An ACK is for the INVITE its CSeq names (RFC 3261 17.1.1.3, 13.2.2.4): a
// late duplicate of the caller's first ACK, arriving once a re-INVITE's
// 2xx awaits its own, neither stops that 2xx nor acknowledges the
// carrier's.
func TestStaleAckDoesNotAcknowledgeTheReinvite(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(re, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, strings.Replace(ackFromCaller(aTag), "CALLERack", "CALLERackdup", 1)) // CSeq 10
	r.expect(carrierA)
	r.advance(600 * time.Millisecond)
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 11 ACK", 1))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
}

// A carrier that missed sipedge's ACK retransmits its 2xx (RFC 3261
// 13.2.2.4); after the caller's re-INVITE went to it, the ACK for the
// first INVITE's 2xx must still carry that INVITE's CSeq, not the
// re-INVITE's, or the carrier matches it to nothing and goes on.
func TestReAckAfterReinviteKeepsTheFirstCSeq(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	cseqOf := func(m *parser.Message) parser.CSeq {
		c, err := m.CSeq()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, second := cseqOf(binv).Num, cseqOf(re).Num
	if first == second {
		t.Fatalf("the re-INVITE reuses CSeq %d", first)
	}
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp)) // the first 2xx again
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if got := cseqOf(ack); got.Num != first || got.Method != parser.MethodAck {
		t.Fatalf("ACK for the first 2xx has CSeq %d %s, want %d ACK", got.Num, got.MethodRaw, first)
	}
}
