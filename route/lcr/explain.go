package lcr

import (
	"context"

	"github.com/sipedge/sipedge/route"
)

// Where an explained decision came from (Explanation.From).
const (
	FromAPI      = "api"      // the routing API answered
	FromCache    = "cache"    // a cache tier held the API's answer (Explanation.Tier)
	FromStatic   = "static"   // the static rate table
	FromFallback = "fallback" // the API failed: fallback_gateway_group
	FromNone     = "none"     // the API failed, and there is no fallback
)

// Explanation is a routing decision as a dry run shows it: what the call
// core would carry out, and where it came from.
type Explanation struct {
	// Decision is the decision a shard's Router would give the call core
	// (the default policy applied: a reject, 404 No Route, 503 Route
	// Unavailable for none).
	Decision route.Decision
	// From is one of the From* constants.
	From string
	// Tier is the cache tier that held it, "local" or "redis" (FromCache).
	Tier string
	// Prefix is the static table's prefix that matched (FromStatic), and
	// Matched whether one did.
	Prefix  string
	Matched bool
	// Failure is why the API gave no decision (FromFallback, FromNone): a
	// kind of sipedge_lcr_api_failures_total (timeout, 5xx, status,
	// invalid, transport, breaker_open) or "closed"; Err says more.
	Failure, Err string
}

// Explain makes the routing decision for q as a shard's Router would, from
// static when it is not nil (the table in force), else from the cache
// tiers, then the API, and says where it came from. It changes nothing a
// call would see: the answer is not cached, nor counted in the circuit
// breaker or the cache and failure metrics, and a lookup in flight is not
// joined (only sipedge_lcr_api_request_duration_seconds times the request,
// and a Redis that fails is marked down as on any lookup). It blocks on
// Redis and the API (lcr.timeout_ms at most): call it off the shards (the
// admin API's dry run).
func (r *Resolver) Explain(ctx context.Context, static *StaticTable, q *route.Request) Explanation {
	if static == nil && r.url == "" {
		static = r.static
	}
	if static != nil || r.url == "" {
		prefix, routes, ok := static.Match(string(q.Dialed))
		ex := Explanation{From: FromStatic, Prefix: prefix, Matched: ok,
			Decision: route.Decision{Routes: routes, Source: route.SourceStatic}}
		if len(routes) == 0 {
			ex.Decision = route.Decision{Code: 404, Reason: "No Route"}
		}
		return ex
	}
	key := r.AppendKey(nil, q.TrunkGroup, string(q.Dialed), q.Attributes)
	if r.local != nil {
		if e := r.local.getBytes(key, r.coarseNow()); e != nil {
			return Explanation{From: FromCache, Tier: "local", Decision: decisionOf(e.d)}
		}
	}
	if r.redis != nil {
		if d, ok := r.redisDecision(ctx, string(key)); ok {
			return Explanation{From: FromCache, Tier: "redis", Decision: decisionOf(d)}
		}
	}
	failed := func(kind failKind, why string) Explanation {
		ex := Explanation{From: FromNone, Failure: failKindNames[kind], Err: why, Decision: decisionOf(r.failure)}
		if kind == failClosed {
			ex.Failure = "closed"
		}
		if r.failure.Source == route.SourceFallback {
			ex.From = FromFallback
		}
		return ex
	}
	if ctx.Err() != nil || r.ctx.Err() != nil {
		return failed(failClosed, "the dry run or the resolver ended")
	}
	if r.br.failingFast() {
		return failed(failBreakerOpen, errBreakerOpen.Error())
	}
	req := &Request{CallID: string(q.CallID), From: string(q.From), DialedNumber: string(q.Dialed), To: string(q.To),
		Source: CallSource{IP: q.Source.Addr.Addr().String(), Port: int(q.Source.Addr.Port()),
			Transport: q.Source.Transport.Name(), TrunkGroup: q.TrunkGroup}, Attributes: q.Attributes}
	resp, _, _, kind, err := r.call(req)
	if kind != failNone {
		return failed(kind, err.Error())
	}
	d := Decision{Routes: resp.Routes, Reject: resp.Reject, Source: route.SourceLCR}
	return Explanation{From: FromAPI, Decision: decisionOf(d)}
}

// redisDecision reads the decision under key from the Redis tier, as a
// flight does (resolve), counting no hit.
func (r *Resolver) redisDecision(ctx context.Context, key string) (Decision, bool) {
	body, ttl, ok := r.redis.lookup(ctx, key)
	if !ok {
		return Decision{}, false
	}
	var resp Response
	if err := unmarshalResponse(body, &resp); err != nil {
		return Decision{}, false
	}
	return Decision{Routes: resp.Routes, Reject: resp.Reject, Source: route.SourceLCR, TTL: ttl}, true
}
