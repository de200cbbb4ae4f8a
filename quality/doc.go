// Package quality keeps live call-quality statistics per (quality prefix,
// carrier) and per (quality prefix, gateway member), scores them, and uses
// the scores in routing: a decision's carriers are demoted or sorted by
// score, a carrier can be disabled, and a pair that turns bad raises an
// event. OpenSIPS' qrouting is the prior art: the same statistics and
// warning/critical penalty profiles, but a statistic is judged by a
// confidence bound rather than trusted from its first sample (qrouting's
// min_samples treats fewer samples as perfect and then trusts the raw
// ratio at once). docs/design/quality.md has the reasoning at more length.
//
// # Who calls what
//
// The owner builds one Monitor (New) with a Collector per shard.
//
//   - On a shard, that shard's goroutine only: Collector.Record when an
//     attempt ends (answered, failed, or skipped undialled),
//     Collector.RecordEnd when an answered call ends, and Collector.Tick at
//     least once per sampling interval (a comparison when there is nothing
//     to do). They take the shard's clock as now and never read the wall
//     clock; they take no lock and do not allocate, except the first time
//     a shard sees a pair (it interns the carrier or gateway name: a map
//     entry and a copy of the string) and when a new sampling interval
//     finds no bucket handed back by the reader yet.
//   - From any goroutine, shards included, lock-free and without
//     allocating: Monitor.Prefix and PrefixBytes, Reorder (it copies the
//     routes into the caller's buffer when the order changes; that buffer
//     grows, once, if it is too small), Disabled and Score. They read an
//     immutable snapshot published atomically by the reader and the
//     control plane. Scores reads it too, but sorts and allocates: for a
//     routing API's request, off the call path.
//   - The reader, one goroutine, never a shard: Update. New starts it when
//     Options.Clock is set, Start when the shards' clock comes later (an
//     Update a fifth of an interval after each sampling interval ends);
//     otherwise the owner calls it.
//   - The control plane, any goroutine but a shard's: Disable, Enable,
//     Disables, Status and Handler (GET /v1/quality, POST
//     /v1/quality/disable and /v1/quality/enable). They share a mutex with
//     the reader.
//   - With Options.Store, a goroutine of the Monitor's loads the stored
//     disables as it starts and writes each change back (Disable, Enable,
//     auto_disable): see Disables below.
//
// # From the shards to the reader
//
// A Collector counts into plain (non-atomic) tallies, one per pair it has
// seen, in its current bucket: one sampling interval of that shard. When
// the shard's clock passes the end of the interval (Record, RecordEnd or
// Tick), the bucket is sealed: pushed on a lock-free stack and never
// written again by the shard. Update takes every sealed bucket, adds it
// into its interval in a ring of history_span/sampling_interval + 2
// intervals, and pushes it back on a second stack, from which the shard
// reuses it. The atomic push and take order the shard's writes before the
// reader's reads, so neither side locks and the shard pays no atomic per
// counter. A bucket is read up to one sampling interval (plus the reader's
// fifth) after its interval ends; one that reaches the reader after its
// interval has left the window is dropped and counted.
//
// The window Update judges covers the current sampling interval and the
// history_span_secs before it (rounded up to whole intervals): a sample
// counts for history_span_secs, plus up to one interval, after it is
// recorded.
//
// # Statistics
//
// An attempt counts against a carrier only if sipedge dialled it (an
// INVITE left) and it is not a caller's CANCEL before any 101-199: group
// down, CPS or channel limited, unknown group, disabled, and callers who
// give up early count against no one. For the attempts that count:
//
//	ASR  answered (2xx) / attempts
//	CCR  completed / attempts: answered, or a final answer of the far end's
//	     own (3xx, 4xx including its own 408, 6xx), or a caller's CANCEL
//	     after progress (the far end had reached the callee); not a 5xx,
//	     sipedge's ring-out 408, its Timer B 408 or a transport error
//	     (Outcome.Local)
//	PDD  mean time from the INVITE to the first 101-199, over the attempts
//	     that had one
//	AST  mean time from the INVITE to the answer, over answered attempts
//	ACD  mean time from the answer to the end, over answered calls that
//	     ended (RecordEnd)
//
// Each answered attempt is also completed, so CCR >= ASR, and has its AST
// at or after its PDD; PDD's mean also covers attempts that rang and then
// failed, so over a mix it may exceed AST's.
//
// # Scores
//
// A profile sets, per statistic, a warning and a critical threshold and a
// weight, and a warning and a critical penalty (1 and 10). A statistic is
// at critical when its bound is past the critical threshold, else at
// warning when past the warning one (past: below for ASR, CCR and ACD,
// above for PDD and AST); the score is the sum over the statistics of
// weight x the penalty of their level. 0 is perfect; lower is better.
//
// The bound is the optimistic end of a one-sided confidence interval at
// the configured confidence c (z = the standard normal quantile of c,
// 1.645 for 0.95): a statistic is at a level only when, with confidence
// c, its true value is past the threshold. So few samples never demote
// and many always can, with no min_samples cliff.
//
// Ratios (ASR, CCR) use the upper Wilson score bound of k successes in n:
//
//	(p + z²/2n + z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n),  p = k/n
//
// which, unlike the normal approximation, stays sound at p = 0 and small
// n: with no answer at all it is (z²/n) / (1 + z²/n). At 0.95, 1 failure
// in 2 gives 0.88 and 2 in 2 0.57: no verdict; 0 answers in 25 give 0.098
// and in 50 0.051, under the built-in critical ASR of 0.10.
//
// Times (PDD, AST; ACD) use the mean m of n samples and the bound
//
//	m - z·s'/sqrt(n)   (PDD, AST: high is bad)
//	m + z·s'/sqrt(n)   (ACD: low is bad)
//
// where s' is the sample standard deviation, but at least the mean and at
// least the warning threshold. At small n the sample deviation is itself
// unreliable (two equal samples give 0, which would make two calls
// conclusive); the mean is the deviation of exponentially distributed
// times, the usual model of waiting times, and the warning threshold is
// the scale at which the profile judges the statistic. With that floor no
// verdict is possible before n > z² (3 samples at 0.95), and the samples
// needed grow as the mean nears the threshold: a PDD mean of twice the
// critical threshold is critical after 11 samples, of 1.3 times after 51.
//
// # The built-in profile
//
// Without profiles (DefaultProfile, so that mode: demote alone works):
//
//	ASR  warning below 25%, critical below 10%: a carrier that answers
//	     fewer than one call in ten, with confidence, is failing, whatever
//	     the destination's usual answer rate (30 to 60%)
//	CCR  warning below 70%, critical below 40%: the far end normally
//	     gives most calls a final answer of its own; when most end in 5xx
//	     or timeouts, the carrier's network is failing
//	PDD  warning above 5 s, critical above 10 s: a caller hears nothing
//	     meanwhile; beyond 10 s callers hang up before ringback, and the
//	     route is likely looping or queueing
//	AST  warning above 30 s, no critical: the callee owns most of it (the
//	     ring), so it can only hint at a slow network
//	ACD  warning below 15 s, critical below 5 s: calls that short are
//	     answered but unusable (no audio, false answer supervision)
//	penalties 1 and 10, weights 1
//
// # Routing
//
// Reorder applies the mode to a decision's routes for the call's prefix:
// demote moves the carriers whose score reaches their profile's critical
// penalty behind the others, each group in the API's order; sort orders by
// score, the API's order breaking ties. A decision may be shared (the
// cache): its routes are never modified; a changed order is a copy into
// the caller's buffer, which a pooled call keeps across calls. A carrier
// disabled for the prefix (or for all) stays in place: the engine asks
// Disabled before dialling it and skips it with ReasonDisabled. Quality
// never marks a gateway down for health, nor health a carrier down for
// quality.
//
// # Events
//
// When a pair's score reaches the event threshold (bad_dst_threshold, by
// default its profile's critical penalty) from below, Update raises a
// bad-destination event: an info log line, the pair's
// sipedge_quality_bad_destination_events_total, Options.OnEvent, and the
// webhook if configured (a JSON POST from a goroutine of its own, a queue
// of 64 that drops beyond, Options.WebhookTimeout per POST, no retry:
// sipedge_quality_webhook_posts_total{result="ok"|"failed"|"dropped"}).
// With auto_disable a carrier pair's event disables it (Disable.Auto);
// only Enable lifts it.
//
// # Disables across restarts
//
// A Store (Options.Store; Redis in quality/redisstore; the sipedge server's
// fleet state with fleet.redis) keeps the disables. A Store several nodes
// share tells each Monitor of the others' changes through Stored, which
// takes them as stored, never written back.
// The Monitor starts without them and a goroutine of its own loads them,
// retrying after a failure (1 s, doubling up to 30 s) until the Store
// answers, so that a Store that is down never stalls the start: meanwhile
// routing goes without the stored disables, and a disable or enable made
// here before the load wins over the stored one of its carrier and prefix
// (an enable for every prefix, over all of the carrier's). Each change then
// wakes the goroutine, which writes what differs between the disables and
// what it last knew the Store to hold, one Put or Delete per disable;
// changes are never queued, so none is lost and a burst costs one pass. A
// failed call is retried after the same delays. A stored disable of a
// prefix no longer configured is logged and left alone.
//
// # Metrics
//
// Per pair, created when a shard first reports it, labels prefix and
// carrier (or gateway, with "gateway_" after "sipedge_quality_"):
// sipedge_quality_score, sipedge_quality_asr and _asr_bound, _ccr and
// _ccr_bound (fractions), _pdd_seconds and _pdd_bound_seconds, _ast_*,
// _acd_* (NaN without samples), sipedge_quality_samples{statistic=
// "attempts"|"pdd"|"ast"|"acd"}, and the events counter. Besides:
// sipedge_quality_disables (in force), sipedge_quality_late_buckets_total,
// the webhook counter and sipedge_quality_store_errors_total{op="load"|
// "write"} (the Store's failed calls). Pairs and their metrics live as long as the
// Monitor: their number is bounded by prefixes x carriers (and gateways).
package quality
