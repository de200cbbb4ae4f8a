package quality

import (
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// Metric names. A pair's are created when a shard first reports it, with
// its labels baked in: prefix and carrier for a carrier, prefix and
// gateway (the names below with "gateway_" after "sipedge_quality_") for a
// gateway. Values are fractions (asr, ccr) or seconds, NaN without
// samples; bounds are the confidence bounds the statistics are judged by.
const (
	metricPrefix       = "sipedge_quality_"
	metricScore        = "score"                               // the pair's score
	metricSamples      = "samples"                             // {statistic="attempts"|"pdd"|"ast"|"acd"} over the window
	metricEvents       = "bad_destination_events_total"        // bad-destination events raised for the pair
	metricLateBuckets  = "sipedge_quality_late_buckets_total"  // shard buckets that reached the reader after their interval left the window
	metricDisables     = "sipedge_quality_disables"            // disables in force
	metricWebhookPosts = "sipedge_quality_webhook_posts_total" // {result="ok"|"failed"|"dropped"}
	metricStoreErrors  = "sipedge_quality_store_errors_total"  // {op="load"|"write"}: failed calls to Options.Store
)

// entryMetrics are a pair's gauges.
type entryMetrics struct {
	score                   *metrics.Gauge
	value, bound            [numStats]*metrics.Gauge
	attempts, pdd, ast, acd *metrics.Gauge
	events                  *metrics.Counter
}

func newEntryMetrics(set *metrics.Set, prefix string, k slotKey) entryMetrics {
	name, labels := metricPrefix, `{prefix="`+escapeLabel(prefix)+`",carrier="`+escapeLabel(k.name)+`"`
	if k.gateway {
		name, labels = metricPrefix+"gateway_", `{prefix="`+escapeLabel(prefix)+`",gateway="`+escapeLabel(k.name)+`"`
	}
	gauge := func(n, extra string) *metrics.Gauge { return set.NewGauge(name+n+labels+extra+"}", nil) }
	em := entryMetrics{
		score:    gauge(metricScore, ""),
		attempts: gauge(metricSamples, `,statistic="attempts"`),
		pdd:      gauge(metricSamples, `,statistic="pdd"`),
		ast:      gauge(metricSamples, `,statistic="ast"`),
		acd:      gauge(metricSamples, `,statistic="acd"`),
		events:   set.NewCounter(name + metricEvents + labels + "}"),
	}
	for s := range numStats {
		em.value[s] = gauge(stats[s].metric, "")
		em.bound[s] = gauge(stats[s].bound, "")
	}
	return em
}

// set puts f into the gauges.
func (em *entryMetrics) set(f *figures) {
	em.score.Set(f.score)
	em.attempts.Set(float64(f.attempts))
	em.pdd.Set(float64(f.stat[statPDD].samples))
	em.ast.Set(float64(f.stat[statAST].samples))
	em.acd.Set(float64(f.stat[statACD].samples))
	for s := range numStats {
		em.value[s].Set(f.stat[s].value)
		em.bound[s].Set(f.stat[s].bound)
	}
}

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
