package server

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
)

// cps holds the egress limits (one key per carrier account, in Redis when
// configured) and the groups' CPS reject matchers.
type cps struct {
	limiter *ratelimit.Limiter
	log     *slog.Logger
	ingress *ratelimit.Local // trunks' ingress CPS (their keys: trunkData): in process, no Redis on the way in

	// groups maps a gateway group to its account's key and its CPS reject
	// matchers. Read lock-free on every paced dial; replaced whole, under
	// groupMu, when a group is added, replaced or removed at run time.
	groups  atomic.Pointer[map[string]groupLimit]
	groupMu sync.Mutex

	// routeKeys maps an account name to its routeKey: the accounts of
	// routes' own cps. Read lock-free on every paced dial (a sync.Map would
	// box the string key, an allocation a call); replaced whole, under
	// routeMu, when one is added or its limit changes, which is rare.
	routeKeys  atomic.Pointer[map[string]routeKey]
	routeMu    sync.Mutex
	routeNames int // accounts registered for routes; guarded by routeMu
}

// groupLimit is a gateway group's CPS: its account's key when paced, and
// the rejects that say its limit was exceeded.
type groupLimit struct {
	key     ratelimit.Key
	paced   bool
	rejects []health.CPSReject
}

// routeKey is an account a route's cps registered, with the limit it did.
type routeKey struct {
	key ratelimit.Key
	lim ratelimit.Limit
}

// maxRouteAccounts bounds the accounts routes may create: the API names
// them, and every one is kept for the node's life.
const maxRouteAccounts = 10000

func newCPS(cfg *config.Config, s *Server) (*cps, error) {
	c := &cps{log: s.log}
	var err error
	if c.ingress, err = ratelimit.NewLocal(ratelimit.Options{}); err != nil {
		return nil, err
	}
	c.limiter, err = ratelimit.New(ratelimit.Options{Config: ratelimit.Config{Redis: cfg.RateLimit.Redis,
		DeadlineMS: int(cfg.RateLimit.Deadline / time.Millisecond), FailureMode: ratelimit.FailureMode(cfg.RateLimit.FailureMode),
		Nodes: cfg.RateLimit.Nodes}, Batch: cfg.RateLimit.Batch, BatchMinRate: cfg.RateLimit.BatchMinRate,
		Metrics: s.cpsSet, Logger: s.log})
	if errors.Is(err, ratelimit.ErrRedisURL) {
		return nil, fmt.Errorf("ratelimit.redis: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	groups := make(map[string]groupLimit)
	for _, g := range healthGroups(cfg) {
		gl := groupLimit{rejects: g.CPSReject}
		if g.CPS != nil {
			// A YAML group sharing an account with one before it draws
			// from that account at its limit.
			name := cmp.Or(g.CPS.Key, g.Name)
			k, ok := c.limiter.Lookup(name)
			if !ok {
				if k, err = c.limiter.Register(name, limitOf(g.CPS)); err != nil {
					return nil, fmt.Errorf("gateway.groups[%s].cps: %w", g.Name, err)
				}
			}
			gl.key, gl.paced = k, true
		}
		groups[g.Name] = gl
	}
	c.groups.Store(&groups)
	return c, nil
}

// limitOf is the limiter's limit for a group's cps.
func limitOf(c *health.CPSConfig) ratelimit.Limit {
	return ratelimit.Limit{Rate: c.Rate, Burst: c.Burst, MaxWait: c.MaxWait()}
}

// addGroup is the health registry's OnAdd: a group added or replaced at run
// time draws from its account at the limit it names, which becomes the
// account's (as a route's cps does); an invalid limit refuses the group.
func (c *cps) addGroup(g health.GroupConfig) error {
	gl := groupLimit{rejects: g.CPSReject}
	if g.CPS != nil {
		k, err := c.limiter.Register(cmp.Or(g.CPS.Key, g.Name), limitOf(g.CPS))
		if err != nil {
			return fmt.Errorf("cps: %w", err)
		}
		gl.key, gl.paced = k, true
	}
	c.setGroup(g.Name, &gl)
	return nil
}

// checkGroup returns the error addGroup would return for g, registering
// nothing: a reload checks all its groups before it adds any.
func (c *cps) checkGroup(g health.GroupConfig) error {
	if g.CPS == nil {
		return nil
	}
	if err := limitOf(g.CPS).Validate(); err != nil {
		return fmt.Errorf("cps: %w", err)
	}
	return nil
}

// removeGroup is the health registry's OnRemove. The account's key stays
// registered: other groups and routes may share it.
func (c *cps) removeGroup(name string) { c.setGroup(name, nil) }

// setGroup publishes a copy of the groups with name's entry set to gl, or
// deleted when gl is nil.
func (c *cps) setGroup(name string, gl *groupLimit) {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	next := maps.Clone(*c.groups.Load())
	if gl == nil {
		delete(next, name)
	} else {
		next[name] = *gl
	}
	c.groups.Store(&next)
}

// admit is the engines' Env.Admit: the trunk's ingress CPS.
func (a *shardApp) admit(t *b2bua.Trunk) (time.Duration, bool) {
	td := a.s.trunks.dataOf(t)
	if td == nil || !td.ingress.paced {
		return 0, true
	}
	if d := a.s.cps.ingress.Reserve(td.ingress.key, a.sh.Now()); d.Over {
		td.stats.cps.Inc()
		return time.Second, false
	}
	return 0, true
}

// keyOf returns the account a dial to t for route r draws from: the
// route's own cps (from the API), else its gateway group's.
func (c *cps) keyOf(r *route.Route, t *b2bua.Target) (ratelimit.Key, bool) {
	if r != nil && r.CPS != nil && r.CPS.Rate > 0 {
		return c.routeKey(r)
	}
	g := (*c.groups.Load())[t.Group]
	return g.key, g.paced
}

// routeKey returns the account of a route's own cps, registering it on
// first use. The last limit seen for an account is its limit (a route
// naming a group's key sets that key's). Past maxRouteAccounts a new
// account is not paced, and logged.
func (c *cps) routeKey(r *route.Route) (ratelimit.Key, bool) {
	name := r.CPS.Key
	if name == "" {
		name = r.CarrierID
	}
	lim := routeLimit(r.CPS)
	if m := c.routeKeys.Load(); m != nil {
		if rk, ok := (*m)[name]; ok && rk.lim == lim {
			return rk.key, true
		}
	}
	c.routeMu.Lock()
	defer c.routeMu.Unlock()
	_, known := c.limiter.Lookup(name)
	if !known && c.routeNames >= maxRouteAccounts {
		c.log.Warn("route cps: too many accounts; this one is not paced", "key", name, "max", maxRouteAccounts)
		return 0, false
	}
	k, err := c.limiter.Register(name, lim)
	if err != nil {
		c.log.Warn("route cps: invalid limit; not paced", "key", name, "err", err)
		return 0, false
	}
	if !known {
		c.routeNames++
	}
	next := make(map[string]routeKey)
	if m := c.routeKeys.Load(); m != nil {
		maps.Copy(next, *m)
	}
	next[name] = routeKey{key: k, lim: lim}
	c.routeKeys.Store(&next)
	return k, true
}

// routeLimit is the limit of a route's own cps: max_wait_ms absent is 1 s.
func routeLimit(c *route.CPS) ratelimit.Limit {
	lim := ratelimit.Limit{Rate: c.Rate, Burst: c.Burst, MaxWait: time.Second}
	if w := c.MaxWaitMs; w != nil {
		lim.MaxWait = time.Duration(*w) * time.Millisecond
	}
	return lim
}

// pace is the engines' Env.Pace: a slot of the carrier account's budget.
func (a *shardApp) pace(r *route.Route, t *b2bua.Target, ref uint64) b2bua.PaceResult {
	k, ok := a.s.cps.keyOf(r, t)
	if !ok {
		return b2bua.PaceResult{}
	}
	sh, eng := a.sh, a.eng
	d, now := a.s.cps.limiter.ReserveAsync(k, func(d ratelimit.Decision) {
		sh.Post(func() { eng.Paced(ref, b2bua.PaceResult{Wait: d.Wait, Over: d.Over}, sh.Now()) })
	})
	if !now {
		return b2bua.PaceResult{Pending: true}
	}
	return b2bua.PaceResult{Wait: d.Wait, Over: d.Over}
}

// cpsReject is the engines' Env.CPSReject: the group's matchers (a code,
// and text the reason phrase or the Reason header must contain); a match
// backs off the limiter of the account the dial drew from, the route's own
// or the group's (AIMD), and retries after a jittered delay (the seed's
// 0.6 to 1.6 s).
func (a *shardApp) cpsReject(r *route.Route, t *b2bua.Target, code int, phrase, reason []byte) (time.Duration, bool) {
	for _, m := range (*a.s.cps.groups.Load())[t.Group].rejects {
		if m.Code != code || m.Reason != "" && !containsFold(phrase, m.Reason) && !containsFold(reason, m.Reason) {
			continue
		}
		if k, ok := a.s.cps.keyOf(r, t); ok {
			a.s.cps.limiter.Backoff(k)
		}
		return 600*time.Millisecond + rand.N(time.Second), true
	}
	return 0, false
}

// containsFold reports whether b contains s, ignoring ASCII case. Only CPS
// rejects get here: the allocations of the lower-casing do not matter.
func containsFold(b []byte, s string) bool {
	return len(b) > 0 && bytes.Contains(bytes.ToLower(b), bytes.ToLower([]byte(s)))
}
