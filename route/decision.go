package route

import (
	"time"

	"github.com/sipedge/sipedge/transport"
)

// Source says where a call's routing decision came from: the CDR's
// route_source.
type Source uint8

const (
	SourceNone     Source = iota // no decision: the API failed and there is no fallback
	SourceLCR                    // the routing API, directly or through a cache tier
	SourceStatic                 // the static rate table (no api_url)
	SourceFallback               // fallback_gateway_group, because the API failed
)

var sourceNames = [...]string{SourceNone: "none", SourceLCR: "lcr", SourceStatic: "static", SourceFallback: "fallback"}

// String returns "none", "lcr", "static" or "fallback".
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "unknown"
}

// Request describes a new call to the routing decision (a Router) and to
// a policy's OnInvite. Its byte slices are views into the call, valid only
// during the call that passes the Request: copy what a lookup keeps.
type Request struct {
	// Ref names the call to the call core when the decision comes later
	// (Decision.Pending).
	Ref    uint64
	CallID []byte // the caller's
	// Trunk and TrunkGroup name the trunk the call came from (trunk_group
	// is what routing keys on); Attributes are its attributes, the
	// routing API's and, by name, part of the cache key. Read-only.
	Trunk, TrunkGroup string
	Attributes        map[string]string
	// Dialed is the dialled number: the Request-URI user, in E.164 when the
	// trunk has a number policy, so that "+1202...", "1202..." and
	// "001202..." find the same routes and cache entry.
	Dialed []byte
	From   []byte // the caller's From URI
	To     []byte // the caller's To URI
	// Source is where the caller's INVITE came from (its source port, not
	// the Via's).
	Source transport.Peer
}

// Decision is a routing decision as the call core carries it out: the
// carriers to try in order, or a code to reject the call with.
type Decision struct {
	Routes []Route
	Code   int // when no route: the response to the caller (503 when 0)
	Reason string
	Source Source
	// NoDecision says there was no decision to give (the LCR API failed and
	// no fallback applied), as against one that rejects the call: Code and
	// Reason then hold the default answer, 503 Route Unavailable, which a
	// policy's OnInvite may replace, or clear to route.
	NoDecision bool
	// Pending says the decision comes later: the Router started a lookup
	// off the shard, and posts its answer back for Request.Ref.
	Pending bool
	// RingTimeout, when not 0, is this call's ring bound
	// (SequenceOptions.RingTimeout), over its trunk's: a policy's OnInvite
	// may set it; NoRingBound means none.
	RingTimeout time.Duration
}
