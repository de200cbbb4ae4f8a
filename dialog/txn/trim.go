package txn

// The trim gives memory back after a peak. A slot keeps its buffers for the
// next transaction, and the slab and index keep the size of the largest
// load they served: a steady load allocates nothing. After a peak, though,
// the slots it needed sit free with their buffers, and the table would hold
// the peak's memory for ever. So a slot free for Config.IdleRelease gives
// its buffers to the garbage collector (a steady load never lets one sit
// that long: the free list hands out the slots freed last first), and once
// every free slot has, a slab and index that hold four times what is live
// or more shrink to fit.
//
// The table arms its own timer for it (trimArg on Timers) whenever a
// transaction terminates and none is pending, every IdleRelease/2 while
// free slots are young: its fire is also the call that frees the slots of
// the last transactions to end, which an idle table gets no other. Its work is bounded by the slots freed since the last trim: each
// free list (one per kind, see alloc) runs from the slot freed last to the
// slot freed first, so the slots old enough to release form its tail, and
// those released before end it.

// trimArg is the timer argument of the trim: a slot index no transaction
// has (indexes stay below maxTransactions) and inTimerTrim.
const trimArg = uint64(inTimerTrim)<<24 | maxTransactions

// armTrim arms the trim's timer unless it is pending or trims are off.
func (t *Table) armTrim() {
	if t.trimArmed || t.idleRelease <= 0 {
		return
	}
	t.trimArmed = true
	t.timers.StartAt(t.now+t.idleRelease/2, trimArg)
}

// trim releases the buffers of the slots free for IdleRelease or longer and
// the spares no transaction took since the last trim (shed.go) and, when no
// free slot is younger and no spare is left, shrinks the slab and the index.
func (t *Table) trim() {
	t.trimArmed = false
	cutoff := t.now - t.idleRelease
	young := 0
	for _, head := range t.free {
		for i := head; i >= 0; i = t.slots.at(i).next {
			x := t.slots.at(i)
			if x.freedAt > cutoff {
				young++
				continue
			}
			if x.swept {
				break // the tail trims before released
			}
			t.pooled -= x.held
			t.release(x)
			x.swept = true
		}
	}
	spares := t.trimSpares()
	switch {
	case young > 0, spares:
		t.armTrim()
	case t.taken > 0:
		t.armTrim() // a list TakeActions gave out may name any slot: later
	default:
		t.shrink()
	}
}

// shrink cuts the slab after its last live slot, and halves the index
// while it is over eight times the live transactions, when that gives back
// three quarters of the slab or more (and minShrink slots at least): the
// slab and the index then grow again only for a load like the one they
// served. Every free slot is bare (trim released them all). The slots left
// are free-listed in order, so that new transactions fill the low ones and
// a later shrink can cut more.
func (t *Table) shrink() {
	n := t.slots.n
	for n > 0 && t.slots.at(n-1).state == StateTerminated {
		n--
	}
	keep := max(int(n), t.minSlots)
	if keep*4 > t.slots.len() || t.slots.cap()-keep < minShrink {
		return
	}
	for i := n; i < t.slots.n; i++ {
		if g := t.slots.at(i).gen; g >= t.genFloor {
			t.genFloor = max(g+1, 1) // a wrapped generation restarts at 1
		}
	}
	t.slots.truncate(n, keep)
	for k := range t.free {
		t.free[k] = -1
	}
	for i := n - 1; i >= 0; i-- {
		if x := t.slots.at(i); x.state == StateTerminated {
			x.next, t.free[x.kind] = t.free[x.kind], i
		}
	}

	size := 64
	for size < 4*t.indexed {
		size <<= 1
	}
	if size < len(t.index) {
		t.index = make([]int32, size)
		for i := range t.slots.n {
			if t.slots.at(i).inIndex {
				t.place(int32(i))
			}
		}
	}
	if t.freeInvite >= 0 && t.invitesFree() == len(t.invites) {
		t.invites, t.freeInvite = nil, -1
	}
}

// invitesFree counts the entries of the invites slab on its free list.
func (t *Table) invitesFree() int {
	n := 0
	for k := t.freeInvite; k >= 0; k = t.invites[k].next {
		n++
	}
	return n
}
