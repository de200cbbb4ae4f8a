// Package journal keeps a node's answered calls in its fleet's call
// journal (fleet.Journal), so that another node writes their CDRs should
// this one die; and it writes, as CDRs with hangup_side "node_lost", the
// calls of dead nodes the fleet hands this one (Lost, for
// fleet.Options.OnLost).
// It is the call core's Env.Journal (dialog/b2bua), which stays free of
// the fleet: the engine hands over each answered call's record, built as
// its CDR is (without an allocation once warm), and the end of each.
//
// # Who may call what
//
//   - Answered and Ended: the shards, each call's on its shard. A short
//     lock and an append: no I/O, and no allocation once the queue has
//     grown to its high-water mark. Answered takes the record over.
//   - Lost's function: the fleet's claimer goroutine (fleet.Options.OnLost).
//   - New and Close: the owner, Close after the last Answered and Ended.
//
// New starts one goroutine. It takes what the shards queued, in order:
// each answered call's record becomes a fleet.Call (its strings copied,
// which allocates: off the shards) handed to fleet.Journal.Answered, and
// the record goes back to the pool; each end goes to fleet.Journal.Ended.
//
// # When the queue is full
//
// Answered is refused past Options.Queue operations waiting (counted in
// sipedge_call_journal_dropped_total): the engine then does not journal
// that call, which gets no node_lost CDR should its node die while it is
// up (its normal CDR is written as ever). Ended is never refused: a call
// journalled is always ended, so that it is never written twice. The
// fleet's own queue behind this one has the same bound and rule
// (sipedge_fleet_journal_dropped_total).
package journal
