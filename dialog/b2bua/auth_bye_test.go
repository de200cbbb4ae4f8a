package b2bua

import (
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// byeChallenge is the carrier's challenge in these tests, nonce and
// extra params its own.
func byeChallenge(nonce, extra string) string {
	return `Digest realm="carrier.example.net", nonce="` + nonce + `", qop="auth"` + extra
}

// answerCallRouted is answerCall with a carrier whose 200 records a route:
// the B-leg has a route set, which a BYE carries (RFC 3261 12.2.1.1).
func (r *rig) answerCallRouted() (aTag string) {
	r.t.Helper()
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	ok := strings.Replace(carrierResponse(binv, 200, "OK", sdp), "Contact: ",
		"Record-Route: <sip:rr1.carrier.example.net;lr>, <sip:rr2.carrier.example.net;lr>\r\nContact: ", 1)
	r.recv(carrierA, ok)
	aTag = tagOf(r.t, r.expect(caller, "SIP/2.0 200 OK")[0], parser.HeaderTo)
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	return aTag
}

// hangUp has the caller hang up, its BYE carrying a header the policy
// copies, and returns sipedge's BYE to the carrier.
func (r *rig) hangUp(aTag string) *parser.Message {
	r.t.Helper()
	bye := strings.Replace(inDialogFromCaller("BYE", "bye", 11, aTag, ""), "Content-Length: 0",
		"X-Keep: cause-16\r\nContent-Length: 0", 1)
	r.recv(caller, bye)
	r.expect(caller, "SIP/2.0 200 OK")
	return r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
}

// carrierByes counts the BYEs to carriers the engine keeps for a
// challenge, and checks its entries add up: each in use or free.
func carrierByes(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	for _, r := range e.roles {
		if r.kind == roleCarrierBye {
			n++
		}
	}
	free := 0
	for i := e.byes.free; i >= 0; i = e.byes.list[i].next {
		free++
	}
	if n+free != len(e.byes.list) {
		t.Fatalf("%d BYEs watched and %d entries free, of %d", n, free, len(e.byes.list))
	}
	return n
}

// sameDialog checks that again is bye sent again as RFC 3261 8.1.3.5 and
// 22.2 ask: the same Request-URI, Route, Call-ID, From, To, Max-Forwards
// and copied headers, a new branch and the next CSeq.
func sameDialog(t *testing.T, bye, again *parser.Message) {
	t.Helper()
	for _, k := range []parser.HeaderKind{parser.HeaderCallID, parser.HeaderFrom, parser.HeaderTo, parser.HeaderMaxForwards} {
		if hdr(again, k) != hdr(bye, k) {
			t.Fatalf("%v %q, want the BYE's %q:\n%s", k, hdr(again, k), hdr(bye, k), again.Bytes())
		}
	}
	if string(again.RequestURI()) != string(bye.RequestURI()) || again.Count(parser.HeaderRoute) != bye.Count(parser.HeaderRoute) ||
		string(again.Nth(parser.HeaderRoute, 0)) != string(bye.Nth(parser.HeaderRoute, 0)) ||
		string(again.Nth(parser.HeaderRoute, 1)) != string(bye.Nth(parser.HeaderRoute, 1)) {
		t.Fatalf("the BYE again has another Request-URI or route:\n%s\nfirst:\n%s", again.Bytes(), bye.Bytes())
	}
	if string(again.GetByName("X-Keep")) != string(bye.GetByName("X-Keep")) {
		t.Fatalf("the BYE again lost the caller's copied header:\n%s", again.Bytes())
	}
	if c, c0 := cseqOf(t, again), cseqOf(t, bye); c.Num != c0.Num+1 || c.Method != parser.MethodBye {
		t.Fatalf("CSeq %d %v, want %d BYE", c.Num, c.Method, c0.Num+1)
	}
	if viaBranch(t, again) == viaBranch(t, bye) {
		t.Fatal("the BYE again reuses the branch: it is a new transaction")
	}
}

// The caller hangs up, the call ends (its CDR at once), and the carrier
// challenges sipedge's BYE: the BYE goes again in the same dialog with the
// next CSeq and the group's credentials for BYE (RFC 3261 22.2), in
// Proxy-Authorization for a 407 and Authorization for a 401; its 200 ends
// the matter, nothing more is sent, and nothing is kept.
func TestCarrierByeChallengeAnswered(t *testing.T) {
	for _, tc := range []struct {
		name        string
		code        int
		answer, not parser.HeaderKind
		tcp         bool // the carrier over TCP: the 407 ends the BYE's transaction at once (Timer K is zero)
	}{
		{"407", 407, parser.HeaderProxyAuthorization, parser.HeaderAuthorization, false},
		{"401", 401, parser.HeaderAuthorization, parser.HeaderProxyAuthorization, false},
		{"407 over TCP", 407, parser.HeaderProxyAuthorization, parser.HeaderAuthorization, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
			if tc.tcp {
				r.c.OnReserve = func(rt *route.Route, _ uint64, d *carrier.Dial) string {
					reason := r.c.Gateway(rt, d)
					d.Peer.Transport = transport.TCP
					return reason
				}
			}
			bye := r.hangUp(r.answerCallRouted())
			if bye.Count(parser.HeaderRoute) != 2 || len(r.calls) != 1 || r.e.Calls() != 0 {
				t.Fatalf("%d CDRs, %d calls left, BYE:\n%s", len(r.calls), r.e.Calls(), bye.Bytes())
			}
			if tc.tcp && !strings.HasPrefix(hdr(bye, parser.HeaderVia), "SIP/2.0/TCP ") {
				t.Fatalf("the BYE did not go over TCP:\n%s", bye.Bytes())
			}
			if carrierByes(t, r.e) != 1 {
				t.Fatal("the BYE to the carrier is not watched")
			}
			r.recv(carrierA, challengeTo(bye, tc.code, byeChallenge("n-bye", `, opaque="op4"`)))
			again := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
			r.expect(caller)
			sameDialog(t, bye, again)
			if p := checkCredentials(t, again, tc.answer, "carrier.example.net", "n-bye"); p["opaque"] != "op4" {
				t.Fatalf("credentials %v: opaque not echoed", p)
			}
			if again.Count(tc.not) != 0 {
				t.Fatalf("the BYE again carries %v:\n%s", tc.not, again.Bytes())
			}
			if got := r.e.m.authAnswered.Get(); got != 1 {
				t.Fatalf("%d challenges counted answered, want 1", got)
			}

			r.recv(carrierA, carrierResponse(again, 200, "OK", ""))
			r.advance(time.Minute) // the transactions' timers run out
			r.expect(carrierA)
			r.expect(caller)
			if n := carrierByes(t, r.e); n != 0 || r.e.Transactions() != 0 {
				t.Fatalf("%d BYEs and %d transactions kept after the 200", n, r.e.Transactions())
			}
			if len(r.calls) != 1 {
				t.Fatalf("%d CDRs, want 1", len(r.calls))
			}
		})
	}
}

// A second challenge to the BYE that carried the credentials, its nonce
// not stale, is the carrier refusing them: not answered, counted and
// warned of, and the BYE's entry is given back.
func TestCarrierByeChallengeRefused(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	_, aTag := r.answerCall()
	bye := r.hangUp(aTag)
	r.recv(carrierA, challengeTo(bye, 401, byeChallenge("n1", "")))
	again := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	checkCredentials(t, again, parser.HeaderAuthorization, "carrier.example.net", "n1")
	r.recv(carrierA, challengeTo(again, 401, byeChallenge("n2", "")))
	r.expect(carrierA)
	if got := r.e.m.authRefused.Get(); got != 1 {
		t.Fatalf("%d challenges counted refused, want 1", got)
	}
	if got := r.e.m.authAnswered.Get(); got != 1 {
		t.Fatalf("%d challenges counted answered, want 1", got)
	}
	if n := carrierByes(t, r.e); n != 0 {
		t.Fatalf("%d BYEs kept after the refusal", n)
	}
}

// stale=true says the nonce expired, not the credentials (RFC 7616 3.3):
// the BYE is answered once more, with the new nonce and the CSeq after,
// and no further.
func TestCarrierByeChallengeStale(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	_, aTag := r.answerCall()
	bye := r.hangUp(aTag)
	for i, nonce := range []string{"n1", "n2"} {
		stale := ""
		if i > 0 {
			stale = ", stale=true"
		}
		r.recv(carrierA, challengeTo(bye, 407, byeChallenge(nonce, stale)))
		again := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
		sameDialog(t, bye, again)
		checkCredentials(t, again, parser.HeaderProxyAuthorization, "carrier.example.net", nonce)
		bye = again
	}
	r.recv(carrierA, challengeTo(bye, 407, byeChallenge("n3", ", stale=true")))
	r.expect(carrierA)
	if a, f := r.e.m.authAnswered.Get(), r.e.m.authRefused.Get(); a != 2 || f != 1 {
		t.Fatalf("%d answered, %d refused: want 2 and 1", a, f)
	}
	if n := carrierByes(t, r.e); n != 0 {
		t.Fatalf("%d BYEs kept", n)
	}
}

// Without credentials for the carrier's group, or with none for the realm
// it names, the challenge to the BYE is not answered, and is counted.
func TestCarrierByeChallengeUnanswered(t *testing.T) {
	for _, tc := range unansweredCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			r.creds, r.realm = tc.creds, tc.realm
			_, aTag := r.answerCall()
			bye := r.hangUp(aTag)
			r.recv(carrierA, challengeTo(bye, 407, byeChallenge("n1", "")))
			r.expect(carrierA)
			r.expect(caller)
			if tc.count(r.e) != 1 || r.e.m.authAnswered.Get() != 0 {
				t.Fatal("the challenge was not counted unanswered")
			}
			if n := carrierByes(t, r.e); n != 0 {
				t.Fatalf("%d BYEs kept", n)
			}
		})
	}
	// Nor is anything kept for a BYE the carrier never answers (RFC 3261
	// 17.1.2.2 Timer F).
	t.Run("no response", func(t *testing.T) {
		r := newRig(t, nil)
		r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
		_, aTag := r.answerCall()
		r.hangUp(aTag)
		r.advance(time.Minute)
		r.take(carrierA) // the BYE's retransmissions
		if n := carrierByes(t, r.e); n != 0 || r.e.Transactions() != 0 {
			t.Fatalf("%d BYEs and %d transactions kept", n, r.e.Transactions())
		}
	})
}

// The carrier hangs up, and the caller challenges the BYE sipedge sends
// it: sipedge holds no account with the caller, and answers nothing.
// (This one passes without the answer to the carrier's challenges too: it
// guards that the caller's is not taken for one.)
func TestCallerByeChallengeNotAnswered(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	binv, _ := r.answerCall()
	r.recv(carrierA, inDialogFromCarrier(t, binv, "BYE", 1))
	r.expect(carrierA, "SIP/2.0 200 OK")
	bye := r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")[0]
	r.recv(caller, challengeTo(bye, 407, `Digest realm="caller.example.org", nonce="n1"`))
	r.advance(time.Minute)
	r.expect(caller)
	r.expect(carrierA)
	if n := r.e.m.authAnswered.Get() + r.e.m.authRefused.Get() + r.e.m.authNoCredentials.Get() + r.e.m.authUnanswerable.Get(); n != 0 {
		t.Fatalf("the caller's challenge was counted as a carrier's (%d)", n)
	}
	if n := carrierByes(t, r.e); n != 0 || r.e.Transactions() != 0 {
		t.Fatalf("%d BYEs and %d transactions kept", n, r.e.Transactions())
	}
}

// A call ended by sipedge, at its maximum duration, sends a BYE to both
// sides: the carrier's challenge to its BYE is answered too.
func TestMaxDurationByeChallengeAnswered(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxDuration = time.Minute })
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	r.answerCallRouted()
	r.advance(time.Minute)
	r.expect(caller, "BYE sip:alice@caller.example.org:5061 SIP/2.0")
	bye := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if s := r.summary(); s.HangupSide.String() != "system" {
		t.Fatalf("hung up by %q", s.HangupSide)
	}
	r.recv(carrierA, challengeTo(bye, 401, byeChallenge("n-max", "")))
	again := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	sameDialog(t, bye, again)
	checkCredentials(t, again, parser.HeaderAuthorization, "carrier.example.net", "n-max")
	r.recv(carrierA, carrierResponse(again, 200, "OK", ""))
	r.expect(carrierA)
	if n := carrierByes(t, r.e); n != 0 {
		t.Fatalf("%d BYEs kept", n)
	}
}
