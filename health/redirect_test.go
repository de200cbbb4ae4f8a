package health

import (
	"net/netip"
	"testing"
	"time"
)

// Redirect gives the member of a group that follows redirects named by a
// 3xx's Contact host and port (RFC 3261 8.1.3.4), by its resolved address
// or its configured DNS name, and only a member that can take a call.
func TestRedirect(t *testing.T) {
	dns := &fakeDNS{names: map[string][]netip.Addr{}}
	dns.set("gw.example.net", "192.0.2.7")
	r, clk, _ := newClockRegistry(t, Options{Resolve: dns.resolve},
		GroupConfig{Name: "follows", FollowRedirects: true, Destinations: []DestConfig{
			{URI: "sip:a.example.com", Address: "127.0.0.1:5061"},
			{URI: "sip:b.example.com", Address: "127.0.0.2:5060"},
			{URI: "sip:c.example.com", Address: "gw.example.net:5070"},
			{URI: "sip:d.example.com", Address: "[2001:db8::1]:5060"},
		}},
		GroupConfig{Name: "stays", Destinations: dests(1)})
	f := func(group, host string, port uint16, wantIndex int) {
		t.Helper()
		m, ok := r.Redirect(group, []byte(host), port)
		switch {
		case wantIndex < 0 && ok:
			t.Errorf("Redirect(%s, %s, %d) = member %d, want none", group, host, port, m.Index)
		case wantIndex >= 0 && !ok:
			t.Errorf("Redirect(%s, %s, %d): none, want member %d", group, host, port, wantIndex)
		case ok && (m.Index != wantIndex || m.Group != group || m.st == nil):
			t.Errorf("Redirect(%s, %s, %d) = %+v, want member %d", group, host, port, m, wantIndex)
		}
	}
	f("follows", "127.0.0.1", 5061, 0)
	f("follows", "127.0.0.2", 0, 1) // no port: 5060 (RFC 3261 19.1.2)
	f("follows", "127.0.0.2", 5060, 1)
	f("follows", "GW.example.net", 5070, 2) // the configured name, resolved
	f("follows", "192.0.2.7", 5070, 2)
	f("follows", "[2001:db8::1]", 5060, 3)
	f("follows", "127.0.0.1", 5062, -1)      // another port
	f("follows", "198.51.100.9", 5060, -1)   // outside the group
	f("follows", "other.example.net", 0, -1) // a name no member has
	f("stays", "127.0.0.1", 5061, -1)        // the group does not follow redirects
	f("unknown", "127.0.0.1", 5061, -1)
	f("follows", "", 5061, -1)

	// A member marked down by calls is not redirected to: every call
	// failing, for over a second.
	m, _ := r.Redirect("follows", []byte("127.0.0.1"), 5061)
	for range 12 {
		clk.advance(100 * time.Millisecond)
		r.ReportCall(m, OutcomeNoResponse)
	}
	f("follows", "127.0.0.1", 5061, -1)
}
