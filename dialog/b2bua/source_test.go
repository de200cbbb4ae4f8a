package b2bua

import (
	"net/netip"
	"testing"
)

func TestSource(t *testing.T) {
	tests := []struct {
		in       string
		str      string
		inside   string
		outside  string
		parseErr bool
	}{
		{in: "10.1.2.3/8", str: "10.0.0.0/8", inside: "10.9.9.9:1", outside: "11.0.0.1:1"},
		{in: "10.0.0.0/8:5060", str: "10.0.0.0/8:5060", inside: "10.0.0.1:5060", outside: "10.0.0.1:5061"},
		{in: "192.0.2.7:5060", str: "192.0.2.7/32:5060", inside: "192.0.2.7:5060", outside: "192.0.2.8:5060"},
		{in: "[2001:db8::/32]:5060", str: "[2001:db8::/32]:5060", inside: "[2001:db8::5]:5060", outside: "[2001:db9::5]:5060"},
		{in: "2001:db8::1", str: "2001:db8::1/128", inside: "[2001:db8::1]:9", outside: "[2001:db8::2]:9"},
		{in: "10.0.0.0/8:0", parseErr: true},
		{in: "[2001:db8::/32", parseErr: true},
		{in: "::ffff:10.0.0.0/104", parseErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s Source
			err := s.UnmarshalText([]byte(tt.in))
			if tt.parseErr {
				if err == nil {
					t.Fatalf("accepted %q as %v", tt.in, s)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tt.str {
				t.Errorf("String = %q, want %q", s.String(), tt.str)
			}
			if !s.Matches(netip.MustParseAddrPort(tt.inside)) || s.Matches(netip.MustParseAddrPort(tt.outside)) {
				t.Errorf("Matches wrong for %s / %s", tt.inside, tt.outside)
			}
		})
	}
}
