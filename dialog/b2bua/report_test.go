package b2bua

import (
	"reflect"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// The carrier plane hears of every attempt and of the answered call's end,
// with what per-carrier statistics need: the dialled number as routed,
// the carrier, the code, dialled or not, and the times on the shard's
// clock (INVITE, first 101-199, answer, duration).
func TestReports(t *testing.T) {
	ghost := route.Route{CarrierID: "ghost", GatewayGroup: "no-such-group"}
	r := newRig(t, nil)
	r.routes = []route.Route{routeA, ghost, routeB}
	start := r.Clock.Now
	inv := r.startCall()
	r.advance(200 * time.Millisecond)
	r.take(carrierA)
	r.recv(carrierA, carrierResponse(inv, 183, "Session Progress", ""))
	r.take(caller)
	r.advance(300 * time.Millisecond)
	r.recv(carrierA, carrierResponse(inv, 503, "Service Unavailable", ""))
	failed := r.Clock.Now
	r.take(carrierA)
	dialB := r.Clock.Now
	invB := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.advance(time.Second)
	r.recv(carrierB, carrierResponse(invB, 200, "OK", sdp))
	answer := r.Clock.Now
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
	r.take(carrierB)
	r.advance(time.Minute)
	end := r.Clock.Now
	r.recv(carrierB, inDialogFromCarrier(t, invB, "BYE", 1))
	r.take(carrierB)
	r.take(caller)

	want := []carrier.Report{
		{Event: carrier.AttemptFailed, CarrierID: "carrier-a", Code: 503, Dialed: true, Invite: start,
			Progress: start + 200*time.Millisecond, At: failed},
		{Event: carrier.AttemptFailed, CarrierID: "ghost", Code: 503, Reason: route.ReasonUnknownGroup, At: failed},
		{Event: carrier.Answered, CarrierID: "carrier-b", Code: 200, Dialed: true, Invite: dialB, Answer: answer, At: answer},
		{Event: carrier.CallEnded, CarrierID: "carrier-b", Code: 200, Dialed: true, Invite: dialB, Answer: answer,
			Duration: time.Minute, At: end},
	}
	if len(r.c.Reports) != len(want) {
		t.Fatalf("%d reports, want %d: %+v", len(r.c.Reports), len(want), r.c.Reports)
	}
	for i, got := range r.c.Reports {
		if string(got.Number) != "15551234" {
			t.Errorf("report %d: number %q", i, got.Number)
		}
		got.Number = nil
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("report %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
}

// A carrier the caller gives up on before it shows progress is reported
// abandoned: the caller's patience, not the carrier's failure.
func TestReportAbandoned(t *testing.T) {
	r := newRig(t, nil)
	r.startCall()
	r.recv(caller, cancelOf(callerInvite("1", "a-call-1", "15551234")))
	r.take(caller)
	r.take(carrierA)
	if len(r.c.Reports) != 1 || !r.c.Reports[0].Abandoned || r.c.Reports[0].Code != 487 || !r.c.Reports[0].Dialed {
		t.Fatalf("reports %+v, want one dialled 487 abandoned", r.c.Reports)
	}
}
