package b2bua

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

func TestAnsweredCallByeFromCaller(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.answerCall()
	// The B-leg INVITE: a fresh dialog, sipedge's Via and Contact, the
	// caller's SDP and allowed headers only.
	if hdr(binv, parser.HeaderCallID) == "a-call-1" || tagOf(t, binv, parser.HeaderFrom) == "atag1" {
		t.Fatal("B-leg reuses the A-leg dialog identifiers")
	}
	if !strings.Contains(string(binv.Bytes()), "X-Keep: kept") || strings.Contains(string(binv.Bytes()), "X-Drop") {
		t.Fatalf("header policy not applied:\n%s", binv.Bytes())
	}
	if string(binv.Body()) != sdp {
		t.Fatal("SDP not passed through unchanged")
	}
	if mf, _, _ := binv.MaxForwards(); mf != 69 {
		t.Fatalf("Max-Forwards %d, want 69", mf)
	}
	if c := hdr(binv, parser.HeaderContact); c != "<sip:sipedge@203.0.113.1:5060>" {
		t.Fatalf("Contact %q", c)
	}

	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	bye := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if tagOf(t, bye, parser.HeaderTo) != "btag9" || hdr(bye, parser.HeaderCallID) != hdr(binv, parser.HeaderCallID) {
		t.Fatalf("BYE not in the B dialog:\n%s", bye.Bytes())
	}
	r.recv(carrierA, carrierResponse(bye, 200, "OK", ""))
	if len(r.calls) != 1 {
		t.Fatalf("%d CDRs, want 1", len(r.calls))
	}
	s := r.calls[0]
	if s.FinalCode != 200 || s.HangupSide.String() != "caller" || string(s.ACallID) != "a-call-1" || s.Answer == 0 || s.End == 0 {
		t.Fatalf("summary %+v", s)
	}
	if r.e.Calls() != 0 {
		t.Fatalf("%d calls left", r.e.Calls())
	}
}

func TestAnsweredCallByeFromCallee(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 1))
	r.expect(carrierA, "SIP/2.0 200 OK")
	bye := r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	if tagOf(t, bye, parser.HeaderFrom) != aTag || tagOf(t, bye, parser.HeaderTo) != "atag1" || hdr(bye, parser.HeaderCallID) != "a-call-1" {
		t.Fatalf("BYE not in the A dialog:\n%s", bye.Bytes())
	}
	if hdr(bye, parser.HeaderRoute) != "<sip:rr.caller.example.org;lr>" {
		t.Fatalf("BYE does not follow the caller's route set: %q", hdr(bye, parser.HeaderRoute))
	}
	r.recv(caller, callerResponse(bye, 200, "OK"))
	if len(r.calls) != 1 || r.calls[0].HangupSide.String() != "callee" {
		t.Fatalf("summaries %+v", r.calls)
	}
}

func TestCancelBeforeAnswer(t *testing.T) {
	r := newRig(t, nil)
	inv := callerInvite("1", "a-call-1", "15551234")
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	r.expect(caller, "SIP/2.0 180 Ringing")
	cancel := cancelOf(inv)
	r.recv(caller, cancel)
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	bc := r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(bc, 200, "OK", ""))
	r.recv(carrierA, carrierResponse(binv, 487, "Request Terminated", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	if len(r.calls) != 1 || r.calls[0].FinalCode != 487 || r.calls[0].HangupSide.String() != "caller" {
		t.Fatalf("summaries %+v", r.calls)
	}
}

// A caller who gives up on a ringing carrier, with a CANCEL or with a BYE
// in its early dialog, leaves the same attempt in the CDR's lcr_attempts
// (487, caller_cancelled, with the B-leg the carrier saw, to reconcile
// with its invoice) and in the carrier plane's report, which counts it in
// sipedge_lcr_attempts_total.
func TestCallerGivesUpAttemptListed(t *testing.T) {
	for _, how := range []string{"cancel", "bye"} {
		t.Run(how, func(t *testing.T) {
			r := newRig(t, nil)
			inv := callerInvite("1", "a-call-1", "15551234")
			r.recv(caller, inv)
			r.expect(caller, "SIP/2.0 100 Trying")
			dialed := r.Clock.Now
			binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
			r.advance(time.Second)
			r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
			r.take(carrierA) // the INVITE's retransmissions before the 180
			aTag := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
			r.advance(4 * time.Second)
			if how == "cancel" {
				r.recv(caller, cancelOf(inv))
			} else {
				r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
			}
			bc := r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
			r.recv(carrierA, carrierResponse(bc, 200, "OK", ""))
			r.recv(carrierA, carrierResponse(binv, 487, "Request Terminated", ""))

			s := r.summary()
			want := []route.Attempt{{CarrierID: "carrier-a", Status: 487, ElapsedMs: 5000, Dialed: true, Reason: route.ReasonCallerCancelled}}
			wantLegs := []cdrLeg{{BCallID: hdr(binv, parser.HeaderCallID), Invite: dialed}}
			if s.FinalCode != 487 || s.HangupSide != cdr.HangupCaller || !reflect.DeepEqual(s.Attempts, want) || !reflect.DeepEqual(s.Legs, wantLegs) {
				t.Fatalf("final %d hung up by %v, attempts %+v legs %+v; want 487 by the caller, %+v with %+v",
					s.FinalCode, s.HangupSide, s.Attempts, s.Legs, want, wantLegs)
			}
			var failed []carrier.Report
			for _, rep := range r.c.Reports {
				if rep.Event == carrier.AttemptFailed {
					failed = append(failed, rep)
				}
			}
			if len(failed) != 1 || failed[0].CarrierID != "carrier-a" || failed[0].Code != 487 || !failed[0].Dialed ||
				failed[0].Reason != route.ReasonCallerCancelled || failed[0].Invite != dialed {
				t.Fatalf("failed attempts reported %+v, want carrier-a's, 487 caller_cancelled, dialled at %v", failed, dialed)
			}
		})
	}
}

func TestBusyRelayed(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 486, "Busy Here", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0") // by the transaction layer (RFC 3261 17.1.1.3)
	busy := r.expect(caller, "SIP/2.0 486 Busy Here")[0]
	if hdr(busy, parser.HeaderContact) != "" {
		t.Fatal("a failure carries a Contact")
	}
	if len(r.calls) != 1 || r.calls[0].FinalCode != 486 {
		t.Fatalf("summaries %+v", r.calls)
	}
}

// A CANCEL that crosses the caller's final response still matches the
// INVITE server transaction, which lingers in Completed after the call has
// ended: 200, not 481 (RFC 3261 9.2).
func TestCancelCrossingFinal(t *testing.T) {
	r := newRig(t, nil)
	inv := callerInvite("1", "a-call-1", "15551234")
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 486, "Busy Here", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller, "SIP/2.0 486 Busy Here")
	cancel := cancelOf(inv)
	r.recv(caller, cancel)
	r.expect(caller, "SIP/2.0 200 OK")
}

func TestEarlyMediaThenAnswer(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 183, "Session Progress", sdp))
	p := r.expect(caller, "SIP/2.0 183 Session Progress")[0]
	if string(p.Body()) != sdp || hdr(p, parser.HeaderContentType) != "application/sdp" {
		t.Fatalf("early media SDP not relayed:\n%s", p.Bytes())
	}
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	if tagOf(t, ok, parser.HeaderTo) != tagOf(t, p, parser.HeaderTo) {
		t.Fatal("one B-leg early dialog got two A-leg tags")
	}
}

func TestReInviteInDialog(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	cseq, _ := re.CSeq()
	if cseq.Num != 2 || hdr(re, parser.HeaderCallID) != hdr(binv, parser.HeaderCallID) || string(re.Body()) != sdp {
		t.Fatalf("re-INVITE on B:\n%s", re.Bytes())
	}
	// A second re-INVITE from the caller while its first is pending: 500
	// with Retry-After (RFC 3261 14.2); an INVITE from the carrier, on
	// which sipedge's is in progress, is glare: 491.
	r.recv(caller, inDialogFromCaller("INVITE", "re2", 12, aTag, sdp))
	second := r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 500 Server Internal Error")[1]
	if ra, ok, err := second.RetryAfter(); !ok || err != nil || ra.Seconds > 10 {
		t.Fatalf("500 to a second re-INVITE without a Retry-After of 0 to 10 s:\n%s", second.Bytes())
	}
	r.recv(carrierA, inDialogFromCarrier(t, binv, "INVITE", 1))
	r.expect(carrierA, "SIP/2.0 100 Trying", "SIP/2.0 491 Request Pending")
	r.recv(carrierA, carrierResponse(re, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	if c, _ := ok.CSeq(); c.Num != 11 || string(ok.Body()) != sdp {
		t.Fatalf("re-INVITE 200 to the caller:\n%s", ok.Bytes())
	}
	ack := strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 11 ACK", 1)
	r.recv(caller, ack)
	back := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if c, _ := back.CSeq(); c.Num != 2 {
		t.Fatalf("ACK CSeq %d, want the re-INVITE's 2", c.Num)
	}
}

func TestInviteRetransmissionAbsorbed(t *testing.T) {
	r := newRig(t, nil)
	inv := callerInvite("1", "a-call-1", "15551234")
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying") // the transaction re-sends its last response
	r.expect(carrierA)                     // and no second B-leg
	if r.e.Calls() != 1 {
		t.Fatalf("%d calls", r.e.Calls())
	}
}

func TestB200RetransmissionReAcked(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerCall()
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	r.expect(caller)
}

func TestLate200AfterCancelAckedAndByed(t *testing.T) {
	r := newRig(t, nil)
	inv := callerInvite("1", "a-call-1", "15551234")
	r.recv(caller, inv)
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	r.take(caller)
	cancel := cancelOf(inv)
	r.recv(caller, cancel)
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	r.take(carrierA) // the CANCEL
	// The carrier answers before it sees the CANCEL.
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	r.expect(caller) // the caller never hears of it
}

func TestUnknownSourceDroppedOrRefused(t *testing.T) {
	r := newRig(t, nil)
	r.recv(stranger, callerInvite("1", "a-call-1", "15551234"))
	r.expect(stranger) // silent: not even a 100 Trying
	r.expect(carrierA)

	r = newRig(t, func(c *Config) { c.RejectUnknown = true })
	r.recv(stranger, callerInvite("1", "a-call-1", "15551234"))
	r.expect(stranger, "SIP/2.0 403 Forbidden")
}

func TestMaxForwardsZero(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, strings.Replace(callerInvite("1", "a-call-1", "15551234"), "Max-Forwards: 70", "Max-Forwards: 0", 1))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 483 Too Many Hops")
	r.expect(carrierA)
}

func Test2xxRetransmittedUntilAck(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	r.advance(500 * time.Millisecond) // T1
	r.expect(caller, "SIP/2.0 200 OK")
	r.advance(time.Second) // 2*T1
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	r.advance(10 * time.Second)
	r.expect(caller)
}

func TestNoAckEndsCall(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	r.advance(40 * time.Second) // beyond 64*T1
	if len(r.calls) != 1 || r.calls[0].HangupSide.String() != "system" {
		t.Fatalf("summaries %+v", r.calls)
	}
	got := strings.Join(r.take(carrierA), "")
	if !strings.Contains(got, "BYE sip:gw@carrier.example.net:5070") {
		t.Fatalf("no BYE to the carrier:\n%s", got)
	}
}

func TestReferRefused(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("REFER", "ref", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 603 Decline")
	r.expect(carrierA)
}

func TestLimitsAndRouterReject(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxCalls = 1 })
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	r.take(carrierA)
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 503 Service Unavailable")
	r = newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "404"))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 404 No Route")
}

// While the engine drains, a new call is refused 503 Draining without a
// dial, and gets a CDR as a call refused by routing does: final_code 503,
// final_reason Draining, hung up by the system, no attempt. The limit on
// calls does not take precedence: a node at its limit that drains refuses
// for the drain. The caller's ACK ends the matter.
func TestDrainingRefusedWithCDR(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxCalls = 1 })
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	r.take(carrierA)
	r.e.env.Draining = func() bool { return true }
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	got := r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 503 Draining")
	r.expect(carrierA)
	if len(r.calls) != 1 {
		t.Fatalf("%d CDRs, want 1: the refused call's", len(r.calls))
	}
	s := r.calls[0]
	if string(s.ACallID) != "a-call-2" || s.FinalCode != 503 || string(s.FinalReason) != ReasonDraining ||
		s.HangupSide != cdr.HangupSystem || len(s.Attempts) != 0 || s.Target.CarrierID != "" || s.Answer != 0 {
		t.Fatalf("CDR %+v, want a-call-2 refused 503 Draining by the system, no carrier", s)
	}
	if r.e.m.rejected.Get() != 1 || r.e.Calls() != 1 {
		t.Fatalf("%d calls counted rejected, %d up; want 1 and the first call only", r.e.m.rejected.Get(), r.e.Calls())
	}
	// The first call's two INVITEs are unanswered; the 503 awaits its ACK.
	if n := r.e.Unsettled(); n != 3 {
		t.Fatalf("%d transactions unsettled before the ACK, want 3", n)
	}
	r.recv(caller, ackOfFailure("2", "a-call-2", tagOf(t, got[1], parser.HeaderTo)))
	if n := r.e.Unsettled(); n != 2 {
		t.Fatalf("%d transactions unsettled after the ACK, want 2", n)
	}
}

func TestUnknownDialog481(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, inDialogFromCaller("BYE", "x", 11, "nosuchtag", ""))
	r.expect(caller, "SIP/2.0 481 Call/Transaction Does Not Exist")
}

func TestOrphanReaped(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INFO", "info", 11, aTag, ""))
	r.expect(carrierA, "INFO sip:gw@carrier.example.net:5070 SIP/2.0")
	r.advance(40 * time.Second) // Timer F: the carrier never answers
	if len(r.calls) != 1 || r.calls[0].HangupSide.String() != "system" {
		t.Fatalf("summaries %+v", r.calls)
	}
	got := strings.Join(r.take(caller), "")
	if !strings.Contains(got, "SIP/2.0 408 Request Timeout") || !strings.Contains(got, "BYE sip:alice@caller.example.org:5061") {
		t.Fatalf("caller got:\n%s", got)
	}
}

// TestRandomToken checks that tokens of every length up to two and a half
// draws are appended whole, of token characters (RFC 3261 25.1), and vary.
func TestRandomToken(t *testing.T) {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-."
	for n := 0; n <= 25; n++ {
		a := randomToken([]byte("x"), n)
		b := randomToken(nil, n)
		if len(a) != 1+n || a[0] != 'x' || len(b) != n {
			t.Fatalf("randomToken(_, %d): lengths %d and %d", n, len(a), len(b))
		}
		for _, c := range a[1:] {
			if strings.IndexByte(chars, c) < 0 {
				t.Fatalf("randomToken(_, %d) = %q: %q is not a token character", n, a, c)
			}
		}
		if n >= 8 && string(a[1:]) == string(b) {
			t.Fatalf("randomToken(_, %d) gave %q twice", n, b)
		}
	}
}

// An INVITE must carry exactly one SIP or SIPS URI in Contact (RFC 3261
// 8.1.1.8): it is where the A-leg's in-dialog requests go. Without one,
// sipedge answers 400 and dials nobody, where it used to connect the call
// and then send the caller a BYE with an empty Request-URI.
func TestInviteWithoutUsableContact(t *testing.T) {
	const contact = "Contact: <sip:alice@caller.example.org:5061>\r\n"
	for name, repl := range map[string]string{
		"none":   "",
		"star":   "Contact: *\r\n",
		"two":    contact + "Contact: <sip:alice@192.0.2.10:5061>\r\n",
		"tel":    "Contact: <tel:+15551234>\r\n",
		"one ok": contact,
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, nil)
			r.recv(caller, strings.Replace(callerInvite("1", "a-call-1", "15551234"), contact, repl, 1))
			if name == "one ok" {
				r.expect(caller, "SIP/2.0 100 Trying")
				r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
				return
			}
			r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 400 Missing Contact")
			r.expect(carrierA)
		})
	}
}

// A carrier 2xx whose Contact is not a SIP URI (here "*") leaves the B-leg's
// remote target at the Request-URI it was dialled with: the BYE still has
// one (RFC 3261 12.1.2 wants a SIP URI there; an empty one is no request).
func TestCarrierContactNotSIPKeepsTarget(t *testing.T) {
	r := newRig(t, nil)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	ok := strings.Replace(carrierResponse(binv, 200, "OK", sdp), "Contact: <sip:gw@carrier.example.net:5070>", "Contact: *", 1)
	r.recv(carrierA, ok)
	aTag := tagOf(t, r.expect(caller, "SIP/2.0 200 OK")[0], parser.HeaderTo)
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	r.expect(carrierA, "BYE sip:15551234@198.51.100.20:5070 SIP/2.0")
}

// The B-leg From carries the caller's display name as it came, quoted or
// not, and none when there is none.
func TestBLegFromKeepsCallerDisplay(t *testing.T) {
	for _, tc := range []struct{ from, want string }{
		{`"Alice" <sip:alice@caller.example.org>;tag=atag1`, `"Alice" <sip:`},
		{`Alice Smith <sip:alice@caller.example.org>;tag=atag1`, `Alice Smith <sip:`},
		{`"A <b>" <sip:alice@caller.example.org>;tag=atag1`, `"A <b>" <sip:`},
		{`<sip:alice@caller.example.org>;tag=atag1`, `<sip:`},
		{`sip:alice@caller.example.org;tag=atag1`, `<sip:`},
	} {
		r := newRig(t, nil)
		inv := strings.Replace(callerInvite("1", "a-call-1", "15551234"),
			`"Alice" <sip:alice@caller.example.org>;tag=atag1`, tc.from, 1)
		r.recv(caller, inv)
		r.expect(caller, "SIP/2.0 100 Trying")
		binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
		if from := hdr(binv, parser.HeaderFrom); !strings.HasPrefix(from, tc.want) {
			t.Errorf("caller From %s: B-leg From %s, want it to start %s", tc.from, from, tc.want)
		}
	}
}

// A response whose top Via is not one sipedge wrote is silently discarded
// (RFC 3261 18.1.2), and counted, even when its branch matches a live
// transaction; the same response with sipedge's Via goes through.
func TestResponseWithForeignViaDropped(t *testing.T) {
	set := metrics.NewSet()
	r := newRig(t, func(c *Config) { c.Metrics = set })
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	ringing := carrierResponse(binv, 180, "Ringing", "")
	for _, foreign := range []string{"203.0.113.9:5060", "203.0.113.1:5070", "[2001:db8::1]:5060", "evil.example.net:5060"} {
		r.recv(carrierA, strings.Replace(ringing, "203.0.113.1:5060;branch=", foreign+";branch=", 1))
		r.expect(caller)
	}
	var b strings.Builder
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), `sipedge_responses_foreign_via_total{shard="0"} 4`) {
		t.Errorf("want 4 foreign-Via responses counted:\n%s", b.String())
	}
	r.recv(carrierA, ringing)
	r.expect(caller, "SIP/2.0 180 Ringing")
	// Without a port, the sent-by port is 5060 (RFC 3261 18.2.2): ours.
	progress := carrierResponse(binv, 183, "Session Progress", "")
	r.recv(carrierA, strings.Replace(progress, "203.0.113.1:5060;branch=", "203.0.113.1;branch=", 1))
	r.expect(caller, "SIP/2.0 183 Session Progress")
}

// The caller's responses that establish the dialog carry the Record-Route
// of its INVITE (RFC 3261 12.1.1): without it, the caller's UA has an
// empty route set, and its ACK and BYE bypass the proxies that asked to
// stay in the path (an ACK that never arrives ends the call at 64*T1).
func TestDialogResponsesEchoRecordRoute(t *testing.T) {
	r := newRig(t, nil)
	binv := r.startCall()
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	ringing := r.expect(caller, "SIP/2.0 180 Ringing")[0]
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	for _, m := range []*parser.Message{ringing, ok} {
		if got := hdr(m, parser.HeaderRecordRoute); got != "<sip:rr.caller.example.org;lr>" {
			t.Errorf("%s: Record-Route %q, want the INVITE's", firstLine(string(m.Bytes())), got)
		}
	}
}

// A carrier's final failure that reaches the caller as it is keeps the
// headers the policy relays: a 422 keeps its Min-SE, which RFC 4028 6
// requires in it and without which the caller cannot retry with a longer
// session interval.
func TestForwardedFailureKeepsAllowedHeaders(t *testing.T) {
	r := newRig(t, func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Min-SE") })
	binv := r.startCall()
	resp := carrierResponse(binv, 422, "Session Interval Too Small", "gw7.carrier.internal: session timer policy\r\n")
	resp = strings.Replace(resp, "Content-Type: application/sdp", "Content-Type: text/plain", 1)
	resp = strings.Replace(resp, "Content-Length:", "Min-SE: 1800\r\nX-Keep: carrier\r\nX-Drop: no\r\nContent-Length:", 1)
	r.recv(carrierA, resp)
	r.take(carrierA) // the ACK
	got := r.expect(caller, "SIP/2.0 422 Session Interval Too Small")[0]
	if got.GetByName("Min-SE") == nil || got.GetByName("X-Keep") == nil || got.GetByName("X-Drop") != nil {
		t.Fatalf("the carrier's 422 relayed without its allowed headers:\n%s", got.Bytes())
	}
	// Its body stays with the carrier: an error text may name its network.
	if len(got.Body()) != 0 || got.Get(parser.HeaderContentType) != nil {
		t.Fatalf("the carrier's failure body reached the caller:\n%s", got.Bytes())
	}
	if hdr(got, parser.HeaderContact) != "" {
		t.Fatal("a failure carries a Contact")
	}
}

// A delayed offer (an INVITE without SDP): the carrier's 2xx carries the
// offer and the ACK must carry the caller's answer (RFC 3261 13.2.2.4,
// RFC 3264). When the carrier retransmits its 2xx, having missed the ACK,
// the ACK sent again carries the answer too, or the carrier never gets one.
func TestDelayedOfferReAckCarriesTheAnswer(t *testing.T) {
	r := newRig(t, nil)
	inv := callerInvite("1", "a-call-1", "15551234")
	inv = inv[:strings.Index(inv, "Content-Type:")] + "Content-Length: 0\r\n\r\n"
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	ok := carrierResponse(binv, 200, "OK", sdp)
	r.recv(carrierA, ok)
	aTag := tagOf(t, r.expect(caller, "SIP/2.0 200 OK")[0], parser.HeaderTo)
	ack := ackFromCaller(aTag)
	ack = strings.Replace(ack, "Content-Length: 0\r\n\r\n", "Content-Type: application/sdp\r\n"+
		"Content-Length: "+strconv.Itoa(len(sdp))+"\r\n\r\n"+sdp, 1)
	r.recv(caller, ack)
	if first := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]; string(first.Body()) != sdp {
		t.Fatalf("the ACK lacks the caller's answer:\n%s", first.Bytes())
	}
	r.recv(carrierA, ok)
	again := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if string(again.Body()) != sdp || hdr(again, parser.HeaderContentType) != "application/sdp" {
		t.Fatalf("the ACK to the retransmitted 2xx lacks the answer:\n%s", again.Bytes())
	}
}

// The caller's INVITE arriving again on another branch (a caller-side
// proxy that forked it to sipedge twice, or re-sent it as a new
// transaction) is a merged request: 482 (RFC 3261 8.2.2.2), not a second
// call that dials the carrier again and takes over the first one's
// Call-ID, leaving it unreachable (a ghost dialog).
func TestMergedInviteLoopDetected(t *testing.T) {
	r := newRig(t, nil)
	r.startCall()
	r.recv(caller, callerInvite("2", "a-call-1", "15551234"))
	got := r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 482 Loop Detected")
	r.expect(carrierA)
	if r.e.Calls() != 1 {
		t.Fatalf("%d calls, want 1", r.e.Calls())
	}
	// RFC 3261 8.2.6.2: a UAS adds a To tag to every response but a 100.
	if tagOf(t, got[1], parser.HeaderTo) == "" {
		t.Fatalf("482 without a To tag:\n%s", got[1].Bytes())
	}
}

// The caller's CANCEL's Reason (RFC 3326 2: "Call completed elsewhere",
// which tells the callee not to show a missed call) reaches the carrier on
// sipedge's CANCEL when the header policy allows Reason, also when that
// CANCEL waits for the carrier's first provisional (RFC 3261 9.1); nothing
// else of the caller's CANCEL does.
func TestCancelRelaysReason(t *testing.T) {
	const reason = `SIP;cause=200;text="Call completed elsewhere"`
	for _, allow := range []bool{true, false} {
		r := newRig(t, func(c *Config) {
			if allow {
				c.HeaderAllow = append(c.HeaderAllow, "Reason")
			}
		})
		inv := callerInvite("1", "a-call-1", "15551234")
		binv := r.startCall()
		cancel := strings.Replace(strings.Replace(inv, "INVITE sip:", "CANCEL sip:", 1), "CSeq: 10 INVITE", "CSeq: 10 CANCEL", 1)
		r.recv(caller, cancel[:strings.Index(cancel, "Content-Type")]+"Reason: "+reason+"\r\nContent-Length: 0\r\n\r\n")
		r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
		r.expect(carrierA) // held until a provisional
		r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
		bc := r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
		want := reason
		if !allow {
			want = ""
		}
		if got := hdr(bc, parser.HeaderReason); got != want {
			t.Errorf("Reason allowed %v: the carrier's CANCEL has Reason %q, want %q", allow, got, want)
		}
		if bc.GetByName("X-Keep") != nil {
			t.Errorf("the caller's X-Keep reached the carrier's CANCEL:\n%s", bc.Bytes())
		}
	}
}

// A CANCEL of a re-INVITE being relayed carries the caller's Reason too.
func TestCancelReinviteRelaysReason(t *testing.T) {
	r := newRig(t, func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Reason") })
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	re := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(re, 100, "Trying", ""))
	r.recv(caller, reinviteCancel(aTag, "Reason: SIP;cause=487\r\n"))
	r.expect(caller, "SIP/2.0 200 OK")
	bc := r.expect(carrierA, "CANCEL sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if got := hdr(bc, parser.HeaderReason); got != "SIP;cause=487" {
		t.Errorf("the carrier's CANCEL has Reason %q, want the caller's", got)
	}
}
