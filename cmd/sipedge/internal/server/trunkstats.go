package server

import (
	"strings"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/b2bua"
)

// trunkStats are a trunk name's metrics: what a customer sends and what
// sipedge refuses it. One per name, made when the name is first seen (the
// YAML, the admin API) and kept for the node's life, so that every version
// of a trunk, and a name removed and added again, counts in the same
// series. Calls reach them through their trunk's trunkData (by Index): no
// lookup by name, no lock and no allocation per call.
type trunkStats struct {
	calls   atomic.Int64  // live calls: the engines' b2bua.Trunk.Calls
	refused atomic.Uint64 // INVITEs over max_concurrent_calls: b2bua.Trunk.Refused

	answered, cancelled, failed *metrics.Counter // calls ended, by result
	cps                         *metrics.Counter // INVITEs over the trunk's ingress CPS (admit)
}

// newTrunkStats registers name's metrics in set.
func newTrunkStats(set *metrics.Set, name string) *trunkStats {
	st := new(trunkStats)
	l := `{trunk="` + escapeLabel(name) + `"`
	set.GetOrCreateGauge("sipedge_trunk_calls"+l+"}", func() float64 { return float64(st.calls.Load()) })
	st.answered = set.GetOrCreateCounter("sipedge_trunk_calls_total" + l + `,result="answered"}`)
	st.cancelled = set.GetOrCreateCounter("sipedge_trunk_calls_total" + l + `,result="cancelled"}`)
	st.failed = set.GetOrCreateCounter("sipedge_trunk_calls_total" + l + `,result="failed"}`)
	st.cps = set.GetOrCreateCounter("sipedge_trunk_refused_total" + l + `,reason="cps"}`)
	// The engines count in refused; a gauge's callback is how the metrics
	// package reads a counter it does not hold.
	set.GetOrCreateGauge("sipedge_trunk_refused_total"+l+`,reason="concurrent"}`,
		func() float64 { return float64(st.refused.Load()) })
	return st
}

// ended counts a finished call by its result: answered when a 2xx reached
// the caller, cancelled when the caller gave up before one, else failed
// (sipedge's refusal after admission, a carrier's, a drain).
func (st *trunkStats) ended(s *b2bua.Summary) {
	switch {
	case s.Answer != 0:
		st.answered.Inc()
	case s.HangupSide == "caller":
		st.cancelled.Inc()
	default:
		st.failed.Inc()
	}
}

// trunkStats returns name's metrics, making them on first use. The live
// calls counter is shared by every shard's engine, so that
// max_concurrent_calls holds for the node (a per-shard share refused calls
// early on one shard, and rounded up past the limit across them), and by
// every version of the trunk: its calls in progress still count against a
// replacement's limit.
func (s *Server) trunkStats(name string) *trunkStats {
	s.trunkMu.Lock()
	defer s.trunkMu.Unlock()
	if s.trunkStat == nil {
		s.trunkStat = make(map[string]*trunkStats)
	}
	st := s.trunkStat[name]
	if st == nil {
		st = newTrunkStats(s.engineSet, name)
		s.trunkStat[name] = st
	}
	return st
}

// escapeLabel escapes a Prometheus label value.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
