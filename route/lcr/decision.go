package lcr

import (
	"time"

	"github.com/sipedge/sipedge/route"
)

// FallbackCarrierID is the carrier_id of the one route of a fallback
// decision.
const FallbackCarrierID = "fallback"

// Decision is the routing decision for one call, as the policy sees it
// (docs/design/lcr.md 2). Exactly one of these holds:
//
//   - NoDecision: the API failed and no fallback gateway group is
//     configured; the default policy answers 503. Source is route.SourceNone.
//   - Reject != nil: the API blocks the call; the default policy answers
//     Reject.Code and Reject.Reason.
//   - otherwise Routes, in the order to try them; empty means no route and
//     the default policy answers 404.
//
// Routes and Reject are shared with the cache and with every other call that
// got the same decision: they are read-only. A policy that filters or
// reorders clones first (slices.Clone); the maps inside a Route (Headers,
// CDRFields) may be read and kept but never written.
type Decision struct {
	Routes     []route.Route
	Reject     *Reject
	Source     route.Source
	NoDecision bool
	// TTL is how long the decision may be cached: the API's cache_ttl_secs
	// (or Options.CacheTTL) for a fresh answer, what remained in Redis for a
	// decision read from there. 0 for decisions that are not cached
	// (static, fallback, none, cache_ttl_secs 0).
	TTL time.Duration
}
