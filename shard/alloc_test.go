//go:build !race

package shard

import (
	"testing"

	"github.com/sipedge/sipedge/transport"
)

func TestDispatchAllocs(t *testing.T) {
	src, dst, m, _ := dispatchRig(t)
	for i := 0; i < 64; i++ { // warm the packet pool
		src.dispatch(m, transport.Peer{Transport: transport.UDP})
	}
	dst.run()
	n := testing.AllocsPerRun(200, func() {
		for i := 0; i < 32; i++ {
			src.dispatch(m, transport.Peer{Transport: transport.UDP})
		}
		dst.run()
	})
	if n != 0 {
		t.Errorf("dispatch of 32 messages allocates %v times, want 0", n)
	}
}
