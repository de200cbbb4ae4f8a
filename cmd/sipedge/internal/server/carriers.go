package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/route"
)

// carrierPolicy is the default routing policy's bookkeeping: the figures an
// operator trends carrier quality by, those of OpenSIPS' qrouting (seed
// 001). Attempts per carrier and outcome give the answer-seizure ratio
// (200s over dialled attempts) and what the carriers signalled; three
// histograms per carrier give the times:
//   - sipedge_lcr_pdd_seconds: post-dial delay, from the INVITE to the
//     carrier's first 101-199, for every dialled attempt that had one;
//   - sipedge_lcr_setup_seconds: from the INVITE to the answer;
//   - sipedge_lcr_call_duration_seconds: from the answer to the end.
//
// One per shard: its caches of metrics are the shard's alone, so counting
// takes no lock of its own and, once a metric exists, allocates nothing
// (carrier ids come from the API, so metrics are created as they are first
// seen).
type carrierPolicy struct {
	set      *metrics.Set
	counters map[attemptKey]*metrics.Counter
	times    map[timeKey]*metrics.Histogram
}

type timeKey struct {
	carrier string
	name    string // the histogram's metric name
}

type attemptKey struct {
	carrier string
	code    int
	dialed  bool
}

func newCarrierPolicy(set *metrics.Set) *carrierPolicy {
	return &carrierPolicy{set: set, counters: make(map[attemptKey]*metrics.Counter),
		times: make(map[timeKey]*metrics.Histogram)}
}

func (p *carrierPolicy) hooks() b2bua.Policy {
	return b2bua.Policy{OnAnswer: p.answered, OnRouteFailure: p.failed}
}

// chainPolicy runs the server's own hooks, then the embedder's: a policy
// given to NewWithPolicy adds to the per-carrier metrics, never replaces
// them. own sets only the notifications (OnAnswer, OnRouteFailure); the
// decisions (OnInvite, OnFailure) are user's alone.
func chainPolicy(own, user b2bua.Policy) b2bua.Policy {
	p := user
	switch {
	case user.OnAnswer == nil:
		p.OnAnswer = own.OnAnswer
	case own.OnAnswer != nil:
		p.OnAnswer = func(c *b2bua.Call, r *route.Route) {
			own.OnAnswer(c, r)
			user.OnAnswer(c, r)
		}
	}
	switch {
	case user.OnRouteFailure == nil:
		p.OnRouteFailure = own.OnRouteFailure
	case own.OnRouteFailure != nil:
		p.OnRouteFailure = func(c *b2bua.Call, r *route.Route, a route.Attempt) {
			own.OnRouteFailure(c, r, a)
			user.OnRouteFailure(c, r, a)
		}
	}
	return p
}

func (p *carrierPolicy) answered(c *b2bua.Call, r *route.Route) {
	p.count(r.CarrierID, 200, true)
	s := c.Summary()
	if s.Progress != 0 {
		p.observe(r.CarrierID, "sipedge_lcr_pdd_seconds", s.Progress-s.Dialed)
	}
	p.observe(r.CarrierID, "sipedge_lcr_setup_seconds", s.Answer-s.Dialed)
}

// failed counts a failed attempt. dialed="false" marks carriers burned
// without an INVITE (the seed: not the carrier's fault; alert your own
// config, not them).
func (p *carrierPolicy) failed(_ *b2bua.Call, r *route.Route, a route.Attempt) {
	p.count(r.CarrierID, a.Status, a.Dialed)
	if a.PDD != 0 {
		p.observe(r.CarrierID, "sipedge_lcr_pdd_seconds", a.PDD)
	}
}

// ended records how long an answered call lasted on its carrier.
func (p *carrierPolicy) ended(s *b2bua.Summary) {
	if s.Answer != 0 && s.End != 0 && s.Route != nil {
		p.observe(s.Route.CarrierID, "sipedge_lcr_call_duration_seconds", s.End-s.Answer)
	}
}

func (p *carrierPolicy) observe(carrier, name string, d time.Duration) {
	k := timeKey{carrier, name}
	h := p.times[k]
	if h == nil {
		h = p.set.GetOrCreateHistogram(fmt.Sprintf(`%s{carrier=%q}`, name, carrier))
		p.times[k] = h
	}
	h.Update(d.Seconds())
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
