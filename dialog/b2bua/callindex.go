package b2bua

import "hash/maphash"

// callIndex finds a call by the hash of either leg's Call-ID. Each call
// indexes a leg or two and drops them at its end, a few operations per
// call, which a Go map makes the costliest part of a call's bookkeeping
// (a delete alone ran to some 200 instructions). It is open addressing
// with linear probing over a power-of-two slab at most half full, and
// backward-shift deletion as in txn.Table's index: no tombstones, so
// lookups stay short under churn, and nothing is allocated once the slab
// has grown to the most calls ever live.
//
// A slot's home is the low bits of the hash, so the hash is keyed (hash):
// a caller picks its Call-IDs, and with an unkeyed one (xxhash) could pick
// them all onto one home offline, making every lookup walk a cluster of
// all its calls (hash flooding), which a Go map's own seeded hash had
// prevented.
type callIndex struct {
	slots []callSlot
	n     int // slots in use
	seed  maphash.Seed
}

type callSlot struct {
	hash uint64
	call int32 // 1 + the call's index in Engine.calls; 0: empty
}

const minCallIndex = 64 // slots at first

// hash is the key of a Call-ID in the index, under its seed.
func (x *callIndex) hash(callID []byte) uint64 { return maphash.Bytes(x.seed, callID) }

// find returns the slot holding hash h, or -1.
func (x *callIndex) find(h uint64) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		s := &x.slots[p]
		if s.call == 0 {
			return -1
		}
		if s.hash == h {
			return int(p)
		}
	}
}

// get returns the call indexed under h.
func (x *callIndex) get(h uint64) (int32, bool) {
	if p := x.find(h); p >= 0 {
		return x.slots[p].call - 1, true
	}
	return 0, false
}

// set indexes call i under h, in place of the call indexed under h before.
func (x *callIndex) set(h uint64, i int32) {
	if p := x.find(h); p >= 0 {
		x.slots[p].call = i + 1
		return
	}
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	x.place(callSlot{hash: h, call: i + 1})
	x.n++
}

func (x *callIndex) place(s callSlot) {
	mask := uint64(len(x.slots) - 1)
	p := s.hash & mask
	for x.slots[p].call != 0 {
		p = (p + 1) & mask
	}
	x.slots[p] = s
}

// grow doubles the slab, the only allocation of the index.
func (x *callIndex) grow() {
	old := x.slots
	x.slots = make([]callSlot, max(2*len(old), minCallIndex))
	for _, s := range old {
		if s.call != 0 {
			x.place(s)
		}
	}
}

// delete drops h if it indexes call i (another call may have taken h
// over since), by backward-shift deletion (Knuth 6.4, Algorithm R).
func (x *callIndex) delete(h uint64, i int32) {
	p := x.find(h)
	if p < 0 || x.slots[p].call != i+1 {
		return
	}
	x.n--
	mask := len(x.slots) - 1
	for q := p; ; {
		q = (q + 1) & mask
		s := x.slots[q]
		if s.call == 0 {
			break
		}
		// The entry at q may fill the hole at p unless its home lies
		// cyclically in (p, q].
		if home := int(s.hash) & mask; (q-home)&mask >= (q-p)&mask {
			x.slots[p] = s
			p = q
		}
	}
	x.slots[p] = callSlot{}
}
