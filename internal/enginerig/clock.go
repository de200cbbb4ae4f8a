package enginerig

import "time"

// Epoch is the wall-clock time of a Clock's 0 (Clock.Wall): a CDR's times
// less Epoch are times on the clock.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a shard's timer wheel reduced to a list of timers in the order
// they were started, and the shard's time; it has the methods of
// b2bua.Clock. A handle is base plus the timer's position plus one:
// Advance fires what is due, then drops the prefix of fired and stopped
// timers and moves base past it, so Stop is O(1), the list only spans the
// timers still pending, and a warm Clock allocates nothing.
type Clock struct {
	// Now is the shard's time, what the engine's inputs are given.
	Now time.Duration
	// Engine's Timer is called for each timer due (Rig.Attach sets it).
	Engine Engine
	// Fired counts the timers fired.
	Fired int

	ts   []timer
	base uint64
}

type timer struct {
	at   time.Duration
	arg  uint64
	kind uint8
	live bool
}

// StartAt starts a timer due at at (b2bua.Clock).
func (c *Clock) StartAt(at time.Duration, kind uint8, arg uint64) uint64 {
	// In place: a timer literal appended is built on the stack and copied
	// with loads wider than its stores, a stall the shard's wheel does not
	// have and the benchmarks would measure.
	c.ts = append(c.ts, timer{})
	t := &c.ts[len(c.ts)-1]
	t.at, t.arg, t.kind, t.live = at, arg, kind, true
	return c.base + uint64(len(c.ts))
}

// Stop stops the timer h; it reports whether the timer was pending
// (b2bua.Clock).
func (c *Clock) Stop(h uint64) bool {
	if h <= c.base || h-c.base > uint64(len(c.ts)) {
		return false
	}
	t := &c.ts[h-c.base-1]
	was := t.live
	t.live = false
	return was
}

// Wall returns the wall-clock time of at, counted from Epoch (b2bua.Clock).
func (c *Clock) Wall(at time.Duration) time.Time { return Epoch.Add(at) }

// Advance moves the clock d ahead, firing the timers due by then: the
// earliest first, those due at one time in the order they were started,
// timers a fire starts included, each at its own time (or at Now, for a
// timer that was due before Now was moved by hand).
func (c *Clock) Advance(d time.Duration) {
	end := c.Now + d
	for {
		next, due := end, false
		for i := range c.ts {
			if t := &c.ts[i]; t.live && t.at <= next {
				next, due = t.at, true
			}
		}
		if !due {
			break
		}
		c.Now = max(c.Now, next)
		for i := 0; i < len(c.ts); i++ { // a fire may append
			if t := c.ts[i]; t.live && t.at <= next {
				c.ts[i].live = false
				c.Fired++
				c.Engine.Timer(t.kind, t.arg, c.Now)
			}
		}
	}
	c.Now = end
	k := 0
	for k < len(c.ts) && !c.ts[k].live {
		k++
	}
	c.ts = c.ts[:copy(c.ts, c.ts[k:])]
	c.base += uint64(k)
}

// Pending returns the number of timers neither fired nor stopped.
func (c *Clock) Pending() int {
	n := 0
	for i := range c.ts {
		if c.ts[i].live {
			n++
		}
	}
	return n
}

// Release drops the list's storage when no timer is pending.
func (c *Clock) Release() {
	if len(c.ts) == 0 {
		c.ts = nil
	}
}
