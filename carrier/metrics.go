package carrier

import (
	"fmt"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// carrierMetrics are the figures an operator trends carrier quality by,
// those of OpenSIPS' qrouting. Attempts per carrier and outcome give the
// answer-seizure ratio (200s over dialled attempts) and what the carriers
// signalled; three histograms per carrier give the times:
//   - sipedge_lcr_pdd_seconds: post-dial delay, from the INVITE to the
//     carrier's first 101-199, for every dialled attempt that had one;
//   - sipedge_lcr_setup_seconds: from the INVITE to the answer;
//   - sipedge_lcr_call_duration_seconds: from the answer to the end.
//
// One per shard: its caches of metrics are the shard's alone, so counting
// takes no lock of its own and, once a metric exists, allocates nothing
// (carrier ids come from the API, so metrics are created as they are first
// seen).
type carrierMetrics struct {
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
	reason  string
}

func newCarrierMetrics(set *metrics.Set) carrierMetrics {
	return carrierMetrics{set: set, counters: make(map[attemptKey]*metrics.Counter),
		times: make(map[timeKey]*metrics.Histogram)}
}

// record counts what r reports. dialed="false" marks carriers burned
// without an INVITE: not the carrier's fault (an operator alerts on their
// own configuration, not the carrier). reason is the attempt's in
// lcr_attempts, "" for the carrier's own response: it tells sipedge's
// ring-out 408 (ring_timeout) from the carrier's own 408.
func (p *carrierMetrics) record(r *Report) {
	switch r.Event {
	case AttemptFailed:
		p.count(r.CarrierID, r.Code, r.Dialed, r.Reason)
		if r.Progress != 0 {
			p.observe(r.CarrierID, "sipedge_lcr_pdd_seconds", r.Progress-r.Invite)
		}
	case Answered:
		p.count(r.CarrierID, 200, true, "")
		if r.Progress != 0 {
			p.observe(r.CarrierID, "sipedge_lcr_pdd_seconds", r.Progress-r.Invite)
		}
		p.observe(r.CarrierID, "sipedge_lcr_setup_seconds", r.Answer-r.Invite)
	case CallEnded:
		p.observe(r.CarrierID, "sipedge_lcr_call_duration_seconds", r.Duration)
	}
}

func (p *carrierMetrics) observe(carrier, name string, d time.Duration) {
	k := timeKey{carrier, name}
	h := p.times[k]
	if h == nil {
		h = p.set.GetOrCreateHistogram(fmt.Sprintf(`%s{carrier=%q}`, name, carrier))
		p.times[k] = h
	}
	h.Update(d.Seconds())
}

func (p *carrierMetrics) count(carrier string, code int, dialed bool, reason string) {
	k := attemptKey{carrier, code, dialed, reason}
	c := p.counters[k]
	if c == nil {
		c = p.set.GetOrCreateCounter(fmt.Sprintf(`sipedge_lcr_attempts_total{carrier=%q,code="%d",dialed="%s",reason=%q}`,
			carrier, code, strconv.FormatBool(dialed), reason))
		p.counters[k] = c
	}
	c.Inc()
}
