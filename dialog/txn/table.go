package txn

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"strconv"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// txn is one transaction. Its byte slices are its own storage, kept across
// reuse of the slot so that a warm table allocates nothing.
type txn struct {
	hash uint64
	key  []byte // the index key; see the key functions below
	msg  []byte // client: the request; server: the last response sent (empty if none)
	ack  []byte // INVITE client: the ACK for a non-2xx response (RFC 3261 17.1.1.3)
	// INVITE client: the header lines for its CANCEL (CancelWith).
	cancelHdrs []byte

	// RFC 2543 server transactions: the To tag of the last final response
	// sent, which an ACK's must equal (that of the request is in the key).
	respTag []byte

	peer transport.Peer

	// held is the capacity of the buffers above as last charged to
	// Table.held (see charge); it stays with the slot, as they do.
	held int
	// A free slot: when it was freed, and whether trim has released its
	// buffers since (see trim).
	freedAt time.Duration
	swept   bool

	// At most one retransmission timer (A, E, G) and one lifetime timer
	// (the others) run at a time; rtxID and lifeID are 0 when not armed.
	rtx, life     uint64
	rtxID, lifeID input
	// INVITE client sent with SendBuilt: 1 + the index in Table.invites of
	// where its request's parts lie, until its final response; 0 when the
	// request is re-parsed instead.
	invite   int32
	interval time.Duration // current A, E or G interval
	gen      uint32
	next     int32 // free list
	kind     Kind
	state    State
	legacy   bool  // RFC 2543 request: matched by the legacy rules of RFC 3261 17.2.3
	internal bool  // a CANCEL the table sent on its own: the TU hears nothing of it
	cancel   uint8 // INVITE client: cancelNone, cancelPending, cancelSent
	inIndex  bool
}

const (
	cancelNone uint8 = iota
	cancelPending
	cancelSent
)

func (x *txn) reset() {
	x.hash = 0
	x.key = x.key[:0]
	x.msg = x.msg[:0]
	x.ack = x.ack[:0]
	x.cancelHdrs = x.cancelHdrs[:0]
	x.respTag = x.respTag[:0]
	x.peer = transport.Peer{}
	x.rtx, x.life, x.rtxID, x.lifeID = 0, 0, 0, 0
	x.invite = 0
	x.interval = 0
	x.next = -1
	x.kind, x.state = 0, StateTerminated
	x.legacy, x.internal, x.inIndex = false, false, false
	x.cancel = cancelNone
}

// charge brings Table.held up to date with x's buffers after a store. It
// is the budget's whole cost on the hot path: a few adds, no scan. The
// capacity is counted, not the length, since a reused slot keeps the
// buffers of its largest message.
func (t *Table) charge(x *txn) {
	n := cap(x.key) + cap(x.msg) + cap(x.ack) + cap(x.cancelHdrs) + cap(x.respTag)
	t.held += n - x.held
	x.held = n
}

// takeFree pops a free slot, from kind's list when it has one, else from
// any other; -1 when every list is empty.
func (t *Table) takeFree(kind Kind) int32 {
	k := int(kind)
	for other := 0; t.free[k] < 0; other++ {
		if other == len(t.free) {
			return -1
		}
		k = other
	}
	i := t.free[k]
	t.free[k] = t.slots.at(i).next
	return i
}

// release gives x's buffers back to the garbage collector and takes them
// off Table.held. The actions of the current call may still view them; they
// keep the memory alive until cleared, as the GC sees to.
func (t *Table) release(x *txn) {
	t.held -= x.held
	x.held = 0
	x.key, x.msg, x.ack, x.cancelHdrs, x.respTag = nil, nil, nil, nil, nil
}

// handle packs generation and index: gen<<32 | index. Indexes stay below
// 1<<24 so that bits 24-31 can carry a timer id in a timer argument.
func (t *Table) handle(i int32) Handle { return Handle(uint64(t.slots.at(i).gen)<<32 | uint64(i)) }

// lookup returns the slot of a live transaction h.
func (t *Table) lookup(h Handle) (int32, bool) {
	i := uint64(h) & 0xffffffff
	if i >= uint64(t.slots.len()) {
		return -1, false
	}
	x := t.slots.at(int32(i))
	if x.gen != uint32(h>>32) || x.state == StateTerminated {
		return -1, false
	}
	return int32(i), true
}

// alloc takes a free slot, one a transaction of the same kind held when
// there is one, or grows the slab. The slot's buffers keep their capacity:
// a slot of the same kind has held a message like the new one's, so they
// fit; with one free list for all kinds, a slot would go to any kind, and
// its buffers would grow until it had held the largest of every kind (in
// a busy shard, minutes of allocation after its tables reached their size).
func (t *Table) alloc(kind Kind, state State, peer transport.Peer) (int32, error) {
	if t.live >= t.max {
		return -1, ErrFull
	}
	if t.held > t.hard && !kind.client() {
		// Over twice the budget, which only transactions the budget never
		// shortens (INVITE, client) can bring about: refuse new requests
		// from the network, which the owner answers 503 statelessly,
		// rather than grow further. The TU's own requests (a BYE ending a
		// call, a CANCEL, a gateway probe) go on: they free state, and
		// the requests the table admits bound them.
		t.stats.BudgetRefused++
		return -1, ErrFull
	}
	i := t.takeFree(kind)
	if i >= 0 {
		t.pooled -= t.slots.at(i).held
	} else {
		if t.slots.len() >= maxTransactions {
			return -1, ErrFull
		}
		i = t.slots.add(txn{gen: t.genFloor})
	}
	t.live++
	x := t.slots.at(i)
	x.reset()
	x.kind, x.state, x.peer = kind, state, peer
	t.refill(x)
	return i, nil
}

// terminate ends transaction i (the Terminated state of every figure): its
// timers stop, it leaves the index, the TU hears of it, and its Handle goes
// stale. The slot is freed at the start of the next call, so that views
// into its buffers in this call's actions stay valid.
func (t *Table) terminate(i int32) {
	x := t.slots.at(i)
	t.stopRtx(x)
	t.stopLife(x)
	t.dropInvite(x)
	if x.inIndex {
		t.unindex(i)
	}
	if !x.internal {
		t.act(ActTerminated, t.handle(i), x.peer, nil)
	}
	x.state = StateTerminated
	if x.gen++; x.gen == 0 {
		x.gen = 1
	}
	t.limbo = append(t.limbo, i)
	t.live--
	t.armTrim()
	if t.held > t.budget || x.held > maxKeptSlotBytes {
		// Over budget, a slot does not keep its buffers for reuse: the
		// table shrinks back to its budget as transactions end. Nor does
		// it keep the buffers of an unusually large message: a slot keeps
		// the largest buffers it ever held, and slots take turns serving
		// every transaction, so a few large messages among ordinary ones
		// would grow every slot to their size over hours, and a table at
		// a steady load to its budget, shortening Timer J with no flood.
		t.release(x)
	} else {
		t.pooled += x.held
	}
}

// Keys. A transaction is indexed by a 64-bit hash of its key bytes; the key
// itself is kept in the transaction and compared on lookup, so a hash
// collision never confuses two transactions. Keys start with a byte naming
// the matching rule:
//
//	'S' method 0 lower(branch) 0 lower(sent-by host) ':' port (2 bytes)
//	                                                      server, RFC 3261 17.2.3
//	'L' method 0 Call-ID 0 CSeq number 0 From tag 0 top Via 0 Request-URI 0 To tag
//	                                                      server, RFC 2543 (17.2.3 legacy)
//	'C' method 0 lower(branch)                            client, RFC 3261 17.1.3
//
// ACK and CANCEL look up their INVITE with method "INVITE". A legacy key
// ends with the request's To tag, so that requests differing only in it,
// which anyone can send, spread over the index rather than share one hash
// and one probe cluster. An ACK's To tag is that of the final response,
// not of the INVITE: receiveAck looks its INVITE up under both (see there).

var (
	methodInvite = []byte("INVITE")
	methodCancel = []byte("CANCEL")
)

// serverKey builds the RFC 3261 17.2.3 key into t.key.
func (t *Table) serverKey(method []byte, via *parser.Via) {
	k := append(t.key[:0], 'S')
	k = append(k, method...)
	k = append(k, 0)
	k = appendLower(k, via.Branch)
	k = append(k, 0)
	k = appendLower(k, via.Host)
	// The port in binary: the key is only compared, and it ends the key,
	// so a fixed width needs no delimiter.
	t.key = append(k, ':', byte(via.Port>>8), byte(via.Port))
}

// appendLower appends b in ASCII lower case: the branch is a token and the
// host a host name, both compared without case (RFC 3261 7.3.1, 19.1.4).
// Eight bytes a round, the last round on the last eight (lowering twice
// changes nothing); a short b byte by byte.
func appendLower(dst, b []byte) []byte {
	n := len(dst)
	dst = append(dst, b...) // one copy, then a pass without appends
	low := dst[n:]
	if len(low) < 8 {
		for i, c := range low {
			if 'A' <= c && c <= 'Z' {
				low[i] = c + 'a' - 'A'
			}
		}
		return dst
	}
	for i := 0; i < len(low)-8; i += 8 {
		binary.LittleEndian.PutUint64(low[i:], lowerWord(binary.LittleEndian.Uint64(low[i:])))
	}
	tail := low[len(low)-8:]
	binary.LittleEndian.PutUint64(tail, lowerWord(binary.LittleEndian.Uint64(tail)))
	return dst
}

// lowerWord lowers the ASCII capitals among the eight bytes of x. The sums
// are on each byte's low seven bits, so none carries into the next byte; a
// byte with its high bit set is not ASCII and is left alone.
func lowerWord(x uint64) uint64 {
	const ones = 0x0101010101010101
	low7 := x & (0x7f * ones)
	atLeastA := low7 + (0x80-'A')*ones // high bit set where the byte is >= 'A'
	pastZ := low7 + (0x80-'Z'-1)*ones  // high bit set where the byte is > 'Z'
	upper := atLeastA &^ pastZ &^ x & (0x80 * ones)
	return x | upper>>2 // 0x80>>2 is 'a'-'A'
}

// legacyKey builds the RFC 2543 key (RFC 3261 17.2.3, last paragraphs) into
// t.key and returns the request's To tag, which ends the key. Header values
// are compared as bytes: a retransmission repeats them byte for byte, and
// the URI and Via equivalence rules of RFC 3261 19.1.4 and 20.42 are not
// applied.
func (t *Table) legacyKey(method []byte, m *parser.Message) (toTag []byte, err error) {
	cseq, err := m.CSeq()
	if err != nil {
		return nil, err
	}
	var a parser.Address
	if err := m.To(&a); err != nil {
		return nil, err
	}
	toTag = a.Tag
	if err := m.From(&a); err != nil {
		return nil, err
	}
	callID := m.CallID()
	if callID == nil {
		return nil, parser.ErrMissingCallID
	}
	k := append(t.key[:0], 'L')
	k = append(k, method...)
	k = append(k, 0)
	k = append(k, callID...)
	k = append(k, 0)
	k = strconv.AppendUint(k, uint64(cseq.Num), 10)
	k = append(k, 0)
	k = append(k, a.Tag...)
	k = append(k, 0)
	k = append(k, m.Get(parser.HeaderVia)...)
	k = append(k, 0)
	k = append(k, m.RequestURI()...)
	k = append(k, 0)
	t.key = append(k, toTag...)
	return toTag, nil
}

// requestKey builds into t.key the key of the server transaction request m
// belongs to, looked up as method. It reports whether m is an RFC 2543
// request (no branch, or one without the magic cookie) and returns its To
// tag in that case.
func (t *Table) requestKey(m *parser.Message, via *parser.Via, method []byte) (legacy bool, toTag []byte, err error) {
	if via.IsRFC3261Branch() {
		t.serverKey(method, via)
		return false, nil, nil
	}
	toTag, err = t.legacyKey(method, m)
	return true, toTag, err
}

// keyMethod returns the method of a key, which follows its rule byte.
func keyMethod(key []byte) []byte {
	if len(key) == 0 {
		return nil
	}
	if i := bytes.IndexByte(key[1:], 0); i >= 0 {
		return key[1 : 1+i]
	}
	return key[1:]
}

// clientKey builds the RFC 3261 17.1.3 key into t.key.
func (t *Table) clientKey(method, branch []byte) {
	k := append(t.key[:0], 'C')
	k = append(k, method...)
	k = append(k, 0)
	t.key = appendLower(k, branch)
}

func (t *Table) hash(key []byte) uint64 { return maphash.Bytes(t.seed, key) }

// find returns the slot of the transaction whose key is t.key, or -1. An
// RFC 2543 ACK must carry the To tag of the final response the transaction
// sent, too (RFC 3261 17.2.3); other requests' To tags are in the key.
func (t *Table) find(h uint64, toTag []byte, ack bool) int32 {
	mask := uint64(len(t.index) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		s := t.index[p]
		if s == 0 {
			return -1
		}
		x := t.slots.at(s - 1)
		if x.hash != h || string(x.key) != string(t.key) {
			continue
		}
		if ack && x.legacy && string(x.respTag) != string(toTag) {
			continue
		}
		return s - 1
	}
}

// insert indexes transaction i under t.key, copying the key into the
// transaction.
func (t *Table) insert(i int32, h uint64) {
	if 2*(t.indexed+1) > len(t.index) {
		t.grow()
	}
	x := t.slots.at(i)
	x.hash = h
	x.key = append(x.key[:0], t.key...)
	t.charge(x)
	x.inIndex = true
	t.place(i)
	t.indexed++
}

func (t *Table) place(i int32) {
	mask := uint64(len(t.index) - 1)
	p := t.slots.at(i).hash & mask
	for t.index[p] != 0 {
		p = (p + 1) & mask
	}
	t.index[p] = i + 1
}

// grow doubles the index. It is the only allocation of the index, made when
// more transactions are live than ever before.
func (t *Table) grow() {
	old := t.index
	t.index = make([]int32, 2*len(old))
	for _, s := range old {
		if s != 0 {
			t.place(s - 1)
		}
	}
}

// unindex removes transaction i by backward-shift deletion (Knuth 6.4,
// Algorithm R), which leaves no tombstones: lookups stay short under churn.
func (t *Table) unindex(i int32) {
	mask := uint64(len(t.index) - 1)
	p := t.slots.at(i).hash & mask
	for t.index[p] != i+1 {
		p = (p + 1) & mask
	}
	for {
		t.index[p] = 0
		q := p
		for {
			q = (q + 1) & mask
			s := t.index[q]
			if s == 0 {
				t.slots.at(i).inIndex = false
				t.indexed--
				return
			}
			// The entry at q may fill the hole at p unless its home lies
			// cyclically in (p, q].
			home := t.slots.at(s-1).hash & mask
			if p <= q && (home <= p || home > q) || p > q && home <= p && home > q {
				t.index[p] = s
				p = q
				break
			}
		}
	}
}

// Timers. A timer's argument is the transaction's Handle with the timer's
// input in bits 24-31, so a fire finds its transaction and state machine
// input without a lookup, and a fire for a reused slot is ignored.

func (t *Table) timerArg(i int32, id input) uint64 { return uint64(t.handle(i)) | uint64(id)<<24 }

// arm starts timer id to fire d from now.
func (t *Table) arm(i int32, id input, d time.Duration) {
	x := t.slots.at(i)
	h := t.timers.StartAt(t.now+d, t.timerArg(i, id))
	if id.retransmit() {
		x.rtx, x.rtxID = h, id
	} else {
		x.life, x.lifeID = h, id
	}
}

func (t *Table) stopRtx(x *txn) {
	if x.rtxID != 0 {
		t.timers.Stop(x.rtx)
		x.rtx, x.rtxID = 0, 0
	}
}

func (t *Table) stopLife(x *txn) {
	if x.lifeID != 0 {
		t.timers.Stop(x.life)
		x.life, x.lifeID = 0, 0
	}
}

// linger arms the wait timer of a Completed or Confirmed state (D, I, J, K),
// or terminates at once when the transport is reliable, where its value is
// zero (RFC 3261 Table 4).
func (t *Table) linger(i int32, id input, d time.Duration) {
	if t.slots.at(i).peer.Transport.Reliable() {
		t.terminate(i)
		return
	}
	t.arm(i, id, d)
}

// Timeout delivers a fired timer: arg is the argument given to
// Timers.StartAt. A timer of a terminated transaction, or one stopped or
// superseded, is ignored. Call it from the wheel's fire callback, before any
// other call on the Table, and read Actions after it.
func (t *Table) Timeout(arg uint64, now time.Duration) {
	t.begin(now)
	id := input(arg >> 24)
	if arg == trimArg {
		t.trim()
		return
	}
	i, ok := t.lookup(Handle(arg &^ (0xff << 24)))
	if !ok || !id.timer() {
		return
	}
	x := t.slots.at(i)
	if id.retransmit() {
		if x.rtxID != id {
			return
		}
		x.rtx, x.rtxID = 0, 0
	} else {
		if x.lifeID != id {
			return
		}
		x.life, x.lifeID = 0, 0
	}
	_ = t.step(i, &event{in: id})
}

// TransportError reports that the transport could not send for transaction
// h (an ActSend of h failed, or its connection is gone). A client
// transaction informs the TU and terminates (RFC 3261 17.1.4) in the states
// that send; a server transaction informs the TU and stays in its state
// (RFC 6026 8.8, amending 17.2.4), its timers or the TU's final response
// still ending it.
func (t *Table) TransportError(h Handle, now time.Duration) error {
	t.begin(now)
	i, ok := t.lookup(h)
	if !ok {
		return ErrStale
	}
	return t.step(i, &event{in: inTransportError})
}

// PeerFailed reports that nothing can be sent to peer: a connection to it
// could not be opened, so the requests queued for it are lost. Every
// client transaction to peer's address and transport sees a transport
// error (RFC 3261 17.1.4), as one whose ActSend failed would, and the TU
// hears of those in the states that send. It returns how many were told.
func (t *Table) PeerFailed(peer transport.Peer, now time.Duration) int {
	t.begin(now)
	n := 0
	for i := range t.slots.n {
		x := t.slots.at(i)
		if x.state == StateTerminated || !x.kind.client() || x.peer.Addr != peer.Addr || x.peer.Transport != peer.Transport {
			continue
		}
		t.step(int32(i), &event{in: inTransportError})
		n++
	}
	return n
}

// Terminate ends transaction h at once, stopping its timers, whatever its
// state: for a TU that gives up on a transaction the RFC would keep (a
// client INVITE in Proceeding never answered and never cancelled, or
// shutdown).
func (t *Table) Terminate(h Handle, now time.Duration) error {
	t.begin(now)
	i, ok := t.lookup(h)
	if !ok {
		return ErrStale
	}
	t.terminate(i)
	return nil
}

// Output helpers.

// act appends an action, written in place: an Action built on the stack
// and copied into the list stalled each append on a store the copy's wider
// loads could not take forwarded, a few percent of a call's time.
func (t *Table) act(kind ActionKind, h Handle, peer transport.Peer, data []byte) *Action {
	if len(t.actions) < cap(t.actions) {
		t.actions = t.actions[:len(t.actions)+1]
	} else {
		t.actions = append(t.actions, Action{})
	}
	a := &t.actions[len(t.actions)-1]
	a.Kind, a.Txn, a.Ref, a.Peer, a.Data = kind, h, 0, peer, data
	return a
}

func (t *Table) send(i int32, data []byte) {
	t.act(ActSend, t.handle(i), t.slots.at(i).peer, data)
}

// resend is send for a retransmission, counted in Stats.
func (t *Table) resend(i int32, data []byte) {
	t.stats.Retransmissions++
	t.send(i, data)
}

func (t *Table) tu(kind ActionKind, i int32) {
	x := t.slots.at(i)
	if x.internal {
		return
	}
	var data []byte
	if kind == ActResponse {
		// The request: a view valid as long as any Data, though the
		// response may terminate the transaction at once (a reliable
		// transport's Timer K is zero): its slot waits in limbo, and a
		// release over budget leaves the bytes to the garbage collector.
		data = x.msg
	}
	t.act(kind, t.handle(i), x.peer, data)
}
