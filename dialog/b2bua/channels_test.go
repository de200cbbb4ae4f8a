package b2bua

import (
	"fmt"
	"testing"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// channelRig routes to carrier-a then carrier-b, carrier-a taking one call
// at a time: its carrier plane counts the channels each dial holds, from
// Reserve to Release, as carrier.Shard does (whose own tests check that a
// carrier at its limit is skipped before a member is picked).
func channelRig(t *testing.T) (*rig, map[string]int) {
	r := twoCarriers(t, routeA, routeB)
	inUse := map[string]int{}
	held := map[*carrier.Dial]string{}
	r.c.OnReserve = func(rt *route.Route, _ uint64, d *carrier.Dial) string {
		group := rt.GatewayGroup
		if group == "carrier-a" && inUse[group] >= 1 {
			return route.ReasonCallsLimited
		}
		reason := r.c.Gateway(rt, d)
		if reason == "" {
			inUse[group]++
			held[d] = group
		}
		return reason
	}
	r.c.OnRelease = func(d *carrier.Dial) {
		group, ok := held[d]
		if !ok {
			return
		}
		delete(held, d)
		if inUse[group]--; inUse[group] < 0 {
			t.Fatalf("%s released more channels than it took", group)
		}
	}
	return r, inUse
}

// startNth sends the caller's INVITE of call n.
func (r *rig) startNth(n int) {
	r.t.Helper()
	r.recv(caller, callerInvite(fmt.Sprint(n), fmt.Sprintf("a-call-%d", n), "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
}

// A carrier at its concurrent-call limit is skipped without dialling, as
// one at its CPS limit is: the call goes to the next carrier, and the
// attempt says why. Its channel comes back when its call ends.
func TestCarrierAtCallLimitSkipped(t *testing.T) {
	r, inUse := channelRig(t)
	r.startNth(1)
	inv1 := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(inv1, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
	r.take(carrierA)

	r.startNth(2) // carrier-a has its one call
	r.expect(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 486, "Busy Here", ""))
	r.take(carrierB)
	r.expect(caller, "SIP/2.0 486 Busy Here")
	if len(r.calls) != 1 || len(r.calls[0].Attempts) != 2 ||
		r.calls[0].Attempts[0] != (route.Attempt{CarrierID: "carrier-a", Status: 503, Reason: route.ReasonCallsLimited}) {
		t.Fatalf("CDRs %+v", r.calls)
	}
	if inUse["carrier-a"] != 1 || inUse["carrier-b"] != 0 || r.e.m.callsLimited.Get() != 1 {
		t.Fatalf("channels %v, %d limited", inUse, r.e.m.callsLimited.Get())
	}

	// The first call ends: carrier-a takes the next one.
	r.recv(carrierA, inDialogFromCarrier(t, inv1, "BYE", 1))
	r.take(carrierA)
	r.take(caller)
	if inUse["carrier-a"] != 0 {
		t.Fatalf("channels %v after the call ended", inUse)
	}
	r.startNth(3)
	r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
}

// A carrier's failure gives its channel back as the call moves on.
func TestCarrierChannelReleasedOnFailover(t *testing.T) {
	r, inUse := channelRig(t)
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	if inUse["carrier-a"] != 0 || inUse["carrier-b"] != 1 {
		t.Fatalf("channels %v, want carrier-b's alone", inUse)
	}
	r.recv(carrierB, carrierResponse(inv2, 180, "Ringing", ""))
	r.recv(caller, cancelOf(callerInvite("1", "a-call-1", "15551234")))
	r.take(caller)
	r.expect(carrierB, "CANCEL sip:15551234@198.51.100.21:5070 SIP/2.0")
	r.recv(carrierB, carrierResponse(inv2, 487, "Request Terminated", ""))
	r.take(carrierB)
	if len(r.calls) != 1 || inUse["carrier-b"] != 0 {
		t.Fatalf("channels %v after the caller cancelled", inUse)
	}
}
