//go:build !race

package parser

import (
	"net/netip"
	"testing"
)

// The race runtime allocates, so these run only without -race.

func TestParseAndAccessAllocs(t *testing.T) {
	for _, name := range []string{"invite.sip", "ok200.sip"} {
		buf := benchMessage(t, name)
		var m Message
		var out accessed
		if err := parseAndAccess(&m, buf, &out); err != nil && name == "invite.sip" {
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(100, func() {
			_ = parseAndAccess(&m, buf, &out)
			_ = m.Validate(nil)
		})
		if n != 0 {
			t.Errorf("%s: parse, access and validate allocate %v times per message, want 0", name, n)
		}
	}
}

func TestBuildAllocs(t *testing.T) {
	buf := benchMessage(t, "invite.sip")
	var m Message
	if err := m.Parse(buf); err != nil {
		t.Fatal(err)
	}
	m.SetSource(netip.MustParseAddrPort("[2001:db8::99]:5062")) // stamped: the longest address
	out := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		out = buildRinging(out[:0], &m)
		out = AppendHeaders(out, &m, NewHeaderSet(HeaderVia))
		out = AppendVia(out, m.Get(HeaderVia), netip.MustParseAddrPort("192.0.2.99:5062"))
	})
	if n != 0 {
		t.Errorf("building allocates %v times, want 0", n)
	}
}

func TestFrameAllocs(t *testing.T) {
	buf := benchMessage(t, "invite.sip")
	n := testing.AllocsPerRun(100, func() {
		if _, _, err := Frame(buf, 1<<16); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("Frame allocates %v times, want 0", n)
	}
}
