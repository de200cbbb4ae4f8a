package quality

import (
	"strings"
	"sync/atomic"
	"time"
)

// Collector records the outcomes of one shard's attempts. It belongs to the
// shard: Record, RecordEnd and Tick are called from the shard's goroutine
// only, with the shard's clock (Monitor's contract in doc.go). It takes no
// lock and, once it has seen a (prefix, carrier) or (prefix, gateway) pair
// and has a spare bucket, does not allocate.
//
// The shard writes plain counters into its current bucket. When the clock
// passes the end of the bucket's sampling interval the bucket is sealed:
// pushed on a lock-free stack the reader (Monitor.Update) empties, and
// never written again until the reader hands it back on a second stack.
// The reader thus only reads buckets the shard has let go of.
type Collector struct {
	interval time.Duration
	// carriers and gateways intern the pairs this shard has seen: per
	// prefix, a carrier or gateway name (separate name spaces) to its slot,
	// the index of the pair's tally in a bucket. A gateway also remembers
	// the carrier it was first seen with, and that carrier's slot, so that
	// an attempt through a known gateway takes one map lookup, not two.
	carriers []map[string]int32
	gateways []map[string]gatewaySlots
	// keys says, by slot, which pair it is. The shard only appends to it:
	// a sealed bucket keeps the keys it was sealed with.
	keys []slotKey

	cur   *bucket       // being written
	index int64         // cur's sampling interval: now / interval
	end   time.Duration // when cur's interval ends
	dirty bool          // cur holds something
	spare *bucket       // buckets back from the reader, ready for reuse

	sealed stack // shard -> reader
	free   stack // reader -> shard
}

// gatewaySlots is a gateway's slot, and the carrier it was first seen
// with and its slot.
type gatewaySlots struct {
	carrier     string
	carrierSlot int32
	slot        int32
}

// slotKey names the pair a slot counts for.
type slotKey struct {
	prefix  Prefix
	gateway bool // name is a gateway, else a carrier
	name    string
}

// bucket is one shard's tallies over one sampling interval, by slot.
type bucket struct {
	index   int64     // the sampling interval: now / interval
	keys    []slotKey // the shard's keys when sealed; len(keys) == len(tallies)
	tallies []tally
	next    *bucket // on a stack
}

// stack is a lock-free stack of buckets with one pusher and one taker,
// which takes everything at once (so no ABA).
type stack struct{ head atomic.Pointer[bucket] }

func (s *stack) push(b *bucket) {
	for {
		old := s.head.Load()
		b.next = old
		if s.head.CompareAndSwap(old, b) {
			return
		}
	}
}

// takeAll empties the stack and returns its buckets, linked by next.
func (s *stack) takeAll() *bucket { return s.head.Swap(nil) }

func newCollector(interval time.Duration, prefixes int) *Collector {
	return &Collector{
		interval: interval,
		carriers: make([]map[string]int32, prefixes),
		gateways: make([]map[string]gatewaySlots, prefixes),
		cur:      &bucket{},
		index:    -1,
	}
}

// Record records at now (the shard's clock) the outcome of one attempt on
// a carrier for a number under quality prefix p. Attempts that count
// against no carrier (classify) are left out. o is not retained.
func (c *Collector) Record(now time.Duration, p Prefix, o *Outcome) {
	if now >= c.end {
		c.rotate(now)
	}
	if p < 0 || int(p) >= len(c.carriers) {
		return
	}
	v := classify(o)
	if v == vNone {
		return
	}
	pdd, setup := seconds(o.PDD), seconds(o.Setup)
	if o.Gateway == "" {
		c.cur.tallies[c.carrierSlot(p, o.Carrier)].record(v, pdd, setup)
	} else {
		cs, gs := c.slots(p, o.Carrier, o.Gateway)
		c.cur.tallies[cs].record(v, pdd, setup)
		c.cur.tallies[gs].record(v, pdd, setup)
	}
	c.dirty = true
}

// RecordEnd records at now that an answered call on carrier (through
// gateway, "" for none) lasted d from its answer to its end: an ACD
// sample.
func (c *Collector) RecordEnd(now time.Duration, p Prefix, carrier, gateway string, d time.Duration) {
	if now >= c.end {
		c.rotate(now)
	}
	if p < 0 || int(p) >= len(c.carriers) {
		return
	}
	x := seconds(max(d, 0))
	if gateway == "" {
		c.cur.tallies[c.carrierSlot(p, carrier)].acd.add(x)
	} else {
		cs, gs := c.slots(p, carrier, gateway)
		c.cur.tallies[cs].acd.add(x)
		c.cur.tallies[gs].acd.add(x)
	}
	c.dirty = true
}

// Tick seals the current bucket once now is past its sampling interval.
// Call it on the shard at least every sampling interval (a shard that has
// no calls would otherwise keep its last bucket from the reader); the
// sooner after an interval ends, the fresher the reader's figures. It is a
// comparison when there is nothing to do.
func (c *Collector) Tick(now time.Duration) {
	if now >= c.end {
		c.rotate(now)
	}
}

// rotate starts the sampling interval of now, sealing the current bucket
// if it holds anything.
func (c *Collector) rotate(now time.Duration) {
	index := int64(now / c.interval)
	if c.dirty {
		b := c.cur
		b.index, b.keys = c.index, c.keys[:len(c.keys):len(c.keys)]
		c.sealed.push(b)
		c.cur, c.dirty = c.takeSpare(), false
	}
	c.index, c.end = index, time.Duration(index+1)*c.interval
}

// takeSpare returns an empty bucket sized for the slots so far: one back
// from the reader if there is any, else a new one.
func (c *Collector) takeSpare() *bucket {
	if c.spare == nil {
		c.spare = c.free.takeAll()
	}
	b := c.spare
	if b == nil {
		b = &bucket{}
	} else {
		c.spare, b.next = b.next, nil
	}
	b.keys = nil
	n := len(c.keys)
	if cap(b.tallies) < n {
		b.tallies = make([]tally, n, n+n/2+8)
	} else {
		b.tallies = b.tallies[:n]
		clear(b.tallies)
	}
	return b
}

// carrierSlot returns the slot of (p, carrier), interning it the first
// time.
func (c *Collector) carrierSlot(p Prefix, carrier string) int32 {
	if s, ok := c.carriers[p][carrier]; ok {
		return s
	}
	if c.carriers[p] == nil {
		c.carriers[p] = map[string]int32{}
	}
	s := c.intern(p, carrier, false)
	c.carriers[p][c.keys[s].name] = s
	return s
}

// slots returns the slots of (p, carrier) and (p, gateway), interning
// them the first time.
func (c *Collector) slots(p Prefix, carrier, gateway string) (carrierSlot, gatewaySlot int32) {
	g, ok := c.gateways[p][gateway]
	if ok && g.carrier == carrier {
		return g.carrierSlot, g.slot
	}
	cs := c.carrierSlot(p, carrier)
	if ok {
		// A gateway shared by carriers: its first carrier stays cached.
		return cs, g.slot
	}
	if c.gateways[p] == nil {
		c.gateways[p] = map[string]gatewaySlots{}
	}
	gs := c.intern(p, gateway, true)
	c.gateways[p][c.keys[gs].name] = gatewaySlots{carrier: c.keys[cs].name, carrierSlot: cs, slot: gs}
	return cs, gs
}

// intern adds a slot for a pair first seen, the one path that allocates:
// the name is copied (the caller's string may be a view into a buffer).
func (c *Collector) intern(p Prefix, name string, gateway bool) int32 {
	s := int32(len(c.keys))
	c.keys = append(c.keys, slotKey{prefix: p, gateway: gateway, name: strings.Clone(name)})
	c.cur.tallies = append(c.cur.tallies, tally{})
	return s
}
