package carrier

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/fleet"
)

// channels counts each gateway group's calls, from the dial until the
// call moves on or ends, against its max_concurrent_calls: a carrier sells
// a trunk with so many channels and refuses the call beyond them, so
// sipedge skips it instead (route.ReasonCallsLimited). The count is the
// fleet's Channel "group:<name>": with the fleet's Redis the limit holds
// across the fleet (fleet/doc.go has how, and when it may not); without it
// each node keeps to its share, ceil(limit / nodes).
type channels struct {
	fleet  *fleet.Fleet
	set    *metrics.Set
	mu     sync.Mutex // serialises setGroup
	groups atomic.Pointer[map[string]*fleet.Channel]
}

// channelKey is the fleet's key of a group's channels.
func channelKey(group string) string { return "group:" + group }

func newChannels(f *fleet.Fleet, set *metrics.Set) *channels {
	ch := &channels{fleet: f, set: set}
	ch.groups.Store(&map[string]*fleet.Channel{})
	return ch
}

// setGroup sets the limit of the group called name (0: none), as it is
// added, replaced or removed. A group's Channel outlives it (a removed or
// replaced group's calls give their channels back to it), so a name keeps
// one for the node's life.
func (ch *channels) setGroup(name string, limit int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	old := *ch.groups.Load()
	if c := old[name]; c != nil {
		c.SetLimit(limit)
		return
	}
	c := ch.fleet.Channel(channelKey(name), limit)
	next := make(map[string]*fleet.Channel, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = c
	ch.set.NewGauge(`sipedge_gateway_calls{group="`+escapeLabel(name)+`"}`, func() float64 { return float64(c.InUse()) })
	ch.groups.Store(&next)
}

// take takes a channel for a call about to be dialled on a route naming
// group, before a member is picked: ok false when the limit is reached; a
// nil Channel when nothing counts the group's calls (no such group: the
// route's next hop). A Channel taken is given back (Release) once, when
// the call moves on to another carrier or ends.
func (ch *channels) take(group string) (c *fleet.Channel, ok bool) {
	c = (*ch.groups.Load())[group]
	if c == nil {
		return nil, true // no such group: the route's next hop, not counted
	}
	if !c.Take() {
		return nil, false
	}
	return c, true
}

// full reports whether take would refuse a call on group now, taking
// nothing: a dry run's view of the node's channel grant.
func (ch *channels) full(group string) bool {
	c := (*ch.groups.Load())[group]
	return c != nil && c.InUse() >= c.Grant()
}

// escapeLabel escapes a Prometheus label value.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
