package carrier

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// channels counts each gateway group's calls on this node, from the dial
// until the call moves on or ends, against its max_concurrent_calls: a
// carrier sells a trunk with so many channels and refuses the call beyond
// them, so sipedge skips it instead (route.ReasonCallsLimited). The count
// is per node; with ratelimit.nodes N, each node keeps to its share,
// ceil(limit / N), as the CPS fallback does.
type channels struct {
	nodes  int64
	set    *metrics.Set
	mu     sync.Mutex // serialises setGroup
	groups atomic.Pointer[map[string]*groupChannels]
}

// groupChannels is one group's count. It outlives the group (a removed or
// replaced group's calls give their channels back to it), so a name keeps
// one for the node's life.
type groupChannels struct {
	limit atomic.Int64 // the node's share; 0: unlimited
	inUse atomic.Int64
}

func newChannels(nodes int, set *metrics.Set) *channels {
	ch := &channels{nodes: int64(max(nodes, 1)), set: set}
	ch.groups.Store(&map[string]*groupChannels{})
	return ch
}

// setGroup sets the limit of the group called name (0: none), as it is
// added or replaced.
func (ch *channels) setGroup(name string, limit int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	old := *ch.groups.Load()
	g := old[name]
	if g == nil {
		g = new(groupChannels)
		next := make(map[string]*groupChannels, len(old)+1)
		for k, v := range old {
			next[k] = v
		}
		next[name] = g
		ch.set.NewGauge(`sipedge_gateway_calls{group="`+escapeLabel(name)+`"}`, func() float64 { return float64(g.inUse.Load()) })
		ch.groups.Store(&next)
	}
	g.limit.Store((int64(limit) + ch.nodes - 1) / ch.nodes)
}

// take counts a call about to be dialled on a route naming group against
// its limit, before a member is picked: ok false when the limit is
// reached; counted false when nothing counts the group's calls (no such
// group: the route's next hop). A call counted gives its channel back
// through release once, when it moves on to another carrier or ends.
func (ch *channels) take(group string) (counted, ok bool) {
	g := (*ch.groups.Load())[group]
	if g == nil {
		return false, true // no such group: the route's next hop, not counted
	}
	n := g.inUse.Add(1)
	if lim := g.limit.Load(); lim > 0 && n > lim {
		g.inUse.Add(-1)
		return false, false
	}
	return true, true
}

// full reports whether take would refuse a call on group now, taking
// nothing: a dry run's view.
func (ch *channels) full(group string) bool {
	g := (*ch.groups.Load())[group]
	if g == nil {
		return false
	}
	lim := g.limit.Load()
	return lim > 0 && g.inUse.Load() >= lim
}

// release gives back a channel take counted: its group's entry is never
// dropped.
func (ch *channels) release(group string) {
	if g := (*ch.groups.Load())[group]; g != nil {
		g.inUse.Add(-1)
	}
}

// escapeLabel escapes a Prometheus label value.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
