package carrier

import (
	"time"

	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// Dial is the carrier of one attempt: what a route became when the call
// reserved it (Shard.Reserve), held by the call until it leaves the
// carrier (Shard.Release). The exported fields are the call's to read; the
// rest is the plane's account of what the dial holds.
type Dial struct {
	CarrierID string
	// Group is what the CDR records as the route taken: the gateway group,
	// or the next hop as the route wrote it.
	Group string
	// URI is the Request-URI without its user, "sip:host:port;params":
	// the dialled number becomes its user.
	URI  string
	Peer transport.Peer // where the INVITE goes
	// Gateway is the group member picked; zero for a next hop. Its health
	// hears the attempt's outcome once (Shard.Outcome).
	Gateway health.Member

	route   *route.Route   // the route dialled, for its own cps
	channel *fleet.Channel // the group's channel it holds until Release; nil: none
}

// Pace is a CPS reservation for a dial: go now (the zero value), Wait
// first, Over the limit (the carrier is skipped), or Pending: the answer
// comes later, through the post function the Shard was given.
type Pace struct {
	Wait    time.Duration
	Over    bool
	Pending bool
}

// Outcome codes other than a final response's status, for Shard.Outcome.
const (
	OutcomeNoResponse = 0  // no final response in time (Timer B, or the carrier's deadline without progress)
	OutcomeTransport  = -1 // the INVITE could not be sent or the transport failed
	OutcomeAbandoned  = -2 // the caller gave up first, or the attempt never reached the gateway: says nothing about it
)

// Event says what a Report is about.
type Event uint8

const (
	// AttemptFailed: a carrier was given up: its final failure, its
	// deadline, or sipedge's verdict before it was dialled.
	AttemptFailed Event = iota + 1
	// Answered: a carrier answered the call.
	Answered
	// CallEnded: a call a carrier answered ended.
	CallEnded
)

// Report is what the call core tells the carrier plane as an attempt ends
// and as an answered call ends: the figures of per-carrier metrics and of
// quality statistics (answer-seizure ratio, post-dial delay, setup time,
// call duration). It is filled on the shard, passed by pointer and valid
// during the call only: a per-shard consumer reads it without a lock or an
// allocation, and copies what it keeps.
type Report struct {
	Event     Event
	CarrierID string
	// Gateway is the member dialled; zero for a next hop, or a carrier
	// given up before a member was picked.
	Gateway health.Member
	// Number is the dialled number as routed: E.164 when the trunk has a
	// number policy. A view into the call.
	Number []byte
	// Code is the final status: 200 when answered, the carrier's failure,
	// or sipedge's verdict (408 ring-out, 487 caller gave up, 503 not
	// dialled or unreachable). Reason is the machine-readable cause of a
	// verdict (a route.Reason constant or the call core's own), "" for a
	// carrier's own response.
	Code   int
	Reason string
	// Dialed is false when no INVITE left for the carrier: Code is then
	// sipedge's verdict, never the carrier's doing.
	Dialed bool
	// Invite, Progress and Answer are when the attempt's INVITE left, when
	// the carrier first sent 101-199 and when it answered, on the shard's
	// clock; 0 when it did not happen. Progress-Invite is the post-dial
	// delay (PDD), Answer-Invite the setup time.
	Invite, Progress, Answer time.Duration
	// Duration is how long the answered call lasted, from the answer to
	// the end (CallEnded).
	Duration time.Duration
	// Abandoned is true when the caller gave up before the carrier showed
	// progress (AttemptFailed).
	Abandoned bool
	// Local is true when Code is sipedge's own though Reason is empty: its
	// Timer B 408 (no response at all) or a transport error's 503, which
	// the failover sequence takes as the carrier's (AttemptFailed).
	Local bool
	// CPSRejected is true when the carrier refused the call over its CPS
	// limit (its group's cps_reject rules) and the retries were used up:
	// sipedge's pace, not the carrier's quality (AttemptFailed).
	CPSRejected bool
	// At is when the report is made, on the shard's clock.
	At time.Duration
}
