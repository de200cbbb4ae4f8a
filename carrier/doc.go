// Package carrier is the carrier plane: what a route becomes when a call
// dials it, and everything a carrier imposes on the dial. A route turns
// into a target (a healthy member of its gateway group, picked through
// health, or its next hop, read with parser.ParseURI); each attempt's
// outcome feeds the gateway's health (a 503's Retry-After cools it down);
// a dial draws a slot from its carrier's calls-per-second account (the
// route's own cps, else its group's, in ratelimit) and counts against the
// group's concurrent-call limit (max_concurrent_calls, ceil(limit/nodes)
// per node); a failure matching the group's cps_reject rules backs the
// account off and retries after a jittered delay; the group's credentials
// answer the carrier's Digest challenges; and what the attempts report
// becomes per-carrier metrics.
//
// # Contract
//
// A Plane is the node's: one per process, safe for concurrent use. The
// control plane (the admin API, a reload) adds, replaces and removes
// groups through it, keeping their CPS accounts and channel limits in
// step, and the flood guard asks it which addresses are carriers'
// (Exempt). Each shard dials through a Shard of its own (Plane.NewShard),
// which holds the shard's gateway selection, per-carrier metric caches and
// warning pacing: a Shard's methods run on its shard's goroutine only,
// never block, and once warm allocate nothing, but for a CPS reservation
// answered later (Pace Pending: the limiter's answer comes on another
// goroutine, and ShardOptions.Paced posts it back). The call core
// (dialog/b2bua) holds each attempt's carrier as a Dial value, from
// Reserve (ReserveLast for a call's last carrier, which a group calls
// marked down still takes) to Release, and reports what became of it
// (Outcome for the gateway's health, Report for statistics). NextHops is the plane of a
// call core that has none: next hops only, no limits.
//
// The package imports health, ratelimit, route, parser and transport,
// never the call core, the runtime or the binary's wiring.
//
// # Metrics
//
//	sipedge_lcr_attempts_total{carrier,code,dialed}   attempts by outcome; dialed="false": burned without an INVITE
//	sipedge_lcr_pdd_seconds{carrier}                  INVITE to the first 101-199
//	sipedge_lcr_setup_seconds{carrier}                INVITE to the answer
//	sipedge_lcr_call_duration_seconds{carrier}        answer to the end
//	sipedge_gateway_calls{group}                      calls holding one of the group's channels
package carrier
