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

	reported   bool // its outcome went to Carriers.Outcome
	progress   bool // it sent 101-199
	trying     bool // it sent 100
	pacing     bool // waiting for a CPS slot before dialling
	redirected bool // a 3xx sent it on to another member of its group (followRedirect)
	// intervalRetried: its 422 was answered with a longer session interval
	// (retryInterval).
	intervalRetried bool
	cpsRetries      uint8 // its CPS rejects retried
	authTries       uint8 // its challenges answered (answerChallenge)
}

// start makes route r, reserved into a.dial, the carrier in flight.
func (a *attempt) start(r *route.Route) {
	a.route, a.dialed = r, 0
	a.reported, a.progress, a.trying, a.redirected, a.intervalRetried, a.cpsRetries = false, false, false, false, false, 0
}
