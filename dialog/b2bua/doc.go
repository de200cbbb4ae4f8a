// Package b2bua is sipedge's call core: a back-to-back user agent that
// terminates the caller's dialog (the A-leg) and originates a fresh dialog
// toward a carrier (the B-leg), relaying between them.
//
// # Contract
//
// An Engine belongs to one shard: every method but LiveCalls runs on the
// shard's loop, never concurrently, and performs no blocking I/O (the
// admin API's AppendCalls and EndCall too: the owner posts them there). The
// shard gives it every message whose Call-ID hashes to the shard (Receive)
// and every timer it started (Timer); the Engine answers through its Env:
// Send for the wire, Clock for timers and the CDR's wall times, MintCallID
// for B-leg Call-IDs that hash back to this shard, so both legs of a call
// live on one shard. Messages passed in are views valid only during the
// call; the Engine copies what it keeps.
//
// The rest of Env is the owner's, each with a working default, so the call
// path tests none for nil:
//   - Carriers (a carrier.Shard; default carrier.NextHops) orders a call's
//     routes (Order: quality routing's demote or sort, a copy the call
//     keeps when the order changes, never the shared decision), and turns
//     each route into the carrier of an attempt, a carrier.Dial the call
//     holds from Reserve to Release (or a reason it cannot be dialled:
//     group down, limits, disabled by quality): the member or next hop,
//     its channel, its CPS slot
//     (Pace; an answer that comes later is delivered by Paced), whether a
//     failure is a CPS reject (CPSReject), the gateway's health (Outcome),
//     its credentials, and what became of each attempt and answered call
//     (Report, carrier.Report: per-carrier metrics and statistics);
//   - Router (an lcr.Router; default 404 No Route for every call) decides
//     where a call goes; a decision that needs I/O is Pending and comes back
//     through Decided;
//   - CDR (a cdr.Writer; default none) takes the record the Engine builds as
//     each call ends, its strings in the record's own storage: a warm engine
//     allocates nothing per call, its CDR included;
//   - Policy's hooks, Draining (default never) and Log.
//
// # Topology hiding
//
// B-leg messages are built from scratch: a new Call-ID, From tag and CSeq,
// sipedge's own Via and Contact, the caller's identity re-hosted on
// sipedge's address, and only the headers the header policy allows. Nothing
// of the A side's Via, Contact, Record-Route, Call-ID or tags reaches the B
// side, nor the reverse. Bodies (SDP) pass through unchanged.
//
// # Calls
//
// Initial INVITE: the source address selects a trunk (unknown sources are
// dropped or refused), Max-Forwards is checked (483 at zero, RFC 3261
// 16.3), the Router picks the carrier, and the B-leg INVITE goes out.
// Provisional responses with a To tag are relayed with an A-leg To tag per
// B-leg early dialog; the 2xx is relayed and retransmitted to the caller
// until its ACK (RFC 3261 13.3.1.4, RFC 6026), whose arrival sends the
// B-leg ACK. A carrier's 3xx is never relayed (its Contact names the
// carrier's network, RFC 3261 21.3): it is the attempt's failure, a reroute
// cause when lcr.reroute_causes lists it, otherwise the caller's 480; with
// its group's follow_redirects, a 3xx naming another member of the group
// sends the attempt there once (RFC 3261 8.1.3.4, redirect.go). In-dialog
// requests are matched by Call-ID and tags and relayed
// to the other leg with that leg's identifiers; BYE from either side ends
// both legs. CANCEL is answered 200, the B-leg is cancelled once it has sent
// a provisional (RFC 3261 9.1), with the caller's Reason when the header
// policy allows Reason (RFC 3326), and the caller gets 487. A 2xx from a B-leg
// the call no longer wants is ACKed and BYEd, so one call never reaches the
// caller twice: a late or forked answer, one that crossed the call's end, or
// one that came after the INVITE's transaction had ended (RFC 3261
// 13.2.2.4, 15), then built from the 2xx alone and sent where it came from.
// Each such dialog gets one BYE: while its transaction lives, a
// retransmitted 2xx is only ACKed again; at most 64 of those after the
// transaction (which anyone can send) run at once per shard, and one beyond
// them is left for the peer to retransmit. Counted in
// sipedge_late_answers_total, sipedge_late_answers_stray_total (after the
// transaction) and sipedge_late_answers_over_cap_total. Every call ends in
// one CDR.
//
// # Reliable provisional responses
//
// 100rel (RFC 3262) is each leg's own: sipedge is the caller's UAS and the
// carrier's UAC, PRACKs never cross, and RSeq and RAck are never relayed
// (rel.go). A relay end to end with a mapping would tie the caller to the
// carrier: a caller that requires 100rel could only reach carriers that
// support it, every failover would strand PRACKs in an early dialog left
// behind, and the offer/answer state of the provisionals would span two
// dialogs sipedge does not otherwise couple. Per leg, any caller reaches
// any carrier:
//   - the carrier's leg: the B-leg INVITE supports 100rel when the caller
//     does and its INVITE carries an offer (so a carrier's reliable SDP is
//     an answer, and the PRACK needs no body); each reliable provisional
//     of the carrier's early dialog is PRACKed once, in RSeq order, a
//     retransmission or one out of order going no further (RFC 3262 4),
//     even one the INVITE did not ask for;
//   - the caller's leg: a caller that requires 100rel gets every 101-199
//     reliably, one that supports it those the carrier sent reliably:
//     Require: 100rel and an RSeq of sipedge's own, retransmitted from T1,
//     doubling, until its PRACK (RFC 3262 3), one at a time (the latest
//     provisional waits for the PRACK), and the 2xx waits for the PRACK of
//     one with SDP. sipedge answers the PRACK: 200, 481 when it
//     acknowledges nothing awaiting one, 488 when it carries an offer (whose
//     answer only the carrier could give). No PRACK in 64*T1 fails the call
//     with 500. In a caller's dialog without an offer a reliable
//     provisional carries no SDP, which would be an offer answered in the
//     caller's PRACK, where the carrier's dialog has no place for it.
//
// # Session timers
//
// RFC 4028 (sessiontimer.go), in either mode: a request asking for a
// session interval below SessionTimer.MinSE (90 s, the RFC's floor, by
// default) gets 422 with sipedge's Min-SE, the caller's INVITE before any
// routing and a re-INVITE or UPDATE in the dialog (RFC 4028 9), and a
// carrier's 422 reaches the caller with its Min-SE whatever the header
// policy (RFC 4028 6).
//
// Relay (the default) leaves the session timer to the peers: Session-Expires
// and Min-SE pass with the header policy (as b2bua.header_policy does by
// default), and a 2xx whose Session-Expires says refresher=uac gets the
// Require: timer RFC 4028 9 asks for, which sipedge writes itself (Require
// is never relayed: each leg's extensions are its own).
//
// Uphold (SessionTimer.Uphold) keeps a session timer on each leg of
// sipedge's own: the B-leg INVITE asks for Interval (Supported: timer,
// Session-Expires, Min-SE; a 422 answered once with the interval its Min-SE
// names, RFC 4028 7.4), the caller's 2xx grants its leg what the caller
// asked for, at most Interval, with the caller as refresher when it
// supports timers (Require: timer) and sipedge otherwise (RFC 4028 9).
// Neither side's Session-Expires or Min-SE crosses: sipedge writes each
// leg's into the requests and 2xx it relays. On a leg whose refresher is
// sipedge (a peer without timers, a carrier's 2xx without Session-Expires,
// one saying refresher=uac), sipedge refreshes at half the interval (RFC
// 4028 10): an UPDATE without a body when the peer allows UPDATE (RFC
// 3311), else a re-INVITE offering the session description sipedge last
// sent it unchanged (kept per leg in uphold, a few hundred bytes a call).
// A refresh relayed through (a re-INVITE or UPDATE with its 2xx) refreshes
// both legs. A session not refreshed by min(32 s, a third of the interval)
// before it runs out, or a refresh of sipedge's refused 408 or 481 or
// unanswered, ends the call with a BYE on both legs; its CDR says
// hangup_side "system", end_reason "session_expired" (counted in
// sipedge_sessions_expired_total; sipedge's refreshes in
// sipedge_session_refreshes_total). This also bounds a call whose BYE was
// lost.
//
// # Draining
//
// While Env.Draining says true, a new call is refused 503 Draining
// (ReasonDraining) where routing would refuse it, past the trunk's
// admission and the INVITE's checks, and gets a CDR as such calls do:
// final_code 503, final_reason "Draining", hangup_side "system". EndAll
// ends the calls still up when the drain is over; Unsettled counts the
// transactions that ended them which still await their peer (a BYE
// retransmitted until answered, one answering a carrier's challenge, a
// 503 awaiting its ACK), for the owner to let them finish before it stops.
//
// # Routing policy
//
// Env.Policy holds the Go form of a routing script's handlers, each
// optional and run on the shard: OnInvite sees the Router's route.Decision
// (and whether there was none, NoDecision) and may filter or reorder its
// routes or reject; OnRouteFailure is told of every failed attempt and
// OnAnswer of the winning route, after the carrier plane (Carriers.Report);
// OnFailure runs once per call, when every carrier failed, and its
// FailureAction may pick the caller's response or route the call again.
// The routes the sequence then tries, OnInvite's or OnFailure's, are
// ordered by the carrier plane first (Carriers.Order).
// Hooks must not block, nor keep what they are given past their return.
// A hook that panics is recovered (hooks.go): the call gets sipedge's own
// answer, and the panic is logged and counted (sipedge_policy_panics_total).
//
// # Trunks
//
// The trunks are an immutable TrunkSet behind an atomic pointer
// (Config.TrunkSet), which the owner may swap at any time and every shard's
// engine shares: each request loads it once, without a lock or an
// allocation, so its admission, its reply address and its call see one set.
// A call keeps the *Trunk it began with: replacing or removing a trunk never
// touches the calls in progress. A trunk's Stats (TrunkStats: its live
// calls, the INVITEs refused over MaxCalls or its ingress CPS, its calls
// ended by result, each a metric labelled with the trunk) are the owner's
// to share between the trunk's versions and the shards, for
// max_concurrent_calls to hold on the node and across a replacement
// (sipedge_trunk_limited_total is per shard). Its Ingress limit, when set,
// refuses a new call over the trunk's calls per second with 503 and
// Retry-After before any routing work. A call keeps its trunk's ForceRPort
// too, for its dialog's responses.
//
// # Carriers that authenticate
//
// A carrier's 401 or 407 to the B-leg INVITE is answered with the account
// of its gateway group (Carriers.Credentials, dialog/digest): the INVITE again
// in the same dialog with the next CSeq and the credentials (RFC 3261
// 22.2), the carrier's deadline running on from its dial; once more on a
// stale nonce, not again otherwise; the ACK of its 2xx repeats the
// credentials (13.2.2.4). So is a challenge to a request the caller sent in
// the dialog and sipedge relayed (a re-INVITE, UPDATE, INFO...), the
// caller's transaction waiting for the answer. A challenge sipedge cannot
// answer is the attempt's (or the request's) failure, as its code says.
// Challenges and credentials are never relayed across legs: either side's
// is for the hop it came from, so a 401 or 407 reaches the other side as
// 403. So is a challenge to a BYE sipedge sends the carrier as the call
// ends (the caller hung up, the maximum duration, a drain): the BYE again
// with the next CSeq and the credentials (RFC 3261 8.1.3.5, 22.2), or the
// carrier keeps the call up, and bills it, until a timer of its own ends
// it. The call is gone by then (its CDR written, its memory reused): the
// BYE's transaction keeps its bytes, and a small entry per BYE in flight
// the carrier, until its final response. Not answered: a challenge to a
// BYE to the caller, with whom sipedge holds no account, or to one ending
// a dialog no call keeps (a late or forked answer). Counted in
// sipedge_carrier_auth_challenges_total by result.
//
// # Where messages go
//
// Responses to the caller, and the 2xx's retransmissions, go where RFC
// 3261 18.2.2 says (txn.ReplyTo): the source address at the Via's sent-by
// port, or at the source port with rport (or a trunk's ForceRPort).
// Requests sipedge sends the caller in a dialog (BYE, relayed re-INVITE,
// UPDATE, INFO, the ACK of a 2xx) go where RFC 3261 12.2.1.1 and 8.1.2 say
// (nexthop.go): to the first URI of the caller's route set (the INVITE's
// Record-Route, in order, 12.1.1), loose or strict (16.12), or with none to
// its remote target (its Contact, moved by each accepted re-INVITE or
// UPDATE and by the caller's 2xx to one, 12.2), the address resolved by
// RFC 3263 4 as far as an edge that does no DNS on a shard can: maddr or
// an IP address host, the port or 5060, the transport parameter or UDP. A
// name there (a proxy's or a PBX's host name), sips, or a transport
// sipedge does not serve falls back to where the INVITE's responses went,
// the source address; a trunk with NAT sends them all to the INVITE's
// source address and port, whatever its Contact says (a private address).
// A stream caller's connection carries them while it lives, for a next
// hop on its address. sipedge_requests_to_caller_total counts them by
// next_hop: route_set, contact, nat, fallback. The carrier's leg is as the
// edge set it up: requests carry its route set and remote target, but go
// on the wire to the gateway dialled; a carrier's Contact or Record-Route
// naming another host is never where sipedge sends, as the edge talks only
// to the gateways it knows.
//
// # Files
//
// One concern each, in the order a call meets them: engine.go (the
// Engine, its inputs and the actions of the transaction layer), env.go
// (what the owner gives), options.go (the extensions sipedge implements),
// trunk.go (trunks: sources, ingress limits,
// counters), admit.go (a new call up to the routing decision), dial.go (a
// carrier's B-leg INVITE and its pacing), failover.go (the failover
// sequence's steps, each attempt reported), attempt.go (the carrier in
// flight), shaping.go (a carrier's view of the numbers and identity),
// present.go (the same, for a dry run: Config.Present), auth.go (the
// carriers' challenges), hooks.go (the policy's hooks, each guarded
// against a panic), answer.go (the carrier's responses relayed, the 2xx
// and its ACK), rel.go (reliable provisionals, each leg's own),
// sessiontimer.go (session timers; their state, as reliable
// provisionals', in callExtra), redirect.go (a carrier's 3xx followed
// within its group), cancel.go (the caller's CANCEL), indialog.go
// (requests in the dialog, and BYE), teardown.go (dialogs no call keeps:
// late and forked 2xx), call.go (a call's state and end), calls.go (the
// live calls as an operator sees and ends them), cdr.go (what an ended
// call reports), respond.go (sipedge's own responses and where they go),
// headers.go (the header policy), build.go (the messages sipedge writes),
// nexthop.go (where requests to the caller go), probe.go (gateway
// probes). The call flows themselves, as SIP ladders of both legs and the
// CDR, are the golden scripts in testdata/
// (callflow_test.go).
package b2bua
