package shard

import (
	"testing"
	"unsafe"
)

// Every shard has a hand-off ring from every other, so at a fixed depth
// their memory grew with the square of the shards: 1 GiB of pointer slots
// (which the GC scans) at 128. The default depth shrinks as shards are
// added so that each shard's rings together hold handoffBudget slots at
// most, while a small node keeps the full 8192 per ring.
func TestHandoffMemoryBounded(t *testing.T) {
	h := func(*Shard) Handler { return Handler{} }
	for _, tc := range []struct {
		shards, depth int
		maxBytes      int
	}{
		{2, 8192, 4 * 8192 * 8},
		{8, 8192, 8 * 65536 * 8},
		{128, 512, 64 << 20},
	} {
		s, err := New(Config{Listen: listens("udp://127.0.0.1:5999"), Shards: tc.shards}, h, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(s.shards[0].inbox[1].buf); got != tc.depth {
			t.Errorf("%d shards: rings of %d, want %d", tc.shards, got, tc.depth)
		}
		bytes := 0
		for _, sh := range s.shards {
			for _, r := range sh.inbox {
				bytes += len(r.buf) * int(unsafe.Sizeof(r.buf[0]))
			}
		}
		if bytes > tc.maxBytes {
			t.Errorf("%d shards: %d MiB of hand-off rings, want at most %d MiB", tc.shards, bytes>>20, tc.maxBytes>>20)
		}
	}
}
