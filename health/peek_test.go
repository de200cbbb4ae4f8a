package health

import (
	"testing"
	"time"
)

// Peek says which member Pick would choose, taking nothing: a half-open
// member's trial calls stay, a hash group maps a key as Pick does, a
// rotation does not move, and a group's Result is Pick's.
func TestPeek(t *testing.T) {
	r, _ := newTestRegistry(t, Options{},
		GroupConfig{Name: "w", Destinations: dests(2), Passive: PassiveConfig{HalfOpenCalls: 1}},
		GroupConfig{Name: "h", Algorithm: AlgorithmHash, Destinations: dests(5)},
		GroupConfig{Name: "rr", Algorithm: AlgorithmRoundRobin, Destinations: dests(3)},
		GroupConfig{Name: "p", Algorithm: AlgorithmHash, Destinations: dests(4)})
	if _, res := r.Peek("nope", 0); res != UnknownGroup {
		t.Fatalf("unknown group: %v", res)
	}

	// One half-open member with one trial call left: peeking leaves it.
	r.toDown(st(t, r, "w", 0), false, "test", nil)
	r.toDown(st(t, r, "w", 1), false, "test", nil)
	r.toHalfOpen(st(t, r, "w", 1), "test")
	for range 3 {
		if m, res := r.Peek("w", 0); res != OK || m.Index != 1 || m.st != nil {
			t.Fatalf("half-open member: %+v %v, want member 1, not to be reported", m, res)
		}
	}
	var sel Selector
	if m, res := r.Pick("w", 0, &sel); res != OK || m.Index != 1 {
		t.Fatalf("Pick after the Peeks: %+v %v, want the trial call still there", m, res)
	}
	if _, res := r.Peek("w", 0); res != GroupDown {
		t.Fatalf("its trial taken: %v, want group_down", res)
	}

	// Hash: the member Pick maps the key to.
	for k := uint64(1); k < 200; k++ {
		key := k * 0x9e3779b97f4a7c15
		pm, _ := r.Pick("h", key, &sel)
		if m, res := r.Peek("h", key); res != OK || m.Index != pm.Index {
			t.Fatalf("key %x: Peek %d %v, Pick %d", key, m.Index, res, pm.Index)
		}
	}

	// Panic (one member of four up, under the default threshold of 50%):
	// Peek chooses among the members calls marked down, as Pick does.
	for i := range 3 {
		r.toDown(st(t, r, "p", i), false, "test", nil)
	}
	spread := map[int]bool{}
	for k := uint64(1); k < 200; k++ {
		key := k * 0x9e3779b97f4a7c15
		pm, _ := r.Pick("p", key, &sel)
		m, res := r.Peek("p", key)
		if res != OK || m.Index != pm.Index {
			t.Fatalf("panic, key %x: Peek %d %v, Pick %d", key, m.Index, res, pm.Index)
		}
		spread[m.Index] = true
	}
	if len(spread) < 2 {
		t.Fatalf("panic: Peek chose only %v, want members marked down too", spread)
	}

	// Every member down, three by calls, one by probes: Peek finds
	// none, PeekLastResort the member PickLastResort takes, never the
	// probes' one.
	r.toDown(st(t, r, "p", 3), true, "test", nil)
	for k := uint64(1); k < 50; k++ {
		key := k * 0x9e3779b97f4a7c15
		if _, res := r.Peek("p", key); res != GroupDown {
			t.Fatalf("all down, key %x: Peek %v, want group_down", key, res)
		}
		pm, _ := r.PickLastResort("p", key, &sel)
		m, res := r.PeekLastResort("p", key)
		if res != OK || m.Index != pm.Index || m.Index == 3 {
			t.Fatalf("all down, key %x: PeekLastResort %d %v, PickLastResort %d", key, m.Index, res, pm.Index)
		}
	}

	// Round robin: the rotation's first choice, however often peeked.
	for range 3 {
		if m, _ := r.Peek("rr", 0); m.Index != 0 {
			t.Fatalf("round robin: %d, want 0", m.Index)
		}
	}
	r.setCooldown(st(t, r, "rr", 0), time.Hour, "test")
	if m, _ := r.Peek("rr", 0); m.Index != 1 {
		t.Fatalf("round robin, member 0 in cooldown: %d, want 1", m.Index)
	}
}
