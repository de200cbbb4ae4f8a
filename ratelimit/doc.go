// Package ratelimit paces calls per key (a carrier account, a trunk) to a
// calls-per-second limit with GCRA, "defer to the next free slot"
// (docs/design/cps.md 3): a reservation is given the wait until the key's next free slot, and
// slots are 1/Rate × Margin apart (Margin 1.15 by default), so that callers
// leave one by one instead of all at the next second. When the next free
// slot is more than MaxWait away the reservation is Over and takes nothing:
// skip the carrier (the failover engine records cps_limited) or answer 503.
//
// # Limiters
//
// Local is the in-process limiter: the embedded default when no Redis is
// configured, and the fallback. Redis is the fleet limiter: every node asks
// one shared Redis, by a Lua script that decides, each atomically, the
// decisions queued while the previous calls were in flight (group commit,
// below). New picks one from Config, the operators' `ratelimit:` section,
// and returns a Limiter.
//
// Keys are registered up front (Register, at configuration load or when an
// API route brings a new account) and decided by Key, a small integer: the
// decision path indexes a copy-on-write slice, it never hashes a string.
// Register is safe concurrently with decisions.
//
// # Who may call what
//
//   - Local.Reserve, Backoff and Rate never block, take no lock and may be
//     called from any goroutine, shards included. Local.Reserve allocates
//     nothing (proven by TestLocalAllocs).
//   - ReserveAsync (Limiter, Redis) never blocks: it is the shard's call.
//     It returns the decision at once when no I/O is needed (in-process
//     mode, a batched slot, a key known to be full, the breaker open, the
//     worker queue full); otherwise done is called exactly once, later, on
//     one of the limiter's worker goroutines (Options.Workers, default 64,
//     whose concurrent decisions go to Redis in group calls). done must post
//     the decision back to the shard and return.
//   - Reserve(ctx) (Limiter, Redis) blocks for up to the deadline (20 ms by
//     default). Never call it on a shard.
//   - Peek tells what a reservation would get, taking nothing (a dry run:
//     the admin API's POST /v1/route). Local.Peek never blocks;
//     Peek(ctx) (Limiter, Redis) reads the key in Redis, blocking for up
//     to the deadline: never on a shard.
//   - Register and Lookup take a lock and may allocate.
//   - Close once, after the last ReserveAsync.
//
// # Clocks
//
// In Redis mode the slots are computed inside the script on Redis' clock
// (TIME), never on node clocks, which need not agree. A node receives a
// wait, relative, and counts it from when the reply arrived: the error is
// the reply's one-way latency, which the margin absorbs. Local uses the
// caller's monotonic clock (a time.Duration since a start of the caller's
// choosing); the Limiter and Redis use Options.Now (default: time since
// creation) for the fallback, AIMD, the breaker and held slots.
//
// # What is guaranteed
//
// Over any window of length W a key grants at most Burst + W/T slots (T =
// 1/Rate × Margin; the proof is at the script), however the callers of all
// the nodes interleave. With Burst 1 and Margin >= 1 no 1 s window gets more
// than Rate calls, which is what carriers meter. A Burst above 1 trades
// that for immediacy after idle periods: Burst + Rate/Margin may exceed Rate.
//
// # When Redis fails
//
// Every Redis call has its own deadline (Config.DeadlineMS): without one, a
// silent Redis would hold calls for rueidis' connection timeout, seconds.
// After Options.BreakerFailures consecutive failures (3) the circuit breaker
// opens: Redis is not asked for Options.BreakerCoolDown (1 s), then one
// probe call goes; its success resumes Redis mode. Meanwhile, and for every
// failed call, Config.FailureMode decides: local (default) reserves in the
// in-process limiter at Rate / Config.Nodes, so that the fleet as a whole
// stays near the rate; open allows; closed refuses (Over). Each transition,
// down and up, is logged once, not each call; Decision.Source tells every
// decision's origin. The script is loaded with EVALSHA and sent again on
// NOSCRIPT (a Redis restart or SCRIPT FLUSH), by rueidis. A Redis that is
// down when New runs is not an error: the limiter starts down and keeps
// connecting. A Redis that refuses the URL's database is (ErrRedisURL): a
// Redis Cluster has only database 0; should it come up refusing it after
// New, that is logged as an error, once.
//
// # Redis Cluster
//
// Redis may be a Redis Cluster (rueidis finds out; the URL may list more
// seed nodes as ?addr=host:port&addr=..., and must use database 0, the
// only one a Cluster has). Keys are `{sipedge:cps}:<name>`: the hash tag
// puts them all in one slot, so the script, which touches the keys of a
// group, runs on a Cluster unchanged (a call with keys in two slots would
// be refused). The price: all the CPS keys, and every script call of the
// fleet, go to the one master that serves that slot. A Cluster does not
// spread the CPS load, which one master must carry (a script call decides
// up to 64 decisions), and that master down is Redis down for the limiter
// (the failure mode decides) while the rest of the Cluster serves. The
// LCR decision cache, whose keys have no hash tag, is what a Cluster
// spreads.
//
// # Group commit
//
// A decision that needs Redis is queued, and two dispatcher goroutines,
// each with its own connection, send what is queued, up to 64 decisions,
// as one script call: the next call carries the decisions that arrived
// while the previous one was in flight. An idle limiter sends a lone
// decision at once (there is no timer); a busy one makes Redis run a script
// per round trip instead of one per decision, which is what bounds the
// decisions per second. In the script each decision is decided exactly as
// alone, in queue order (a key may come twice), at the call's now: the
// guarantee below holds unchanged. Each decision has its deadline from
// when it was queued, and a call the earliest of its decisions'; should
// the client overrun it (rueidis can, reconnecting to a silent Redis), the
// caller gives up at 1.5 times the deadline. The breaker counts failed
// calls, not decisions; sipedge_ratelimit_redis_group_size shows the
// decisions per call.
//
// # Batch reservation (Options.Batch, off by default)
//
// A node may reserve a block of consecutive slots of a key in one round
// trip and hand them out locally, so that Redis sees a fraction of the
// decisions. It applies only to keys whose effective rate is at least
// Options.BatchMinRate (50/s): there slots are at most 23 ms apart. The
// block size adapts: it doubles, up to Batch, while demand keeps up with the
// rate (the held slots ran out within an interval of the last one) and
// falls back to one slot otherwise. The trade-off:
//
//   - The window guarantee is unchanged: the slots are Redis' GCRA slots.
//   - Throughput can drop below the rate: a held slot that nobody uses
//     within a tenth of an interval after its time is thrown away (counted
//     in sipedge_ratelimit_batch_wasted_total), and other nodes could have
//     used it. At most Batch slots per node and key are at stake.
//   - Fairness: a node with a block queues the other nodes' calls behind
//     its held slots, up to Batch intervals.
//   - A held slot is handed out up to a tenth of an interval late, which
//     eats into the margin; and AIMD changes apply to the next block only.
//
// Independently of Batch, an Over from Redis says when the key's first
// free slot is: until it comes within MaxWait, further reservations on the
// node are Over without a round trip (tat never moves back), so a flood on
// a full key does not load Redis.
//
// # Learning a carrier's real limit (AIMD)
//
// Backoff, called on a CPS reject from the carrier, multiplies the key's
// effective rate by 0.7 (not below 10 % of the configured rate, at most once
// a second, since the calls already in flight are rejected too); the rate
// then recovers by 5 % of the configured rate per second, up to the
// configured rate. Each node learns on its own: a node's lowered rate
// spaces the slots it takes in Redis, not the other nodes'.
//
// # Metrics (in Options.Metrics)
//
//	sipedge_ratelimit_effective_rate{key="..."}   effective fleet rate, calls/s
//	sipedge_ratelimit_redis_up                    1 in Redis mode, 0 in the failure mode
//	sipedge_ratelimit_redis_calls_total           decisions sent to Redis (a script call carries several)
//	sipedge_ratelimit_redis_round_trips_total     script calls
//	sipedge_ratelimit_redis_group_size            histogram of decisions per script call
//	sipedge_ratelimit_redis_errors_total          decisions of failed script calls (deadline included)
//	sipedge_ratelimit_redis_down_total            transitions to the failure mode
//	sipedge_ratelimit_failure_mode_total{mode=""} decisions made by the failure mode
//	sipedge_ratelimit_async_queue_full_total      ReserveAsync calls that found the queue full
//	sipedge_ratelimit_batch_slots_total           held slots handed out
//	sipedge_ratelimit_batch_wasted_total          held slots expired or dropped
package ratelimit
