package parser

import (
	"errors"
	"testing"
)

// RFC 3261 20.10, 20.20, 20.39, 25.1: name-addr / addr-spec with header parameters.
func TestUnitParseAddress(t *testing.T) {
	f := func(in, display string, quoted bool, uri, params, tag string) {
		t.Helper()
		var a Address
		if err := ParseAddress([]byte(in), &a); err != nil {
			t.Errorf("ParseAddress(%q): %v", in, err)
			return
		}
		if string(a.Display) != display || a.Quoted != quoted || string(a.URI) != uri || string(a.Params) != params || string(a.Tag) != tag || a.Star {
			t.Errorf("ParseAddress(%q) = display %q quoted %v uri %q params %q tag %q star %v\n"+
				"want display %q quoted %v uri %q params %q tag %q",
				in, a.Display, a.Quoted, a.URI, a.Params, a.Tag, a.Star, display, quoted, uri, params, tag)
			return
		}
		if (a.Tag != nil) != (tag != "") {
			t.Errorf("ParseAddress(%q): Tag %q nil=%v", in, a.Tag, a.Tag == nil)
		}
		var u URI
		if err := a.ParseURI(&u); err != nil {
			t.Errorf("ParseAddress(%q): URI %q: %v", in, a.URI, err)
		}
	}
	// Quoted display names (RFC 3261 25.1 quoted-string, quoted-pair kept).
	f(`"Bob" <sip:bob@biloxi.com>;tag=a6c85cf`, "Bob", true, "sip:bob@biloxi.com", "tag=a6c85cf", "a6c85cf")
	f(`"" <sip:bob@biloxi.com>`, "", true, "sip:bob@biloxi.com", "", "")
	f(`"a \"b\" c" <sip:b@x>`, `a \"b\" c`, true, "sip:b@x", "", "")
	f(`"J Rosenberg \\\"" <sip:jdrosen@example.com>;tag=98asjd8`, `J Rosenberg \\\"`, true, "sip:jdrosen@example.com", "tag=98asjd8", "98asjd8") // RFC 4475 3.1.1.1
	f(`"Doe, John <x>; tag=1" <sip:j@x>`, "Doe, John <x>; tag=1", true, "sip:j@x", "", "")
	f("\"\xd0\x91\xd0\xbe\xd0\xb1\" <sip:b@x>", "\xd0\x91\xd0\xbe\xd0\xb1", true, "sip:b@x", "", "")
	f(`"Bob"<sip:b@x>`, "Bob", true, "sip:b@x", "", "")
	f(`"Bob"   <sip:b@x>`, "Bob", true, "sip:b@x", "", "")
	f("\"Bob\"\r\n <sip:b@x>", "Bob", true, "sip:b@x", "", "")
	// Token display names (display-name = *(token LWS)), LWS before '<' optional (RFC 4475 3.1.1.6).
	f("Bob <sip:b@x>", "Bob", false, "sip:b@x", "", "")
	f("Bob Smith  Jr <sip:b@x>", "Bob Smith  Jr", false, "sip:b@x", "", "")
	f("caller<sip:caller@example.com>;tag=323", "caller", false, "sip:caller@example.com", "tag=323", "323")
	f("Mr.~Smith!%*_+`'~ <sip:b@x>", "Mr.~Smith!%*_+`'~", false, "sip:b@x", "", "")
	f("<sip:b@x>", "", false, "sip:b@x", "", "")
	f("  <sip:b@x>  ", "", false, "sip:b@x", "", "")
	// Parameters after '>' belong to the header; inside <> to the URI (RFC 4475 3.3.13).
	f("<sip:+19725552222@gw1.example.net;unknownparam>", "", false, "sip:+19725552222@gw1.example.net;unknownparam", "", "")
	f("<sip:b@x;lr>;tag=1 ; expires = 60", "", false, "sip:b@x;lr", "tag=1 ; expires = 60", "1")
	f("<sip:b@x;tag=1>", "", false, "sip:b@x;tag=1", "", "") // a URI parameter named tag is no tag
	f(`<sip:a@b>;x="a;b";tag=1`, "", false, "sip:a@b", `x="a;b";tag=1`, "1")
	f(`<sip:a@b>;x="<y>";tag=1`, "", false, "sip:a@b", `x="<y>";tag=1`, "1")
	f("<sip:a@b>;TAG=Abc", "", false, "sip:a@b", "TAG=Abc", "Abc")
	f("<sip:a@b>;tag=1;foo;bar=baz", "", false, "sip:a@b", "tag=1;foo;bar=baz", "1")
	// Names of the same length, or one letter off, are other parameters
	// (checkParams compares "tag" a word at a time).
	f("<sip:a@b>;tAg=1;tah=x;uag=x;tbg=x;t\x60g=x;Tagg=x;ta=x", "", false, "sip:a@b", "tAg=1;tah=x;uag=x;tbg=x;t\x60g=x;Tagg=x;ta=x", "1")
	f("<sip:a@b>;tags=1;tg;ta;t;xtag=2", "", false, "sip:a@b", "tags=1;tg;ta;t;xtag=2", "")
	f("<sip:user@example.com?Route=%3Csip:sip.example.com%3E>", "", false, "sip:user@example.com?Route=%3Csip:sip.example.com%3E", "", "") // RFC 4475 3.3.14
	f("<sip:a,b@x>", "", false, "sip:a,b@x", "", "")
	f("<urn:service:sos>", "", false, "urn:service:sos", "", "")
	// addr-spec: the first ';' ends the URI (RFC 3261 20.10; RFC 4475 3.3.12).
	f("sip:+19725552222@gw1.example.net;unknownparam", "", false, "sip:+19725552222@gw1.example.net", "unknownparam", "")
	f("sip:watson@example.com;tag=DkfVgjkrtMwaerKKpe", "", false, "sip:watson@example.com", "tag=DkfVgjkrtMwaerKKpe", "DkfVgjkrtMwaerKKpe")
	f("sip:b@x ;tag=1", "", false, "sip:b@x", "tag=1", "1")
	f("sip:b@x", "", false, "sip:b@x", "", "")
	f("tel:+14085264000", "", false, "tel:+14085264000", "", "")
	f("sips:b@[2001:db8::1]:5061;tag=x", "", false, "sips:b@[2001:db8::1]:5061", "tag=x", "x")
	// RFC 3261 25.1: from-param = tag-param / generic-param; gen-value may be a
	// quoted-string, and its contents are not address syntax.
	f(`sip:a@b;x="<y>"`, "", false, "sip:a@b", `x="<y>"`, "")
	f(`sip:a@b;x="1;2";tag=3`, "", false, "sip:a@b", `x="1;2";tag=3`, "3")
}

// RFC 4475 3.3.12 vs 3.3.13: where "unknownparam" lands.
func TestUnitAddressParamPlacement(t *testing.T) {
	f := func(in string, inURI, inHeader bool) {
		t.Helper()
		var (
			a Address
			u URI
		)
		if err := ParseAddress([]byte(in), &a); err != nil {
			t.Errorf("ParseAddress(%q): %v", in, err)
			return
		}
		if err := a.ParseURI(&u); err != nil {
			t.Errorf("ParseAddress(%q): URI: %v", in, err)
			return
		}
		_, uriHas := u.Param("unknownparam")
		_, hdrHas := a.Param("unknownparam")
		if uriHas != inURI || hdrHas != inHeader {
			t.Errorf("%q: URI has it %v, header has it %v; want %v, %v", in, uriHas, hdrHas, inURI, inHeader)
		}
	}
	f("sip:+19725552222@gw1.example.net;unknownparam", false, true)   // cparam01
	f("<sip:+19725552222@gw1.example.net;unknownparam>", true, false) // cparam02
	f("<sip:+19725552222@gw1.example.net;unknownparam>;unknownparam=1", true, true)
}

// Header parameter lookup (case-insensitive names, LWS around ';' and '=', quoted values kept quoted).
func TestUnitAddressParam(t *testing.T) {
	f := func(in, name, want string, present bool) {
		t.Helper()
		var a Address
		if err := ParseAddress([]byte(in), &a); err != nil {
			t.Errorf("ParseAddress(%q): %v", in, err)
			return
		}
		v, ok := a.Param(name)
		if ok != present || string(v) != want {
			t.Errorf("%q.Param(%q) = %q, %v; want %q, %v", in, name, v, ok, want, present)
		}
	}
	const c = `<sip:a@b;lr>;expires=60 ; q = 0.5;+sip.instance="<urn:uuid:00000000-0000-1000-8000-AABBCCDDEEFF>";reg-id=1;pub-gruu`
	f(c, "expires", "60", true)
	f(c, "EXPIRES", "60", true)
	f(c, "q", "0.5", true)
	f(c, "+sip.instance", `"<urn:uuid:00000000-0000-1000-8000-AABBCCDDEEFF>"`, true)
	f(c, "reg-id", "1", true)
	f(c, "pub-gruu", "", true)
	f(c, "lr", "", false) // a URI parameter
	f(c, "tag", "", false)
	f(c, "expire", "", false)
	f(`<sip:a@b>;x="a;tag=2";tag=1`, "tag", "1", true)
}

func TestUnitParseAddressErrors(t *testing.T) {
	f := func(in string, want error) {
		t.Helper()
		var a Address
		err := ParseAddress([]byte(in), &a)
		if !errors.Is(err, want) {
			t.Errorf("ParseAddress(%q): err %v, want %v", in, err, want)
		}
	}
	f(`"Mr. J. User <sip:j.user@example.com>`, ErrBadAddress)         // RFC 4475 3.1.2.6: unterminated quote
	f(`"Mr. J. User \" <sip:j.user@example.com>`, ErrBadAddress)      // the quote is escaped
	f(`"Watson, Thomas" < sip:t.watson@example.org >`, ErrBadAddress) // RFC 4475 3.1.2.14: LWS inside <>
	f("<sip:t.watson@example.org >", ErrBadAddress)
	f("< sip:t.watson@example.org>", ErrBadAddress)
	f("<sip:t.watson @example.org>", ErrBadAddress)
	f("<sip:t.watson@\texample.org>", ErrBadAddress)
	f("Bell, Alexander <sip:a.g.bell@bell-tel.com>;tag=43", ErrBadAddress)   // RFC 4475 3.1.2.15
	f("Bell@Alexander <sip:a.g.bell@bell-tel.com>", ErrBadAddress)           // '@' is not a token character
	f("sip:user@example.com?Route=%3Csip:sip.example.com%3E", ErrBadAddress) // RFC 4475 3.1.2.13
	f("sip:a,b@example.com", ErrBadAddress)                                  // ',' needs <>
	f(`"Bob" sip:b@x`, ErrBadAddress)                                        // quoted name without <>
	f(`Bob "x" <sip:b@x>`, ErrBadAddress)                                    // token and quoted mixed
	f("<sip:b@x", ErrBadAddress)                                             // no '>'
	f("<sip:b@x> junk", ErrBadAddress)                                       // not a parameter
	f("<sip:b@x>tag=1", ErrBadAddress)                                       // no ';'
	f("<>", ErrBadAddress)                                                   // no URI
	f("", ErrBadAddress)                                                     // nothing
	f("Bob", ErrBadAddress)                                                  // no URI
	f("<bob>", ErrBadAddress)                                                // no scheme
	f("**", ErrBadAddress)                                                   // not a star
	f("*;expires=0", ErrBadAddress)                                          // a star takes no parameters (RFC 3261 20.10)
	f("<sip:b@x>;tag=1;tag=2", ErrDupTag)                                    // one tag (RFC 3261 19.3)
	f("<sip:b@x>;tag=1;TAG=1", ErrDupTag)                                    // names are case-insensitive
	f("sip:b@x;tag=1;tag=2", ErrDupTag)                                      // addr-spec form too
	f("<sip:b@x>;tag", ErrBadTag)                                            // tag-param = "tag" EQUAL token
	f("<sip:b@x>;x=1;TaG", ErrBadTag)                                        // idem, after another parameter
	f("<sip:b@x>;tag=", ErrBadParams)                                        // EQUAL then nothing
	f("<sip:b@x>;", ErrBadParams)                                            // empty parameter
	f("<sip:b@x>;;tag=1", ErrBadParams)                                      // idem
	f("<sip:b@x>;tag=1;", ErrBadParams)                                      // idem
	f(`"Joe" <sip:joe@example.org>;;;;`, ErrBadParams)                       // RFC 4475 3.1.2.1
	f(`<sip:b@x>;x="unterminated`, ErrBadParams)                             // unterminated quoted value
	f("<sip:b@x>;x=a b", ErrBadParams)                                       // two tokens
	f("<sip:b@x>;x=(a)", ErrBadParams)                                       // not a token
	f("<sip:b@x>;=a", ErrBadParams)                                          // no name
}

// Contact: * (RFC 3261 10.2.2, 20.10).
func TestUnitAddressStar(t *testing.T) {
	f := func(in string, star bool) {
		t.Helper()
		var a Address
		err := ParseAddress([]byte(in), &a)
		if star && (err != nil || !a.Star || a.URI != nil || a.Params != nil) {
			t.Errorf("ParseAddress(%q) = %+v, %v; want a star", in, a, err)
		}
		if !star && a.Star {
			t.Errorf("ParseAddress(%q): star", in)
		}
	}
	f("*", true)
	f(" * ", true)
	f("\r\n *", true)
	f("<sip:*@x>", false)
	f("sip:*@x", false)
}

// The address accessors of Message.
func TestUnitMessageAddress(t *testing.T) {
	m := unitParse(t, "REGISTER sip:example.com SIP/2.0", []string{
		"f: Alice <sip:alice@example.com>;tag=1",
		"t: sip:alice@example.com",
		"m: <sip:alice@192.0.2.1>;expires=60, \"Mobile\" <sip:alice@192.0.2.2>",
		"Contact: *",
		"P-Asserted-Identity: <sip:alice@example.com>, <tel:+15551234>",
	}, "")
	f := func(kind HeaderKind, n int, wantErr error, wantURI string) {
		t.Helper()
		var a Address
		a.Tag = []byte("stale")
		err := m.Address(kind, n, &a)
		if !errors.Is(err, wantErr) || string(a.URI) != wantURI {
			t.Errorf("Address(%v, %d) = %q, %v; want %q, %v", kind, n, a.URI, err, wantURI, wantErr)
		}
		if err != nil && a.Tag != nil {
			t.Errorf("Address(%v, %d): stale value left on error", kind, n)
		}
	}
	f(HeaderFrom, 0, nil, "sip:alice@example.com")
	f(HeaderTo, 0, nil, "sip:alice@example.com")
	f(HeaderContact, 0, nil, "sip:alice@192.0.2.1")
	f(HeaderContact, 1, nil, "sip:alice@192.0.2.2")
	f(HeaderContact, 2, nil, "") // *
	f(HeaderContact, 3, ErrNoHeader, "")
	f(HeaderPAssertedIdentity, 1, nil, "tel:+15551234")
	f(HeaderRoute, 0, ErrNoHeader, "")
	f(HeaderFrom, 1, ErrNoHeader, "")
	var a Address
	if err := m.From(&a); err != nil || string(a.Tag) != "1" || string(a.Display) != "Alice" {
		t.Errorf("From: %+v %v", a, err)
	}
	if err := m.To(&a); err != nil || a.Tag != nil {
		t.Errorf("To: %+v %v", a, err)
	}
	if err := m.Contact(1, &a); err != nil || string(a.Display) != "Mobile" || !a.Quoted {
		t.Errorf("Contact 1: %+v %v", a, err)
	}
	if err := m.Contact(2, &a); err != nil || !a.Star {
		t.Errorf("Contact 2: %+v %v", a, err)
	}
}

// ParseAddress's one-scan display name and checkParams's lone-tag shortcut
// agree with skipQuoted and the parameter walk for every byte value at every
// position.
func TestUnitAddressShortcuts(t *testing.T) {
	walk := func(b []byte) (tag []byte, err error) { // checkParams without its shortcut
		it := paramIter{b: b}
		seen := false
		for !it.done {
			name, value, _, err := it.next()
			if err != nil {
				return nil, err
			}
			if equalFold(name, "tag") {
				if seen {
					return nil, ErrDupTag
				}
				if len(value) == 0 {
					return nil, ErrBadTag
				}
				seen, tag = true, value
			}
		}
		return tag, nil
	}
	for _, s := range []string{"tag=abc", "TaG=a:b", "tag=1;x", "tag=\"q\""} {
		for pos := range len(s) + 1 {
			for c := range 256 {
				b := append(append([]byte(s[:pos]), byte(c)), s[pos:]...)
				for _, b := range [][]byte{b, b[:pos+1]} {
					tag, err := checkParams(b)
					wtag, werr := walk(b)
					if err != werr || string(tag) != string(wtag) || (tag == nil) != (wtag == nil) || cap(tag) != cap(wtag) {
						t.Fatalf("checkParams(%q) = %q, %v; the walk gives %q, %v", b, tag, err, wtag, werr)
					}
				}
			}
		}
	}
	for _, s := range []string{`"Alice" <sip:a@b>`, `"a\"b" <sip:a@b>`, "\"a\r\n b\" <sip:a@b>"} {
		for pos := 1; pos < 9 && pos < len(s); pos++ {
			for c := range 256 {
				b := []byte(s)
				b[pos] = byte(c)
				var a Address
				err := ParseAddress(b, &a)
				end, ok := skipQuoted(b, 0, len(b))
				if ok != (err == nil || a.Quoted) || ok && string(a.Display) != string(b[1:end-1]) {
					t.Fatalf("ParseAddress(%q) = display %q, %v; skipQuoted ends at %d, %v", b, a.Display, err, end, ok)
				}
			}
		}
	}
}
