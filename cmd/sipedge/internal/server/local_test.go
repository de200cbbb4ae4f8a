package server

import (
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/transport"
)

// The call core's own address per transport is the first listen address
// of that transport, as advertised; a transport sipedge does not listen on
// writes the first one there is.
func TestLocalAddrsFromListen(t *testing.T) {
	f := func(yaml, udp, tcp string) {
		t.Helper()
		cfg, err := config.Parse([]byte("shards: 1\n"+yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{cfg: cfg}
		local := s.b2buaConfig(0).Local
		if got := local.For(transport.UDP); got != udp {
			t.Errorf("%q: UDP %q, want %q", yaml, got, udp)
		}
		if got := local.For(transport.TCP); got != tcp {
			t.Errorf("%q: TCP %q, want %q", yaml, got, tcp)
		}
	}
	f("listen: [udp://127.0.0.1:5060, tcp://127.0.0.1:5070, udp://127.0.0.2:5080]\n", "127.0.0.1:5060", "127.0.0.1:5070")
	f("listen: [\"tcp://[::1]:5070\"]\n", "[::1]:5070", "[::1]:5070")
	f("listen: [udp://127.0.0.1:5060]\n", "127.0.0.1:5060", "127.0.0.1:5060")
	f("listen: [udp://0.0.0.0:5060, tcp://0.0.0.0:5070]\nadvertise: 192.0.2.1\n", "192.0.2.1:5060", "192.0.2.1:5070")
}
