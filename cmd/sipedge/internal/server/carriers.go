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
// It runs on the shards, once per attempt: the counters are looked up by
// name (carrier ids come from the API), off the per-message path.
type carrierPolicy struct{ set *metrics.Set }

func (p carrierPolicy) hooks() b2bua.Policy {
	return b2bua.Policy{OnAnswer: p.answered, OnRouteFailure: p.failed}
}

func (p carrierPolicy) answered(_ *b2bua.Call, r *route.Route) {
	p.set.GetOrCreateCounter(fmt.Sprintf(`sipedge_lcr_attempts_total{carrier=%q,code="200",dialed="true"}`, r.CarrierID)).Inc()
}

// failed counts a failed attempt. dialed="false" marks carriers burned
// without an INVITE (the seed: not the carrier's fault; alert your own
// config, not them).
func (p carrierPolicy) failed(_ *b2bua.Call, r *route.Route, a route.Attempt) {
	p.set.GetOrCreateCounter(fmt.Sprintf(`sipedge_lcr_attempts_total{carrier=%q,code="%d",dialed="%s"}`,
		r.CarrierID, a.Status, strconv.FormatBool(a.Dialed))).Inc()
}
