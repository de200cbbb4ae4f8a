package parser

import (
	"errors"
	"testing"
)

// RFC 3261 19.1.1, 19.1.3 and 25.1 (SIP-URI, SIPS-URI); RFC 3966 (tel).
func TestUnitParseURI(t *testing.T) {
	f := func(in string, scheme Scheme, user, password, host string, port int, params, headers string) {
		t.Helper()
		var u URI
		if err := ParseURI([]byte(in), &u); err != nil {
			t.Errorf("ParseURI(%q): %v", in, err)
			return
		}
		if u.Scheme != scheme || string(u.User) != user || string(u.Password) != password || string(u.Host) != host ||
			u.Port != port || string(u.Params) != params || string(u.Headers) != headers {
			t.Errorf("ParseURI(%q) = scheme %d user %q password %q host %q port %d params %q headers %q\n"+
				"want scheme %d user %q password %q host %q port %d params %q headers %q",
				in, u.Scheme, u.User, u.Password, u.Host, u.Port, u.Params, u.Headers,
				scheme, user, password, host, port, params, headers)
			return
		}
		if c := len(u.SchemeRaw); string(u.SchemeRaw) != in[:c] || in[c] != ':' || string(u.Opaque) != in[c+1:] {
			t.Errorf("ParseURI(%q): SchemeRaw %q Opaque %q", in, u.SchemeRaw, u.Opaque)
		}
		if u.IsSIP() != (scheme == SchemeSIP || scheme == SchemeSIPS) {
			t.Errorf("ParseURI(%q): IsSIP %v", in, u.IsSIP())
		}
	}
	// RFC 3261 19.1.3 examples.
	f("sip:alice@atlanta.com", SchemeSIP, "alice", "", "atlanta.com", 0, "", "")
	f("sip:alice:secretword@atlanta.com;transport=tcp", SchemeSIP, "alice", "secretword", "atlanta.com", 0, "transport=tcp", "")
	f("sips:alice@atlanta.com?subject=project%20x&priority=urgent", SchemeSIPS, "alice", "", "atlanta.com", 0, "", "subject=project%20x&priority=urgent")
	f("sip:+1-212-555-1212:1234@gateway.com;user=phone", SchemeSIP, "+1-212-555-1212", "1234", "gateway.com", 0, "user=phone", "")
	f("sips:1212@gateway.com", SchemeSIPS, "1212", "", "gateway.com", 0, "", "")
	f("sip:alice@192.0.2.4", SchemeSIP, "alice", "", "192.0.2.4", 0, "", "")
	f("sip:atlanta.com;method=REGISTER?to=alice%40atlanta.com", SchemeSIP, "", "", "atlanta.com", 0, "method=REGISTER", "to=alice%40atlanta.com")
	f("sip:alice;day=tuesday@atlanta.com", SchemeSIP, "alice;day=tuesday", "", "atlanta.com", 0, "", "")
	// RFC 3261 19.1.4 examples.
	f("sip:%61lice@atlanta.com;transport=TCP", SchemeSIP, "%61lice", "", "atlanta.com", 0, "transport=TCP", "")
	f("sip:carol@chicago.com;newparam=5", SchemeSIP, "carol", "", "chicago.com", 0, "newparam=5", "")
	f("sip:biloxi.com;transport=tcp;method=REGISTER?to=sip:bob%40biloxi.com", SchemeSIP, "", "", "biloxi.com", 0, "transport=tcp;method=REGISTER", "to=sip:bob%40biloxi.com")
	f("sip:alice@AtLanTa.CoM;Transport=tcp", SchemeSIP, "alice", "", "AtLanTa.CoM", 0, "Transport=tcp", "")
	f("sip:carol@chicago.com?Subject=next%20meeting", SchemeSIP, "carol", "", "chicago.com", 0, "", "Subject=next%20meeting")
	// Scheme names are case-insensitive (RFC 3261 19.1.4).
	f("SIP:alice@atlanta.com", SchemeSIP, "alice", "", "atlanta.com", 0, "", "")
	f("SiPs:alice@atlanta.com", SchemeSIPS, "alice", "", "atlanta.com", 0, "", "")
	// Escapes and user-unreserved characters (RFC 4475 3.1.1.2, 3.1.1.3, 3.1.1.4, 3.1.1.9).
	f("sip:sips%3Auser%40example.com@example.net", SchemeSIP, "sips%3Auser%40example.com", "", "example.net", 0, "", "")
	f("sip:null-%00-null@example.com", SchemeSIP, "null-%00-null", "", "example.com", 0, "", "")
	f("sip:user;par=u%40example.net@example.com", SchemeSIP, "user;par=u%40example.net", "", "example.com", 0, "", "")
	f("sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com",
		SchemeSIP, "1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*", "&it+has=1,weird!*pas$wo~d_too.(doesn't-it)", "example.com", 0, "", "")
	f("sip:a&b=c+d$e,f;g?h/i@host", SchemeSIP, "a&b=c+d$e,f;g?h/i", "", "host", 0, "", "")
	f("sip:alice:@host", SchemeSIP, "alice", "", "host", 0, "", "") // password = *( ... ): may be empty
	f("sip:alice:p%40ss&=+$,w@host", SchemeSIP, "alice", "p%40ss&=+$,w", "host", 0, "", "")
	// Hosts and ports.
	f("sip:[2001:db8::10]:5070", SchemeSIP, "", "", "[2001:db8::10]", 5070, "", "")
	f("sip:[::1]", SchemeSIP, "", "", "[::1]", 0, "", "")
	f("sip:alice@[2001:DB8::1];transport=tcp", SchemeSIP, "alice", "", "[2001:DB8::1]", 0, "transport=tcp", "")
	f("sip:[::ffff:192.0.2.1]:5060", SchemeSIP, "", "", "[::ffff:192.0.2.1]", 5060, "", "")
	f("sip:host:0", SchemeSIP, "", "", "host", 0, "", "")
	f("sip:host:1", SchemeSIP, "", "", "host", 1, "", "")
	f("sip:host:65535", SchemeSIP, "", "", "host", 65535, "", "")
	f("sip:host:005060", SchemeSIP, "", "", "host", 5060, "", "")
	f("sip:192.0.2.1:5060", SchemeSIP, "", "", "192.0.2.1", 5060, "", "")
	f("sip:a.b-c.example.com.", SchemeSIP, "", "", "a.b-c.example.com.", 0, "", "")
	f("sip:host:00000000000000000000065535", SchemeSIP, "", "", "host", 65535, "", "")
	// A user of host characters is found by the host scan; one with others,
	// or a password, by the first '@'.
	f("sip:a_b.c-9@host_1.example:5060", SchemeSIP, "a_b.c-9", "", "host_1.example", 5060, "", "")
	f("sip:alice.smith+x@host", SchemeSIP, "alice.smith+x", "", "host", 0, "", "")
	f("sip:alice%40x@host", SchemeSIP, "alice%40x", "", "host", 0, "", "")
	f("sip:a.b:c@[::1]:5060", SchemeSIP, "a.b", "c", "[::1]", 5060, "", "")
	f("sip:a@b", SchemeSIP, "a", "", "b", 0, "", "")
	f("sip:h.example;lr", SchemeSIP, "", "", "h.example", 0, "lr", "")
	// Parameters: valueless, with paramchars, escapes, IPv6 maddr.
	f("sip:host;lr", SchemeSIP, "", "", "host", 0, "lr", "")
	f("sip:p1.example.com;lr;transport=udp;maddr=[2001:db8::1];ttl=1", SchemeSIP, "", "", "p1.example.com", 0, "lr;transport=udp;maddr=[2001:db8::1];ttl=1", "")
	f("sip:host;p=a%20b;q=[]/:&+$-_.!~*'()", SchemeSIP, "", "", "host", 0, "p=a%20b;q=[]/:&+$-_.!~*'()", "")
	f("sip:host:5060;lr?a=b&c=", SchemeSIP, "", "", "host", 5060, "lr", "a=b&c=") // hvalue may be empty
	f("sip:user@example.com?Route=%3Csip:example.com%3E", SchemeSIP, "user", "", "example.com", 0, "", "Route=%3Csip:example.com%3E")
	// tel (RFC 3966): the number in User, parameters in Params.
	f("tel:+1-201-555-0123", SchemeTel, "+1-201-555-0123", "", "", 0, "", "")
	f("tel:7042;phone-context=example.com", SchemeTel, "7042", "", "", 0, "phone-context=example.com", "")
	f("TEL:+358-555-1234567;postd=pp22", SchemeTel, "+358-555-1234567", "", "", 0, "postd=pp22", "")
	f("tel:+1(201)555.0123", SchemeTel, "+1(201)555.0123", "", "", 0, "", "")
	// Other schemes are opaque (RFC 4475 3.3.2, 3.3.3, 3.3.4).
	f("mailto:alice@example.com", SchemeOther, "", "", "", 0, "", "")
	f("urn:service:sos", SchemeOther, "", "", "", 0, "", "")
	f("http://www.example.com/a?b=c", SchemeOther, "", "", "", 0, "", "")
	f("nobodyKnowsThisScheme:totallyopaquecontent", SchemeOther, "", "", "", 0, "", "")
	f("soap.beep://192.0.2.103:3002", SchemeOther, "", "", "", 0, "", "")
	f("isbn:2983792873", SchemeOther, "", "", "", 0, "", "")
	f("sipx:alice@host", SchemeOther, "", "", "", 0, "", "")
	f("sip+x:alice@host", SchemeOther, "", "", "", 0, "", "")
}

func TestUnitParseURIErrors(t *testing.T) {
	f := func(in string) {
		t.Helper()
		var u URI
		if err := ParseURI([]byte(in), &u); !errors.Is(err, ErrBadURI) {
			t.Errorf("ParseURI(%q): err %v, want ErrBadURI (parsed %+v)", in, err, u)
		}
	}
	// Not a URI.
	f("")
	f("sip")
	f(":alice@host")
	f("1sip:alice@host")
	f("s p:alice@host")
	f("<sip:alice@host>")
	// userinfo (RFC 3261 25.1: user = 1*(...), no SP, escapes well formed).
	f("sip:")
	f("sip:@host")
	f("sip::pw@host")
	f("sip:al ice@host")
	f("sip:al\"ice@host")
	f("sip:al<ice@host")
	f("sip:a%4@host")
	f("sip:a%zz@host")
	f("sip:a%@host")
	f("sip:alice:pa ss@host")
	f("sip:alice:pa;ss@host") // ';' is not a password character
	f("sip:alice:pa?ss@host") // nor '?'
	// host and port.
	f("sip:alice@")
	f("sip:alice@ho st")
	f("sip:alice@host@x")
	f("sip:alice@@host")
	f("sip:alice@host:5060@x")
	f("sip:alice@:5060")
	f("sip:alice@;lr")
	f("sip:host:000000000000000000065536")
	f("sip:alice@host>")
	f("sip:host:")
	f("sip:host:65536") // port out of range
	// IPv6reference (RFC 3261 25.1, RFC 5954 4).
	f("sip:alice@[::1")
	f("sip:alice@[]")
	f("sip:alice@[1::2::3]")
	f("sip:alice@[1:2:3:4:5:6:7:8:9]")
	f("sip:alice@[fe80::1%eth0]")
	f("sip:alice@[1.2.3.4]")
	f("sip:alice@[::1.2.3.256]")
	f("sip:host:99999")
	f("sip:host:4294967301")
	f("sip:host:-1")
	f("sip:host:port")
	f("sip:host:50x")
	f("sip:host:5060:5061")
	f("sip:[2001:db8::1")
	f("sip:[]")
	f("sip:[2001:db8::g]")
	f("sip:[2001:db8::1]x")
	f("sip:2001:db8::1") // IPv6 needs brackets (RFC 3261 25.1 IPv6reference)
	// parameters (RFC 3261 25.1: uri-parameter = pname [ "=" pvalue ], both 1*paramchar).
	f("sip:host;;lr")
	f("sip:host;=a")
	f("sip:host;a=")
	f("sip:host;a=b c")
	f("sip:host;a=\"b\"")
	f("sip:host;a=%zz")
	f("sip:host;a=b;") // a trailing ';' starts an empty uri-parameter
	f("sip:host;")     // idem
	// headers (RFC 3261 25.1: "?" header *( "&" header )).
	f("sip:host?")
	f("sip:host;lr?")
	f("sip:host?a=b;c")
	f("sip:host?a b=c")
	// tel and others.
	f("tel:")
	f("tel:;phone-context=x")
	f("tel:+1 201")
	f("tel:+1;;a=b")
	f("tel:+1;")     // a trailing ';' starts an empty parameter (RFC 3966 3)
	f("tel:+1;a=b;") // idem
	f("mailto:")
	f("mailto:a b")
	f("urn:a\x00b")
	f("urn:a\x7fb")
}

// RFC 3261 19.1.4: parameter names are case-insensitive; a valueless parameter is present with an empty value.
func TestUnitURIParam(t *testing.T) {
	f := func(in, name, want string, present bool) {
		t.Helper()
		var u URI
		if err := ParseURI([]byte(in), &u); err != nil {
			t.Errorf("ParseURI(%q): %v", in, err)
			return
		}
		v, ok := u.Param(name)
		if ok != present || string(v) != want {
			t.Errorf("%q.Param(%q) = %q, %v; want %q, %v", in, name, v, ok, want, present)
		}
		if ok && v == nil {
			t.Errorf("%q.Param(%q): present but nil", in, name)
		}
	}
	const u = "sip:alice@host;Transport=TCP;lr;maddr=239.255.255.1;user=phone;x=a%3Bb?transport=udp&lr=1"
	f(u, "transport", "TCP", true)
	f(u, "TRANSPORT", "TCP", true)
	f(u, "lr", "", true)
	f(u, "LR", "", true)
	f(u, "maddr", "239.255.255.1", true)
	f(u, "user", "phone", true)
	f(u, "x", "a%3Bb", true) // escaped, not unescaped
	f(u, "ttl", "", false)
	f(u, "trans", "", false)
	f(u, "transportx", "", false)
	f(u, "phone", "", false)
	f(u, "", "", false)
	f("sip:alice@host", "lr", "", false)
	f("sip:alice;lr=1@host", "lr", "", false) // in the user part, not a parameter
	f("sip:host;lr=on;lr", "lr", "on", true)  // the first one wins
	f("sip:host;maddr=[2001:db8::1]", "maddr", "[2001:db8::1]", true)
	f("tel:7042;phone-context=example.com;ext=22", "phone-context", "example.com", true)
	f("tel:7042;phone-context=example.com;ext=22", "EXT", "22", true)
}

// Unescape decodes %HH once (RFC 3261 19.1.4; RFC 4475 3.1.1.3) and keeps
// %00 as a NUL byte (RFC 4475 3.1.1.4).
func TestUnitUnescape(t *testing.T) {
	f := func(dst, in, want string) {
		t.Helper()
		got := Unescape([]byte(dst), []byte(in))
		if string(got) != want {
			t.Errorf("Unescape(%q, %q) = %q, want %q", dst, in, got, want)
		}
	}
	f("", "", "")
	f("", "alice", "alice")
	f("", "%61lice", "alice")
	f("", "sip%3Auser%40example.com", "sip:user@example.com")
	f("", "%2541", "%41") // single level
	f("", "value%41", "valueA")
	f("", "null-%00-null", "null-\x00-null")
	f("", "%00%00", "\x00\x00")
	f("", "%4a%4A", "JJ")
	f("", "%ff", "\xff")
	f("", "%", "%")
	f("", "%4", "%4")
	f("", "a%4", "a%4")
	f("", "%zz", "%zz")
	f("", "%4z", "%4z")
	f("", "%%41", "%A")
	f("", "100%", "100%")
	f("x:", "%41", "x:A") // appends
}

func TestUnitValidIPv6Ref(t *testing.T) {
	f := func(h string, want bool) {
		t.Helper()
		if got := validIPv6Ref([]byte(h)); got != want {
			t.Errorf("validIPv6Ref(%q) = %v, want %v", h, got, want)
		}
	}
	for _, h := range []string{"[::1]", "[2001:db8::1]", "[::ffff:192.0.2.1]", "[2001:DB8:0:0:0:0:0:1]"} {
		f(h, true)
	}
	for _, h := range []string{"", "[", "[]", "[::1", "::1]", "[1::2::3]", "[1.2.3.4]", "[fe80::1%eth0]",
		"[1:2:3:4:5:6:7:8:9]", "[::1.2.3.256]", "[g::1]"} {
		f(h, false)
	}
}
