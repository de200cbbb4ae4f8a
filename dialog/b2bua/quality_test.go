package b2bua

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// fakeQuality is a quality view for the rig's carrier plane: per dialled
// number, the carriers demoted (Order moves them last, as quality's demote
// mode does, into the engine's buffer) and those disabled (Reserve refuses
// them as route.ReasonDisabled).
type fakeQuality struct {
	demoted  map[string][]string // number -> carriers
	disabled map[string][]string
	ordered  []string // the numbers Order was asked for
}

func (q *fakeQuality) install(r *rig) {
	r.c.OnOrder = func(routes []route.Route, number []byte, buf *[]route.Route) []route.Route {
		q.ordered = append(q.ordered, string(number))
		demoted := q.demoted[string(number)]
		moves := false
		for i := range routes {
			if i+1 < len(routes) && slices.Contains(demoted, routes[i].CarrierID) && !slices.Contains(demoted, routes[i+1].CarrierID) {
				moves = true
			}
		}
		if !moves {
			return routes
		}
		out := (*buf)[:0]
		for _, keep := range []bool{true, false} {
			for _, rt := range routes {
				if slices.Contains(demoted, rt.CarrierID) != keep {
					out = append(out, rt)
				}
			}
		}
		*buf = out
		return out
	}
	r.c.OnReserve = func(rt *route.Route, _ uint64, d *carrier.Dial) string {
		if slices.Contains(q.disabled[r.c.Numbers[len(r.c.Numbers)-1]], rt.CarrierID) {
			return route.ReasonDisabled
		}
		return r.c.Gateway(rt, d)
	}
}

// The carrier plane orders the decision's routes by quality: carrier-a,
// demoted, is tried after carrier-b. The decision itself, shared, keeps
// its order; the CDR's attempts carry the B-leg each carrier saw.
func TestQualityOrderApplied(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	q := &fakeQuality{demoted: map[string][]string{"15551234": {"carrier-a"}}}
	q.install(r)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	dialB := r.Clock.Now
	invB := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.advance(250 * time.Millisecond)
	r.recv(carrierB, carrierResponse(invB, 503, "Service Unavailable", ""))
	r.take(carrierB)
	invA := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(invA, 486, "Busy Here", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 486 Busy Here")

	if r.routes[0].CarrierID != "carrier-a" || r.routes[1].CarrierID != "carrier-b" {
		t.Fatalf("the shared decision was reordered: %+v", r.routes)
	}
	if !slices.Equal(q.ordered, []string{"15551234"}) || !slices.Equal(r.c.Numbers, []string{"15551234", "15551234"}) {
		t.Fatalf("Order asked for %q, Reserve for %q", q.ordered, r.c.Numbers)
	}
	s := r.summary()
	wantLegs := []cdrLeg{{BCallID: hdr(invB, parser.HeaderCallID), Invite: dialB},
		{BCallID: hdr(invA, parser.HeaderCallID), Invite: dialB + 250*time.Millisecond}}
	if len(s.Attempts) != 2 || s.Attempts[0].CarrierID != "carrier-b" || s.Attempts[1].CarrierID != "carrier-a" ||
		!reflect.DeepEqual(s.Legs, wantLegs) {
		t.Fatalf("attempts %+v legs %+v, want carrier-b then carrier-a with %+v", s.Attempts, s.Legs, wantLegs)
	}
}

// A carrier quality disabled for the number is skipped undialled, its
// attempt's reason "disabled", with no B-leg in the CDR; nothing moves for
// another number.
func TestQualityDisabledSkipped(t *testing.T) {
	r := twoCarriers(t, routeA, routeB)
	q := &fakeQuality{disabled: map[string][]string{"15551234": {"carrier-a"}}}
	q.install(r)
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	r.take(carrierA)
	invB := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(invB, 486, "Busy Here", ""))
	r.take(carrierB)
	r.take(caller)
	s := r.summary()
	if len(s.Attempts) != 2 || s.Attempts[0] != (route.Attempt{CarrierID: "carrier-a", Status: 503, Reason: route.ReasonDisabled}) ||
		s.Legs[0] != (cdrLeg{}) || s.Legs[1].BCallID != hdr(invB, parser.HeaderCallID) {
		t.Fatalf("attempts %+v legs %+v", s.Attempts, s.Legs)
	}
	rep := r.c.Reports[0]
	if rep.CarrierID != "carrier-a" || rep.Dialed || rep.Reason != route.ReasonDisabled {
		t.Fatalf("reported %+v", rep)
	}

	r.recv(caller, callerInvite("2", "a-call-2", "16661234"))
	r.take(caller)
	r.expect(carrierA, "INVITE sip:16661234@198.51.100.20:5070 SIP/2.0")
}

// OnFailure's routes are ordered too, into a buffer of their own: the
// first sequence's, which the call's last dial still points into, stay.
// And two calls in flight each keep their own order.
func TestQualityOrderPerCallAndAfterOnFailure(t *testing.T) {
	down := route.Route{CarrierID: "carrier-c", GatewayGroup: "down"}
	r := newRig(t, nil)
	r.routes = []route.Route{routeA, routeB, down}
	q := &fakeQuality{demoted: map[string][]string{"15551234": {"carrier-a"}, "16661234": {"carrier-b"}}}
	q.install(r)
	restarts := 0
	r.e.env.Policy.OnFailure = func(c *Call, _ int, _ string) FailureAction {
		if string(c.callee) != "15551234" {
			return FailureAction{}
		}
		restarts++
		return FailureAction{Routes: []route.Route{routeA, routeB}}
	}
	r.recv(caller, callerInvite("1", "a-call-1", "15551234")) // carrier-b, carrier-c, carrier-a
	r.recv(caller, callerInvite("2", "a-call-2", "16661234")) // carrier-a, carrier-c, carrier-b
	r.take(caller)
	inv1 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	inv2 := r.expect(carrierA, "INVITE sip:16661234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv1, 503, "Service Unavailable", ""))
	r.take(carrierB)
	inv1 = r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(inv1, 503, "Service Unavailable", ""))
	r.take(carrierA)
	// Every carrier failed: OnFailure routes again, ordered: carrier-b first.
	inv1 = r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv1, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
	r.take(carrierB)
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, tagOf(t, ok, parser.HeaderTo), ""))
	r.take(caller)
	r.take(carrierB)
	r.recv(carrierA, carrierResponse(inv2, 486, "Busy Here", ""))
	r.take(carrierA)
	r.take(caller)

	if restarts != 1 || len(r.calls) != 2 {
		t.Fatalf("%d restarts, %d CDRs", restarts, len(r.calls))
	}
	one := r.calls[0]
	var got []string
	for _, a := range one.Attempts {
		got = append(got, a.CarrierID)
	}
	if !slices.Equal(got, []string{"carrier-b", "carrier-c", "carrier-a"}) || one.Target.CarrierID != "carrier-b" ||
		one.Target.Group != "carrier-b" || one.FinalCode != 200 {
		t.Fatalf("call 1: attempts %v, answered by %+v (%d)", got, one.Target, one.FinalCode)
	}
	if !strings.HasPrefix(string(r.calls[1].ACallID), "a-call-2") || r.calls[1].Attempts[0].CarrierID != "carrier-a" {
		t.Fatalf("call 2: %+v", r.calls[1].Attempts)
	}
	if r.routes[0].CarrierID != "carrier-a" {
		t.Fatalf("the shared decision was reordered: %+v", r.routes)
	}
}

// A failure of sipedge's own that the sequence takes as the carrier's (no
// response at all: Timer B) is reported Local: quality counts it as no
// answer of the far end's.
func TestReportLocal(t *testing.T) {
	slow := routeA
	slow.TimeoutSecs = 60 // Timer B (64*T1) fires first
	r := twoCarriers(t, slow, routeB)
	r.startCall()
	r.advance(32*time.Second + 100*time.Millisecond) // before the next carrier's first retransmission
	r.take(carrierA)
	r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
	if len(r.c.Reports) != 1 || !r.c.Reports[0].Local || r.c.Reports[0].Code != 408 || r.c.Reports[0].Reason != "" {
		t.Fatalf("reports %+v, want carrier-a's 408, local", r.c.Reports)
	}
}
