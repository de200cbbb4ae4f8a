package shard

import (
	"os"
	"testing"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// dispatchRig is two shards of a server that is not started: dispatch and
// the drain run without gnet, as they do inside OnTraffic.
func dispatchRig(tb testing.TB) (src, dst *Shard, m *parser.Message, delivered *int) {
	delivered = new(int)
	s, err := New(Config{Listen: listens("udp://127.0.0.1:5999"), Shards: 2}, func(*Shard) Handler {
		return Handler{Message: func(*Shard, *parser.Message, transport.Peer) { *delivered++ }}
	}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	buf, err := os.ReadFile("../parser/testdata/bench/invite.sip")
	if err != nil {
		tb.Fatal(err)
	}
	m = new(parser.Message)
	if err := m.Parse(buf); err != nil {
		tb.Fatal(err)
	}
	owner := s.OwnerOf(m.CallID())
	return s.shards[1-owner], s.shards[owner], m, delivered
}

// BenchmarkDispatch measures the Call-ID hash plus the hand-over of one
// message to another shard: the copy into a pooled packet, the ring push,
// and the owner's pop and delivery, drained in batches of 64 as a wake does.
func BenchmarkDispatch(b *testing.B) {
	src, dst, m, delivered := dispatchRig(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Bytes())))
	i := 0
	for b.Loop() {
		src.dispatch(m, transport.Peer{Transport: transport.UDP})
		if i++; i%64 == 0 {
			dst.run()
		}
	}
	dst.run()
	if *delivered != i {
		b.Fatalf("delivered %d of %d", *delivered, i)
	}
}

func TestDispatchDelivers(t *testing.T) {
	src, dst, m, delivered := dispatchRig(t)
	for i := 0; i < 100; i++ {
		src.dispatch(m, transport.Peer{Transport: transport.UDP})
	}
	if *delivered != 0 {
		t.Fatalf("delivered %d before the owner ran", *delivered)
	}
	dst.run()
	if *delivered != 100 || dst.m.handoffsIn.Get() != 100 || src.m.handoffsOut.Get() != 100 {
		t.Fatalf("delivered %d, in %d, out %d; want 100", *delivered, dst.m.handoffsIn.Get(), src.m.handoffsOut.Get())
	}
	// A full queue drops and counts rather than blocking the loop.
	for i := 0; i < src.srv.cfg.HandoffQueue+10; i++ {
		src.dispatch(m, transport.Peer{Transport: transport.UDP})
	}
	if got := src.m.handoffDrops.Get(); got != 10 {
		t.Fatalf("drops %d, want 10", got)
	}
}
