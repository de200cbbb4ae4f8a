package b2bua

import (
	"testing"
	"time"

	"github.com/sipedge/sipedge/route"
)

// The ring bound of a call: the engine's (45 s here), else its trunk's,
// else what a policy's OnInvite set for it; route.NoRingBound is none.
// Each case lets the carrier ring and checks the call rings out, 408 to
// the caller, at the bound and not a moment before.
func TestRingBoundPerTrunkAndCall(t *testing.T) {
	f := func(trunk, call, want time.Duration) {
		t.Helper()
		r := newRig(t, func(c *Config) {
			c.Sequence.RingTimeout = 45 * time.Second
			c.Trunks[0].RingTimeout = trunk
		})
		r.routes = []route.Route{routeA}
		if call != 0 {
			r.e.env.Policy.OnInvite = func(_ *route.Request, d *route.Decision) { d.RingTimeout = call }
		}
		inv := r.startCall()
		r.recv(carrierA, carrierResponse(inv, 180, "Ringing", ""))
		r.expect(caller, "SIP/2.0 180 Ringing")
		if want == route.NoRingBound {
			r.advance(50 * time.Minute)
			r.expect(carrierA)
			r.expect(caller)
			return
		}
		r.advance(want - time.Millisecond)
		r.expect(carrierA)
		r.advance(time.Millisecond)
		r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")
		r.expect(caller, "SIP/2.0 408 Request Timeout")
	}
	f(0, 0, 45*time.Second)                                 // the engine's
	f(20*time.Second, 0, 20*time.Second)                    // the trunk's
	f(route.NoRingBound, 0, route.NoRingBound)              // the trunk's: none
	f(20*time.Second, 90*time.Second, 90*time.Second)       // the call's, over the trunk's
	f(20*time.Second, route.NoRingBound, route.NoRingBound) // the call's: none
}

// A call routed again by OnFailure keeps the ring bound it was given.
func TestRingBoundKeptWhenRoutedAgain(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Trunks[0].RingTimeout = 20 * time.Second })
	r.routes = []route.Route{routeA}
	r.e.env.Policy.OnFailure = func(*Call, int, string) FailureAction {
		return FailureAction{Routes: []route.Route{routeB}}
	}
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 180, "Ringing", ""))
	r.take(caller)
	r.advance(20*time.Second - time.Millisecond)
	r.expect(carrierB)
	r.advance(time.Millisecond)
	r.expect(carrierB, "CANCEL sip:15551234@198.51.100.21:5070 SIP/2.0")
	r.expect(caller, "SIP/2.0 408 Request Timeout")
}
