package txn

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// trimRig drives OPTIONS server transactions through a table on fake
// timers: each answered 200, ended by Timer J.
type trimRig struct {
	t     *testing.T
	tab   *Table
	clock *fakeTimers
	m     parser.Message
	buf   []byte
	resp  []byte
	now   time.Duration
	n     int
}

func newTrimRig(t *testing.T, cfg Config) *trimRig {
	r := &trimRig{t: t, clock: &fakeTimers{}}
	var err error
	if r.tab, err = New(cfg, r.clock); err != nil {
		t.Fatal(err)
	}
	return r
}

// options starts an OPTIONS transaction and answers it 200: Completed,
// Timer J pending. It returns its handle.
func (r *trimRig) options() Handle {
	r.t.Helper()
	r.n++
	r.buf = fmt.Appendf(r.buf[:0], "OPTIONS sip:bob@example.com SIP/2.0\r\n"+
		"Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKtrim%d\r\n"+
		"From: <sip:alice@example.com>;tag=a\r\nTo: <sip:bob@example.com>\r\n"+
		"Call-ID: trim%d\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", r.n, r.n)
	if err := r.m.Parse(r.buf); err != nil {
		r.t.Fatal(err)
	}
	from := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5060"), Transport: transport.UDP}
	if err := r.tab.ReceiveRequest(&r.m, from, r.now); err != nil {
		r.t.Fatal(err)
	}
	h := r.tab.Actions()[0].Txn
	r.resp = parser.AppendBody(parser.AppendResponse(r.resp[:0], &r.m, 200, "OK", []byte("t1")), "", nil)
	if err := r.tab.Respond(h, r.resp, r.now); err != nil {
		r.t.Fatal(err)
	}
	return h
}

// advance moves the clock d ahead, firing what is due in order.
func (r *trimRig) advance(d time.Duration) {
	end := r.now + d
	for {
		ft, ok := r.clock.next(end)
		if !ok {
			break
		}
		r.now = ft.at
		r.tab.Timeout(ft.arg, r.now)
	}
	r.now = end
}

// After a peak, the slots its transactions needed give their buffers back
// once free for IdleRelease, and the slab and the index shrink to fit; the
// stored bytes split into in use and pooled all along.
func TestTrimAfterPeak(t *testing.T) {
	r := newTrimRig(t, Config{})
	const peak = 20000
	for range peak {
		r.options()
	}
	st := r.tab.Stats()
	if st.InUseBytes == 0 || st.PooledBytes != 0 || st.InUseBytes != st.StoredBytes || st.Slots != peak {
		t.Fatalf("at the peak: %+v, want every byte in use, %d slots", st, peak)
	}
	indexAtPeak := len(r.tab.index)

	r.advance(64*DefaultT1 + time.Millisecond) // J: every transaction ends
	r.tab.Timeout(0, r.now)                    // a call frees the slots of the last ones
	st = r.tab.Stats()
	if r.tab.Len() != 0 || st.InUseBytes != 0 || st.PooledBytes == 0 || st.PooledBytes != st.StoredBytes {
		t.Fatalf("idle: %d live, %+v: want every byte pooled", r.tab.Len(), st)
	}
	if st.StoredBytes != heldByScan(r.tab) {
		t.Fatalf("stored %d, scan %d", st.StoredBytes, heldByScan(r.tab))
	}

	r.advance(DefaultIdleRelease/2 + time.Millisecond) // too soon
	if st := r.tab.Stats(); st.PooledBytes == 0 {
		t.Fatalf("buffers released %v after the slots were freed, before IdleRelease", DefaultIdleRelease/2)
	}
	r.advance(DefaultIdleRelease)
	st = r.tab.Stats()
	if st.StoredBytes != 0 || st.PooledBytes != 0 || heldByScan(r.tab) != 0 {
		t.Fatalf("after IdleRelease: %+v, %d bytes by scan: want none", st, heldByScan(r.tab))
	}
	if st.Slots != 0 || r.tab.slots.cap() != 0 || len(r.tab.index) != 64 || len(r.tab.index) >= indexAtPeak {
		t.Fatalf("slab %d (cap %d), index %d (%d at the peak): want both shrunk", st.Slots, r.tab.slots.cap(), len(r.tab.index), indexAtPeak)
	}
	if n := len(r.clock.pending); n != 0 {
		t.Fatalf("%d timers pending on an empty table", n)
	}

	// It grows again as needed, and works.
	for range 100 {
		r.options()
	}
	r.advance(64*DefaultT1 + time.Millisecond)
	if r.tab.Len() != 0 {
		t.Fatalf("%d live after J", r.tab.Len())
	}
}

// A steady load keeps its slots' buffers: the slots it frees are the ones
// it takes next, well within IdleRelease, so nothing is released and
// nothing allocated again.
func TestTrimSparesSteadyLoad(t *testing.T) {
	r := newTrimRig(t, Config{})
	for range 3 * 64 * 2 { // 3 per 500 ms for 64 s: J is 32 s
		for range 3 {
			r.options()
		}
		r.advance(500 * time.Millisecond)
	}
	slots, stored := r.tab.Stats().Slots, r.tab.Stats().StoredBytes
	for range 3 * 64 * 2 {
		for range 3 {
			r.options()
		}
		r.advance(500 * time.Millisecond)
	}
	if st := r.tab.Stats(); st.Slots != slots || st.StoredBytes < stored {
		t.Fatalf("steady load: %d slots holding %d bytes, were %d holding %d", st.Slots, st.StoredBytes, slots, stored)
	}
}

// A live transaction at the end of the slab keeps the slab from shrinking
// below it; once it ends, the next trim shrinks. Handles of slots a shrink
// dropped stay stale when the slab grows back over them.
func TestTrimShrinkKeepsHandles(t *testing.T) {
	r := newTrimRig(t, Config{IdleRelease: 2 * time.Second})
	const peak = 4000
	hs := make([]Handle, peak)
	for i := range hs {
		hs[i] = r.options()
	}
	last := hs[peak-1]
	r.advance(time.Second)
	for _, h := range hs[:peak-1] {
		if err := r.tab.Terminate(h, r.now); err != nil {
			t.Fatal(err)
		}
	}
	r.advance(10 * time.Second)
	if k, s, ok := r.tab.State(last); !ok || k != KindNonInviteServer || s != StateCompleted {
		t.Fatalf("the last transaction: %v %v %v, want live, Completed", k, s, ok)
	}
	if st := r.tab.Stats(); st.Slots != peak || st.PooledBytes != 0 {
		t.Fatalf("with the last slot live: %+v, want the slab whole and the free slots bare", st)
	}
	r.advance(64 * DefaultT1) // J ends it
	r.advance(10 * time.Second)
	if st := r.tab.Stats(); st.Slots != 0 {
		t.Fatalf("after the last one ended: %d slots, want 0", st.Slots)
	}
	for range peak {
		r.options()
	}
	for _, h := range hs {
		if _, _, ok := r.tab.State(h); ok {
			t.Fatalf("handle %x of a dropped slot names slot %d's new transaction", uint64(h), h.Index())
		}
		if err := r.tab.Terminate(h, r.now); err != ErrStale {
			t.Fatalf("Terminate of a dropped slot's handle: %v, want ErrStale", err)
		}
	}
	if r.tab.Len() != peak {
		t.Fatalf("%d live, want %d", r.tab.Len(), peak)
	}
}

// IdleRelease negative keeps the buffers for ever, as before; a list out
// with TakeActions keeps the slab whole (its handles may name any slot).
func TestTrimOff(t *testing.T) {
	r := newTrimRig(t, Config{IdleRelease: -1})
	for range 2000 {
		r.options()
	}
	r.advance(time.Minute)
	r.tab.Timeout(0, r.now)
	if st := r.tab.Stats(); st.PooledBytes == 0 || st.Slots != 2000 || len(r.clock.pending) != 0 {
		t.Fatalf("IdleRelease -1: %+v, %d timers pending; want the buffers and slots kept, no trim", st, len(r.clock.pending))
	}

	r = newTrimRig(t, Config{})
	for range 2000 {
		r.options()
	}
	r.advance(64*DefaultT1 + time.Millisecond)
	r.tab.Timeout(0, r.now)
	list := r.tab.TakeActions(nil)
	r.advance(time.Minute)
	if st := r.tab.Stats(); st.PooledBytes != 0 || st.Slots != 2000 {
		t.Fatalf("with a list out: %+v, want the buffers released and the slab whole", st)
	}
	r.tab.ReturnActions()
	_ = list
	r.tab.Timeout(0, r.now) // frees what the list held back, arms the trim
	r.advance(time.Minute)
	if st := r.tab.Stats(); st.Slots != 0 {
		t.Fatalf("list back: %d slots, want 0", st.Slots)
	}
}

// Free slots are listed by the kind of transaction that held them (see
// alloc): the trim releases the buffers on every kind's list.
func TestTrimEveryKind(t *testing.T) {
	r := newTrimRig(t, Config{})
	r.tab.begin(r.now)
	kinds := []Kind{KindInviteClient, KindNonInviteClient, KindInviteServer, KindNonInviteServer}
	var slots []int32
	for _, k := range kinds {
		i, err := r.tab.alloc(k, StateTrying, transport.Peer{})
		if err != nil {
			t.Fatal(err)
		}
		x := r.tab.slots.at(i)
		x.msg = append(x.msg, "a stored message"...)
		r.tab.charge(x)
		slots = append(slots, i)
	}
	for _, i := range slots {
		r.tab.terminate(i)
	}
	r.tab.begin(r.now) // the next call frees them, each onto its kind's list
	for _, k := range kinds {
		if r.tab.free[k] < 0 {
			t.Fatalf("no free slot listed for kind %v", k)
		}
	}
	if st := r.tab.Stats(); st.PooledBytes == 0 || st.Slots != len(kinds) {
		t.Fatalf("after %d kinds ended: %+v, want their buffers pooled", len(kinds), st)
	}
	r.advance(2 * DefaultIdleRelease)
	if st := r.tab.Stats(); st.StoredBytes != 0 || st.PooledBytes != 0 || heldByScan(r.tab) != 0 {
		t.Fatalf("idle for twice IdleRelease: %+v, %d bytes by scan: want every kind's slots released", st, heldByScan(r.tab))
	}
}
