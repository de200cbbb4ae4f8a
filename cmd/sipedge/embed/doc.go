// Package embed runs sipedge inside another Go program, with the
// program's own routing policy, as Go hooks (docs/design/lcr.md 2.2, 3.11).
//
// # Contract
//
// LoadConfig and ParseConfig read the YAML configuration exactly as
// "sipedge run -config" does: ${VAR} expanded from the process
// environment, defaults filled in, every rule checked, all problems
// returned at once with the same messages. Start builds and starts the
// server on a validated Config, as "sipedge run" does, with
// Options.Policy's hooks (b2bua.Policy); Shutdown drains it, as SIGTERM
// does, and Reopen reopens the CDR file, as SIGHUP does. Signals, the log
// file and its level (log: in the YAML) are the embedding program's: the
// server logs to Options.Logger.
//
// # Policy
//
// Without hooks sipedge routes as the binary does, which is the default
// policy of docs/design/lcr.md 2.2: the dialled number normalised by the trunk's number
// policy, looked up (the LCR API or the static table), then no decision
// (API down, no fallback) rejected 503 Route Unavailable, an API reject
// answered with its code and reason, no routes 404 No Route, routes tried
// in order, and a failure after the last carrier sent to the caller.
//
// Each hook is optional and changes one step (b2bua.Policy documents them):
//
//   - OnInvite(r, d): d is that decision, already applied (d.Code set for
//     a reject, d.NoDecision for no decision). Filter or reorder d.Routes
//     (assign a new slice: d.Routes is shared with the cache and other
//     calls), set d.Code and d.Reason to reject, or clear d.Code and set
//     d.Routes to route anyway.
//   - OnAnswer(c, r): the winning route; OnRouteFailure(c, r, a): once per
//     failed attempt, a notification only. Both run after the carrier
//     plane recorded the attempt in sipedge's own per-carrier metrics
//     (sipedge_lcr_attempts_total and the PDD, setup and duration
//     histograms), which a policy never replaces.
//   - OnFailure(c, code, reason): once per call, after every carrier
//     failed. Its b2bua.FailureAction rejects with a chosen code and reason
//     (Code), routes again (Routes: the CDR's lcr_attempts keeps the
//     carriers tried so far), or keeps the default (zero value).
//
// Hooks run on the shards' goroutines, several at once (one per shard),
// in the middle of a call's processing: a hook must not block (no network
// or disk I/O, no lock held long) and must not keep the *b2bua.Call, the
// *route.Request, the *route.Route or their byte slices past its
// return. State shared between calls needs the program's own
// synchronisation.
//
// # A hook that panics
//
// A panic in a hook never takes the node, or another call, down. It is
// recovered, logged at error level with the hook, the call's Call-ID, the
// panic's value and the stack, and counted in
// sipedge_policy_panics_total{shard,hook}, and the call gets sipedge's
// own answer:
//
//   - OnInvite: 500 Server Internal Error, and no carrier is dialled. The
//     policy's verdict is unknown, and routing the call without it could
//     send it where the policy meant to refuse (a blocked destination, a
//     customer over credit): sipedge fails closed.
//   - OnFailure: the answer the caller would have had without the hook.
//   - OnAnswer, OnRouteFailure: notifications; the call goes on.
//
// The next call runs the hooks again. A hook costs a call nothing when it
// is not set. A fatal runtime error (concurrent map writes, out of memory)
// is not a panic and still ends the process.
//
// The request and decision OnInvite sees are route.Request and
// route.Decision: the types the routing decision (route/lcr) makes, the
// same as the binary's. The carrier plane (carrier) and the call core
// (dialog/b2bua) are the binary's too: an embedding program routes,
// paces and fails over exactly as "sipedge run" does.
package embed
