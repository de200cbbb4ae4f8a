// Package health keeps the gateway groups (a carrier's pool of gateways) and
// their members' health, and chooses a member per dial.
//
// # Readers and writers
//
// A Registry publishes an immutable snapshot of its groups through an atomic
// pointer; each member's health lives in atomics shared by every version of
// its group. The shards read without locks:
//
//   - Pick chooses a member of a group, per dial, from the calling shard's
//     own Selector (not safe for concurrent use; one per shard). It does not
//     allocate once that Selector has seen the group's current version.
//     PickLastResort is Pick for the last carrier a call can try.
//   - Peek says which member Pick would choose, taking nothing (no
//     trial call, no rotation moved): a dry run's, from any goroutine.
//     PeekLastResort is Peek for PickLastResort.
//   - ReportCall records what a real call said about the member Pick
//     returned; call it exactly once per Member returned with OK. It does
//     not allocate unless the member changes state.
//   - Cooldown skips a member for a while (a 503 with Retry-After), at
//     most passive.max_retry_after_secs (default 300 s).
//
// The writers are the probe loop and the Prober's callbacks (the health of a
// member), ReportCall (passive signals) and the control plane (AddGroup,
// RemoveGroup, and the admin Handler that calls them), which is serialised
// and replaces the snapshot: Picks that start after AddGroup or RemoveGroup
// returns see the change.
//
// # Selection
//
// weighted is smooth weighted round robin (nginx), per Selector, so shards
// share no counter; round_robin cycles per Selector; hash is rendezvous
// hashing of the caller's key, stable while the chosen member is usable and
// moved only for the keys of a member that comes or goes. Destinations are
// in tiers by priority (lower first); a tier is used only when no member
// of the tiers before it can be chosen. A member can be chosen when it is
// not down, its address resolves, it is not in cooldown and, half-open, it
// has trial calls left. An unknown group name (UnknownGroup) is distinct
// from a group that cannot be used (GroupDown, or Unresolvable when every
// member's name fails to resolve).
//
// A group is in panic when some of its members are up but fewer than
// panic_threshold_percent of them (default 50 %, Envoy's; 0 turns it
// off; with tiers, each tier counts for the share of its members up, the
// shares summed, so that a full backup tier makes up for a dead primary).
// Then Pick ignores the marks calls left: it chooses among every member
// except those probes hold down, those in cooldown and unresolvable ones,
// in all tiers at once, rather than pile the group's load on the few left
// by evidence that may be the network's or sipedge's own. A group none of
// whose members is up is not in panic: its calls go to their next carrier.
// For the last carrier of a call there is none, and PickLastResort
// chooses among the members calls marked down (tiers in order) when Pick
// finds none; a member probes hold down is never chosen, since failing
// OPTIONS for failure_threshold probes in a row is evidence that does not
// depend on load, and dialling it would make the caller wait for the
// failure it has already.
//
// # Health
//
// Members start up. For a group with probing enabled, the probe loop (one
// goroutine per registry) asks the owner's Prober for an OPTIONS probe of
// every member each interval plus a random jitter; failure_threshold failed
// probes in a row (no reply, or a reply not in healthy_codes: by default
// any reply but 503) mark a member down, and success_threshold good ones
// bring a down member back. A 503 with Retry-After to a probe or a call is a
// cooldown for that long, neither a success nor a failure; a Retry-After
// longer than the group's passive.max_retry_after_secs (default 300 s) is
// cut to it, logged and counted, so that one reply cannot take a gateway
// out for hours.
//
// Between probes, real calls are evidence (outlier detection, outlier.go).
// The outcomes the group's passive config counts (by default no response
// to an INVITE, 503, transport errors) are failures. An up member goes
// down when its failures are a share of its recent calls (at least
// passive.failure_threshold failures, passive.failure_percent of the last
// second's calls or of the last passive.min_calls, up to ten seconds back,
// lasting half a second at least), or when passive.failure_threshold calls
// or more failed in a row over a second at least, the evidence at low
// rates. So a few lost calls among thousands mark nothing, and a member
// that stops answering is down within a second or two at any rate from 1
// call/s up. A member that comes back is half-open: Pick lets
// half_open_calls trial calls through, and it is up once they all succeed;
// a failed trial sends it down again. A member calls marked down comes
// back half-open when success_threshold probes succeed (probed groups),
// after passive.down_secs (unprobed groups), or when it answers a call a
// panic or a last resort sent it. Probes that fail failure_threshold times
// while calls hold a member down make the down probe-confirmed: then only
// probes bring it back.
//
// Addresses that are DNS names are resolved when the group is added and
// again every Options.ResolveInterval by a goroutine of their own. A
// re-resolution that times out or fails at the server keeps the address
// (logged once, and sipedge_gateway_member_address_stale is 1 meanwhile);
// a name that no longer resolves makes the member
// unresolvable.
//
// Every state change is logged once (slog, with the group, uri and address)
// and counted. Per member, in the Options.Metrics set, labelled group, uri
// and address: sipedge_gateway_member_up (1 when Pick may choose it: not
// down, resolvable and not in cooldown),
// sipedge_gateway_member_cooldown_seconds (the cooldown left, 0 if none),
// sipedge_gateway_member_consecutive_failures{source="probe"|"call"},
// sipedge_gateway_probe_rtt_seconds (histogram),
// sipedge_gateway_member_transitions_total{to="up"|"down"|"half_open"|"cooling"}
// (to cooling: a cooldown that begins; its end is logged) and
// sipedge_gateway_retry_after_capped_total (Retry-Afters cut to the cap).
// A member in cooldown is "cooling" in the admin API, with the time its
// cooldown ends, unless it is down.
// Per group, labelled group: sipedge_gateway_group_panic (1 in panic; its
// start and end are logged by the probe loop, within a second) and
// sipedge_gateway_rescue_picks_total{mode="panic"|"last_resort"} (members
// chosen despite the marks calls left). A runtime group's metrics are
// created when it is added and unregistered when it, or the member, is
// removed.
//
// # Fixed groups
//
// The groups given to New (the YAML's) are fixed: AddGroup and RemoveGroup
// refuse them with ErrFixedGroup; SyncFixed replaces the fixed set with a
// reloaded file's. Runtime groups are added, replaced and removed at will;
// replacing keeps the health of members whose uri and address are
// unchanged.
//
// The package imports neither the configuration nor the runtime (shard):
// of the transports it knows only their names (transport.Kind). cmd maps
// the YAML to GroupConfig and implements Prober over the shards.
package health
