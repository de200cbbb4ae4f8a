package fleet

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Channel is one limited key's channels on this node: a gateway group's or
// a trunk's max_concurrent_calls, held across the fleet. Shards Take a
// channel as a call starts using one and Release it when the call is
// done with it; Take succeeds while the calls up on this node are within
// the node's grant, which the grant loop keeps in step with the fleet
// (grants.go). Take and Release take no lock, allocate nothing and never
// wait on Redis; any goroutine may call them.
type Channel struct {
	// Every Take reads or writes these; Release only use. use packs two
	// counters, so that a Take is one atomic add: the low 32 bits are the
	// calls holding a channel on this node (in use), the high 32 bits the
	// Takes ever made, wrapping (the grant loop reads the demand from
	// them).
	use atomic.Uint64
	cap atomic.Int64 // a Take succeeds while in use stays within it
	low atomic.Int64 // a Take that leaves in use at or above it wakes the grant loop
	_   [40]byte     // keep the rest off the hot cache line

	refused atomic.Int64 // refused Takes since the grant loop last looked
	limit   atomic.Int64 // the fleet-wide limit; 0: none

	name  string
	rkey  string // the Redis key of its grants
	cs    *channels
	total *metrics.Counter // refused Takes, for the metric
	st    grantState       // the grant loop's
}

// unlimited is the cap of a Channel without a limit.
const unlimited = math.MaxInt64

// Take takes a channel for a call. It reports false, taking nothing, when
// the node's grant is used up: skip the carrier (or refuse the call) as
// its limit requires.
func (c *Channel) Take() bool {
	n := int64(uint32(c.use.Add(takeOne)))
	if n > c.cap.Load() {
		c.use.Add(releaseOne)
		c.refused.Add(1)
		c.total.Inc()
		c.cs.wake()
		return false
	}
	if n >= c.low.Load() {
		c.cs.wake()
	}
	return true
}

// Release gives back a channel a Take took.
func (c *Channel) Release() {
	if uint32(c.use.Add(releaseOne)) == math.MaxUint32 {
		panic("BUG: fleet: Channel.Release without a Take")
	}
}

// The additions to Channel.use: one more call in use and one more Take;
// one call fewer in use (two's complement: the high half is left alone
// while the low half is not 0).
const (
	takeOne    = 1<<32 | 1
	releaseOne = ^uint64(0)
)

// inUse is the calls holding a channel on this node.
func (c *Channel) inUse() int64 { return int64(uint32(c.use.Load())) }

// takes is the count of Takes, wrapping at 2^32.
func (c *Channel) takes() uint32 { return uint32(c.use.Load() >> 32) }

// Name is the key the Channel was made for.
func (c *Channel) Name() string { return c.name }

// InUse is the calls holding a channel on this node.
func (c *Channel) InUse() int64 { return c.inUse() }

// Grant is the most calls this node may hold now, math.MaxInt64 without
// a limit.
func (c *Channel) Grant() int64 { return c.cap.Load() }

// Limit is the fleet-wide limit, 0 for none.
func (c *Channel) Limit() int { return int(c.limit.Load()) }

// SetLimit changes the fleet-wide limit (0: none). Calls up beyond a
// lowered limit stay up; new ones wait until the calls are within it. It
// may be called from any goroutine but a shard's: it may take a lock.
func (c *Channel) SetLimit(limit int) {
	c.limit.Store(int64(max(limit, 0)))
	if c.cs.f.o.Redis == "" || limit <= 0 {
		c.cs.setLocal(c)
	}
	c.cs.wake()
}

// channels is the node's Channels, by name. A Channel, once made, lives as
// long as the Fleet: a removed group's calls still give their channels
// back to it.
type channels struct {
	f      *Fleet
	mu     sync.Mutex // guards byName and changes of list
	byName map[string]*Channel
	list   atomic.Pointer[[]*Channel] // what the grant loop walks
	wakeCh chan struct{}
	nudged sync.Map // Redis key -> struct{}: rounds asked for by other nodes

	localShare atomic.Int64 // Channels at the failure mode's local share
}

// Channel returns the Channel called name, making it on first use, with
// limit as its fleet-wide limit (0: none). Without Redis a node keeps to
// ceil(limit / Options.Nodes). With Redis a new Channel has no channels
// until its first grant, a round trip later: make Channels before calls
// arrive. Call it from configuration or admin goroutines, not a shard.
func (f *Fleet) Channel(name string, limit int) *Channel {
	cs := &f.chans
	cs.mu.Lock()
	c := cs.byName[name]
	if c == nil {
		c = &Channel{name: name, rkey: prefix + ":ch:" + name, cs: cs,
			total: f.o.Metrics.GetOrCreateCounter(`sipedge_fleet_channel_refused_total{key="` + escapeLabel(name) + `"}`)}
		c.low.Store(unlimited)
		f.o.Metrics.GetOrCreateGauge(`sipedge_fleet_channel_grant{key="`+escapeLabel(name)+`"}`, func() float64 {
			if g := c.cap.Load(); g != unlimited {
				return float64(g)
			}
			return -1
		})
		cs.byName[name] = c
		old := *cs.list.Load()
		next := make([]*Channel, len(old), len(old)+1)
		copy(next, old)
		next = append(next, c)
		cs.list.Store(&next)
	}
	cs.mu.Unlock()
	c.SetLimit(limit)
	return c
}

func (cs *channels) init(f *Fleet) {
	cs.f = f
	cs.byName = make(map[string]*Channel)
	cs.list.Store(&[]*Channel{})
	cs.wakeCh = make(chan struct{}, 1)
	f.o.Metrics.GetOrCreateGauge("sipedge_fleet_channels_local_share", func() float64 { return float64(cs.localShare.Load()) })
}

// wake makes the grant loop run a round now. It never blocks.
func (cs *channels) wake() {
	select {
	case cs.wakeCh <- struct{}{}:
	default:
	}
}

// setLocal sets c's cap without Redis: the whole limit divided among the
// nodes, or no cap without a limit.
func (cs *channels) setLocal(c *Channel) {
	lim := c.limit.Load()
	if lim <= 0 {
		c.cap.Store(unlimited)
		c.low.Store(unlimited)
		return
	}
	n := int64(cs.f.o.Nodes)
	if cs.f.o.Redis != "" {
		n = cs.f.liveNodes()
	}
	c.cap.Store((lim + n - 1) / n)
	c.low.Store(unlimited)
}
