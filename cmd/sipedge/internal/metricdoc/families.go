package metricdoc

// Sections of docs/metrics.md, in its order.
const (
	secSIP        = "SIP and transport"
	secTxn        = "Transactions"
	secCalls      = "Calls"
	secTrunks     = "Customer trunks"
	secCarriers   = "Carriers"
	secLCR        = "Routing decisions"
	secHealth     = "Gateway health"
	secCPS        = "CPS limits"
	secCDR        = "CDRs and the call journal"
	secFleet      = "The fleet"
	secQuality    = "Quality routing"
	secNode       = "The node"
	secRuntime    = "Go runtime and process"
	shard         = "shard"
	carrierLabel  = "carrier"
	groupLabel    = "group"
	memberURI     = "uri"
	memberAddress = "address"
)

// Sections lists the sections in the order docs/metrics.md shows them.
var Sections = []string{secSIP, secTxn, secCalls, secTrunks, secCarriers, secLCR, secHealth, secCPS, secCDR,
	secFleet, secQuality, secNode, secRuntime}

var (
	byShard  = []string{shard}
	member   = []string{groupLabel, memberURI, memberAddress}
	qCarrier = []string{"prefix", carrierLabel}
	qGateway = []string{"prefix", "gateway"}
)

// Families documents every metric family sipedge exports.
var Families = []Family{
	// The event loops (shard): what arrives, leaves and is refused.
	{"sipedge_sip_requests_in_total", Counter, []string{shard, "method"}, "SIP requests received, by method (other: an extension method)", secSIP},
	{"sipedge_sip_requests_out_total", Counter, []string{shard, "method"}, "SIP requests sent, by method", secSIP},
	{"sipedge_sip_responses_in_total", Counter, []string{shard, "class"}, "SIP responses received, by status class (1xx to 6xx)", secSIP},
	{"sipedge_sip_responses_out_total", Counter, []string{shard, "class"}, "SIP responses sent, by status class (1xx to 6xx)", secSIP},
	{"sipedge_sip_parse_errors_total", Counter, []string{shard, "code"}, "malformed requests, by the status they were answered with (400, 413, 414, 416, 420, 505, 513, or other)", secSIP},
	{"sipedge_sip_malformed_responses_dropped_total", Counter, byShard, "malformed responses, dropped silently (RFC 3261 18.1.2)", secSIP},
	{"sipedge_sip_oversize_datagrams_dropped_total", Counter, byShard, "UDP datagrams larger than sip.max_message_size, dropped", secSIP},
	{"sipedge_shard_handoffs_out_total", Counter, byShard, "messages this event loop received for a call another shard owns and handed to it", secSIP},
	{"sipedge_shard_handoffs_in_total", Counter, byShard, "messages handed to this shard by another event loop", secSIP},
	{"sipedge_shard_handoff_queue_full_total", Counter, byShard, "messages dropped because the ring to the owning shard was full (the sender retransmits)", secSIP},
	{"sipedge_shard_timers", Gauge, byShard, "timers on the shard's timer wheel", secSIP},
	{"sipedge_shard_batch_intervals_total", Counter, byShard, "intervals (sip.batch_interval_us) a busy event loop slept before taking what its sockets held, instead of waking per datagram", secSIP},
	{"sipedge_shard_ticks_total", Counter, nil, "ticks of the shards' timer clock, which wakes a shard not polling to advance its timers (every 5 ms while one does not poll; none while every shard polls: a polling loop advances its own)", secSIP},
	{"sipedge_transport_send_errors_total", Counter, byShard, "messages that could not be sent: socket errors, a closed or stalled TCP connection", secSIP},
	{"sipedge_tcp_connections", Gauge, byShard, "TCP connections open", secSIP},
	{"sipedge_tcp_connections_rejected_total", Counter, byShard, "TCP connections refused over sip.tcp.max_conns or sip.tcp.max_conns_per_ip", secSIP},
	{"sipedge_tcp_framing_errors_total", Counter, byShard, "TCP connections closed on a stream that is not SIP messages (bad framing, a message over the limits)", secSIP},
	{"sipedge_tcp_timeouts_total", Counter, byShard, "TCP connections closed by sip.tcp.first_data_timeout_ms, message_timeout_ms or idle_timeout_ms", secSIP},
	{"sipedge_tcp_stalled_total", Counter, byShard, "TCP connections whose peer stopped reading until their send queue overflowed", secSIP},
	{"sipedge_flood_dropped_total", Counter, byShard, "messages dropped unparsed from sources banned for flooding (ratelimit.flood)", secSIP},
	{"sipedge_flood_bans_total", Counter, byShard, "flood bans begun (a source over ratelimit.flood.messages_per_sec)", secSIP},

	// The transaction layer (dialog/txn, published by each engine).
	{"sipedge_transactions_active", Gauge, byShard, "SIP transactions alive", secTxn},
	{"sipedge_sip_retransmissions_total", Counter, byShard, "requests and responses sipedge's transactions retransmitted (RFC 3261 17 timers A, E, G)", secTxn},
	{"sipedge_sip_retransmissions_absorbed_total", Counter, byShard, "retransmissions received that a transaction absorbed (answered again or ignored) without reaching the call", secTxn},
	{"sipedge_txn_stored_bytes", Gauge, byShard, "bytes the transaction table keeps to answer retransmissions: inuse plus pooled, bounded by sip.max_txn_memory_mb", secTxn},
	{"sipedge_txn_inuse_bytes", Gauge, byShard, "bytes live transactions hold", secTxn},
	{"sipedge_txn_pooled_bytes", Gauge, byShard, "bytes free transaction slots keep for the next ones (given back after 10 s free), and spare message buffers shed by transactions past sending (given back when none was taken between two trims)", secTxn},
	{"sipedge_txn_budget_shortcuts_total", Counter, byShard, "non-INVITE server transactions on UDP ended at their final response, without Timer J, over sip.max_txn_memory_mb", secTxn},
	{"sipedge_txn_budget_refused_total", Counter, byShard, "requests refused 503 at twice sip.max_txn_memory_mb", secTxn},

	// The call core (dialog/b2bua), per shard.
	{"sipedge_calls_started_total", Counter, byShard, "calls admitted (an INVITE from a trunk, within its limits)", secCalls},
	{"sipedge_calls_answered_total", Counter, byShard, "calls a carrier answered (2xx relayed to the caller)", secCalls},
	{"sipedge_calls_ended_total", Counter, byShard, "calls ended, each with its CDR", secCalls},
	{"sipedge_calls_active", Gauge, byShard, "calls up now", secCalls},
	{"sipedge_calls_rejected_total", Counter, byShard, "INVITEs sipedge refused itself: draining, b2bua.max_concurrent_calls, or a decision that rejects or is missing", secCalls},
	{"sipedge_unknown_source_invites_total", Counter, byShard, "INVITEs from a source that is no trunk (b2bua.unknown_source)", secCalls},
	{"sipedge_trunk_limited_total", Counter, byShard, "INVITEs refused 503 over a trunk's cps or max_concurrent_calls (per trunk: sipedge_trunk_refused_total)", secCalls},
	{"sipedge_lcr_failed_attempts_total", Counter, byShard, "carrier attempts that failed, dialled or skipped (by carrier: sipedge_lcr_attempts_total)", secCalls},
	{"sipedge_cps_limited_total", Counter, byShard, "carriers skipped because no CPS slot came within max_wait_ms (cps_limited)", secCalls},
	{"sipedge_calls_limited_total", Counter, byShard, "carriers skipped at their channel limit, max_concurrent_calls (calls_limited)", secCalls},
	{"sipedge_cps_rejects_total", Counter, byShard, "carrier answers that matched a cps_reject rule, retried after the back-off", secCalls},
	{"sipedge_carrier_auth_challenges_total", Counter, []string{shard, "result"}, "carriers' Digest challenges, by result: answered, no_credentials (the group has no auth), unanswerable (a scheme, algorithm or realm sipedge cannot answer), refused (challenged again: wrong credentials)", secCalls},
	{"sipedge_carrier_redirects_followed_total", Counter, byShard, "carriers' 3xx followed to another member of the group (gateway.groups[].follow_redirects, RFC 3261 8.1.3.4)", secCalls},
	{"sipedge_late_answers_total", Counter, byShard, "2xx from a B-leg the call no longer wanted (late, forked, or crossing the call's end), ACKed and BYEd", secCalls},
	{"sipedge_late_answers_stray_total", Counter, byShard, "such 2xx that came after the INVITE transaction ended, answered from the 2xx alone", secCalls},
	{"sipedge_late_answers_over_cap_total", Counter, byShard, "stray 2xx left for the peer to retransmit: 64 teardowns already running on the shard", secCalls},
	{"sipedge_2xx_retransmissions_total", Counter, byShard, "2xx retransmitted to a caller that had not yet ACKed (RFC 3261 13.3.1.4)", secCalls},
	{"sipedge_policy_panics_total", Counter, []string{shard, "hook"}, "panics of the embedding program's b2bua.Policy hooks (OnInvite, OnAnswer, OnRouteFailure, OnFailure), recovered: the call gets sipedge's own answer (cmd/sipedge/embed/doc.go)", secCalls},
	{"sipedge_requests_to_caller_total", Counter, []string{shard, "next_hop"}, "requests sipedge sent the caller in a dialog, by how their next hop was chosen (RFC 3261 12.2.1.1): route_set (the first Record-Route of the INVITE), contact (the remote target), nat (trunks[].nat: the INVITE's source), fallback (a host name or transport sipedge does not resolve: the INVITE's source)", secCalls},
	{"sipedge_session_refreshes_total", Counter, byShard, "session refreshes sipedge sent as refresher on a leg (b2bua.session_timer.mode uphold; UPDATE or re-INVITE, RFC 4028 10)", secCalls},
	{"sipedge_sessions_expired_total", Counter, byShard, "calls sipedge ended because a leg's session went unrefreshed (RFC 4028 10; CDR end_reason session_expired)", secCalls},
	{"sipedge_orphan_calls_total", Counter, byShard, "calls torn down because a leg stopped answering in-dialog requests or has no such dialog (RFC 3261 12.2.1.2)", secCalls},
	{"sipedge_responses_foreign_via_total", Counter, byShard, "responses whose top Via is not sipedge's, dropped", secCalls},

	// Customer trunks, by name.
	{"sipedge_trunk_calls", Gauge, []string{"trunk"}, "the trunk's calls up now on this node", secTrunks},
	{"sipedge_trunk_calls_total", Counter, []string{"trunk", "result"}, "the trunk's calls as they end, by result: answered (a 2xx reached the caller), cancelled (the caller gave up before an answer), failed (any other final failure)", secTrunks},
	{"sipedge_trunk_refused_total", Counter, []string{"trunk", "reason"}, "the trunk's INVITEs refused 503 with Retry-After over its own limits, by reason: cps (limits.cps), concurrent (limits.max_concurrent_calls)", secTrunks},

	// Carriers (carrier), by carrier_id.
	{"sipedge_lcr_attempts_total", Counter, []string{carrierLabel, "code", "dialed", "reason"}, "attempts at the carrier by final code; dialed=\"false\": never reached the carrier (sipedge's configuration, or a caller who hung up while waiting for a CPS slot); reason: the attempt's in the CDR's lcr_attempts, \"\" for the carrier's own response", secCarriers},
	{"sipedge_lcr_pdd_seconds", VMHistogram, []string{carrierLabel}, "post-dial delay: from each attempt's INVITE to its first 101-199, for the dialled attempts that had one", secCarriers},
	{"sipedge_lcr_setup_seconds", VMHistogram, []string{carrierLabel}, "from each answered attempt's INVITE to its answer", secCarriers},
	{"sipedge_lcr_call_duration_seconds", VMHistogram, []string{carrierLabel}, "from the answer to the end of the carrier's calls", secCarriers},
	{"sipedge_gateway_calls", Gauge, []string{groupLabel}, "calls holding one of the group's channels on this node (max_concurrent_calls)", secCarriers},

	// The routing decision (route/lcr).
	{"sipedge_lcr_api_request_duration_seconds", VMHistogram, nil, "duration of every routing API request sent", secLCR},
	{"sipedge_lcr_api_failures_total", Counter, []string{"kind"}, "routing API failures, one per failed request (lookups sharing it count once), by kind: timeout, transport, 5xx, status, invalid, breaker_open, overloaded", secLCR},
	{"sipedge_lcr_cache_hits_total", Counter, []string{"tier"}, "decisions found in the cache, by tier: local (in process), redis", secLCR},
	{"sipedge_lcr_cache_misses_total", Counter, nil, "lookups that found the decision in no tier", secLCR},
	{"sipedge_lcr_coalesced_lookups_total", Counter, nil, "lookups that joined a lookup of the same key in progress", secLCR},
	{"sipedge_lcr_fallbacks_total", Counter, nil, "decisions answered with lcr.fallback_gateway_group after an API failure", secLCR},
	{"sipedge_lcr_no_decisions_total", Counter, nil, "lookups left without a decision (an API failure and no fallback group): 503 Route Unavailable", secLCR},
	{"sipedge_lcr_breaker_state", Gauge, nil, "the routing API's circuit breaker: 0 closed, 1 open, 2 half-open", secLCR},
	{"sipedge_lcr_in_flight", Gauge, nil, "lookups (a Redis read, then the API request) in progress, at most 256", secLCR},
	{"sipedge_lcr_redis_errors_total", Counter, nil, "failed calls to the decision cache's Redis (deadline, connection, error reply)", secLCR},
	{"sipedge_lcr_redis_up", Gauge, nil, "1 while the decision cache's Redis answers, 0 while lookups use the in-process tier alone (with lcr.cache only)", secLCR},

	// Gateway health (health), per member and per group.
	{"sipedge_gateway_member_up", Gauge, member, "1 when calls may go to the member: not down, resolvable, not cooling", secHealth},
	{"sipedge_gateway_member_cooldown_seconds", Gauge, member, "the cooldown a 503's Retry-After left the member in, 0 if none", secHealth},
	{"sipedge_gateway_member_consecutive_failures", Gauge, append(member[:3:3], "source"), "failures in a row, by source: probe or call", secHealth},
	{"sipedge_gateway_member_address_stale", Gauge, member, "1 while the member's DNS name fails to resolve and its last address is used", secHealth},
	{"sipedge_gateway_member_transitions_total", Counter, append(member[:3:3], "to"), "the member's state changes, by new state: up, down, half_open, cooling (each cooldown that begins)", secHealth},
	{"sipedge_gateway_probe_rtt_seconds", VMHistogram, member, "OPTIONS probe round-trip times", secHealth},
	{"sipedge_gateway_retry_after_capped_total", Counter, member, "503 Retry-Afters cut to passive.max_retry_after_secs", secHealth},
	{"sipedge_gateway_group_panic", Gauge, []string{groupLabel}, "1 while the group is in panic (fewer members up than panic_threshold_percent) and picks among members calls marked down", secHealth},
	{"sipedge_gateway_rescue_picks_total", Counter, []string{groupLabel, "mode"}, "members chosen though calls marked them down, by mode: panic, last_resort", secHealth},

	// CPS limits (ratelimit).
	{"sipedge_ratelimit_effective_rate", Gauge, []string{"key"}, "the CPS account's rate as the limiter sees it across the fleet, calls/s", secCPS},
	{"sipedge_ratelimit_redis_up", Gauge, nil, "1 while the limiter decides in Redis, 0 in the failure mode (with ratelimit.redis only)", secCPS},
	{"sipedge_ratelimit_redis_calls_total", Counter, nil, "decisions sent to Redis (one script call carries several)", secCPS},
	{"sipedge_ratelimit_redis_round_trips_total", Counter, nil, "script calls to Redis", secCPS},
	{"sipedge_ratelimit_redis_group_size", VMHistogram, nil, "decisions per script call", secCPS},
	{"sipedge_ratelimit_redis_errors_total", Counter, nil, "decisions of failed script calls, deadline (ratelimit.deadline_ms) included", secCPS},
	{"sipedge_ratelimit_redis_down_total", Counter, nil, "transitions to the failure mode", secCPS},
	{"sipedge_ratelimit_failure_mode_total", Counter, []string{"mode"}, "decisions made by the failure mode (ratelimit.failure_mode)", secCPS},
	{"sipedge_ratelimit_async_queue_full_total", Counter, nil, "CPS reservations refused because the queue to Redis was full", secCPS},
	{"sipedge_ratelimit_batch_slots_total", Counter, nil, "slots handed out from blocks reserved ahead (ratelimit.batch)", secCPS},
	{"sipedge_ratelimit_batch_wasted_total", Counter, nil, "reserved slots that expired or were dropped unused", secCPS},

	// CDRs (dialog/cdr) and the call journal (dialog/journal).
	{"sipedge_cdr_written_total", Counter, nil, "CDRs flushed to the file", secCDR},
	{"sipedge_cdr_dropped_total", Counter, nil, "CDRs refused: the writer's queue (cdr.queue) full, or after close", secCDR},
	{"sipedge_cdr_write_errors_total", Counter, nil, "CDRs lost to an I/O error", secCDR},
	{"sipedge_cdr_queue_length", Gauge, nil, "CDRs waiting for the writer", secCDR},
	{"sipedge_cdr_rotations_total", Counter, nil, "size-based rotations of the CDR file (cdr.max_size_mb)", secCDR},
	{"sipedge_cdr_fields_shadowed_total", Counter, nil, "cdr_fields keys left out because they name a built-in CDR field", secCDR},
	{"sipedge_call_journal_dropped_total", Counter, nil, "answered calls not journalled: the hand-off queue to the journal was full", secCDR},

	// The fleet (fleet).
	{"sipedge_fleet_redis_up", Gauge, nil, "1 while the fleet's Redis answers (with fleet.redis only)", secFleet},
	{"sipedge_fleet_redis_down_total", Counter, nil, "transitions to the fleet's Redis down", secFleet},
	{"sipedge_fleet_redis_errors_total", Counter, []string{"op"}, "failed calls to the fleet's Redis, by op: heartbeat, grants, journal, claim, state, poll", secFleet},
	{"sipedge_fleet_nodes", Gauge, nil, "live nodes, as the last heartbeat saw them", secFleet},
	{"sipedge_fleet_node_calls", Gauge, []string{"node"}, "calls each live node holds (this node's live)", secFleet},
	{"sipedge_fleet_fenced_total", Counter, nil, "times this node was declared dead while it ran (its lease ran out)", secFleet},
	{"sipedge_fleet_node_id_conflicts_total", Counter, nil, "heartbeats refused because a live node holds this node's id", secFleet},
	{"sipedge_fleet_channel_grant", Gauge, []string{"key"}, "the channels this node holds of a fleet-wide limit (key group:NAME or trunk:NAME; -1: no limit)", secFleet},
	{"sipedge_fleet_channel_refused_total", Counter, []string{"key"}, "channel takes refused at the node's grant", secFleet},
	{"sipedge_fleet_channels_local_share", Gauge, nil, "limits kept at the local share, ceil(limit / live nodes), while Redis does not answer", secFleet},
	{"sipedge_fleet_state_applied_total", Counter, nil, "shared runtime documents applied (groups, trunks, static table added, replaced, removed)", secFleet},
	{"sipedge_fleet_state_apply_errors_total", Counter, nil, "shared runtime documents this node refused (e.g. a table naming a group it lacks)", secFleet},
	{"sipedge_fleet_state_lost_total", Counter, nil, "times Redis was found to have lost the shared state (the nodes write back what they applied)", secFleet},
	{"sipedge_fleet_decision_drops_total", Counter, nil, "fleet-wide drops of cached routing decisions applied", secFleet},
	{"sipedge_fleet_journal_pending", Gauge, nil, "call journal operations waiting to be written (with fleet.call_journal)", secFleet},
	{"sipedge_fleet_journal_dropped_total", Counter, nil, "answered calls the journal refused: its queue was full", secFleet},
	{"sipedge_fleet_journal_bad_records_total", Counter, nil, "journalled calls that could not be encoded or decoded", secFleet},
	{"sipedge_fleet_journals_claimed_total", Counter, nil, "dead nodes' journals this node claimed and wrote CDRs for", secFleet},
	{"sipedge_fleet_lost_calls_total", Counter, nil, "calls of dead nodes this node wrote node_lost CDRs for", secFleet},

	// Quality routing (quality), per prefix and carrier, and per prefix and gateway.
	{"sipedge_quality_score", Gauge, qCarrier, "the pair's score: 0 is perfect; each statistic past a threshold adds its penalty times its weight", secQuality},
	{"sipedge_quality_asr", Gauge, qCarrier, "answer-seizure ratio over the window, a fraction (NaN without samples)", secQuality},
	{"sipedge_quality_asr_bound", Gauge, qCarrier, "the ASR's confidence bound, the figure the thresholds judge", secQuality},
	{"sipedge_quality_ccr", Gauge, qCarrier, "call-completion ratio over the window, a fraction", secQuality},
	{"sipedge_quality_ccr_bound", Gauge, qCarrier, "the CCR's confidence bound", secQuality},
	{"sipedge_quality_pdd_seconds", Gauge, qCarrier, "mean post-dial delay over the window", secQuality},
	{"sipedge_quality_pdd_bound_seconds", Gauge, qCarrier, "the PDD's confidence bound", secQuality},
	{"sipedge_quality_ast_seconds", Gauge, qCarrier, "mean answer-setup time (INVITE to answer) over the window", secQuality},
	{"sipedge_quality_ast_bound_seconds", Gauge, qCarrier, "the AST's confidence bound", secQuality},
	{"sipedge_quality_acd_seconds", Gauge, qCarrier, "average call duration over the window", secQuality},
	{"sipedge_quality_acd_bound_seconds", Gauge, qCarrier, "the ACD's confidence bound", secQuality},
	{"sipedge_quality_samples", Gauge, append(qCarrier[:2:2], "statistic"), "samples in the window, by statistic: attempts, pdd, ast, acd", secQuality},
	{"sipedge_quality_bad_destination_events_total", Counter, qCarrier, "bad-destination events raised for the pair (score at quality.bad_dst_threshold)", secQuality},
	{"sipedge_quality_gateway_score", Gauge, qGateway, "a gateway member's score under the prefix, as sipedge_quality_score", secQuality},
	{"sipedge_quality_gateway_asr", Gauge, qGateway, "a gateway member's ASR", secQuality},
	{"sipedge_quality_gateway_asr_bound", Gauge, qGateway, "a gateway member's ASR bound", secQuality},
	{"sipedge_quality_gateway_ccr", Gauge, qGateway, "a gateway member's CCR", secQuality},
	{"sipedge_quality_gateway_ccr_bound", Gauge, qGateway, "a gateway member's CCR bound", secQuality},
	{"sipedge_quality_gateway_pdd_seconds", Gauge, qGateway, "a gateway member's mean PDD", secQuality},
	{"sipedge_quality_gateway_pdd_bound_seconds", Gauge, qGateway, "a gateway member's PDD bound", secQuality},
	{"sipedge_quality_gateway_ast_seconds", Gauge, qGateway, "a gateway member's mean AST", secQuality},
	{"sipedge_quality_gateway_ast_bound_seconds", Gauge, qGateway, "a gateway member's AST bound", secQuality},
	{"sipedge_quality_gateway_acd_seconds", Gauge, qGateway, "a gateway member's ACD", secQuality},
	{"sipedge_quality_gateway_acd_bound_seconds", Gauge, qGateway, "a gateway member's ACD bound", secQuality},
	{"sipedge_quality_gateway_samples", Gauge, append(qGateway[:2:2], "statistic"), "a gateway member's samples in the window, by statistic", secQuality},
	{"sipedge_quality_gateway_bad_destination_events_total", Counter, qGateway, "bad-destination events raised for a gateway member", secQuality},
	{"sipedge_quality_disables", Gauge, nil, "carrier disables in force (POST /v1/quality/disable, auto_disable)", secQuality},
	{"sipedge_quality_late_buckets_total", Counter, nil, "shard statistics that reached the reader after their interval left the window", secQuality},
	{"sipedge_quality_webhook_posts_total", Counter, []string{"result"}, "events POSTed to quality.webhook_url, by result: ok, failed, dropped (queue of 64 full)", secQuality},
	{"sipedge_quality_store_errors_total", Counter, []string{"op"}, "failed reads (load) and writes (write) of the disables in Redis", secQuality},

	// The node (cmd/sipedge).
	{"sipedge_config_reloads_total", Counter, []string{"result"}, "POST /v1/reload, by result: ok, refused", secNode},
	{"sipedge_memory_releases_total", Counter, nil, "times freed memory was returned to the operating system after a peak", secNode},

	// VictoriaMetrics/metrics' WriteProcessMetrics: the Go runtime and the process.
	{"go_sched_latencies_seconds", Histogram, nil, "time goroutines waited to run", secRuntime},
	{"go_mutex_wait_seconds_total", Counter, nil, "time goroutines spent blocked on mutexes", secRuntime},
	{"go_gc_mark_assist_cpu_seconds_total", Counter, nil, "CPU time goroutines spent assisting the garbage collector", secRuntime},
	{"go_gc_cpu_seconds_total", Counter, nil, "CPU time spent in the garbage collector", secRuntime},
	{"go_gc_pauses_seconds", Histogram, nil, "stop-the-world pauses of the garbage collector", secRuntime},
	{"go_scavenge_cpu_seconds_total", Counter, nil, "CPU time spent returning memory to the operating system", secRuntime},
	{"go_memlimit_bytes", Gauge, nil, "the Go memory limit (GOMEMLIMIT)", secRuntime},
	{"go_memstats_alloc_bytes", Gauge, nil, "bytes of allocated heap objects", secRuntime},
	{"go_memstats_alloc_bytes_total", Counter, nil, "bytes allocated for heap objects since start", secRuntime},
	{"go_memstats_buck_hash_sys_bytes", Gauge, nil, "bytes in profiling bucket hash tables", secRuntime},
	{"go_memstats_frees_total", Counter, nil, "heap objects freed", secRuntime},
	{"go_memstats_gc_cpu_fraction", Gauge, nil, "fraction of CPU time used by the garbage collector since start", secRuntime},
	{"go_memstats_gc_sys_bytes", Gauge, nil, "bytes of garbage collection metadata", secRuntime},
	{"go_memstats_heap_alloc_bytes", Gauge, nil, "bytes of allocated heap objects", secRuntime},
	{"go_memstats_heap_idle_bytes", Gauge, nil, "bytes in idle heap spans", secRuntime},
	{"go_memstats_heap_inuse_bytes", Gauge, nil, "bytes in in-use heap spans", secRuntime},
	{"go_memstats_heap_objects", Gauge, nil, "allocated heap objects", secRuntime},
	{"go_memstats_heap_released_bytes", Gauge, nil, "bytes of heap returned to the operating system", secRuntime},
	{"go_memstats_heap_sys_bytes", Gauge, nil, "bytes of heap obtained from the operating system", secRuntime},
	{"go_memstats_last_gc_time_seconds", Gauge, nil, "when the last garbage collection finished, Unix seconds", secRuntime},
	{"go_memstats_lookups_total", Counter, nil, "pointer lookups by the runtime", secRuntime},
	{"go_memstats_mallocs_total", Counter, nil, "heap objects allocated", secRuntime},
	{"go_memstats_mcache_inuse_bytes", Gauge, nil, "bytes of allocated mcache structures", secRuntime},
	{"go_memstats_mcache_sys_bytes", Gauge, nil, "bytes obtained for mcache structures", secRuntime},
	{"go_memstats_mspan_inuse_bytes", Gauge, nil, "bytes of allocated mspan structures", secRuntime},
	{"go_memstats_mspan_sys_bytes", Gauge, nil, "bytes obtained for mspan structures", secRuntime},
	{"go_memstats_next_gc_bytes", Gauge, nil, "heap size the next garbage collection aims at", secRuntime},
	{"go_memstats_other_sys_bytes", Gauge, nil, "bytes of other runtime allocations", secRuntime},
	{"go_memstats_stack_inuse_bytes", Gauge, nil, "bytes in stack spans", secRuntime},
	{"go_memstats_stack_sys_bytes", Gauge, nil, "bytes of stack obtained from the operating system", secRuntime},
	{"go_memstats_sys_bytes", Gauge, nil, "bytes obtained from the operating system in all", secRuntime},
	{"go_cgo_calls_count", Counter, nil, "calls to C code", secRuntime},
	{"go_cpu_count", Gauge, nil, "CPUs the process may use", secRuntime},
	{"go_gc_duration_seconds", Summary, nil, "garbage collection pause durations", secRuntime},
	{"go_gc_forced_count", Counter, nil, "garbage collections forced by the application (sipedge's memory release)", secRuntime},
	{"go_gomaxprocs", Gauge, nil, "GOMAXPROCS", secRuntime},
	{"go_goroutines", Gauge, nil, "goroutines", secRuntime},
	{"go_threads", Gauge, nil, "operating system threads the runtime created", secRuntime},
	{"go_info", Gauge, []string{"version"}, "the Go version sipedge was built with", secRuntime},
	{"go_info_ext", Gauge, []string{"compiler", "GOARCH", "GOOS", "GOROOT"}, "the build's compiler, architecture, operating system and GOROOT", secRuntime},
	{"process_cpu_seconds_system_total", Counter, nil, "CPU time in the kernel", secRuntime},
	{"process_cpu_seconds_total", Counter, nil, "CPU time, user and kernel", secRuntime},
	{"process_cpu_seconds_user_total", Counter, nil, "CPU time in user space", secRuntime},
	{"process_major_pagefaults_total", Counter, nil, "page faults that read from disk", secRuntime},
	{"process_minor_pagefaults_total", Counter, nil, "page faults served from memory", secRuntime},
	{"process_num_threads", Gauge, nil, "operating system threads", secRuntime},
	{"process_resident_memory_bytes", Gauge, nil, "resident memory (RSS)", secRuntime},
	{"process_start_time_seconds", Gauge, nil, "when the process started, Unix seconds", secRuntime},
	{"process_virtual_memory_bytes", Gauge, nil, "virtual memory size", secRuntime},
	{"process_virtual_memory_peak_bytes", Gauge, nil, "peak virtual memory size", secRuntime},
	{"process_resident_memory_peak_bytes", Gauge, nil, "peak resident memory", secRuntime},
	{"process_resident_memory_anon_bytes", Gauge, nil, "resident anonymous memory", secRuntime},
	{"process_resident_memory_file_bytes", Gauge, nil, "resident file-backed memory", secRuntime},
	{"process_resident_memory_shared_bytes", Gauge, nil, "resident shared memory", secRuntime},
	{"process_io_read_bytes_total", Gauge, nil, "bytes read, storage or not", secRuntime},
	{"process_io_written_bytes_total", Gauge, nil, "bytes written, storage or not", secRuntime},
	{"process_io_read_syscalls_total", Gauge, nil, "read system calls", secRuntime},
	{"process_io_write_syscalls_total", Gauge, nil, "write system calls", secRuntime},
	{"process_io_storage_read_bytes_total", Gauge, nil, "bytes read from storage", secRuntime},
	{"process_io_storage_written_bytes_total", Gauge, nil, "bytes written to storage", secRuntime},
	{"process_pressure_cpu_waiting_seconds_total", Counter, nil, "time some of the cgroup's tasks waited for CPU (PSI)", secRuntime},
	{"process_pressure_cpu_stalled_seconds_total", Counter, nil, "time all of the cgroup's tasks waited for CPU (PSI)", secRuntime},
	{"process_pressure_io_waiting_seconds_total", Counter, nil, "time some tasks waited for I/O (PSI)", secRuntime},
	{"process_pressure_io_stalled_seconds_total", Counter, nil, "time all tasks waited for I/O (PSI)", secRuntime},
	{"process_pressure_memory_waiting_seconds_total", Counter, nil, "time some tasks waited for memory (PSI)", secRuntime},
	{"process_pressure_memory_stalled_seconds_total", Counter, nil, "time all tasks waited for memory (PSI)", secRuntime},
	{"process_cgroup_cpu_throttled_seconds_total", Counter, nil, "time the cgroup's CPU quota throttled the process", secRuntime},
}
