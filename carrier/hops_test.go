package carrier

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// A route without a usable gateway group goes to its next_hop, else to its
// ruri's host: IP literals, the transport parameter honoured, names
// skipped as unresolvable (no DNS on a shard).
func TestNextHop(t *testing.T) {
	cases := []struct {
		name        string
		r           route.Route
		addr        string
		tcp         bool
		uri, reason string
	}{
		{"next_hop URI", route.Route{NextHop: "sip:192.0.2.5:5070"}, "192.0.2.5:5070", false, "sip:192.0.2.5:5070", ""},
		{"next_hop host:port", route.Route{NextHop: "192.0.2.5:5070"}, "192.0.2.5:5070", false, "sip:192.0.2.5:5070", ""},
		{"next_hop no port", route.Route{NextHop: "sip:192.0.2.5"}, "192.0.2.5:5060", false, "sip:192.0.2.5:5060", ""},
		{"next_hop TCP", route.Route{NextHop: "sip:192.0.2.5:5070;transport=TCP"}, "192.0.2.5:5070", true, "sip:192.0.2.5:5070;transport=tcp", ""},
		{"next_hop IPv6", route.Route{NextHop: "sip:[2001:db8::5]"}, "[2001:db8::5]:5060", false, "sip:[2001:db8::5]:5060", ""},
		{"ruri only", route.Route{RURI: "sip:+15551234@192.0.2.6:5080"}, "192.0.2.6:5080", false, "sip:192.0.2.6:5080", ""},
		{"next_hop before ruri", route.Route{NextHop: "192.0.2.5", RURI: "sip:1@192.0.2.6"}, "192.0.2.5:5060", false, "sip:192.0.2.5:5060", ""},
		{"a name", route.Route{NextHop: "sip:gw.carrier.example:5060"}, "", false, "", route.ReasonUnresolvable},
		{"ruri with a name", route.Route{RURI: "sip:1@gw.carrier.example"}, "", false, "", route.ReasonUnresolvable},
		{"sips next_hop", route.Route{NextHop: "sips:192.0.2.5:5061"}, "", false, "", route.ReasonUnresolvable}, // no TLS
		{"next_hop port 0", route.Route{NextHop: "192.0.2.5:0"}, "", false, "", route.ReasonUnresolvable},
		{"ruri port 0", route.Route{RURI: "sip:1@[2001:db8::5]:0"}, "", false, "", route.ReasonUnresolvable},
		{"SIP: in capitals", route.Route{NextHop: "SIP:192.0.2.5"}, "192.0.2.5:5060", false, "sip:192.0.2.5:5060", ""},
		{"IPv6 alone", route.Route{NextHop: "2001:db8::5"}, "[2001:db8::5]:5060", false, "sip:[2001:db8::5]:5060", ""},
		{"IPv4-mapped", route.Route{NextHop: "sip:[::ffff:192.0.2.5]:5070"}, "192.0.2.5:5070", false, "sip:192.0.2.5:5070", ""},
		{"no destination", route.Route{}, "", false, "", route.ReasonUnknownGroup},
	}
	var hops hopCache
	for _, c := range cases {
		for range 2 { // parsed, then from the cache
			var d Dial
			reason := hops.nextHop(&c.r, &d)
			if reason != c.reason {
				t.Errorf("%s: reason %q, want %q", c.name, reason, c.reason)
				break
			}
			if reason != "" {
				break
			}
			if d.Peer.Addr != netip.MustParseAddrPort(c.addr) || (d.Peer.Transport == transport.TCP) != c.tcp || d.URI != c.uri {
				t.Errorf("%s: %v tcp=%v %q, want %s tcp=%v %q", c.name, d.Peer.Addr, d.Peer.Transport == transport.TCP, d.URI, c.addr, c.tcp, c.uri)
			}
		}
	}
}

// The API's next hops are bounded: past maxDialledHops the flood guard
// applies to new ones, with one warning.
func TestDialledHopsBounded(t *testing.T) {
	var h dialledHops
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	// All but the last few added at once: one at a time, each a copy of
	// the set, they take seconds.
	full := make(map[netip.Addr]struct{}, maxDialledHops)
	for i := range maxDialledHops - 2 {
		full[addr(i)] = struct{}{}
	}
	h.set.Store(&full)
	for i := maxDialledHops - 2; i < maxDialledHops+5; i++ {
		h.add(addr(i), slog.New(slog.DiscardHandler))
	}
	if n := len(*h.set.Load()); n != maxDialledHops {
		t.Errorf("%d hops kept, want %d", n, maxDialledHops)
	}
	if !h.has(netip.AddrFrom4([4]byte{10, 0, 0, 1})) || h.has(netip.AddrFrom4([4]byte{10, 0, 39, 16})) {
		t.Errorf("the first hop should be kept and the %dth not", maxDialledHops+1)
	}
}

// A shard's cache of next hops starts over when full, so that an API naming
// ever new hops cannot grow it without bound.
func TestHopCacheBounded(t *testing.T) {
	var hops hopCache
	for i := range maxHopCache + 1 {
		r := route.Route{NextHop: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String()}
		var d Dial
		if reason := hops.nextHop(&r, &d); reason != "" {
			t.Fatal(reason)
		}
	}
	if n := len(hops.hops); n != 1 {
		t.Fatalf("%d hops cached after the cache filled, want it started over with 1", n)
	}
}
