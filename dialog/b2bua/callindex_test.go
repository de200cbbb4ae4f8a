package b2bua

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestCallIndex checks callIndex against a map through random sets and
// deletes, with hashes crowded onto few home slots so that clusters form,
// wrap around the slab and shift back on delete.
func TestCallIndex(t *testing.T) {
	f := func(seed, spread uint64) {
		t.Helper()
		r := rand.New(rand.NewPCG(seed, 0))
		var x callIndex
		want := map[uint64]int32{}
		check := func(op int, h uint64) {
			t.Helper()
			i, ok := want[h]
			if got, gotOK := x.get(h); gotOK != ok || got != i {
				t.Fatalf("seed %d, op %d: get(%#x) = %d, %v; want %d, %v", seed, op, h, got, gotOK, i, ok)
			}
		}
		for op := range 20000 {
			// Hashes differing in their high bits alone share a home.
			h := r.Uint64N(spread) | r.Uint64N(4)<<60
			i := int32(r.IntN(3))
			if r.IntN(2) == 0 {
				x.set(h, i)
				want[h] = i
			} else {
				x.delete(h, i)
				if j, ok := want[h]; ok && j == i {
					delete(want, h)
				}
			}
			check(op, h)
			if x.n != len(want) {
				t.Fatalf("seed %d, op %d: %d in use, want %d", seed, op, x.n, len(want))
			}
			if op%500 == 0 {
				for h := range want {
					check(op, h)
				}
			}
		}
		for h := range want {
			check(-1, h)
		}
	}
	f(1, 16)
	f(2, 64)
	f(3, 1000)
	f(4, 1<<40)
}

// TestCallIndexCraftedCallIDs indexes Call-IDs chosen, as a caller can
// choose them offline, so that their unseeded xxhash ends in twelve zero
// bits: were a slot's home those bits, every one would share a home and
// each lookup would probe a cluster of them all. The index hashes with a
// per-engine seed, as txn.Table does: the probes stay short.
func TestCallIndexCraftedCallIDs(t *testing.T) {
	r := newRig(t, nil)
	const n = 256
	for i, k := 0, 0; i < n; k++ {
		id := fmt.Appendf(nil, "flood-%d@attacker.example", k)
		if xxhash.Sum64(id)&0xfff != 0 {
			continue
		}
		r.e.indexLeg(&Call{idx: int32(i)}, &leg{callID: id})
		i++
	}
	x := &r.e.calls.index
	mask := uint64(len(x.slots) - 1)
	longest := uint64(0)
	for p, s := range x.slots {
		if s.call != 0 {
			longest = max(longest, (uint64(p)-s.hash)&mask)
		}
	}
	if longest > 32 {
		t.Errorf("a Call-ID sits %d slots past its home among %d calls in %d slots: crafted Call-IDs cluster", longest, n, len(x.slots))
	}
}
