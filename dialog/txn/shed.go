package txn

// Shedding. A transaction keeps its stored message only while it may send
// it again: a client its request until the final response (RFC 3261
// 17.1.1.2, 17.1.2.2: only Calling, Trying and Proceeding retransmit it,
// and an INVITE's ACK for a non-2xx is built before it goes), an INVITE
// server its responses until a 2xx (RFC 6026 7.1: Accepted never
// retransmits, the TU does) or the ACK of a non-2xx (17.2.1: Confirmed
// only absorbs). Past that, Accepted, Completed and Confirmed hold a
// transaction up to 64*T1 only to match retransmissions, which needs its
// key alone. So the message's buffer goes to a spare list of its kind, for
// the next transaction of that kind to take (alloc, respond). At a steady
// rate most transactions sit in those long states: the table keeps
// buffers for the few that are sending, not for 32 s of them, and a load
// growing its table touches half the fresh memory (docs/design/wire.md 9).
//
// The actions of the call that sheds may still view the buffer (the 2xx
// just sent): it waits in shedding until the next call's begin, as a
// terminated slot waits in limbo. The spares count as pooled bytes; the
// trim releases those no transaction took since the trim before.

type shedBuf struct {
	kind Kind
	buf  []byte
}

// shed moves x's stored message to the spares of its kind.
func (t *Table) shed(x *txn) {
	if cap(x.msg) == 0 {
		return
	}
	n := cap(x.msg)
	x.held -= n
	if t.held > t.budget || n > maxKeptSlotBytes {
		t.held -= n // over budget or unusually large: as release does
	} else {
		t.pooled += n
		t.shedding = append(t.shedding, shedBuf{x.kind, x.msg[:0]})
	}
	x.msg = nil
}

// refill gives x a spare buffer for its message when it has none.
func (t *Table) refill(x *txn) {
	k := x.kind
	n := len(t.spares[k])
	if cap(x.msg) > 0 || n == 0 {
		return
	}
	x.msg = t.spares[k][n-1]
	t.spares[k][n-1] = nil
	t.spares[k] = t.spares[k][:n-1]
	t.spareLow[k] = min(t.spareLow[k], n-1)
	t.pooled -= cap(x.msg)
	x.held += cap(x.msg)
}

// unshed makes the buffers shed by the previous call spares (begin).
func (t *Table) unshed() {
	for i, s := range t.shedding {
		t.spares[s.kind] = append(t.spares[s.kind], s.buf)
		t.shedding[i] = shedBuf{}
	}
	t.shedding = t.shedding[:0]
}

// trimSpares releases the spares of each kind that no transaction took
// since the last trim (the list's low mark), and reports whether any are
// left.
func (t *Table) trimSpares() (left bool) {
	for k, s := range t.spares {
		idle := t.spareLow[k]
		for _, b := range s[:idle] {
			t.held -= cap(b)
			t.pooled -= cap(b)
		}
		n := copy(s, s[idle:])
		clear(s[n:])
		t.spares[k], t.spareLow[k] = s[:n], n
		left = left || n > 0
	}
	return left
}
