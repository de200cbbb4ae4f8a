package route

import "time"

// Route is one carrier of a routing decision, in the order the LCR API (or
// the static rate table) ranked it. The JSON names are those of the LCR API
// contract. A zero field is unset: TimeoutSecs 0 (or negative) falls back to
// the sequence's ring timeout, RerouteCauses nil to the gateway group's and
// then the global set. RerouteCauses empty but not nil ("reroute_causes": [])
// is set: this carrier fails over on nothing.
type Route struct {
	CarrierID            string            `json:"carrier_id"`
	GatewayGroup         string            `json:"gateway_group,omitempty"`
	NextHop              string            `json:"next_hop,omitempty"`
	RURI                 string            `json:"ruri,omitempty"`
	TechPrefix           string            `json:"tech_prefix,omitempty"`
	NumberPolicy         string            `json:"number_policy,omitempty"`
	CallerID             string            `json:"caller_id,omitempty"`
	CallerIDPresentation string            `json:"caller_id_presentation,omitempty"`
	Rate                 float64           `json:"rate"`
	Currency             string            `json:"currency,omitempty"`
	TimeoutSecs          int               `json:"timeout_secs,omitempty"`
	RerouteAfterProgress bool              `json:"reroute_after_progress,omitempty"`
	RerouteCauses        []int             `json:"reroute_causes,omitzero"`
	Headers              map[string]string `json:"headers,omitempty"`
	CDRFields            map[string]string `json:"cdr_fields,omitempty"`
	// CPS is this route's calls-per-second budget, as a gateway group's
	// cps; nil = the group's, if it has one.
	CPS *CPS `json:"cps,omitempty"`
}

// CPS is a carrier account's calls-per-second budget: Rate per second (0 =
// none of its own: the group's applies), Burst slots at once (0 = 1), a
// wait of at most MaxWaitMs for a slot (nil = 1000, 0 = never wait), shared
// under Key ("" = the route's carrier_id) by every route and group that
// names it.
type CPS struct {
	Rate      float64 `json:"rate"`
	Burst     int     `json:"burst,omitempty"`
	MaxWaitMs *int    `json:"max_wait_ms,omitempty"`
	Key       string  `json:"key,omitempty"`
}

// Attempt is one failed carrier attempt: an entry of call.route_attempts
// and of the CDR's lcr_attempts. Status is the carrier's final response,
// 408 for a ring timeout, 487 for a carrier the caller gave up on, and 503
// for a carrier that could not be dialled. Dialed is false when no INVITE
// left for the carrier: it could not be dialled, or the caller gave up
// while it waited for a CPS slot; the status is then sipedge's verdict,
// not something the carrier said. ElapsedMs runs from the dial (the INVITE
// leaving) to the final response or timeout; it is 0 for an undialled
// carrier. Reason is a machine-readable cause: one of the
// Reason constants or the B2BUA's own for an undialled carrier, empty for a
// final response from the carrier. PDD, the post-dial delay, runs from the
// dial to the carrier's first 101-199; it is 0 when none came, and not part
// of lcr_attempts (it feeds the per-carrier quality figures).
type Attempt struct {
	CarrierID string        `json:"carrier_id"`
	Status    int           `json:"status"`
	ElapsedMs int64         `json:"elapsed_ms"`
	Dialed    bool          `json:"dialed"`
	Reason    string        `json:"reason,omitempty"`
	PDD       time.Duration `json:"-"`
}

// Reasons recorded on an Attempt. The undialled ones are passed in by the
// B2BUA to Sequence.Undialable; the engine records the others itself.
const (
	ReasonUnknownGroup    = "unknown_group"    // gateway_group not configured, and no next_hop
	ReasonGroupDown       = "group_down"       // every member of the gateway group is down
	ReasonUnresolvable    = "unresolvable"     // the next hop would not resolve
	ReasonCPSLimited      = "cps_limited"      // the carrier's calls-per-second limit is reached
	ReasonCallsLimited    = "calls_limited"    // the carrier's concurrent-call limit is reached
	ReasonRingTimeout     = "ring_timeout"     // the carrier's deadline passed (status 408)
	ReasonCallerCancelled = "caller_cancelled" // the caller gave up mid-attempt (status 487)
	ReasonDisabled        = "disabled"         // quality routing took the carrier out (quality.Monitor.Disabled)
)

// DefaultRerouteCauses is the reroute set used when neither the route, its
// gateway group nor lcr.reroute_causes sets one. Do not modify it.
var DefaultRerouteCauses = []int{408, 500, 502, 503, 504}
