// Package carrier is the carrier plane: what a route becomes when a call
// dials it, and everything a carrier imposes on the dial. A route turns
// into a target (a healthy member of its gateway group, picked through
// health, or its next hop, read with parser.ParseURI); each attempt's
// outcome feeds the gateway's health (a 503's Retry-After cools it down);
// a dial draws a slot from its carrier's calls-per-second account (the
// route's own cps, else its group's, in ratelimit) and takes one of the
// group's channels (max_concurrent_calls, a fleet.Channel: held across
// the fleet with its Redis, else ceil(limit/nodes) per node); a failure
// matching the group's cps_reject rules backs the account off and retries
// after a jittered delay; the group's credentials answer the carrier's
// Digest challenges; and what the attempts report becomes per-carrier
// metrics and, with Options.Quality, the quality statistics (package
// quality) that order each call's carriers and take disabled ones out.
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
// (Outcome for the gateway's health, Report for statistics). NextHops is
// the plane of a call core that has none: next hops only, no limits.
//
// Plane.Preview is a dry run's view of a route (the admin API's POST
// /v1/route): what Reserve and Pace would decide now, taking nothing (no
// channel, no half-open trial call, no CPS slot). It may block on Redis:
// it runs off the shards.
//
// # Quality
//
// With Options.Quality the plane owns a quality.Monitor (Quality: its
// scores, disables and admin API) with one collector per Shard, which the
// shard feeds and ticks without a lock or an allocation: Report records
// each attempt's outcome and each answered call's duration under the
// dialled number's quality prefix, per carrier and per gateway member
// (its URI); Tick, on each run of the shard's loop, seals the collector's
// sampling interval; Start runs the Monitor's reader on the shards'
// clock. Shard.Order applies quality.mode to a call's routes (a copy into
// the call's own buffer when the order changes: a decision is shared),
// and Reserve refuses a carrier disabled for the number's prefix
// (route.ReasonDisabled) before it takes a channel or a member. Quality
// and health stay apart: a demoted or disabled carrier's gateways keep
// their health, and an attempt health refused (group_down, undialled)
// counts against no carrier's quality, nor does a CPS reject
// (Report.CPSRejected), sipedge's pace.
//
// The package imports health, quality, ratelimit, route, fleet, parser and
// transport, never the call core, the runtime or the binary's wiring.
//
// # Metrics
//
//	sipedge_lcr_attempts_total{carrier,code,dialed,reason}  attempts by outcome; dialed="false": burned
//	                                                        without an INVITE; reason: the attempt's in
//	                                                        lcr_attempts, "" for the carrier's own response
//	sipedge_lcr_pdd_seconds{carrier}                        INVITE to the first 101-199
//	sipedge_lcr_setup_seconds{carrier}                      INVITE to the answer
//	sipedge_lcr_call_duration_seconds{carrier}              answer to the end
//	sipedge_gateway_calls{group}                            calls holding one of the group's channels
//
// and, with quality statistics, the quality package's sipedge_quality_*.
package carrier
