package server

import (
	"fmt"
	"strconv"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/route"
)

// carrierPolicy is the default routing policy's bookkeeping: attempts per
// carrier and outcome, the figures an operator trends carrier quality by.
// One per shard: its cache of counters is the shard's alone, so counting
// takes no lock and, once a counter exists, allocates nothing (carrier ids
// come from the API, so counters are created as they are first seen).
type carrierPolicy struct {
	set      *metrics.Set
	counters map[attemptKey]*metrics.Counter
}

type attemptKey struct {
	carrier string
	code    int
	dialed  bool
}

func newCarrierPolicy(set *metrics.Set) *carrierPolicy {
	return &carrierPolicy{set: set, counters: make(map[attemptKey]*metrics.Counter)}
}

func (p *carrierPolicy) hooks() b2bua.Policy {
	return b2bua.Policy{OnAnswer: p.answered, OnRouteFailure: p.failed}
}

func (p *carrierPolicy) answered(_ *b2bua.Call, r *route.Route) { p.count(r.CarrierID, 200, true) }

// failed counts a failed attempt. dialed="false" marks carriers burned
// without an INVITE (the seed: not the carrier's fault; alert your own
// config, not them).
func (p *carrierPolicy) failed(_ *b2bua.Call, r *route.Route, a route.Attempt) {
	p.count(r.CarrierID, a.Status, a.Dialed)
}

func (p *carrierPolicy) count(carrier string, code int, dialed bool) {
	k := attemptKey{carrier, code, dialed}
	c := p.counters[k]
	if c == nil {
		c = p.set.GetOrCreateCounter(fmt.Sprintf(`sipedge_lcr_attempts_total{carrier=%q,code="%d",dialed="%s"}`,
			carrier, code, strconv.FormatBool(dialed)))
		p.counters[k] = c
	}
	c.Inc()
}
