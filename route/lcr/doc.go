// Package lcr makes least-cost-routing decisions: it asks the routing API
// (an HTTP JSON service the operator runs; the contract is docs/lcr-api.md and the
// Request and Response types), caches its answers in process and in Redis,
// and degrades to a fallback gateway group when the API fails. Without an
// API URL, a static rate table (StaticTable) decides instead.
//
// # Who calls what
//
// Decisions never block a shard. A shard builds the cache key into a buffer
// of its own with AppendKey and calls LookupCached, which answers an
// in-process hit synchronously without allocating. On a miss it calls
// Lookup with a done callback, which returns at once; done runs later on a
// resolver goroutine and posts the decision back to the shard's event loop
// (or synchronously, before Lookup returns, when no I/O was needed: see
// Lookup). The shard then carries the decision out on its own goroutine.
//
//	key := res.AppendKey(sh.keyBuf[:0], trunkGroup, number, attrs)
//	if d, ok := res.LookupCached(key); ok {
//		sh.route(call, d)
//	} else {
//		res.Lookup(req, func(d lcr.Decision) { sh.post(call.id, d) })
//	}
//
// A decision's Routes and Reject are shared by every call that got it: a
// policy clones before filtering or reordering.
//
// # Lookup path
//
// In-process tier, then a flight per key: lookups of a key already in
// flight join it (coalescing); the flight reads Redis (RedisKeyPrefix+key,
// with a deadline of Options.RedisDeadline), then, on a miss, POSTs to the
// API unless the circuit breaker is open. A valid answer with a TTL
// (cache_ttl_secs, else Options.CacheTTL; 0 is "do not cache") is kept in
// process for min(LocalTTL, TTL) and stored in Redis as the API's JSON with
// PX TTL, so that the other nodes of the fleet reuse it. Timeouts, transport
// errors, non-2xx answers and invalid bodies (Response.Validate) are API
// failures: the decision is the fallback gateway group, or NoDecision.
//
// Redis may be a single server or a Redis Cluster (rueidis finds out; the
// URL may list more seed nodes as ?addr=host:port&addr=...). The keys,
// sipedge:lcr:<key>, have no hash tag: every command touches one key, so
// on a Cluster the decisions spread over all the slots and masters. A
// Redis that is down at New is not an error (the tier starts down), but
// one that refuses the URL's database is (ErrRedisURL): a Cluster has
// only database 0.
//
// A Redis failure marks the tier down (one warning, sipedge_lcr_redis_up 0,
// sipedge_lcr_redis_errors_total); lookups then use the in-process tier and
// the API alone, and Redis is probed again once a second; the first success
// logs that it is back.
//
// # Dropping decisions
//
// A decision that must not wait for its TTL (a rate changed) is dropped
// by an admin goroutine: Drop deletes it (or, with key "", every
// decision: a SCAN of each master) from Redis and from this node's
// in-process tier, DropLocal from the in-process tier alone, which is
// what the other nodes of a fleet do when told (the fleet package
// broadcasts it). A lookup in flight while a drop runs caches nothing: it
// may have read what was dropped. Cached shows what each tier holds under
// a key.
//
// # Dry runs
//
// Explain (the admin API's POST /v1/route, sipedge route) makes a call's
// decision as a Router would and says where it came from: the API, a
// cache tier, the static table (and its prefix), the fallback or none
// (and the API's failure). It changes nothing a call sees: nothing is
// cached, nor counted in the breaker or the cache and failure metrics.
//
// # Metrics
//
//	sipedge_lcr_api_request_duration_seconds   histogram of API requests
//	sipedge_lcr_api_failures_total{kind}       timeout, 5xx, status, invalid, transport, breaker_open, overloaded
//	sipedge_lcr_cache_hits_total{tier}         local, redis
//	sipedge_lcr_cache_misses_total             flights that found no cached decision
//	sipedge_lcr_coalesced_lookups_total        lookups that joined a flight
//	sipedge_lcr_fallbacks_total                fallback decisions given
//	sipedge_lcr_no_decisions_total             NoDecision given
//	sipedge_lcr_breaker_state                  0 closed, 1 open, 2 half-open
//	sipedge_lcr_in_flight                      flights in progress
//	sipedge_lcr_redis_errors_total             failed Redis calls
//	sipedge_lcr_redis_up                       1 up, 0 down (with Redis only)
package lcr
