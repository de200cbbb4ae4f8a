package b2bua

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// twoCarriers routes to carrier-a then carrier-b.
func twoCarriers(t *testing.T, a, b route.Route) *rig {
	r := newRig(t, nil)
	r.routes = []route.Route{a, b}
	return r
}

var (
	routeA = route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", Rate: 0.004}
	routeB = route.Route{CarrierID: "carrier-b", GatewayGroup: "carrier-b", Rate: 0.005}
)

// startCall sends the caller's INVITE and returns carrier-a's INVITE.
func (r *rig) startCall() *parser.Message {
	r.t.Helper()
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	return r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
}

func (r *rig) summary() ended {
	r.t.Helper()
	if len(r.calls) != 1 {
		r.t.Fatalf("%d CDRs, want 1", len(r.calls))
	}
	return r.calls[0]
}

func TestFailover503ThenAnswer(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 503, "Service Unavailable", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	// A fresh B-leg dialog: new Call-ID and From tag; the A-leg Call-ID is stable.
	if hdr(inv1, parser.HeaderCallID) == hdr(inv2, parser.HeaderCallID) || tagOf(t, inv1, parser.HeaderFrom) == tagOf(t, inv2, parser.HeaderFrom) {
		t.Fatal("the second carrier got the first carrier's dialog identifiers")
	}
	r.expect(caller) // nothing reaches the caller between carriers
	r.recv(carrierB, carrierResponse(inv2, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
	r.expect(carrierB, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, tagOf(t, ok, parser.HeaderTo), ""))
	r.take(caller)
	r.take(carrierB)
	s := r.summary()
	if s.Target.CarrierID != "carrier-b" || len(s.Attempts) != 1 || s.Attempts[0] != (route.Attempt{CarrierID: "carrier-a", Status: 503, Dialed: true}) {
		t.Fatalf("summary target %q attempts %+v", s.Target.CarrierID, s.Attempts)
	}
}

// A failover is an operational event (docs/design/lcr.md 3.12): each
// failed attempt is logged at info with its carrier, status and elapsed
// time, an undialled one with its status (503) too, and so is the advance
// to the next carrier; the last carrier's failure advances nowhere.
func TestFailoverLogged(t *testing.T) {
	r := newRig(t, nil)
	r.routes = []route.Route{routeA, {CarrierID: "dead", GatewayGroup: "down"}, routeB}
	var logs bytes.Buffer
	r.e.env.Log = slog.New(slog.NewTextHandler(&logs, nil))
	inv1 := r.startCall()
	r.advance(20 * time.Millisecond)
	r.recv(carrierA, carrierResponse(inv1, 503, "Service Unavailable", ""))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 502, "Bad Gateway", ""))
	r.take(carrierB)
	r.take(caller)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if _, msg, ok := strings.Cut(l, " level=INFO msg="); ok {
			lines = append(lines, msg)
		}
	}
	want := []string{
		`"LCR: carrier failed" call_id=a-call-1 carrier=carrier-a status=503 elapsed_ms=20`,
		`"LCR: failing over" call_id=a-call-1 from=carrier-a to=dead`,
		`"LCR: carrier burned without dialling" call_id=a-call-1 carrier=dead reason=group_down status=503`,
		`"LCR: failing over" call_id=a-call-1 from=dead to=carrier-b`,
		`"LCR: carrier failed" call_id=a-call-1 carrier=carrier-b status=502 elapsed_ms=0`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("info lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestFailoverBusyForwardedWithoutFailover(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 486, "Busy Here", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 486 Busy Here")
	r.expect(carrierB)
	if s := r.summary(); s.FinalCode != 486 {
		t.Fatalf("final %d", s.FinalCode)
	}
}

func TestFailover6xxStops(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 603, "Decline", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 603 Decline")
	r.expect(carrierB)
}

func TestFailoverNoProgressTimeout(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 6
	r := twoCarriers(t, a, routeB)
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 100, "Trying", "")) // a 100 is not progress
	r.advance(6 * time.Second)
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
}

func TestFailoverProgressThenRingOut408(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 6
	r := newRig(t, func(c *Config) { c.Sequence.RingTimeout = 45 * time.Second })
	r.routes = []route.Route{a, routeB}
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 180, "Ringing", ""))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.advance(10 * time.Second) // past timeout_secs: progress keeps it ringing
	r.expect(carrierA)
	r.advance(35 * time.Second) // 45 s from the dial: ring-out
	cancel := r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.expect(caller, "SIP/2.0 408 Request Timeout")
	r.expect(carrierB) // the rest are not tried
	r.recv(carrierA, carrierResponse(cancel, 200, "OK", ""))
	r.recv(carrierA, carrierResponse(inv1, 487, "Request Terminated", ""))
	s := r.summary()
	if s.FinalCode != 408 || len(s.Attempts) != 1 || s.Attempts[0].Status != 408 {
		t.Fatalf("summary %d %+v", s.FinalCode, s.Attempts)
	}
}

func TestFailoverRerouteAfterProgress(t *testing.T) {
	a := routeA
	a.TimeoutSecs, a.RerouteAfterProgress = 6, true
	r := twoCarriers(t, a, routeB)
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 183, "Session Progress", sdp))
	r.take(caller)
	r.advance(6 * time.Second)
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
}

func TestFailoverBestFailure408Over503(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 6
	r := twoCarriers(t, a, routeB)
	r.startCall()
	r.advance(6 * time.Second) // carrier-a rings out without progress: 408
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 503, "Service Unavailable", ""))
	r.take(carrierB)
	// carrier-a's ring-out outranks carrier-b's 503 (RFC 3261 16.7).
	r.expect(caller, "SIP/2.0 408 Request Timeout")
}

func TestFailoverCarrier503ReachesCallerAs500(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 503, "Service Unavailable", ""))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 503, "Service Unavailable", ""))
	r.take(carrierB)
	if got := r.take(caller); len(got) != 1 || !strings.HasPrefix(got[0], "SIP/2.0 500 ") {
		t.Fatalf("caller got %q, want a 500", got)
	}
}

func TestFailoverUndialableSkippedAtOnce(t *testing.T) {
	r := twoCarriers(t, route.Route{CarrierID: "dead", GatewayGroup: "down"}, routeB)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	// No ring timeout waited out: carrier-b is dialled at once.
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 486, "Busy Here", ""))
	r.take(carrierB)
	r.expect(caller, "SIP/2.0 486 Busy Here")
	s := r.summary()
	if len(s.Attempts) != 2 || s.Attempts[0] != (route.Attempt{CarrierID: "dead", Status: 503, Reason: route.ReasonGroupDown}) {
		t.Fatalf("attempts %+v", s.Attempts)
	}
}

func TestFailoverUndialableTailOwn503(t *testing.T) {
	r := twoCarriers(t, routeA, route.Route{CarrierID: "ghost", GatewayGroup: "no-such-group"})
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 502, "Bad Gateway", ""))
	r.take(carrierA)
	// The carriers left cannot be dialled: sipedge's own 503, not a 500.
	r.expect(caller, "SIP/2.0 503 Service Unavailable")
}

// After a carrier's 503 the undialable tail's 503 is still sipedge's own:
// not the carrier's, whose code it shares, relayed with its phrase and
// headers (route.Step.Own).
func TestFailoverUndialableTailOwn503AfterCarrier503(t *testing.T) {
	r := twoCarriers(t, routeA, route.Route{CarrierID: "ghost", GatewayGroup: "no-such-group"})
	inv1 := r.startCall()
	resp := strings.Replace(carrierResponse(inv1, 503, "Carrier Congested", ""), "Content-Length:", "Reason: Q.850;cause=34\r\nContent-Length:", 1)
	r.recv(carrierA, resp)
	r.take(carrierA)
	m := r.expect(caller, "SIP/2.0 503 Service Unavailable")[0]
	if m.Get(parser.HeaderReason) != nil {
		t.Fatalf("sipedge's own 503 relays the carrier's Reason:\n%s", m.Bytes())
	}
}

func TestFailoverCancelDuringSequence(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	inv := callerInvite("1", "a-call-1", "15551234")
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 180, "Ringing", ""))
	r.take(caller)
	cancel := cancelOf(inv)
	r.recv(caller, cancel)
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.recv(carrierA, carrierResponse(inv1, 487, "Request Terminated", ""))
	r.take(carrierA)
	r.expect(carrierB) // no failover after the caller gave up
	if s := r.summary(); s.FinalCode != 487 {
		t.Fatalf("final %d", s.FinalCode)
	}
}

func TestFailoverLate200FromBurnedCarrier(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 6
	r := twoCarriers(t, a, routeB)
	inv1 := r.startCall()
	r.advance(6 * time.Second)
	r.take(carrierA) // CANCEL
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	// carrier-a answers anyway: ACK and BYE it, the caller never hears of it.
	r.recv(carrierA, carrierResponse(inv1, 200, "OK", sdp))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "BYE sip:gw@carrier.example.net:5070 SIP/2.0")
	r.expect(caller)
	r.recv(carrierB, carrierResponse(inv2, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
}

func TestAsyncDecision(t *testing.T) {
	r := newRig(t, nil)
	r.pending = true
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA) // nothing until the decision is posted back
	r.e.Decided(r.refs[0], route.Decision{Routes: []route.Route{routeA}, Source: route.SourceLCR}, r.Clock.Now)
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
	// A stale or repeated decision is ignored.
	r.e.Decided(r.refs[0], route.Decision{Routes: []route.Route{routeB}, Source: route.SourceLCR}, r.Clock.Now)
	r.expect(carrierB)
}

func TestAsyncDecisionRejectAndCancelWhileRouting(t *testing.T) {
	r := newRig(t, nil)
	r.pending = true
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	r.e.Decided(r.refs[0], route.Decision{Code: 403, Reason: "Blocked"}, r.Clock.Now)
	r.expect(caller, "SIP/2.0 403 Blocked")

	r = newRig(t, nil)
	r.pending = true
	inv := callerInvite("1", "a-call-1", "15551234")
	r.recv(caller, inv)
	r.take(caller)
	cancel := cancelOf(inv)
	r.recv(caller, cancel)
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	r.e.Decided(r.refs[0], route.Decision{Routes: []route.Route{routeA}}, r.Clock.Now) // too late
	r.expect(carrierA)
	// The caller hung up, whether or not a carrier was dialled yet.
	if s := r.summary(); s.FinalCode != 487 || len(s.Attempts) != 0 || s.HangupSide.String() != "caller" {
		t.Fatalf("summary %d %q %+v", s.FinalCode, s.HangupSide, s.Attempts)
	}
}

func TestProbe(t *testing.T) {
	r := newRig(t, nil)
	type result struct {
		code  int
		retry time.Duration
		err   error
	}
	var got []result
	done := func(code int, retry, _ time.Duration, err error) { got = append(got, result{code, retry, err}) }
	to := transport.Peer{Addr: carrierA, Transport: transport.UDP}
	r.e.Probe(to, "sip:198.51.100.20:5070", 2*time.Second, r.Clock.Now, done)
	opt := r.expect(carrierA, "OPTIONS sip:198.51.100.20:5070 SIP/2.0")[0]
	b := parser.AppendResponse(nil, opt, 503, "Service Unavailable", []byte("x"))
	b = append(b, "Retry-After: 30\r\n"...)
	r.recv(carrierA, string(parser.AppendBody(b, "", nil)))
	// A probe that gets no answer times out.
	r.e.Probe(to, "sip:198.51.100.20:5070", 2*time.Second, r.Clock.Now, done)
	r.take(carrierA)
	r.advance(3 * time.Second)
	if len(got) != 2 || got[0].code != 503 || got[0].retry != 30*time.Second || got[1].err != ErrProbeTimeout {
		t.Fatalf("probe results %+v", got)
	}
}

func TestPacingDelaysTheDial(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	r.c.OnPace = func(rt *carrier.Dial, _ uint64) carrier.Pace {
		if rt.CarrierID == "carrier-a" {
			return carrier.Pace{Wait: 300 * time.Millisecond}
		}
		return carrier.Pace{}
	}
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA) // held for its slot, on the wheel
	r.advance(300 * time.Millisecond)
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
}

func TestPacingOverLimitBurnsCarrier(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	r.c.OnPace = func(rt *carrier.Dial, _ uint64) carrier.Pace {
		return carrier.Pace{Over: rt.CarrierID == "carrier-a"}
	}
	var outcomes []int
	r.c.OnOutcome = func(t *carrier.Dial, code int, _ time.Duration) { outcomes = append(outcomes, code) }
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	r.expect(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 486, "Busy Here", ""))
	r.take(carrierB)
	r.take(caller)
	s := r.summary()
	if len(s.Attempts) != 2 || s.Attempts[0] != (route.Attempt{CarrierID: "carrier-a", Status: 503, Reason: route.ReasonCPSLimited}) {
		t.Fatalf("attempts %+v", s.Attempts)
	}
	// carrier-a's gateway, picked but not tried, is reported abandoned: not
	// blamed, and a trial it held after an outage goes back (health).
	if len(outcomes) != 2 || outcomes[0] != carrier.OutcomeAbandoned || outcomes[1] != 486 {
		t.Fatalf("outcomes %v, want [%d 486]", outcomes, carrier.OutcomeAbandoned)
	}
}

func TestCPSRejectRetriedThenFailover(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	r.c.OnCPSReject = func(_ *carrier.Dial, code int, reason, _ []byte) (time.Duration, bool) {
		return time.Second, code == 503 && string(reason) == "CPS Limit"
	}
	inv := r.startCall()
	for i := 0; i < MaxCPSRetries; i++ {
		r.recv(carrierA, carrierResponse(inv, 503, "CPS Limit", ""))
		r.take(carrierA) // the ACK
		r.advance(time.Second)
		next := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
		if hdr(next, parser.HeaderCallID) == hdr(inv, parser.HeaderCallID) {
			t.Fatal("a CPS retry reused the B-leg dialog")
		}
		inv = next
	}
	var outcomes []int
	r.c.OnOutcome = func(_ *carrier.Dial, code int, _ time.Duration) { outcomes = append(outcomes, code) }
	r.recv(carrierA, carrierResponse(inv, 503, "CPS Limit", ""))
	r.take(carrierA)
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0") // retries exhausted: fail over
	// A CPS limit says nothing of the gateway's health: a 503 would put it
	// in cooldown; nor of the carrier's quality.
	if len(outcomes) != 1 || outcomes[0] != carrier.OutcomeAbandoned {
		t.Errorf("outcomes %v, want [%d]", outcomes, carrier.OutcomeAbandoned)
	}
	if len(r.c.Reports) != 1 || !r.c.Reports[0].CPSRejected || r.c.Reports[0].Code != 503 || !r.c.Reports[0].Dialed {
		t.Errorf("reports %+v, want carrier-a's 503, a CPS reject", r.c.Reports)
	}
}

func TestTrunkLimits(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Trunks[0].MaxCalls = 1 })
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.take(caller)
	r.take(carrierA)
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	got := r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 503 Service Unavailable")
	if hdr(got[1], parser.HeaderRetryAfter) == "" {
		t.Fatal("no Retry-After on the ingress 503")
	}
	r.expect(carrierA)

	// A trunk of one call a second, no wait: the second call in the same
	// instant is over.
	ingress, err := ratelimit.NewLocal(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ingress.Register("trunk:local", ratelimit.Limit{Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	routed := 0
	r = newRig(t, func(c *Config) { c.Trunks[0].Ingress = &TrunkIngress{Limiter: ingress, Key: key} })
	inner := r.e.env.Router
	r.e.env.Router = routerFunc(func(q *route.Request) route.Decision { routed++; return inner.Route(q) })
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.take(carrierA)
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	got = r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 503 Service Unavailable")
	if hdr(got[1], parser.HeaderRetryAfter) != "1" || routed != 1 {
		t.Fatalf("Retry-After %q, routed %d: the trunk's CPS must refuse before any routing work", hdr(got[1], parser.HeaderRetryAfter), routed)
	}
}

// A CPS-reject retry pending when the carrier's deadline ends the attempt
// is dropped with it: the next carrier is dialled once, and the rejected
// one not again.
func TestCPSRetryDroppedWhenTheSequenceMovesOn(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 1
	r := twoCarriers(t, a, routeB)
	r.c.OnCPSReject = func(_ *carrier.Dial, code int, reason, _ []byte) (time.Duration, bool) {
		return 3 * time.Second, code == 503 && string(reason) == "CPS Limit"
	}
	var outcomes []int
	r.c.OnOutcome = func(_ *carrier.Dial, code int, _ time.Duration) { outcomes = append(outcomes, code) }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 503, "CPS Limit", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.advance(time.Second) // carrier-a's deadline, before its retry
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	// carrier-a's gateway hears of its attempt, left while waiting for a
	// retry: abandoned (its CPS reject is not its health), before carrier-b
	// is picked.
	if len(outcomes) != 1 || outcomes[0] != carrier.OutcomeAbandoned {
		t.Fatalf("outcomes %v, want [%d]", outcomes, carrier.OutcomeAbandoned)
	}
	r.recv(carrierB, carrierResponse(inv2, 180, "Ringing", "")) // no retransmissions
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.advance(5 * time.Second) // past the retry's time
	r.expect(carrierB)
	r.expect(carrierA)
}

// A carrier's deadline that passes after its 100 Trying but before any
// ringing says the callee did not ring in time, not that the gateway is
// dead: the outcome is abandoned, not "no response", which would mark a
// working gateway down after a few slow destinations.
func TestRingTimeoutAfterTryingIsNotNoResponse(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 2
	r := twoCarriers(t, a, routeB)
	var outcomes []int
	r.c.OnOutcome = func(_ *carrier.Dial, code int, _ time.Duration) { outcomes = append(outcomes, code) }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 100, "Trying", ""))
	r.advance(2 * time.Second)
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
	if len(outcomes) != 1 || outcomes[0] != carrier.OutcomeAbandoned {
		t.Fatalf("outcomes %v, want [%d]", outcomes, carrier.OutcomeAbandoned)
	}
}

// A dial that waited for its CPS slot counts its ring bound from when its
// INVITE left (docs/design/lcr.md 3.2, cps.md 4), also after
// progress.
func TestPacedDialRingsFromTheRealDial(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Sequence.RingTimeout = 45 * time.Second })
	a := routeA
	a.TimeoutSecs = 6 // progress moves the deadline to the ring bound
	r.routes = []route.Route{a}
	waited := false
	r.c.OnPace = func(*carrier.Dial, uint64) carrier.Pace {
		if waited {
			return carrier.Pace{}
		}
		waited = true
		return carrier.Pace{Wait: 800 * time.Millisecond}
	}
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA)
	r.advance(800 * time.Millisecond)
	inv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.advance(400 * time.Millisecond) // before T1: no retransmission
	r.recv(carrierA, carrierResponse(inv, 180, "Ringing", ""))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.advance(44300 * time.Millisecond) // 45.5 s after the decision, 44.7 s after the dial
	r.expect(carrierA)
	r.advance(400 * time.Millisecond)
	r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
}

// The CDR's route is the carrier last dialled, the one Target names: a
// later carrier that could not be dialled does not lend it its route (and
// so its cdr_fields).
func TestSummaryRouteIsTheDialledCarriers(t *testing.T) {
	ghost := route.Route{CarrierID: "ghost", GatewayGroup: "no-such-group", CDRFields: map[string]string{"deck": "ghost"}}
	a := routeA
	a.CDRFields = map[string]string{"deck": "a"}
	r := twoCarriers(t, a, ghost)
	var s Summary // as the call fails: its Route is gone with the call after
	r.e.env.Policy.OnFailure = func(c *Call, _ int, _ string) FailureAction { s = c.Summary(); return FailureAction{} }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
	r.take(carrierA)
	r.take(caller)
	if s.Target.CarrierID != "carrier-a" || s.Route == nil || s.Route.CarrierID != "carrier-a" {
		t.Fatalf("target %q, route %+v: want carrier-a's", s.Target.CarrierID, s.Route)
	}
	if cdr := r.summary(); cdr.Target.CarrierID != "carrier-a" || cdr.Target.Group != "carrier-a" {
		t.Fatalf("CDR carrier %q route %q: want carrier-a's", cdr.Target.CarrierID, cdr.Target.Group)
	}
}

// A trunk's max_concurrent_calls holds for the node: the shards' engines
// count in one shared counter. A per-shard share let a limit of 1 take a
// call on every shard.
func TestTrunkMaxCallsAcrossShards(t *testing.T) {
	shared := NewTrunkStats(nil, "local")
	mod := func(c *Config) { c.Trunks[0].MaxCalls, c.Trunks[0].Stats = 1, shared }
	one, two := newRig(t, mod), newRig(t, mod)
	one.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	one.expect(caller, "SIP/2.0 100 Trying")
	inv := one.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	two.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	busy := two.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 503 Service Unavailable")[1]
	if busy.Get(parser.HeaderRetryAfter) == nil {
		t.Error("no Retry-After on the trunk's 503")
	}
	two.expect(carrierA)
	one.recv(carrierA, carrierResponse(inv, 486, "Busy Here", ""))
	one.take(carrierA)
	one.take(caller)
	if shared.Calls.Load() != 0 {
		t.Fatalf("%d calls counted after the only one ended", shared.Calls.Load())
	}
	two.recv(caller, callerInvite("3", "a-call-3", "15551234"))
	two.expect(caller, "SIP/2.0 100 Trying")
	two.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
}

// A trunk whose calls a fleet's Channel bounds (Trunk.Channels) is held
// to the Channel's limit, not MaxCalls: here a fleet of three nodes
// without Redis, whose share of 3 channels is 1 a node. The refused call
// takes nothing; the call that ended gives its channel back.
func TestTrunkChannels(t *testing.T) {
	f, err := fleet.New(fleet.Options{Config: fleet.Config{NodeID: "test"}, Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ch := f.Channel("trunk:local", 3)
	r := newRig(t, func(c *Config) { c.Trunks[0].MaxCalls, c.Trunks[0].Channels = 100, ch })
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	inv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying", "SIP/2.0 503 Service Unavailable")
	r.expect(carrierA)
	if n := ch.InUse(); n != 1 {
		t.Fatalf("%d channels in use with one call up, want 1", n)
	}
	r.recv(carrierA, carrierResponse(inv, 486, "Busy Here", ""))
	r.take(carrierA)
	r.take(caller)
	if n := ch.InUse(); n != 0 {
		t.Fatalf("%d channels in use after the only call ended, want 0", n)
	}
	r.recv(caller, callerInvite("3", "a-call-3", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
}

// Every call in flight to a carrier whose transport failed fails over at
// once (RFC 3261 8.1.3.1, 17.1.4), not only the first: the first's new
// INVITE must not take the transaction slot of the second's failed one
// while the engine still has that failure to handle.
func TestPeerFailedFailsOverEveryCall(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.take(caller)
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
	var failed []route.Attempt
	r.e.env.Policy.OnRouteFailure = func(_ *Call, _ *route.Route, a route.Attempt) { failed = append(failed, a) }
	r.e.PeerFailed(transport.Peer{Addr: carrierA, Transport: transport.UDP}, r.Clock.Now)
	if got := r.take(carrierB); len(got) != 2 || len(failed) != 2 {
		t.Fatalf("after the transport to carrier-a failed: %d INVITEs to carrier-b, %d attempts burned; want 2 and 2 (%+v)", len(got), len(failed), failed)
	}
	for _, a := range failed {
		if a.Status != 503 || !a.Dialed {
			t.Errorf("attempt %+v, want a dialled 503", a)
		}
	}
}

// A carrier that rang and then refuses with what reads as a CPS reject has
// failed like any carrier that rang: no retry on a fresh B-leg (which would
// ring the callee again), the next carrier dialled. The attempt keeps its
// post-dial delay; the next carrier's times count from its own INVITE.
func TestCPSRejectAfterProgressFailsOver(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	r.c.OnCPSReject = func(_ *carrier.Dial, code int, reason, _ []byte) (time.Duration, bool) {
		return time.Second, code == 503 && string(reason) == "CPS Limit"
	}
	var failed []route.Attempt
	r.e.env.Policy.OnRouteFailure = func(_ *Call, _ *route.Route, a route.Attempt) { failed = append(failed, a) }
	var answered Summary
	r.e.env.Policy.OnAnswer = func(c *Call, _ *route.Route) { answered = c.Summary() }
	inv := r.startCall()
	start := r.Clock.Now
	r.advance(500 * time.Millisecond)
	r.take(carrierA) // Timer A's retransmission (RFC 3261 17.1.1.2)
	r.recv(carrierA, carrierResponse(inv, 183, "Session Progress", ""))
	r.take(caller)
	r.advance(500 * time.Millisecond)
	r.recv(carrierA, carrierResponse(inv, 503, "CPS Limit", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	invB := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.advance(2 * time.Second) // no retry to carrier-a comes
	r.expect(carrierA)
	if len(failed) != 1 || failed[0].Status != 503 || failed[0].PDD != 500*time.Millisecond {
		t.Fatalf("attempts %+v, want carrier-a's 503 with a PDD of 500ms", failed)
	}
	dialedB := start + time.Second
	r.recv(carrierB, carrierResponse(invB, 180, "Ringing", ""))
	r.take(caller)
	r.advance(300 * time.Millisecond)
	r.recv(carrierB, carrierResponse(invB, 200, "OK", sdp))
	if answered.Dialed != dialedB || answered.Progress != dialedB+2*time.Second || answered.Answer != dialedB+2300*time.Millisecond {
		t.Errorf("carrier-b dialled %v, progress %v, answer %v; want %v, +2s, +2.3s",
			answered.Dialed, answered.Progress, answered.Answer, dialedB)
	}
}

// A CPS-reject retry is a fresh B-leg: the first INVITE's 100 Trying does
// not count for it, so a retry nothing answers is the gateway's no-response,
// not an attempt abandoned after the gateway proved alive.
func TestCPSRetryNoResponseBlamesGateway(t *testing.T) {
	a := routeA
	a.TimeoutSecs = 4
	r := twoCarriers(t, a, routeB)
	r.c.OnCPSReject = func(_ *carrier.Dial, code int, reason, _ []byte) (time.Duration, bool) {
		return time.Second, code == 503 && string(reason) == "CPS Limit"
	}
	var outcomes []int
	r.c.OnOutcome = func(_ *carrier.Dial, code int, _ time.Duration) { outcomes = append(outcomes, code) }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 100, "Trying", ""))
	r.recv(carrierA, carrierResponse(inv, 503, "CPS Limit", ""))
	r.take(carrierA)
	r.advance(time.Second)
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.advance(4 * time.Second)
	r.take(carrierA)
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
	if len(outcomes) != 1 || outcomes[0] != carrier.OutcomeNoResponse {
		t.Fatalf("outcomes %v, want [%d] (no response)", outcomes, carrier.OutcomeNoResponse)
	}
}

// The carrier the sequence left takes its deadline along: its timer,
// still armed while the next carrier waits for a CPS slot, must not fire
// on that carrier and burn it as rung out before its INVITE has left.
func TestLeftCarriersDeadlineSparesAPacedCarrier(t *testing.T) {
	a, b := routeA, routeB
	a.TimeoutSecs, b.TimeoutSecs = 10, 1
	r := twoCarriers(t, a, b)
	r.c.OnPace = func(rt *carrier.Dial, _ uint64) carrier.Pace {
		if rt.CarrierID == "carrier-b" {
			return carrier.Pace{Wait: 3 * time.Second}
		}
		return carrier.Pace{}
	}
	inv1 := r.startCall()
	r.advance(8500 * time.Millisecond) // a 503 after 8.5 s: carrier-b's 1 s ends before carrier-a's 10 s
	r.recv(carrierA, carrierResponse(inv1, 503, "Service Unavailable", ""))
	r.take(carrierA)
	r.advance(3 * time.Second) // carrier-a's deadline passes; carrier-b's slot comes
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
	r.expect(caller)
}

// Every dialled gateway hears of its attempt once (Carriers.Outcome), however
// the call ends: a caller that hangs up its early dialog with a BYE
// rather than a CANCEL, or a drain, leaves the attempt abandoned, so a
// half-open gateway's trial call goes back instead of being lost.
func TestOutcomeReportedWhenTheCallEndsEarly(t *testing.T) {
	for _, how := range []string{"bye", "drain"} {
		t.Run(how, func(t *testing.T) {
			r := newRig(t, nil)
			var outcomes []int
			r.c.OnOutcome = func(_ *carrier.Dial, code int, _ time.Duration) { outcomes = append(outcomes, code) }
			binv := r.startCall()
			r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
			aTag := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
			if how == "bye" {
				r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
			} else {
				r.e.EndAll(r.Clock.Now)
			}
			if len(r.calls) != 1 || len(outcomes) != 1 || outcomes[0] != carrier.OutcomeAbandoned {
				t.Fatalf("%d CDRs, outcomes %v, want [%d]", len(r.calls), outcomes, carrier.OutcomeAbandoned)
			}
		})
	}
}

// Only the call's last carrier is reserved with ReserveLast, the one whose
// group gives a member calls marked down: the carriers before it, and the
// last of a sequence that an OnFailure hook may still route elsewhere, are
// reserved as usual.
func TestLastCarrierReservedAsLast(t *testing.T) {
	f := func(policy bool, want ...string) {
		t.Helper()
		r := twoCarriers(t, routeA, routeB)
		if policy {
			r.e.env.Policy.OnFailure = func(*Call, int, string) FailureAction {
				return FailureAction{Routes: []route.Route{routeA}}
			}
		}
		inv := r.startCall()
		r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
		r.take(carrierA)
		inv = r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
		r.recv(carrierB, carrierResponse(inv, 503, "Service Unavailable", ""))
		r.take(carrierB)
		if policy {
			inv = r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
			r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
			r.take(carrierA)
		}
		r.expect(caller, "SIP/2.0 500 Server Internal Error")
		if !slices.Equal(r.c.Reserved, want) {
			t.Errorf("OnFailure set %v: reserved %q, want %q", policy, r.c.Reserved, want)
		}
	}
	f(false, "carrier-a", "last:carrier-b")
	f(true, "carrier-a", "carrier-b", "last:carrier-a")
}
