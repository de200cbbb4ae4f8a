package txn

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestShedPastSending: INVITE server transactions answered 2xx and ACKed
// sit in Accepted for Timer L (RFC 6026 7.1) holding their keys only: the
// 2xx, which Accepted never retransmits, went to the spares, where the next
// INVITE's transaction takes it. Once they end, the trim releases the
// spares too.
func TestShedPastSending(t *testing.T) {
	s := newSeq(t)
	const n = 200
	var okLen int
	for k := range n {
		invite := bytes.Replace(benchInvite, []byte("z9hG4bK776asdhds"), fmt.Appendf(nil, "z9hG4bKshed%d", k), 1)
		h := s.expect(s.tab.ReceiveRequest(s.parse(invite), benchPeer, s.now), 2, ActRequest)
		if len(s.tab.Response(h)) == 0 {
			t.Fatal("no 100 Trying kept before the 2xx")
		}
		s.respond(h, 200, "OK")
		okLen = len(s.resp)
		if r := s.tab.Response(h); r != nil {
			t.Fatalf("Accepted keeps its 2xx (%d bytes): want it shed", len(r))
		}
		s.now += time.Millisecond
	}
	st := s.tab.Stats()
	if st.InUseBytes > n*okLen/2 {
		t.Errorf("%d transactions in Accepted hold %d bytes: want their keys only, well under %d (their 2xx)", n, st.InUseBytes, n*okLen)
	}
	if st.PooledBytes > 4<<10 {
		t.Errorf("%d bytes of spares for %d INVITEs one after another: want one buffer's worth", st.PooledBytes, n)
	}
	if got := heldByScan(s.tab); got != st.StoredBytes {
		t.Errorf("stored bytes %d, by scan %d", st.StoredBytes, got)
	}

	// Timer L ends them; the trims then release the spares and the slots'
	// buffers.
	end := s.now + 64*DefaultT1 + 4*DefaultIdleRelease
	for {
		ft, ok := s.clock.next(end)
		if !ok {
			break
		}
		s.now = max(s.now, ft.at)
		s.tab.Timeout(ft.arg, s.now)
	}
	if st := s.tab.Stats(); st.StoredBytes != 0 || s.tab.Len() != 0 {
		t.Errorf("idle after Timer L and the trims: %d transactions, %+v: want nothing stored", s.tab.Len(), st)
	}
}
