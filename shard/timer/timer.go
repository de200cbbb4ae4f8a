package timer

import (
	"math"
	"time"
)

// Defaults for Config zero values.
const (
	DefaultTick  = 5 * time.Millisecond
	DefaultSlots = 8192 // 40.96s revolution at the default tick
)

// Handle identifies one pending timer: slot generation in the high 32 bits,
// slot index in the low 32 bits. Generations start at 1, so 0 is never valid.
type Handle uint64

// Payload is what a timer carries to the fire callback. It is plain data so
// that starting a timer needs no closure.
type Payload struct {
	Kind uint8
	Arg  uint64
}

// Config configures a Wheel. Zero fields take defaults.
type Config struct {
	Tick     time.Duration // resolution; default DefaultTick
	Slots    int           // buckets per revolution, rounded up to a power of two; default DefaultSlots
	Capacity int           // initial slab capacity, to avoid growth on warm-up
}

const (
	nilIdx  = -1 // end of list
	freeIdx = -2 // entry.prev of a slot on the free list
)

// entry is laid out flat (not embedding Payload) to stay at 32 bytes.
type entry struct {
	expire int64 // absolute tick at which it fires
	arg    uint64
	next   int32 // bucket list, or free list when free
	prev   int32 // bucket list, or freeIdx when free
	gen    uint32
	kind   uint8
}

type bucket struct {
	head, tail int32
}

// Wheel is a single-level hashed timer wheel. See the package doc for the
// contract; in short: one owner goroutine, no locks, no allocation.
type Wheel struct {
	fire    func(Payload)
	tick    int64 // nanoseconds
	mask    int64
	now     int64 // now of the last Advance
	cur     int64 // last processed tick; during Advance, the tick being processed
	buckets []bucket
	entries []entry
	free    int32
	n       int

	// cursor is the next entry of the bucket being scanned by Advance.
	// unlink moves it forward so callbacks can Stop any timer mid-scan.
	cursor    int32
	advancing bool
}

// New returns a Wheel at time 0 that calls fire, from inside Advance, for
// each expired timer.
func New(cfg Config, fire func(Payload)) *Wheel {
	if fire == nil {
		panic("timer: nil fire callback")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Slots > 1<<30 {
		panic("timer: too many slots")
	}
	slots := 1
	for slots < cfg.Slots {
		slots <<= 1
	}
	w := &Wheel{
		fire:    fire,
		tick:    int64(cfg.Tick),
		mask:    int64(slots - 1),
		buckets: make([]bucket, slots),
		free:    nilIdx,
		cursor:  nilIdx,
	}
	for i := range w.buckets {
		w.buckets[i] = bucket{nilIdx, nilIdx}
	}
	if cfg.Capacity > 0 {
		w.entries = make([]entry, 0, cfg.Capacity)
	}
	return w
}

// Len returns the number of pending timers.
func (w *Wheel) Len() int { return w.n }

// Now returns the now of the last Advance, the origin of Start's delay.
func (w *Wheel) Now() time.Duration { return time.Duration(w.now) }

// Tick returns the resolution.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tick) }

// Start arms a timer that fires d after Now. d <= 0 fires at the next tick.
func (w *Wheel) Start(d time.Duration, p Payload) Handle {
	at := w.now + int64(d)
	if d > 0 && at < w.now {
		at = math.MaxInt64 // saturate instead of wrapping into the past
	}
	return w.StartAt(time.Duration(at), p)
}

// StartAt arms a timer that fires once Advance reaches at (same clock as
// Advance). A deadline that is not in the future fires at the next tick.
func (w *Wheel) StartAt(at time.Duration, p Payload) Handle {
	// Round the deadline up to a tick so it never fires early, and never
	// into a tick already processed.
	x := w.cur + 1
	if a := int64(at); a > 0 {
		t := a / w.tick
		if a%w.tick != 0 {
			t++
		}
		if t > x {
			x = t
		}
	}

	i := w.alloc()
	e := &w.entries[i] // after alloc: append may have moved the slab
	e.expire = x
	e.arg = p.Arg
	e.kind = p.Kind
	e.next = nilIdx

	// Append at the tail so timers due in one tick fire in Start order.
	b := &w.buckets[x&w.mask]
	e.prev = b.tail
	if b.tail == nilIdx {
		b.head = i
	} else {
		w.entries[b.tail].next = i
	}
	b.tail = i
	w.n++
	return Handle(uint64(e.gen)<<32 | uint64(uint32(i)))
}

// Stop cancels the timer h and reports whether it was pending. It returns
// false for the zero Handle, and for a timer that has fired or was stopped,
// even if its slot now holds another timer.
func (w *Wheel) Stop(h Handle) bool {
	i := uint32(h)
	if uint64(i) >= uint64(len(w.entries)) {
		return false
	}
	e := &w.entries[i]
	if e.gen != uint32(h>>32) || e.prev == freeIdx {
		return false
	}
	w.release(int32(i))
	return true
}

// Advance moves the wheel to now and fires, in order, every timer whose
// deadline tick has been reached. It returns how many fired. A now not after
// the previous one is a no-op. Advance must not be called from the callback.
func (w *Wheel) Advance(now time.Duration) int {
	if w.advancing {
		panic("timer: Advance called from the fire callback")
	}
	if int64(now) <= w.now {
		return 0
	}
	w.now = int64(now)
	target := w.now / w.tick
	if target <= w.cur {
		return 0
	}
	w.advancing = true
	defer w.endAdvance() // keep the wheel usable if a callback panics

	t := w.cur + 1
	// After a long gap visit each bucket once, at the last tick it maps to
	// in the gap: everything due in it has expire <= that tick.
	if slots := w.mask + 1; target-w.cur > slots {
		t = target - slots + 1
	}
	fired := 0
	for ; t <= target; t++ {
		w.cur = t
		fired += w.expire(t)
	}
	return fired
}

func (w *Wheel) endAdvance() {
	w.advancing = false
	w.cursor = nilIdx
}

// expire fires the due entries of tick t's bucket. Entries with a later
// expire are a later revolution's and stay.
func (w *Wheel) expire(t int64) int {
	fired := 0
	i := w.buckets[t&w.mask].head
	for i != nilIdx {
		e := &w.entries[i]
		w.cursor = e.next
		if e.expire <= t {
			p := Payload{Kind: e.kind, Arg: e.arg}
			// Free the slot first: the handle is stale inside the callback
			// and the slot can be reused by a re-arm.
			w.release(i)
			fired++
			w.fire(p) // may Start/Stop; e is invalid from here
		}
		i = w.cursor
	}
	w.cursor = nilIdx
	return fired
}

func (w *Wheel) alloc() int32 {
	if i := w.free; i != nilIdx {
		w.free = w.entries[i].next
		return i
	}
	if len(w.entries) >= math.MaxInt32 {
		panic("timer: too many pending timers")
	}
	w.entries = append(w.entries, entry{gen: 1})
	return int32(len(w.entries) - 1)
}

// release unlinks entry i from its bucket and puts it on the free list with a
// new generation, invalidating its Handle.
func (w *Wheel) release(i int32) {
	e := &w.entries[i]
	if w.cursor == i {
		w.cursor = e.next
	}
	b := &w.buckets[e.expire&w.mask]
	if e.prev == nilIdx {
		b.head = e.next
	} else {
		w.entries[e.prev].next = e.next
	}
	if e.next == nilIdx {
		b.tail = e.prev
	} else {
		w.entries[e.next].prev = e.prev
	}

	e.gen++
	if e.gen == 0 {
		e.gen = 1
	}
	e.prev = freeIdx
	e.next = w.free
	w.free = i
	w.n--
}
