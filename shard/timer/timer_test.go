package timer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

type fired struct {
	now time.Duration
	p   Payload
}

// newRecorder returns a wheel whose callback records each fire with the now
// of the Advance it fired in.
func newRecorder(cfg Config) (*Wheel, *[]fired) {
	var got []fired
	var w *Wheel
	w = New(cfg, func(p Payload) { got = append(got, fired{w.Now(), p}) })
	return w, &got
}

func TestFiresOnTimeAcrossRevolutions(t *testing.T) {
	const tick = 10 * time.Millisecond
	w, got := newRecorder(Config{Tick: tick, Slots: 8}) // 80ms revolution
	w.Advance(3 * time.Millisecond)                     // start off a tick boundary
	delays := []time.Duration{
		-time.Second, 0, 1, time.Millisecond, 7 * time.Millisecond, 9 * time.Millisecond,
		10 * time.Millisecond, 11 * time.Millisecond, 79 * time.Millisecond,
		80 * time.Millisecond, 81 * time.Millisecond, 160 * time.Millisecond,
		time.Second, 12345 * time.Millisecond,
	}
	start := w.Now()
	for i, d := range delays {
		w.Start(d, Payload{Kind: 1, Arg: uint64(i)})
	}
	for now := start; now <= 13*time.Second; now += time.Millisecond {
		w.Advance(now)
	}
	if len(*got) != len(delays) {
		t.Fatalf("fired %d timers, want %d", len(*got), len(delays))
	}
	seen := make(map[uint64]bool)
	for _, f := range *got {
		if seen[f.p.Arg] {
			t.Fatalf("timer %d fired twice", f.p.Arg)
		}
		seen[f.p.Arg] = true
		at := start + max(delays[f.p.Arg], 0)
		if f.now < at {
			t.Errorf("timer %d (d=%v) fired early at %v, deadline %v", f.p.Arg, delays[f.p.Arg], f.now, at)
		}
		// Advance is called every 1ms, so a fire later than one tick after
		// the deadline is the wheel's fault.
		if f.now > at+tick {
			t.Errorf("timer %d (d=%v) fired late at %v, deadline %v", f.p.Arg, delays[f.p.Arg], f.now, at)
		}
		if f.p.Kind != 1 {
			t.Errorf("payload kind %d, want 1", f.p.Kind)
		}
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d after all fired", w.Len())
	}
}

func TestStopPreventsFiring(t *testing.T) {
	w, got := newRecorder(Config{Tick: time.Millisecond, Slots: 4})
	h := w.Start(10*time.Millisecond, Payload{Arg: 1})
	keep := w.Start(100*time.Millisecond, Payload{Arg: 2}) // also lands in other revolutions
	if w.Len() != 2 {
		t.Fatalf("Len = %d, want 2", w.Len())
	}
	if !w.Stop(h) {
		t.Fatal("Stop of a pending timer returned false")
	}
	if w.Stop(h) {
		t.Fatal("second Stop returned true")
	}
	if w.Len() != 1 {
		t.Fatalf("Len = %d, want 1", w.Len())
	}
	w.Advance(50 * time.Millisecond)
	if len(*got) != 0 {
		t.Fatalf("stopped timer fired: %v", *got)
	}
	if !w.Stop(keep) || w.Len() != 0 {
		t.Fatal("Stop of the far timer failed")
	}
	w.Advance(time.Second)
	if len(*got) != 0 {
		t.Fatalf("stopped timer fired: %v", *got)
	}
}

func TestStaleHandleAfterFire(t *testing.T) {
	w, got := newRecorder(Config{Tick: time.Millisecond})
	h1 := w.Start(time.Millisecond, Payload{Arg: 1})
	w.Advance(time.Millisecond)
	if len(*got) != 1 {
		t.Fatalf("fired %d, want 1", len(*got))
	}
	h2 := w.Start(5*time.Millisecond, Payload{Arg: 2})
	if uint32(h2) != uint32(h1) {
		t.Fatalf("slot not reused: %x vs %x", h1, h2) // the test relies on reuse
	}
	if h2 == h1 {
		t.Fatal("reused slot has the same handle")
	}
	if w.Stop(h1) {
		t.Fatal("stale handle stopped the new occupant")
	}
	w.Advance(10 * time.Millisecond)
	if len(*got) != 2 || (*got)[1].p.Arg != 2 {
		t.Fatalf("new occupant did not fire: %v", *got)
	}
	if w.Stop(h2) {
		t.Fatal("Stop after fire returned true")
	}
}

func TestStaleHandleAfterStop(t *testing.T) {
	w, got := newRecorder(Config{Tick: time.Millisecond})
	h1 := w.Start(5*time.Millisecond, Payload{Arg: 1})
	if !w.Stop(h1) {
		t.Fatal("Stop failed")
	}
	h2 := w.Start(5*time.Millisecond, Payload{Arg: 2})
	if uint32(h2) != uint32(h1) {
		t.Fatalf("slot not reused: %x vs %x", h1, h2)
	}
	if w.Stop(h1) {
		t.Fatal("stale handle stopped the new occupant")
	}
	if w.Len() != 1 {
		t.Fatalf("Len = %d, want 1", w.Len())
	}
	w.Advance(10 * time.Millisecond)
	if len(*got) != 1 || (*got)[0].p.Arg != 2 {
		t.Fatalf("got %v, want only timer 2", *got)
	}
}

func TestInvalidHandles(t *testing.T) {
	w, _ := newRecorder(Config{})
	h := w.Start(time.Second, Payload{})
	if h == 0 {
		t.Fatal("Start returned the zero Handle")
	}
	for _, bad := range []Handle{0, h + 1<<32, h - 1<<32, h | 0xffff, Handle(math.MaxUint64)} {
		if w.Stop(bad) {
			t.Fatalf("Stop(%x) returned true", bad)
		}
	}
	// A free slot must not be stoppable even with its next generation.
	if !w.Stop(h) || w.Stop(h+1<<32) {
		t.Fatal("free slot handling wrong")
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d", w.Len())
	}
}

func TestGenerationWrapSkipsZero(t *testing.T) {
	w, _ := newRecorder(Config{})
	h := w.Start(time.Second, Payload{})
	w.entries[uint32(h)].gen = math.MaxUint32
	h = Handle(uint64(math.MaxUint32)<<32 | uint64(uint32(h)))
	if !w.Stop(h) {
		t.Fatal("Stop failed")
	}
	h2 := w.Start(time.Second, Payload{})
	if h2>>32 == 0 || h2 == h {
		t.Fatalf("generation wrapped to %x", h2)
	}
	if w.Stop(h) || !w.Stop(h2) {
		t.Fatal("wrong Stop results after wrap")
	}
}

func TestRearmFromCallback(t *testing.T) {
	const period = 30 * time.Millisecond
	var w *Wheel
	var fires []time.Duration
	var h Handle
	w = New(Config{Tick: 5 * time.Millisecond, Slots: 4}, func(p Payload) {
		fires = append(fires, w.Now())
		if w.Stop(h) {
			t.Error("own handle still valid inside the callback")
		}
		h = w.Start(period, p)
	})
	h = w.Start(period, Payload{})
	for now := time.Duration(0); now <= time.Second; now += time.Millisecond {
		w.Advance(now)
	}
	if len(fires) != 33 {
		t.Fatalf("periodic timer fired %d times, want 33", len(fires))
	}
	for i, f := range fires {
		if want := time.Duration(i+1) * period; f != want {
			t.Fatalf("fire %d at %v, want %v", i, f, want)
		}
	}
	if w.Len() != 1 {
		t.Fatalf("Len = %d, want 1", w.Len())
	}
}

// A zero-delay re-arm inside a multi-tick Advance is due at the Advance's
// now, never in the tick being processed, so a callback cannot make Advance
// spin.
func TestZeroDelayRearm(t *testing.T) {
	const tick = time.Millisecond
	var w *Wheel
	var at []time.Duration
	w = New(Config{Tick: tick, Slots: 8}, func(p Payload) {
		at = append(at, w.Now())
		w.Start(0, p)
	})
	w.Start(0, Payload{})
	if got := w.Advance(tick); got != 1 {
		t.Fatalf("Advance(1 tick) fired %d, want 1", got)
	}
	// Fires at tick 2, re-arms for now (tick 6), fires there, re-arms for 7.
	if got := w.Advance(6 * tick); got != 2 {
		t.Fatalf("Advance(5 ticks) fired %d, want 2", got)
	}
	if got := w.Advance(6*tick + tick/2); got != 0 {
		t.Fatalf("Advance within a tick fired %d, want 0", got)
	}
	if got := w.Advance(7 * tick); got != 1 {
		t.Fatalf("Advance(7 ticks) fired %d, want 1", got)
	}
	if !slices.Equal(at, []time.Duration{tick, 6 * tick, 6 * tick, 7 * tick}) {
		t.Fatalf("fired at %v", at)
	}
}

func TestCallbackStopsAndStarts(t *testing.T) {
	const tick = time.Millisecond
	var w *Wheel
	var order []uint64
	var hA, hB, hC Handle
	w = New(Config{Tick: tick, Slots: 4}, func(p Payload) {
		order = append(order, p.Arg)
		if p.Arg != 1 {
			return
		}
		if w.Stop(hA) {
			t.Error("Stop of the firing timer returned true")
		}
		// B is due in this same tick and is next in the bucket scan.
		if !w.Stop(hB) {
			t.Error("Stop of B, due in this tick, returned false")
		}
		if !w.Stop(hC) {
			t.Error("Stop of C returned false")
		}
		w.Start(0, Payload{Arg: 4})             // next tick, likely reusing B's or C's slot
		w.Start(4*tick, Payload{Arg: 5})        // same bucket, next revolution
		w.Start(-time.Hour, Payload{Arg: 6})    // past deadline: next tick too
		w.Start(3*tick+tick/2, Payload{Arg: 7}) // mid-tick deadline
	})
	hA = w.Start(tick, Payload{Arg: 1})
	hB = w.Start(tick, Payload{Arg: 2})
	hC = w.Start(2*tick, Payload{Arg: 3})
	w.Advance(tick)
	if !slices.Equal(order, []uint64{1}) {
		t.Fatalf("after tick 1 fired %v, want [1]", order)
	}
	w.Advance(2 * tick)
	if !slices.Equal(order, []uint64{1, 4, 6}) {
		t.Fatalf("after tick 2 fired %v, want [1 4 6]", order)
	}
	w.Advance(5*tick - 1)
	if !slices.Equal(order, []uint64{1, 4, 6}) {
		t.Fatalf("before tick 5 fired %v, want [1 4 6]", order)
	}
	w.Advance(5 * tick)
	if !slices.Equal(order, []uint64{1, 4, 6, 5, 7}) {
		t.Fatalf("after tick 5 fired %v, want [1 4 6 5 7]", order)
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d", w.Len())
	}
}

func TestLongJump(t *testing.T) {
	const tick = time.Millisecond
	w, got := newRecorder(Config{Tick: tick, Slots: 8})
	rng := rand.New(rand.NewPCG(1, 2))
	at := make(map[uint64]time.Duration)
	for i := range 1000 {
		d := time.Duration(rng.Int64N(int64(100 * 8 * tick))) // up to 100 revolutions
		at[uint64(i)] = d
		w.Start(d, Payload{Arg: uint64(i)})
	}
	check := func(now time.Duration) {
		t.Helper()
		want := 0
		for _, d := range at {
			if d <= now && (d+tick-1)/tick*tick <= now {
				want++
			}
		}
		*got = (*got)[:0]
		w.Advance(now)
		for _, f := range *got {
			d, ok := at[f.p.Arg]
			if !ok {
				t.Fatalf("timer %d fired twice", f.p.Arg)
			}
			if d > now {
				t.Fatalf("timer %d fired early: deadline %v, now %v", f.p.Arg, d, now)
			}
			delete(at, f.p.Arg)
		}
		if len(*got) != want {
			t.Fatalf("Advance(%v) fired %d, want %d", now, len(*got), want)
		}
	}
	check(37*8*tick + 3*tick)          // more than a revolution at once
	check(37*8*tick + 3*tick + 9*tick) // just over a revolution more
	check(time.Hour)
	if len(at) != 0 || w.Len() != 0 {
		t.Fatalf("%d timers never fired, Len %d", len(at), w.Len())
	}
}

func TestAdvanceEdgeCases(t *testing.T) {
	w, got := newRecorder(Config{Tick: time.Millisecond})
	w.Advance(10 * time.Millisecond)
	w.Start(time.Millisecond, Payload{})
	if w.Advance(5*time.Millisecond) != 0 || w.Now() != 10*time.Millisecond {
		t.Fatal("backwards Advance was not a no-op")
	}
	w.Start(math.MaxInt64, Payload{Arg: 9}) // saturates, must not wrap into the past
	w.Advance(time.Duration(math.MaxInt64 / 2))
	if len(*got) != 1 || (*got)[0].p.Arg != 0 || w.Len() != 1 {
		t.Fatalf("got %v, Len %d", *got, w.Len())
	}
}

func TestAdvanceFromCallbackPanics(t *testing.T) {
	var w *Wheel
	w = New(Config{Tick: time.Millisecond}, func(p Payload) {
		if p.Arg == 1 {
			w.Advance(w.Now() + time.Second)
		}
	})
	w.Start(time.Millisecond, Payload{Arg: 1})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("nested Advance did not panic")
			}
		}()
		w.Advance(time.Millisecond)
	}()
	// The wheel stays usable after the panic.
	w.Start(time.Millisecond, Payload{Arg: 2})
	if n := w.Advance(time.Second); n != 1 {
		t.Fatalf("Advance after recovered panic fired %d, want 1", n)
	}
}

// ceilTick is the reference rounding: first tick boundary at or after at,
// and never a tick already processed.
func ceilTick(at time.Duration, tick time.Duration, cur int64) int64 {
	x := cur + 1
	if at > 0 {
		x = max(x, int64((at+tick-1)/tick))
	}
	return x
}

// Many random timers, some stopped, Advance in random steps; the fire
// sequence must equal the reference: survivors sorted by deadline tick, then
// Start order, each fired in the first Advance that reached that tick.
func TestRandomAgainstSorted(t *testing.T) {
	const tick = 5 * time.Millisecond
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w, got := newRecorder(Config{Tick: tick, Slots: 16}) // 80ms revolution
		type ref struct {
			exp   int64
			at    time.Duration // deadline
			start time.Duration // Now at Start
			id    uint64
		}
		var want []ref
		var now time.Duration
		for id := uint64(0); id < 3000; id++ {
			if rng.IntN(10) == 0 {
				now += time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
				w.Advance(now)
			}
			d := time.Duration(rng.Int64N(int64(3*time.Second))) - 10*time.Millisecond
			h := w.Start(d, Payload{Arg: id})
			if rng.IntN(4) == 0 {
				if !w.Stop(h) {
					t.Fatal("Stop failed")
				}
				continue
			}
			at := now + d
			want = append(want, ref{ceilTick(at, tick, int64(now/tick)), at, now, id})
		}
		// Stable: equal ticks keep Start order.
		slices.SortStableFunc(want, func(a, b ref) int { return int(a.exp - b.exp) })

		check := func() {
			t.Helper()
			n := 0
			for n < len(want) && time.Duration(want[n].exp)*tick <= now {
				n++
			}
			if len(*got) != n {
				t.Fatalf("seed %d: by %v fired %d, want %d", seed, now, len(*got), n)
			}
			for i, f := range *got {
				r := want[i]
				if f.p.Arg != r.id {
					t.Fatalf("seed %d: fire %d is timer %d, want %d", seed, i, f.p.Arg, r.id)
				}
				if f.now < r.at {
					t.Fatalf("seed %d: timer %d fired early at %v, deadline %v", seed, r.id, f.now, r.at)
				}
			}
		}
		check() // timers that fired while the others were being started
		for len(*got) < len(want) {
			prev := now
			now += time.Duration(rng.Int64N(int64(16*tick))) + 1 // at most one revolution
			before := len(*got)
			w.Advance(now)
			check()
			// Spec bound: a timer firing now was not yet a tick overdue at
			// the previous Advance.
			for _, r := range want[before:len(*got)] {
				if prev >= max(r.at, r.start)+tick {
					t.Fatalf("seed %d: timer %d (deadline %v) not fired by %v", seed, r.id, r.at, prev)
				}
			}
		}
		if w.Len() != 0 {
			t.Fatalf("seed %d: Len %d after all fired", seed, w.Len())
		}
	}
}

// Random Start/Stop, also from inside callbacks, checked online against a
// model: each fire must be the live timer with the smallest (deadline tick,
// Start order), not before its deadline, and after each Advance nothing due
// may remain.
func TestRandomWithCallbackOps(t *testing.T) {
	const tick = time.Millisecond
	const rev = 8 * tick
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 99))
		type model struct {
			exp int64
			seq uint64
			at  time.Duration
			h   Handle
		}
		live := map[uint64]*model{}
		var liveIDs []uint64
		var dead []Handle
		var mcur int64 // the tick Start rounds against, as the wheel's
		var seq uint64
		fires := 0
		var w *Wheel

		drop := func(id uint64) {
			i := slices.Index(liveIDs, id)
			liveIDs[i] = liveIDs[len(liveIDs)-1]
			liveIDs = liveIDs[:len(liveIDs)-1]
			dead = append(dead, live[id].h)
			delete(live, id)
		}
		ops := func(k int) {
			for range k {
				switch r := rng.IntN(10); {
				case r < 5:
					d := time.Duration(rng.Int64N(int64(6*rev))) - 2*tick
					seq++
					h := w.Start(d, Payload{Arg: seq})
					at := w.Now() + d
					live[seq] = &model{ceilTick(at, tick, mcur), seq, at, h}
					liveIDs = append(liveIDs, seq)
				case r < 8 && len(liveIDs) > 0:
					id := liveIDs[rng.IntN(len(liveIDs))]
					if !w.Stop(live[id].h) {
						t.Fatalf("seed %d: Stop of live timer %d failed", seed, id)
					}
					drop(id)
				case len(dead) > 0:
					if w.Stop(dead[rng.IntN(len(dead))]) {
						t.Fatalf("seed %d: Stop of a dead handle succeeded", seed)
					}
				}
			}
		}
		w = New(Config{Tick: tick, Slots: 8}, func(p Payload) {
			m, ok := live[p.Arg]
			if !ok {
				t.Fatalf("seed %d: fired timer %d which is not pending", seed, p.Arg)
			}
			for id, o := range live {
				if o.exp < m.exp || (o.exp == m.exp && o.seq < m.seq) {
					t.Fatalf("seed %d: fired %d (tick %d) before %d (tick %d)", seed, p.Arg, m.exp, id, o.exp)
				}
			}
			if m.at > w.Now() || time.Duration(m.exp)*tick > w.Now() {
				t.Fatalf("seed %d: timer %d fired early at %v, deadline %v", seed, p.Arg, w.Now(), m.at)
			}
			drop(p.Arg)
			mcur = m.exp
			fires++
			ops(rng.IntN(4))
		})

		var now time.Duration
		for range 10000 {
			if rng.IntN(3) > 0 {
				ops(1)
				continue
			}
			now += time.Duration(rng.Int64N(int64(rev) + 1)) // no more than a revolution: ordered
			before := fires
			if n := w.Advance(now); n != fires-before {
				t.Fatalf("seed %d: Advance returned %d, callback ran %d times", seed, n, fires-before)
			}
			mcur = int64(now / tick)
			for id, o := range live {
				if o.exp <= mcur {
					t.Fatalf("seed %d: timer %d due at tick %d still pending at %v", seed, id, o.exp, now)
				}
			}
			if w.Len() != len(live) {
				t.Fatalf("seed %d: Len %d, model %d", seed, w.Len(), len(live))
			}
		}
		if fires < 1500 {
			t.Fatalf("seed %d: only %d fires, test is too weak", seed, fires)
		}
	}
}

func TestEntrySize(t *testing.T) {
	if s := unsafe.Sizeof(entry{}); s != 32 {
		t.Fatalf("entry is %d bytes, want 32", s)
	}
}
