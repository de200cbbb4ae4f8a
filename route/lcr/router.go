package lcr

import (
	"sync/atomic"

	"github.com/sipedge/sipedge/route"
)

// Router is one shard's routing decision, what the call core asks for each
// new call: the static table when one is in force, else a cached decision
// at once, else a lookup off the shard (Resolver.Lookup) whose decision
// post delivers later, for the call Request.Ref names. It applies the
// default policy to a decision (decisionOf). A Router is not safe for
// concurrent use: it belongs to a shard, and Route runs on its goroutine
// and allocates nothing on a static or cached decision.
type Router struct {
	res    *Resolver
	static *atomic.Pointer[StaticTable]
	post   func(ref uint64, d route.Decision)
	key    []byte // the cache key of the call being routed
}

// NewRouter returns a shard's Router over res. static, when not nil, holds
// the static table calls are routed by, which the owner may replace at any
// time (nil in it: the LCR API decides). post is called on a resolver
// goroutine with each decision that was Pending: the owner posts it to the
// shard's call core.
func NewRouter(res *Resolver, static *atomic.Pointer[StaticTable], post func(ref uint64, d route.Decision)) *Router {
	return &Router{res: res, static: static, post: post}
}

// Route decides where the call q describes goes.
func (r *Router) Route(q *route.Request) route.Decision {
	if r.static != nil {
		if t := r.static.Load(); t != nil {
			routes, ok := t.Lookup(string(q.Dialed))
			if !ok || len(routes) == 0 {
				return route.Decision{Code: 404, Reason: "No Route"}
			}
			return route.Decision{Routes: routes, Source: route.SourceStatic}
		}
	}
	r.key = r.res.AppendKey(r.key[:0], q.TrunkGroup, string(q.Dialed), q.Attributes)
	if d, ok := r.res.LookupCached(r.key); ok {
		return decisionOf(d)
	}
	// The attributes are the configuration's, shared read-only with the
	// resolver.
	req := &Request{CallID: string(q.CallID), From: string(q.From), DialedNumber: string(q.Dialed),
		To: string(q.To), Source: CallSource{IP: q.Source.Addr.Addr().String(), Port: int(q.Source.Addr.Port()),
			Transport: q.Source.Transport.Name(), TrunkGroup: q.TrunkGroup}, Attributes: q.Attributes}
	ref, post := q.Ref, r.post
	r.res.Lookup(req, func(d Decision) { post(ref, decisionOf(d)) })
	return route.Decision{Pending: true}
}

// decisionOf applies the default policy to a decision: no decision (API
// down, no fallback) is 503 Route Unavailable, an API reject its code, no
// routes 404 No Route. No decision is marked as such, for a policy's
// OnInvite to tell it from an API reject with 503.
func decisionOf(d Decision) route.Decision {
	switch {
	case d.NoDecision:
		return route.Decision{Code: 503, Reason: "Route Unavailable", NoDecision: true}
	case d.Reject != nil:
		return route.Decision{Code: d.Reject.Code, Reason: d.Reject.Reason}
	case len(d.Routes) == 0:
		return route.Decision{Code: 404, Reason: "No Route"}
	}
	return route.Decision{Routes: d.Routes, Source: d.Source}
}
