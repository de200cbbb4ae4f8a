package b2bua

import (
	"fmt"

	vm "github.com/VictoriaMetrics/metrics"
)

// engineMetrics are one engine's counters, created once with the shard label
// baked in.
type engineMetrics struct {
	started          *vm.Counter
	answered         *vm.Counter
	ended            *vm.Counter
	rejected         *vm.Counter
	unknownSource    *vm.Counter
	lateAnswers      *vm.Counter
	strayAnswers     *vm.Counter
	teardownsOverCap *vm.Counter
	retransmitted2xx *vm.Counter
	orphans          *vm.Counter
	attempts         *vm.Counter
	cpsLimited       *vm.Counter
	callsLimited     *vm.Counter
	cpsRejects       *vm.Counter
	trunkLimited     *vm.Counter
	foreignVia       *vm.Counter
	// 3xx from carriers sent on to another member of the group.
	redirectsFollowed *vm.Counter
	// Session timers in uphold: sipedge's refreshes sent, and calls ended
	// for a session that went unrefreshed (RFC 4028 10).
	sessionRefreshes, sessionsExpired *vm.Counter
	// Requests sipedge sent the caller, by how their next hop was chosen.
	callerHops [numHopKinds]*vm.Counter
	// Carriers' challenges to B-leg INVITEs, by what became of them.
	authAnswered, authNoCredentials, authUnanswerable, authRefused *vm.Counter
	active                                                         *vm.Gauge
	hookPanics                                                     [numHooks]*vm.Counter // by hook (hooks.go)
}

// txnMetrics export the transaction table's state, read when scraped.
func registerTxnMetrics(set *vm.Set, shard int, e *Engine) {
	if set == nil {
		return
	}
	name := func(n string) string { return fmt.Sprintf(`%s{shard="%d"}`, n, shard) }
	// The gauges read the engine's atomics: scrapes run off the shard.
	set.NewGauge(name("sipedge_transactions_active"), func() float64 { return float64(e.published.txns.Load()) })
	set.NewGauge(name("sipedge_sip_retransmissions_total"), func() float64 { return float64(e.published.rtx.Load()) })
	set.NewGauge(name("sipedge_sip_retransmissions_absorbed_total"), func() float64 { return float64(e.published.absorbed.Load()) })
	// The memory budget of the table (txn.Config.MaxStoredBytes): what
	// live transactions hold and what free slots keep for reuse, which
	// they give back after txn.Config.IdleRelease; stored is their sum.
	set.NewGauge(name("sipedge_txn_stored_bytes"), func() float64 { return float64(e.published.stored.Load()) })
	set.NewGauge(name("sipedge_txn_inuse_bytes"), func() float64 { return float64(e.published.stored.Load() - e.published.pooled.Load()) })
	set.NewGauge(name("sipedge_txn_pooled_bytes"), func() float64 { return float64(e.published.pooled.Load()) })
	set.NewGauge(name("sipedge_txn_budget_shortcuts_total"), func() float64 { return float64(e.published.shortcuts.Load()) })
	set.NewGauge(name("sipedge_txn_budget_refused_total"), func() float64 { return float64(e.published.refused.Load()) })
}

func newMetrics(set *vm.Set, shard int) engineMetrics {
	if set == nil {
		set = vm.NewSet()
	}
	name := func(n string) string { return fmt.Sprintf(`%s{shard="%d"}`, n, shard) }
	m := engineMetrics{
		started:           set.NewCounter(name("sipedge_calls_started_total")),
		answered:          set.NewCounter(name("sipedge_calls_answered_total")),
		ended:             set.NewCounter(name("sipedge_calls_ended_total")),
		rejected:          set.NewCounter(name("sipedge_calls_rejected_total")),
		unknownSource:     set.NewCounter(name("sipedge_unknown_source_invites_total")),
		lateAnswers:       set.NewCounter(name("sipedge_late_answers_total")),
		strayAnswers:      set.NewCounter(name("sipedge_late_answers_stray_total")),
		teardownsOverCap:  set.NewCounter(name("sipedge_late_answers_over_cap_total")),
		retransmitted2xx:  set.NewCounter(name("sipedge_2xx_retransmissions_total")),
		orphans:           set.NewCounter(name("sipedge_orphan_calls_total")),
		attempts:          set.NewCounter(name("sipedge_lcr_failed_attempts_total")),
		cpsLimited:        set.NewCounter(name("sipedge_cps_limited_total")),
		callsLimited:      set.NewCounter(name("sipedge_calls_limited_total")),
		cpsRejects:        set.NewCounter(name("sipedge_cps_rejects_total")),
		trunkLimited:      set.NewCounter(name("sipedge_trunk_limited_total")),
		foreignVia:        set.NewCounter(name("sipedge_responses_foreign_via_total")),
		redirectsFollowed: set.NewCounter(name("sipedge_carrier_redirects_followed_total")),
		sessionRefreshes:  set.NewCounter(name("sipedge_session_refreshes_total")),
		sessionsExpired:   set.NewCounter(name("sipedge_sessions_expired_total")),
		active:            set.NewGauge(name("sipedge_calls_active"), nil),
		authAnswered:      set.NewCounter(authName(shard, "answered")),
		authNoCredentials: set.NewCounter(authName(shard, "no_credentials")),
		authUnanswerable:  set.NewCounter(authName(shard, "unanswerable")),
		authRefused:       set.NewCounter(authName(shard, "refused")),
	}
	for h := range m.hookPanics {
		m.hookPanics[h] = set.NewCounter(fmt.Sprintf(`sipedge_policy_panics_total{shard="%d",hook=%q}`, shard, hookNames[h]))
	}
	for k, n := range hopKindNames {
		m.callerHops[k] = set.NewCounter(fmt.Sprintf(`sipedge_requests_to_caller_total{shard="%d",next_hop="%s"}`, shard, n))
	}
	return m
}

// authName names the counter of carriers' challenges with result: answered;
// no_credentials (the group holds none); unanswerable (no Digest challenge
// sipedge can answer: another scheme, algorithm or realm, or malformed);
// refused (challenged again after answering, the nonce not stale: the
// credentials are wrong).
func authName(shard int, result string) string {
	return fmt.Sprintf(`sipedge_carrier_auth_challenges_total{shard="%d",result="%s"}`, shard, result)
}
