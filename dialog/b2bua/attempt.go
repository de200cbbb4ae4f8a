package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/route"
)

// attempt is the carrier in flight, or the last one dialled: the route the
// sequence dialled, what the carrier plane made of it (Carriers.Reserve),
// and how far the attempt got. A call keeps one; the next carrier's
// attempt takes its place.
type attempt struct {
	dial   carrier.Dial
	route  *route.Route  // in the call's seq.Routes(); nil before the first dial
	dialed time.Duration // when its INVITE left; 0 before

	timer     uint64        // the sequence's deadline for it
	paceTimer uint64        // the wait for a CPS slot, or for a CPS-reject retry
	wait      time.Duration // its deadline, from its dial; -1 for none

	reported   bool  // its outcome went to Carriers.Outcome
	local      bool  // its failure is sipedge's own: Timer B, a transport error (carrier.Report.Local)
	cpsReject  bool  // its failure is a CPS reject, the retries used up (carrier.Report.CPSRejected)
	progress   bool  // it sent 101-199
	trying     bool  // it sent 100
	pacing     bool  // waiting for a CPS slot before dialling
	cpsRetries uint8 // its CPS rejects retried
	authTries  uint8 // its challenges answered (answerChallenge)
}

// start makes route r, reserved into a.dial, the carrier in flight.
func (a *attempt) start(r *route.Route) {
	a.route, a.dialed = r, 0
	a.reported, a.local, a.cpsReject, a.progress, a.trying, a.cpsRetries = false, false, false, false, false, 0
}
