package parser

import "testing"

// RFC 3261 18.2.2 and RFC 3581 4: where a response goes.
func TestUnitViaResponsePort(t *testing.T) {
	f := func(in string, source uint16, reliable bool, want uint16) {
		t.Helper()
		var v Via
		if err := ParseVia([]byte(in), &v); err != nil {
			t.Fatalf("ParseVia(%q): %v", in, err)
		}
		if got := v.ResponsePort(source, reliable); got != want {
			t.Errorf("%q from port %d (reliable %v): port %d, want %d", in, source, reliable, got, want)
		}
	}
	f("SIP/2.0/UDP 192.0.2.10:5062;branch=z9hG4bK1", 34567, false, 5062)        // sent-by port, not the source's
	f("SIP/2.0/UDP 192.0.2.10;branch=z9hG4bK1", 34567, false, 5060)             // none: the default
	f("SIP/2.0/UDP 192.0.2.10:5062;branch=z9hG4bK1;rport", 34567, false, 34567) // rport: the source port
	f("SIP/2.0/TCP 192.0.2.10:5062;branch=z9hG4bK1;rport", 34567, true, 5062)   // a new connection goes to sent-by
	f("SIP/2.0/TCP 192.0.2.10;branch=z9hG4bK1", 34567, true, 5060)
	f("SIP/2.0/TLS 192.0.2.10;branch=z9hG4bK1", 34567, true, 5061)
}
