package lcr

import (
	"github.com/VictoriaMetrics/metrics"
)

// Metric names. Labels are baked in at New; lookups only increment.
const (
	metricAPIDuration  = "sipedge_lcr_api_request_duration_seconds" // histogram of every API request that was sent
	metricAPIFailures  = "sipedge_lcr_api_failures_total"           // {kind=...}, one per failed flight (coalesced lookups share it)
	metricCacheHits    = "sipedge_lcr_cache_hits_total"             // {tier="local"|"redis"}
	metricCacheMisses  = "sipedge_lcr_cache_misses_total"           // flights that found the decision in no tier
	metricCoalesced    = "sipedge_lcr_coalesced_lookups_total"      // lookups that joined a flight in progress
	metricFallbacks    = "sipedge_lcr_fallbacks_total"              // decisions answered with fallback_gateway_group
	metricNoDecisions  = "sipedge_lcr_no_decisions_total"           // decisions answered with NoDecision
	metricBreakerState = "sipedge_lcr_breaker_state"                // 0 closed, 1 open, 2 half-open
	metricInFlight     = "sipedge_lcr_in_flight"                    // flights (Redis and API) in progress
	metricRedisErrors  = "sipedge_lcr_redis_errors_total"           // failed Redis calls (deadline, connection, error reply)
	metricRedisUp      = "sipedge_lcr_redis_up"                     // 1 up, 0 down (in-process tier only); absent without Redis
)

// failKind is why a flight got no answer from the API.
type failKind uint8

const (
	failNone        failKind = iota
	failTimeout              // timeout_ms passed (connect, headers or body)
	fail5xx                  // the API answered 5xx
	failStatus               // the API answered another non-2xx status
	failInvalid              // the body is not JSON, too large, or breaks the contract
	failTransport            // connection refused, reset, DNS...
	failBreakerOpen          // not sent: the circuit breaker is open
	failOverloaded           // not sent: too many flights in progress
	failClosed               // not sent: the resolver is closed (not counted)
	numFailKinds
)

var failKindNames = [numFailKinds]string{
	failTimeout: "timeout", fail5xx: "5xx", failStatus: "status", failInvalid: "invalid",
	failTransport: "transport", failBreakerOpen: "breaker_open", failOverloaded: "overloaded",
}

type resolverMetrics struct {
	apiDuration            *metrics.Histogram
	failures               [numFailKinds]*metrics.Counter
	localHits, redisHits   *metrics.Counter
	misses, coalesced      *metrics.Counter
	fallbacks, noDecisions *metrics.Counter
	redisErrors            *metrics.Counter
}

func newResolverMetrics(set *metrics.Set, r *Resolver) resolverMetrics {
	m := resolverMetrics{
		apiDuration: set.NewHistogram(metricAPIDuration),
		localHits:   set.NewCounter(metricCacheHits + `{tier="local"}`),
		redisHits:   set.NewCounter(metricCacheHits + `{tier="redis"}`),
		misses:      set.NewCounter(metricCacheMisses),
		coalesced:   set.NewCounter(metricCoalesced),
		fallbacks:   set.NewCounter(metricFallbacks),
		noDecisions: set.NewCounter(metricNoDecisions),
		redisErrors: set.NewCounter(metricRedisErrors),
	}
	for k := failTimeout; k < failClosed; k++ {
		m.failures[k] = set.NewCounter(metricAPIFailures + `{kind="` + failKindNames[k] + `"}`)
	}
	set.NewGauge(metricBreakerState, func() float64 { return float64(r.br.state.Load()) })
	set.NewGauge(metricInFlight, func() float64 { return float64(len(r.sem)) })
	if r.redis != nil {
		set.NewGauge(metricRedisUp, func() float64 {
			if r.redis.up.Load() {
				return 1
			}
			return 0
		})
	}
	return m
}
