package transport

import (
	"net/netip"
	"strings"
	"testing"
)

func TestKindNames(t *testing.T) {
	f := func(k Kind, via, name string, port uint16, reliable bool) {
		t.Helper()
		if k.String() != via || k.Name() != name || k.DefaultPort() != port || k.Reliable() != reliable || !k.Valid() {
			t.Errorf("%d: %q %q %d reliable %v, want %q %q %d %v", k, k.String(), k.Name(), k.DefaultPort(), k.Reliable(), via, name, port, reliable)
		}
	}
	f(UDP, "UDP", "udp", 5060, false)
	f(TCP, "TCP", "tcp", 5060, true)
	f(TLS, "TLS", "tls", 5061, true)
	var zero Kind
	if zero.Valid() || zero.Served() || TLS.Served() || !UDP.Served() || !TCP.Served() {
		t.Error("the zero Kind is a transport, or the served ones are wrong")
	}
}

// What the runtime and the URIs sipedge writes read of a Kind: the stream
// ones run on a TCP socket, and a URI names every transport but the one a
// numeric host without a transport parameter means (RFC 3263 4.1).
func TestKindProperties(t *testing.T) {
	f := func(k Kind, stream bool, network, param string) {
		t.Helper()
		if k.Stream() != stream || k.Network() != network || k.URIParam() != param {
			t.Errorf("%v: stream %v network %q param %q, want %v %q %q", k, k.Stream(), k.Network(), k.URIParam(), stream, network, param)
		}
	}
	f(UDP, false, "udp", "")
	f(TCP, true, "tcp", ";transport=tcp")
	f(TLS, true, "tcp", ";transport=tls")
	f(0, false, "udp", "")
	if URIDefault != UDP {
		t.Errorf("a numeric URI without a transport means %v, want UDP", URIDefault)
	}
	if NumKinds != int(TLS)+1 {
		t.Errorf("NumKinds %d: an array indexed by Kind must hold the last one, TLS", NumKinds)
	}

	p := func(v string, present bool, want Kind, ok bool) {
		t.Helper()
		if k, got := FromURIParam([]byte(v), present); k != want || got != ok {
			t.Errorf("FromURIParam(%q, %v) = %v, %v, want %v, %v", v, present, k, got, want, ok)
		}
	}
	p("", false, UDP, true)
	p("TCP", true, TCP, true)
	p("tls", true, TLS, true)
	p("", true, 0, false)
	p("sctp", true, 0, false)
}

// The configuration names the served transports exactly; a URI's transport
// parameter is read whatever its case (RFC 3261 19.1.4).
func TestParse(t *testing.T) {
	f := func(s string, want Kind, wantErr string) {
		t.Helper()
		k, err := Parse(s)
		switch {
		case wantErr != "" && (err == nil || err.Error() != wantErr):
			t.Errorf("Parse(%q): %v, want error %q", s, err, wantErr)
		case wantErr == "" && (err != nil || k != want):
			t.Errorf("Parse(%q) = %v, %v, want %v", s, k, err, want)
		}
	}
	f("udp", UDP, "")
	f("tcp", TCP, "")
	f("sctp", 0, `"sctp": want one of "udp", "tcp"`)
	f("tls", 0, `"tls": want one of "udp", "tcp"`)
	f("UDP", 0, `"UDP": want one of "udp", "tcp"`)

	p := func(v string, want Kind, ok bool) {
		t.Helper()
		if k, got := FromParam([]byte(v)); k != want || got != ok {
			t.Errorf("FromParam(%q) = %v, %v, want %v, %v", v, k, got, want, ok)
		}
	}
	p("tcp", TCP, true)
	p("TCP", TCP, true)
	p("Udp", UDP, true)
	p("tls", TLS, true)
	p("sctp", 0, false)
	p("", 0, false)
}

func TestKindText(t *testing.T) {
	var k Kind
	if err := k.UnmarshalText([]byte("tcp")); err != nil || k != TCP {
		t.Fatalf("tcp: %v %v", k, err)
	}
	if b, err := k.MarshalText(); err != nil || string(b) != "tcp" {
		t.Fatalf("marshal: %q %v", b, err)
	}
	if err := k.UnmarshalText([]byte("sctp")); err == nil || k != TCP {
		t.Fatalf("sctp accepted, or the value changed: %v %v", k, err)
	}
	// Unset: empty both ways, for the reader's default to apply.
	if b, err := Kind(0).MarshalText(); err != nil || len(b) != 0 {
		t.Fatalf("the zero Kind marshalled as %q, %v", b, err)
	}
	if err := k.UnmarshalText(nil); err != nil || k != 0 {
		t.Fatalf("empty: %v %v", k, err)
	}
	if _, err := Kind(9).MarshalText(); err == nil {
		t.Fatal("Kind(9) marshalled")
	}
}

func TestParseListen(t *testing.T) {
	f := func(s string, want Listen, wantErr string) {
		t.Helper()
		l, err := ParseListen(s)
		switch {
		case wantErr != "":
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("ParseListen(%q): %v, want an error containing %q", s, err, wantErr)
			}
		case err != nil || l != want:
			t.Errorf("ParseListen(%q) = %v, %v, want %v", s, l, err, want)
		case l.String() != s:
			t.Errorf("ParseListen(%q).String() = %q", s, l.String())
		}
	}
	ap := netip.MustParseAddrPort
	f("udp://127.0.0.1:5060", Listen{UDP, ap("127.0.0.1:5060")}, "")
	f("tcp://[::1]:5070", Listen{TCP, ap("[::1]:5070")}, "")
	f("sctp://127.0.0.1:5060", Listen{}, `"sctp://127.0.0.1:5060": transport "sctp" is not udp or tcp`)
	f("127.0.0.1:5060", Listen{}, `"127.0.0.1:5060": want udp://host:port or tcp://host:port`)
	f("tcp://[::1]:0", Listen{}, `"tcp://[::1]:0": port must not be 0`)
	f("udp://127.0.0.1", Listen{}, `"udp://127.0.0.1": missing port`)
	f("udp://sip.example.com:5060", Listen{}, `host "sip.example.com" is not an IP address`)
	f("udp://:5060", Listen{}, "missing host")
	f("udp://127.0.0.1:99999", Listen{}, "invalid port")

	var l Listen
	if err := l.UnmarshalText([]byte("tcp://192.0.2.1:5060")); err != nil || l != (Listen{TCP, ap("192.0.2.1:5060")}) {
		t.Fatalf("UnmarshalText: %v %v", l, err)
	}
	if b, _ := l.MarshalText(); string(b) != "tcp://192.0.2.1:5060" {
		t.Fatalf("MarshalText: %q", b)
	}
}
