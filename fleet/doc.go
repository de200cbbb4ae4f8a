// Package fleet makes the sipedge nodes that share one Redis (or Redis
// Cluster) one fleet: each node registers with a lease; a carrier's or a
// trunk's channel limit (max_concurrent_calls) holds across the fleet; the
// runtime state (gateway groups, trunks, the static table, quality
// disables) is shared and persisted as versioned documents; routing
// decisions are dropped on every node at once; and the answered calls of a
// node that dies get their CDRs from another node (the call journal).
// Redis, through rueidis, is the only engine: Lua scripts on Redis' clock
// and Pub/Sub, no replication protocol of our own.
//
// Without Redis (Config.Redis empty) the fleet is the node alone, in
// process, as an embedder gets it by default: channel limits are split
// statically, ceil(limit / Options.Nodes) per node; Put applies at once;
// there is no journal.
//
// # Who may call what
//
//   - Channel.Take and Channel.Release: any goroutine, shards included.
//     One atomic add each, no lock, no allocation (TestChannelAllocs); they
//     never wait on Redis.
//   - Journal.Answered and Journal.Ended: any goroutine, shards included:
//     a short lock and an append, no I/O. Answered copies the Call.
//   - New, Close, Fleet.Channel, Channel.SetLimit, Follow, Put, PutIf,
//     Delete, Get, List, Nodes, DropDecisions: configuration and admin
//     goroutines. Put, PutIf, Delete, Nodes and DropDecisions block on
//     Redis for up to Options.Deadline.
//   - The callbacks (Follow's apply, Options.OnLost, OnDropDecisions,
//     Calls) run on the fleet's goroutines, never a shard; apply is never
//     called concurrently with itself.
//
// With Redis, New starts five goroutines (heartbeat, grants, journal,
// claimer, state with its subscriber); Close stops them, gives the
// channels back and leaves the fleet.
//
// # Membership (members.go)
//
// A node registers under its id (Config.NodeID, by default the host name)
// with a lease of Config.LeaseSecs on Redis' clock, renewed every third of
// it with the calls it holds (Options.Calls). New refuses an id a live
// node holds (ErrNodeIDTaken, naming its address and when its lease ends):
// a node restarted after a kill -9 starts once its old lease has run out.
// A node whose lease ran out is reaped by the next heartbeat of any node:
// its registration goes and a tombstone of its incarnation (the id and a
// random token drawn at start) stays for a day. Should the process still
// run (paused, or cut off from Redis for a lease), its next heartbeat
// finds the tombstone: it is fenced, logs it and goes on as a new
// incarnation. Per-node state in Redis (channel grants, the journal) is
// keyed by incarnation, so a fenced process never writes into state the
// fleet has given away. Nodes lists the live nodes for GET /v1/fleet;
// every node exports a calls gauge per live node.
//
// # Channel limits (channel.go, grants.go)
//
// A carrier sells so many channels; the fleet as a whole must not have
// more calls up at it. No shard waits on Redis, so each node holds a grant
// per limited key: shards take channels from it with atomics, and the
// grant loop, off the shards, keeps it in step with the fleet. In Redis
// each node's entry for a key says how many channels it occupies (o), how
// many it wants (d), and until when (a lease). A grant round is one script
// call for all the keys that need one (grants.go has the rule): a node
// gets at most the limit minus what the others occupy, cut to its max-min
// fair share of the limit when the wants add up to more; it claims the
// most it can hold while the call is in flight; a lower grant is a cap its
// calls shed to as they end, never a hang-up. A node wants its calls up
// plus a spare: two intervals' worth of Takes at its recent rate, one
// channel when the fleet has room to spare, none when the key is scarce.
// Grants grow when a Take is refused or comes near the cap (a round at
// once), shrink when the spare is not used, and are renewed every third of
// the lease; when wants exceed a limit, the script nudges every node on
// Pub/Sub, so that idle ones give their spare back within a round or two.
//
// What is guaranteed: while Redis answers and every node renews in time,
// the calls up across the fleet never exceed the limit, whatever the
// interleaving. (The sum of the o never exceeds the limit; a node's calls
// never exceed its o: it claims its cap in force before it may use a
// larger one, and keeps claiming a larger one until it no longer holds it.
// The lease is counted on Redis' clock from the script; the node gives its
// grant up at nine tenths of the lease counted from when it sent the
// call, on its own clock, so before the fleet can hand it out.)
//
// When the fleet may briefly have more calls up than the limit:
//
//   - Redis unreachable: a grant that could not be renewed within its lease
//     falls to the local share, ceil(limit / live nodes), logged and
//     counted (as the static split does). The shares add up to at most
//     limit + nodes - 1; and a node cut off alone uses its share while the
//     others, after its entry expired, hand out its channels: up to the
//     limit plus its share, until it is back.
//   - Redis back after it lost the grants (restarted without persistence,
//     a replica promoted that missed writes), or a node back from the
//     failure mode: each node claims what it holds and grows only after a
//     renewal interval, when every node has claimed again; calls up beyond
//     the limit by then (the failure mode's) stay up and no new ones are
//     taken until the fleet is within it.
//   - A limit lowered at run time: the calls up stay; nodes with the old
//     limit (a change on its way through the fleet) decide by theirs.
//   - A node that dies: its channels come back after its lease, but its
//     calls may still be up at the carrier (which learns of the death by
//     RTP or session timers): the carrier refuses the surplus, and the
//     calls fail over as from any refusal.
//
// When channels may go unused: a node's spare (at most two intervals of
// its Takes) is not another's until it gives it back; a node asking for
// more waits a round (the Take that found the cap used up is refused, and
// the call goes to the next carrier); a dead node's channels wait out its
// lease; a node in the failure mode keeps to its share whatever the others
// use; and a fenced node's old entry counts until it expires.
//
// # Shared state (state.go)
//
// Documents are the owner's JSON, by kind and name ("group"/"carrier-x",
// "trunk"/"acme", "static_routes"/"table", "quality_disable"/...). A write
// is one script call: the document, a version from one fleet-wide counter,
// the kind's version, and a notification on Pub/Sub carrying the
// document. Every node applies each change through the owner's callback
// (Follow), in version order per document, within a second: at once by the
// notification, or by the poll of the kinds' versions (Options.PollInterval)
// when the notification was lost (Pub/Sub delivers at most once). A node
// that starts reads the state in force before Follow returns. Put applies
// on the writing node before it returns; with Redis down it fails
// (ErrUnavailable) and nothing changes anywhere, so nodes never diverge
// silently. With Redis a document is at most MaxDocBytes: it travels
// whole in its notification. Redis must persist (appendonly) for the state to survive a
// restart of Redis; should it lose the state anyway, the nodes see its
// epoch change and write back what they applied.
//
// The precedence the sipedge server gives the layers: the YAML file is
// each node's base layer; the shared documents are the run-time layer,
// common to the fleet; on a name both define, the file wins on that node
// (as /v1/reload makes a file's group fixed over a run-time one) and the
// node logs the shared document it shadows. The admin API's writes
// (groups and trunks added, replaced, removed; the static table PUT) go to
// the shared layer through Put and Delete, with the 400/409 rules checked
// before. /v1/reload re-reads the node's file only; a shared document it
// shadows stays stored (other nodes may lack the name) and applies again
// if the file drops the name. The static table is one document: a PUT
// table overrides the file's on every node, and a reload whose file
// changed its table deletes the shared one (the file's change wins).
//
// # Decision drops (state.go)
//
// DropDecisions counts a drop in Redis and broadcasts it: every node,
// this one included, calls Options.OnDropDecisions (the owner drops its
// in-process tier: route/lcr DropLocal). The decisions in Redis are the
// cache's own to delete first (route/lcr Drop). A node that may have
// missed a drop (a notification lost, its count behind) drops all.
//
// # Call journal (journal.go, claim.go)
//
// With Config.CallJournal a node journals its answered calls in Redis:
// Answered when a call is answered, Ended when it ended and its CDR is
// written. The journal goroutine keeps the calls in memory and mirrors
// them, a script call carrying what queued during the previous one, with
// a renewal: the wall-clock time it took the queue, so every call still in
// the journal was up then as far as the node knew. When a node's lease
// runs out, the heartbeat that reaps it gives its journal, atomically, to
// one live node, whose claimer hands the calls to Options.OnLost (the
// owner writes CDRs with hangup_side "node_lost" and time_end the last
// renewal, at most a third of the lease before the death) and deletes
// them. Exactly once across the fleet: a journal has one owner at a time,
// and the claimer checks it at each step. The trade-offs:
//
//   - A claimer that dies between handing a batch (64 calls) to OnLost and
//     deleting it leaves it to the next claimer: that batch is written
//     twice (a_call_id pairs them).
//   - A call that ended while its End had not reached Redis (milliseconds;
//     longer while Redis is down) gets a node_lost CDR too, should its
//     node die then.
//   - A node cut off from Redis for longer than its lease is declared dead
//     while its calls are up: they get node_lost CDRs, and their normal
//     CDRs when they end (the node, fenced, does not journal them again).
//   - Answered is refused past Options.JournalQueue operations waiting
//     (counted): that call is not journalled. Ended is never refused.
//
// The journal is compared with the node's calls at each write (its length)
// and every tenth renewal (its fields), and mended: a Redis that lost it
// gets it again.
//
// # When Redis fails
//
// Every Redis call has Options.Deadline. Nothing on a shard waits on
// Redis; the fleet's goroutines ride an outage out and retry: channel
// grants fall to the local share at their lease end, the shared state
// stays as applied (writes fail), the journal queues in memory, Nodes
// fails. Redis down at New is not an error (the node starts in the failure
// mode and registers once it answers, without the duplicate-id check at
// start); a URL that does not parse, or a database a Cluster refuses, is
// (ErrRedisURL). Each transition of Redis, down and up, is logged once and
// counted (sipedge_fleet_redis_up, sipedge_fleet_redis_down_total).
//
// # Redis Cluster
//
// Every fleet key has the hash tag {sipedge:fleet}: one slot holds them
// all, so each script may touch the keys it needs (it names the first and
// builds the others under the tag), and one master carries the fleet's
// traffic: heartbeats, a grant round per node per interval when demand
// moves, two journal entries per answered call, the rare document. That
// master down is Redis down for the fleet. Notifications (PUBLISH) reach
// subscribers on every node of the cluster. Redis 6.2 or later is needed
// (HRANDFIELD).
//
// # Keys
//
//	{sipedge:fleet}:leases                ZSET node id -> lease end (ms, Redis' clock)
//	{sipedge:fleet}:node:<id>             HASH inc, sip, beat, calls, started, lease
//	{sipedge:fleet}:dead:<id>:<inc>       a reaped incarnation's tombstone (a day)
//	{sipedge:fleet}:ch:<key>              HASH "<id>:<inc>" -> "o d lease-end"
//	{sipedge:fleet}:ch:<key>:nudge        at most one nudge a second
//	{sipedge:fleet}:state:version         the documents' version counter
//	{sipedge:fleet}:state:kinds           HASH kind -> version of its last change
//	{sipedge:fleet}:state:epoch           changes when Redis lost the state
//	{sipedge:fleet}:doc:<kind>            HASH name -> "<version>\n<document>"
//	{sipedge:fleet}:lcr:drops             the count of decision drops
//	{sipedge:fleet}:journals              HASH "<id>:<inc>" -> "<owner> <renewed ms> live|lost"
//	{sipedge:fleet}:journal:<id>:<inc>    HASH call id (hex) -> the call, JSON
//	sipedge:fleet:events                  the Pub/Sub channel
//
// # Metrics (in Options.Metrics)
//
//	sipedge_fleet_redis_up                       1 while Redis answers (with Redis only)
//	sipedge_fleet_redis_down_total               transitions to Redis down
//	sipedge_fleet_redis_errors_total{op}         failed calls: heartbeat, grants, journal, claim, state, poll
//	sipedge_fleet_nodes                          live nodes, as the last heartbeat saw them
//	sipedge_fleet_node_calls{node}               calls each live node holds (this node's live)
//	sipedge_fleet_fenced_total                   times this node was declared dead while it ran
//	sipedge_fleet_node_id_conflicts_total        heartbeats refused: a live node holds the id
//	sipedge_fleet_channel_grant{key}             the node's grant (-1: no limit)
//	sipedge_fleet_channel_refused_total{key}     Takes refused
//	sipedge_fleet_channels_local_share           keys at the failure mode's local share
//	sipedge_fleet_state_applied_total            documents applied (added, replaced, removed)
//	sipedge_fleet_state_apply_errors_total       documents the owner refused
//	sipedge_fleet_state_lost_total               times Redis was found to have lost the state
//	sipedge_fleet_decision_drops_total           decision drops applied
//	sipedge_fleet_journal_pending                journal operations waiting (with the journal)
//	sipedge_fleet_journal_dropped_total          Answered refused: the queue was full
//	sipedge_fleet_journal_bad_records_total      calls that could not be encoded or decoded
//	sipedge_fleet_journals_claimed_total         dead nodes' journals this node wrote
//	sipedge_fleet_lost_calls_total               lost calls this node handed to OnLost
package fleet
