package carrier

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
)

// cps holds the carriers' calls-per-second accounts (one key per account,
// in Redis when configured) and the groups' CPS reject matchers.
type cps struct {
	limiter *ratelimit.Limiter
	log     *slog.Logger

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
	name    string // the account's: cps.key, else the group's name
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

// newCPS registers the accounts of groups, the configuration's: a group
// sharing an account with one before it draws from that account at its
// limit.
func newCPS(limiter *ratelimit.Limiter, log *slog.Logger, groups []health.GroupConfig) (*cps, error) {
	c := &cps{limiter: limiter, log: log}
	m := make(map[string]groupLimit)
	for _, g := range groups {
		gl := groupLimit{rejects: g.CPSReject}
		if g.CPS != nil {
			name := cmp.Or(g.CPS.Key, g.Name)
			k, ok := limiter.Lookup(name)
			if !ok {
				var err error
				if k, err = limiter.Register(name, limitOf(g.CPS)); err != nil {
					return nil, fmt.Errorf("gateway.groups[%s].cps: %w", g.Name, err)
				}
			}
			gl.key, gl.name, gl.paced = k, name, true
		}
		m[g.Name] = gl
	}
	c.groups.Store(&m)
	return c, nil
}

// limitOf is the limiter's limit for a group's cps.
func limitOf(c *health.CPSConfig) ratelimit.Limit {
	return ratelimit.Limit{Rate: c.Rate, Burst: c.Burst, MaxWait: c.MaxWait()}
}

// addGroup applies a group added or replaced at run time: it draws from
// its account at the limit it names, which becomes the account's (as a
// route's cps does); an invalid limit refuses the group.
func (c *cps) addGroup(g health.GroupConfig) error {
	gl := groupLimit{rejects: g.CPSReject}
	if g.CPS != nil {
		name := cmp.Or(g.CPS.Key, g.Name)
		k, err := c.limiter.Register(name, limitOf(g.CPS))
		if err != nil {
			return fmt.Errorf("cps: %w", err)
		}
		gl.key, gl.name, gl.paced = k, name, true
	}
	c.setGroup(g.Name, &gl)
	return nil
}

// checkGroup returns the error addGroup would return for g, registering
// nothing: a reload checks all its groups before it adds any.
func checkGroup(g health.GroupConfig) error {
	if g.CPS == nil {
		return nil
	}
	if err := limitOf(g.CPS).Validate(); err != nil {
		return fmt.Errorf("cps: %w", err)
	}
	return nil
}

// removeGroup forgets a group. The account's key stays registered: other
// groups and routes may share it.
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

// keyOf returns the account a dial of route r in group draws from: the
// route's own cps (from the API), else its gateway group's.
func (c *cps) keyOf(r *route.Route, group string) (ratelimit.Key, bool) {
	if r != nil && r.CPS != nil && r.CPS.Rate > 0 {
		return c.routeKey(r)
	}
	g := (*c.groups.Load())[group]
	return g.key, g.paced
}

// peekKey returns the account a dial of route r in group would draw from,
// as keyOf does but registering nothing: name is the account's name ("",
// paced false: none), known false when a route's own account has not been
// registered yet (no call drew from it on this node).
func (c *cps) peekKey(r *route.Route, group string) (k ratelimit.Key, name string, paced, known bool) {
	if r != nil && r.CPS != nil && r.CPS.Rate > 0 {
		name = cmp.Or(r.CPS.Key, r.CarrierID)
		k, known = c.limiter.Lookup(name)
		return k, name, true, known
	}
	g, ok := (*c.groups.Load())[group]
	if !ok || !g.paced {
		return 0, "", false, false
	}
	return g.key, g.name, true, true
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

// routeLimit is the limiter's limit of a route's own cps: max_wait_ms
// absent is 1 s.
func routeLimit(c *route.CPS) ratelimit.Limit {
	lim := ratelimit.Limit{Rate: c.Rate, Burst: c.Burst, MaxWait: time.Second}
	if w := c.MaxWaitMs; w != nil {
		lim.MaxWait = time.Duration(*w) * time.Millisecond
	}
	return lim
}

// reject tells whether a final response to a dial of d is its carrier
// refusing the call over its CPS limit: the group's matchers (a code, and
// text the reason phrase or the Reason header must contain). A match backs
// off the limiter of the account the dial drew from, the route's own or
// the group's (AIMD), and the dial is retried after a jittered delay, 0.6
// to 1.6 s.
func (c *cps) reject(d *Dial, code int, phrase, reason []byte) (time.Duration, bool) {
	for _, m := range (*c.groups.Load())[d.Group].rejects {
		if m.Code != code || m.Reason != "" && !containsFold(phrase, m.Reason) && !containsFold(reason, m.Reason) {
			continue
		}
		if k, ok := c.keyOf(d.route, d.Group); ok {
			c.limiter.Backoff(k)
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
