package parser

import (
	"errors"
	"testing"
)

// RFC 3261 20.42 and 25.1 (Via), RFC 3581 (rport).
func TestUnitParseVia(t *testing.T) {
	f := func(in, transport, host string, port int, branch, received, maddr string, hasRPort bool, rport string) {
		t.Helper()
		var v Via
		if err := ParseVia([]byte(in), &v); err != nil {
			t.Errorf("ParseVia(%q): %v", in, err)
			return
		}
		if string(v.Transport) != transport || string(v.Host) != host || v.Port != port || string(v.Branch) != branch ||
			string(v.Received) != received || string(v.Maddr) != maddr || v.HasRPort != hasRPort || string(v.RPort) != rport {
			t.Errorf("ParseVia(%q) = transport %q host %q port %d branch %q received %q maddr %q rport %v %q\n"+
				"want transport %q host %q port %d branch %q received %q maddr %q rport %v %q",
				in, v.Transport, v.Host, v.Port, v.Branch, v.Received, v.Maddr, v.HasRPort, v.RPort,
				transport, host, port, branch, received, maddr, hasRPort, rport)
		}
	}
	// RFC 3261 examples.
	f("SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK776asdhds", "UDP", "pc33.atlanta.com", 0, "z9hG4bK776asdhds", "", "", false, "")
	f("SIP/2.0/TCP client.atlanta.example.com:5060;branch=z9hG4bK74bf9", "TCP", "client.atlanta.example.com", 5060, "z9hG4bK74bf9", "", "", false, "")
	f("SIP/2.0/UDP bigbox3.site3.atlanta.com;branch=z9hG4bK77ef4c2312983.1;received=192.0.2.2", "UDP", "bigbox3.site3.atlanta.com", 0, "z9hG4bK77ef4c2312983.1", "192.0.2.2", "", false, "")
	f("SIP/2.0/UDP 192.0.2.1:5060 ;received=192.0.2.207;branch=z9hG4bK77asjd", "UDP", "192.0.2.1", 5060, "z9hG4bK77asjd", "192.0.2.207", "", false, "")
	f("SIP / 2.0 / UDP first.example.com: 4000;ttl=16;maddr=224.2.0.1 ;branch=z9hG4bKa7c6a8dlze.1", "UDP", "first.example.com", 4000, "z9hG4bKa7c6a8dlze.1", "", "224.2.0.1", false, "")
	// LWS around '/' and ':' and parameters (RFC 3261 25.1 SLASH, COLON, SEMI, EQUAL; RFC 4475 3.1.1.1).
	f("SIP  /  2.0  /  UDP  host  :  5060  ;  branch  =  z9hG4bK1", "UDP", "host", 5060, "z9hG4bK1", "", "", false, "")
	f("SIP/2.0/UDP\r\n host\r\n :\r\n 5060\r\n ;branch=z9hG4bK1", "UDP", "host", 5060, "z9hG4bK1", "", "", false, "")
	f("SIP/2.0/UDP\thost;branch=z9hG4bK1", "UDP", "host", 0, "z9hG4bK1", "", "", false, "")
	f("  SIP/2.0/UDP host  ", "UDP", "host", 0, "", "", "", false, "")
	// Transports are tokens, kept as received (RFC 4475 3.1.1.10); protocol name case-insensitive.
	f("SIP/2.0/TLS host:5061", "TLS", "host", 5061, "", "", "", false, "")
	f("SIP/2.0/SCTP host", "SCTP", "host", 0, "", "", "", false, "")
	f("SIP/2.0/UNKNOWN host", "UNKNOWN", "host", 0, "", "", "", false, "")
	f("SIP/2.0/WSS df7jal23ls0d.invalid;branch=z9hG4bK1", "WSS", "df7jal23ls0d.invalid", 0, "z9hG4bK1", "", "", false, "")
	f("sip/2.0/udp host", "udp", "host", 0, "", "", "", false, "")
	// IPv6 references (RFC 3261 25.1 sent-by host; received takes a bare IPv6address).
	f("SIP/2.0/UDP [2001:db8::9:1]:5060;branch=z9hG4bK1", "UDP", "[2001:db8::9:1]", 5060, "z9hG4bK1", "", "", false, "")
	f("SIP/2.0/UDP [2001:db8::9:1];received=2001:db8::9:255;branch=z9hG4bK1", "UDP", "[2001:db8::9:1]", 0, "z9hG4bK1", "2001:db8::9:255", "", false, "")
	f("SIP/2.0/UDP [::1] : 5060", "UDP", "[::1]", 5060, "", "", "", false, "")
	f("SIP/2.0/UDP host;maddr=[2001:db8::1]", "UDP", "host", 0, "", "", "[2001:db8::1]", false, "")
	// RFC 3581: rport with and without a value.
	f("SIP/2.0/UDP 10.1.1.1:4540;rport;branch=z9hG4bKkjshdyff", "UDP", "10.1.1.1", 4540, "z9hG4bKkjshdyff", "", "", true, "")
	f("SIP/2.0/UDP 10.1.1.1:4540;received=192.0.2.1;rport=9988;branch=z9hG4bKkjshdyff", "UDP", "10.1.1.1", 4540, "z9hG4bKkjshdyff", "192.0.2.1", "", true, "9988")
	f("SIP/2.0/UDP h;branch=z9hG4bK1;rport", "UDP", "h", 0, "z9hG4bK1", "", "", true, "")
	// A bare rport after the first branch is read in one compare; other
	// parameters of five bytes there are not rport.
	f("SIP/2.0/UDP h;branch=z9hG4bK1;RPort", "UDP", "h", 0, "z9hG4bK1", "", "", true, "")
	f("SIP/2.0/UDP h;branch=z9hG4bK1;sport", "UDP", "h", 0, "z9hG4bK1", "", "", false, "")
	f("SIP/2.0/UDP h;branch=z9hG4bK1;rpor-", "UDP", "h", 0, "z9hG4bK1", "", "", false, "")
	f("SIP/2.0/UDP h;branch=z9hG4bK1;rporT", "UDP", "h", 0, "z9hG4bK1", "", "", true, "")
	// A first branch is read without the parameter walk; these take the walk.
	f("SIP/2.0/UDP h;BrAnCh=z9hG4bK1;branch=z9hG4bK2", "UDP", "h", 0, "z9hG4bK2", "", "", false, "")
	f("SIP/2.0/UDP h;branch=x", "UDP", "h", 0, "x", "", "", false, "")
	f("SIP/2.0/UDP h;branch=x ;rport", "UDP", "h", 0, "x", "", "", true, "")
	f("SIP/2.0/UDP h;branch=[::1]:5;maddr=m", "UDP", "h", 0, "[::1]:5", "", "m", false, "")
	f(`SIP/2.0/UDP h;branch="x;y";rport`, "UDP", "h", 0, `"x;y"`, "", "", true, "")
	f("SIP/2.0/UDP h;branchx=1;branch", "UDP", "h", 0, "", "", "", false, "")
	// Parameter names are case-insensitive; unknown parameters are kept.
	f("SIP/2.0/UDP host;BRANCH=z9hG4bK1;Received=1.2.3.4;RPORT=5;MAddr=m.example.com", "UDP", "host", 0, "z9hG4bK1", "1.2.3.4", "m.example.com", true, "5")
	// Names of the same length, or one letter off, are other parameters
	// (ParseVia compares the known names a word at a time).
	f("SIP/2.0/UDP host;brancH=b;bRanch=c;branck=x;pranch=x;branch1=x;brnch=x", "UDP", "host", 0, "c", "", "", false, "")
	f("SIP/2.0/UDP host;receiveD=r;receivee=x;deceived=x;receivedd=x;recv=x", "UDP", "host", 0, "", "r", "", false, "")
	f("SIP/2.0/UDP host;maddR=m;maddx=x;nADDR=x;Rport=5;rporx=x;sport=x;rport_=x", "UDP", "host", 0, "", "", "m", true, "5")
	f("SIP/2.0/UDP host;madd=x;rpor=x;rport-=x;bran=x;branc=x", "UDP", "host", 0, "", "", "", false, "")
	f(`SIP/2.0/UDP host;branch=z9hG4bK1;x="quoted;value";hide;ttl=1`, "UDP", "host", 0, "z9hG4bK1", "", "", false, "")
	f("SIP/2.0/UDP 255.255.255.255;branch=z9hG4bK1", "UDP", "255.255.255.255", 0, "z9hG4bK1", "", "", false, "") // RFC 4475 3.3.10
	f("SIP/2.0/UDP host:0065535", "UDP", "host", 65535, "", "", "", false, "")                                   // leading zeros
	f("SIP/2.0/UDP 192.0.2.15;branch=z9hG4bK%fz", "UDP", "192.0.2.15", 0, "z9hG4bK%fz", "", "", false, "")       // RFC 4475 3.1.1.5: '%' is a token character
}

// The raw parameters are kept in order without the leading ';'.
func TestUnitViaParams(t *testing.T) {
	f := func(in, params string) {
		t.Helper()
		var v Via
		if err := ParseVia([]byte(in), &v); err != nil || string(v.Params) != params {
			t.Errorf("ParseVia(%q): params %q, %v; want %q", in, v.Params, err, params)
		}
	}
	f("SIP/2.0/UDP h", "")
	f("SIP/2.0/UDP h;branch=z9hG4bK1;rport", "branch=z9hG4bK1;rport")
	f("SIP/2.0/UDP h:5060 ; ttl=1 ;branch=z9hG4bK1", " ttl=1 ;branch=z9hG4bK1")
}

func TestUnitParseViaErrors(t *testing.T) {
	f := func(in string) {
		t.Helper()
		var v Via
		if err := ParseVia([]byte(in), &v); !errors.Is(err, ErrBadVia) {
			t.Errorf("ParseVia(%q): err %v, want ErrBadVia", in, err)
		}
	}
	f("")
	f("SIP/2.0/UDP")  // no sent-by
	f("SIP/2.0/UDP ") // idem
	f("SIP/2.0/UDPhost")
	f("SIP/2.0 UDP host")
	f("SIP/2.0/ host")
	f("SIP//2.0/UDP host")
	f("SIP/2.0/UDP/ host")
	f("/2.0/UDP host")
	f("SIP/7.0/UDP host") // RFC 4475 3.1.2.16
	f("SIP/2/UDP host")
	f("HTTP/1.1/TCP host")
	f("SIP/2.0/UDP host:")
	f("SIP/2.0/UDP host: ;branch=z9hG4bK1")
	f("SIP/2.0/UDP host:65536")
	f("SIP/2.0/UDP host:99999999999")
	f("SIP/2.0/UDP host:abc")
	f("SIP/2.0/UDP host:5060:5061")
	f("SIP/2.0/UDP ho st")
	f("SIP/2.0/UDP host branch=z9hG4bK1")
	f("SIP/2.0/UDP host;")
	f("SIP/2.0/UDP host;;branch=z9hG4bK1")
	f("SIP/2.0/UDP 192.0.2.15;;,;,,") // RFC 4475 3.1.2.1
	f("SIP/2.0/UDP host;branch=")
	f("SIP/2.0/UDP host;=z9hG4bK1")
	f("SIP/2.0/UDP host;branch=a b")
	f("SIP/2.0/UDP host;branch=a;")
	f("SIP/2.0/UDP host;branch=a;;rport")
	f("SIP/2.0/UDP host;branch=;rport")
	f("SIP/2.0/UDP host;branch=a;rport;")
	f("SIP/2.0/UDP host;branch=a;rport ;")
	f("SIP/2.0/UDP host;rport=x")     // response-port = "rport" [EQUAL 1*DIGIT] (RFC 3581 3)
	f("SIP/2.0/UDP host;rport=65536") // a port
	f("SIP/2.0/UDP [::1;branch=z9hG4bK1")
	f("SIP/2.0/UDP [1::2::3];branch=z9hG4bK1")
	f(`SIP/2.0/UDP host;x="unterminated`)
	f("SIP/2.0/UDP host;branch=z9hG4bK1,SIP/2.0/UDP other") // one value holds no comma
	f("SIP/2.0/UDP [2001:db8::1")
	f("SIP/2.0/UDP [zz::1]")
	f("SIP/2.0/UDP []")
	f("SIP/2.0/UDP 2001:db8::1") // IPv6 needs brackets
	f("SIP/2.0/UDP <host>")
	f("SIP/2.0/UDP host\x00")
}

// RFC 3261 8.1.1.7, 17.2.3: the magic cookie and something after it.
func TestUnitIsRFC3261Branch(t *testing.T) {
	f := func(branch string, want bool) {
		t.Helper()
		v := Via{Branch: []byte(branch)}
		if got := v.IsRFC3261Branch(); got != want {
			t.Errorf("IsRFC3261Branch(%q) = %v, want %v", branch, got, want)
		}
	}
	f("z9hG4bK776asdhds", true)
	f("z9hG4bK1", true)
	f("z9hG4bK", false) // cookie only (RFC 4475 3.2.1)
	f("", false)
	f("776asdhds", false)
	f("xz9hG4bK1", false)
	f("z9hG4b", false)
	f("1z9hG4bK", false)
	var v Via
	if v.IsRFC3261Branch() {
		t.Error("no branch is RFC 3261")
	}
}

// Message.Via and TopVia walk every Via value in order, across lines and commas.
func TestUnitMessageVia(t *testing.T) {
	m := unitParse(t, "INVITE sip:a@b SIP/2.0", []string{
		"Via: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/TCP b;branch=z9hG4bK2",
		"Subject: x",
		"v: SIP/2.0/TLS c;branch=z9hG4bK3",
		"Via: bad",
	}, "")
	f := func(n int, wantErr error, host string) {
		t.Helper()
		var v Via
		v.Host = []byte("stale")
		err := m.Via(n, &v)
		if !errors.Is(err, wantErr) || string(v.Host) != host {
			t.Errorf("Via(%d) = %q, %v; want %q, %v", n, v.Host, err, host, wantErr)
		}
	}
	f(0, nil, "a")
	f(1, nil, "b")
	f(2, nil, "c")
	f(3, ErrBadVia, "")
	f(4, ErrMissingVia, "")
	var v Via
	if err := m.TopVia(&v); err != nil || string(v.Branch) != "z9hG4bK1" {
		t.Errorf("TopVia: %+v %v", v, err)
	}
	var empty Message
	if err := empty.Parse([]byte("OPTIONS sip:a@b SIP/2.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := empty.TopVia(&v); !errors.Is(err, ErrMissingVia) || v.Host != nil {
		t.Errorf("TopVia without Via: %+v %v", v, err)
	}
}
