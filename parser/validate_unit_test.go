package parser

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// vBase is a valid INVITE header section, one header a line.
var vBase = []string{
	"Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK776asdhds",
	"Max-Forwards: 70",
	"To: Bob <sip:bob@biloxi.example.com>",
	"From: Alice <sip:alice@atlanta.example.com>;tag=1928301774",
	"Call-ID: a84b4c76e66710@pc33.atlanta.example.com",
	"CSeq: 314159 INVITE",
}

// vWith returns vBase plus extra lines.
func vWith(extra ...string) []string {
	return append(append([]string(nil), vBase...), extra...)
}

// vSet returns vBase with the line whose name is name (before the colon)
// replaced by lines; no lines removes it.
func vSet(name string, lines ...string) []string {
	var h []string
	for _, l := range vBase {
		if strings.EqualFold(l[:strings.IndexByte(l, ':')], name) {
			h = append(h, lines...)
			continue
		}
		h = append(h, l)
	}
	return h
}

const invite = "INVITE sip:bob@biloxi.example.com SIP/2.0"

// Each rule of Validate's doc comment, passing and failing.
func TestUnitValidate(t *testing.T) {
	f := func(start string, headers []string, supported []string, want error) {
		t.Helper()
		var m Message
		if err := m.Parse(unitMsg(start, headers, "")); err != nil {
			t.Errorf("Parse(%q, %q): %v", start, headers, err)
			return
		}
		if err := m.Validate(supported); !errors.Is(err, want) {
			t.Errorf("Validate(%q, %q, %q) = %v, want %v", start, headers, supported, err, want)
		}
	}
	f(invite, vBase, nil, nil)

	// Mandatory headers (RFC 3261 8.1.1); Max-Forwards may be missing (RFC 4475 3.4.1).
	f(invite, vSet("Via"), nil, ErrMissingVia)
	f(invite, vSet("From"), nil, ErrMissingFrom)
	f(invite, vSet("To"), nil, ErrMissingTo)
	f(invite, vSet("Call-ID"), nil, ErrMissingCallID)
	f(invite, vSet("CSeq"), nil, ErrMissingCSeq)
	f(invite, vSet("Max-Forwards"), nil, nil)
	f(invite, vSet("Via", "v: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK776asdhds"), nil, nil)
	f(invite, vSet("Call-ID", "i: a84b4c76e66710"), nil, nil)

	// Single-value headers not repeated (RFC 3261 7.3.1; RFC 4475 3.3.8).
	f(invite, vWith("From: <sip:eve@example.com>;tag=2"), nil, ErrDupHeader)
	f(invite, vWith("t: <sip:eve@example.com>"), nil, ErrDupHeader)
	f(invite, vWith("i: other"), nil, ErrDupHeader)
	f(invite, vWith("CSeq: 314159 INVITE"), nil, ErrDupHeader)
	f(invite, vWith("Max-Forwards: 70"), nil, ErrDupHeader)
	for _, h := range []string{"Content-Type: text/plain", "Expires: 1", "Min-Expires: 1", "Retry-After: 1",
		"RSeq: 1", "RAck: 1 1 INVITE", "Session-Expires: 90", "Min-SE: 90", "Event: presence",
		"Refer-To: <sip:c@d>", "Referred-By: <sip:c@d>"} {
		f(invite, vWith(h), nil, nil)
		f(invite, vWith(h, h), nil, ErrDupHeader)
	}
	f(invite, vWith("Contact: <sip:a@b>", "Contact: <sip:c@d>"), nil, nil)
	f(invite, vWith("Route: <sip:p1;lr>", "Route: <sip:p2;lr>"), nil, nil)
	f(invite, vWith("Via: SIP/2.0/UDP p2;branch=z9hG4bK2"), nil, nil)
	f(invite, vWith("Supported: timer", "Supported: 100rel"), nil, nil)
	f(invite, vWith("X-Custom: 1", "X-Custom: 2"), nil, nil)

	// CSeq: number up to 2^32-1, method equal to the request method (RFC 3261 8.1.1.5, 20.16; RFC 4475 3.1.2.17).
	f(invite, vSet("CSeq", "CSeq: 4294967295 INVITE"), nil, nil)
	f(invite, vSet("CSeq", "CSeq: 4294967296 INVITE"), nil, ErrBadCSeq)
	f(invite, vSet("CSeq", "CSeq: 36893488147419103232 INVITE"), nil, ErrBadCSeq)
	f(invite, vSet("CSeq", "CSeq: 1"), nil, ErrBadCSeq)
	f(invite, vSet("CSeq", "CSeq: 1 OPTIONS"), nil, ErrCSeqMismatch)
	f(invite, vSet("CSeq", "CSeq: 1 invite"), nil, ErrCSeqMismatch) // methods are case-sensitive (RFC 3261 7.1)
	f("invite sip:bob@biloxi.example.com SIP/2.0", vBase, nil, ErrCSeqMismatch)
	f("NEWMETHOD sip:bob@biloxi.example.com SIP/2.0", vSet("CSeq", "CSeq: 8 NEWMETHOD"), nil, nil)
	f("NEWMETHOD sip:bob@biloxi.example.com SIP/2.0", vSet("CSeq", "CSeq: 8 INVITE"), nil, ErrCSeqMismatch) // RFC 4475 3.1.2.18

	// Max-Forwards 0-255 (RFC 3261 20.22), Expires up to 2^32-1 (RFC 3261 20.19; RFC 4475 3.1.2.4).
	f(invite, vSet("Max-Forwards", "Max-Forwards: 0"), nil, nil)
	f(invite, vSet("Max-Forwards", "Max-Forwards: 255"), nil, nil)
	f(invite, vSet("Max-Forwards", "Max-Forwards: 256"), nil, ErrBadMaxForwards)
	f(invite, vSet("Max-Forwards", "Max-Forwards: x"), nil, ErrBadMaxForwards)
	f(invite, vWith("Expires: 4294967295"), nil, nil)
	f(invite, vWith("Expires: 4294967296"), nil, ErrBadExpires)
	f(invite, vWith("Expires: soon"), nil, ErrBadExpires)

	// Call-ID = word [ "@" word ] (RFC 3261 25.1).
	f(invite, vSet("Call-ID", "Call-ID: f81d4fae-7dec-11d0-a765-00a0c91e6bf6@foo.bar.com"), nil, nil)
	f(invite, vSet("Call-ID", "Call-ID: intmeth.word%ZK-!.*_+'@word`~)(><:\\/\"][?}{"), nil, nil) // RFC 4475 3.1.1.2
	f(invite, vSet("Call-ID", "Call-ID: 1"), nil, nil)
	f(invite, vSet("Call-ID", "Call-ID: a b"), nil, ErrBadCallID)
	f(invite, vSet("Call-ID", "Call-ID: @b"), nil, ErrBadCallID)
	f(invite, vSet("Call-ID", "Call-ID: a@"), nil, ErrBadCallID)
	f(invite, vSet("Call-ID", "Call-ID: a@b@c"), nil, ErrBadCallID)
	f(invite, vSet("Call-ID", "Call-ID: a;b"), nil, ErrBadCallID)
	f(invite, vSet("Call-ID", "Call-ID:"), nil, ErrBadCallID)

	// The top Via (RFC 3261 20.42); a cookie-only branch (RFC 4475 3.2.1); no branch is RFC 2543.
	f(invite, vSet("Via", "Via: SIP/2.0/UDP pc33.atlanta.example.com"), nil, nil)
	f(invite, vSet("Via", "Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=1234"), nil, nil)
	f(invite, vSet("Via", "Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bK"), nil, ErrBadBranch)
	f(invite, vSet("Via", "Via: SIP/2.0/UDP pc33.atlanta.example.com;;branch=z9hG4bK1"), nil, ErrBadVia)
	f(invite, vSet("Via", "Via: SIP/7.0/UDP pc33.atlanta.example.com;branch=z9hG4bK1"), nil, ErrBadVia)
	f(invite, vSet("Via", "Via: pc33.atlanta.example.com"), nil, ErrBadVia)
	f(invite, vSet("Via", "Via:"), nil, ErrBadVia)

	// From, To and the other address headers well-formed, one tag each (RFC 3261 20.20, 20.39, 19.3).
	f(invite, vSet("From", "From: <sip:alice@atlanta.example.com>;tag=1;tag=2"), nil, ErrDupTag)
	f(invite, vSet("To", "To: <sip:bob@biloxi.example.com>;tag=1;tag=2"), nil, ErrDupTag)
	f(invite, vSet("To", "To: <sip:bob@biloxi.example.com>;tag=1"), nil, nil)
	f(invite, vSet("From", "From: sip:alice@atlanta.example.com"), nil, nil) // RFC 2543: no tag
	f(invite, vSet("From", `From: "Alice <sip:alice@atlanta.example.com>;tag=1`), nil, ErrBadAddress)
	f(invite, vSet("From", "From: Bell, Alexander <sip:a.g.bell@bell-tel.com>;tag=43"), nil, ErrBadAddress)
	f(invite, vSet("To", `To: "Watson, Thomas" < sip:t.watson@example.org >`), nil, ErrBadAddress)
	f(invite, vSet("To", "To: <sip:bob@biloxi.example.com:99999>"), nil, ErrBadURI)
	f(invite, vSet("To", "To: <sip:bob@>"), nil, ErrBadURI)
	f(invite, vSet("From", "From: <sip:al ice@atlanta.example.com>;tag=1"), nil, ErrBadAddress)
	f(invite, vWith("Contact: <sip:alice@pc33.atlanta.example.com>;expires=60"), nil, nil)
	f(invite, vWith("Contact: <sip:alice@pc33.atlanta.example.com>;;"), nil, ErrBadParams)                // RFC 4475 3.1.2.1
	f(invite, vWith("Contact: sip:user@example.com?Route=%3Csip:sip.example.com%3E"), nil, ErrBadAddress) // RFC 4475 3.1.2.13
	f(invite, vWith("Contact: <sip:alice@[2001:db8::1>"), nil, ErrBadURI)
	f(invite, vWith("Route: <sip:p1.example.com;lr>"), nil, nil)
	f(invite, vWith("Route: <sip:p1.example.com;;lr>"), nil, ErrBadURI)
	f(invite, vWith("Record-Route: <sip:p1.example.com;lr"), nil, ErrBadAddress)
	f(invite, vWith("P-Asserted-Identity: \"Alice\" <sip:alice@atlanta.example.com>, <tel:+15551234>"), nil, nil)
	f(invite, vWith("P-Asserted-Identity: Alice, Smith <sip:alice@atlanta.example.com>"), nil, ErrBadAddress)
	f(invite, vWith("P-Preferred-Identity: <sip:alice@atlanta.example.com:70000>"), nil, ErrBadURI)
	// Non-SIP URIs in From, To, Contact parse (RFC 4475 3.3.4).
	f(invite, vSet("To", "To: isbn:2983792873"), nil, nil)
	f(invite, vSet("From", "From: <http://www.example.com>;tag=3234233"), nil, nil)
	f(invite, vWith("Contact: <name:John_Smith>"), nil, nil)
	// Contact: * (RFC 3261 10.2.2: a REGISTER removing every binding).
	f("REGISTER sip:biloxi.example.com SIP/2.0", vSet("CSeq", "CSeq: 2 REGISTER", "Contact: *", "Expires: 0"), nil, nil)

	// Request-URI: sip, sips, tel; else 416 (RFC 3261 8.2.2.1; RFC 4475 3.3.2, 3.3.3).
	f("INVITE sips:bob@biloxi.example.com SIP/2.0", vBase, nil, nil)
	f("INVITE tel:+12125551212 SIP/2.0", vBase, nil, nil)
	f("INVITE SIP:bob@BILOXI.example.com SIP/2.0", vBase, nil, nil)
	f("INVITE mailto:bob@biloxi.example.com SIP/2.0", vBase, nil, ErrURIScheme)
	f("INVITE nobodyKnowsThisScheme:totallyopaquecontent SIP/2.0", vBase, nil, ErrURIScheme)
	f("INVITE soap.beep://192.0.2.103:3002 SIP/2.0", vBase, nil, ErrURIScheme)
	f("INVITE http://example.com/ SIP/2.0", vBase, nil, ErrURIScheme)
	f("INVITE urn:service:sos SIP/2.0", vBase, nil, ErrURIScheme)
	// A sip Request-URI well-formed and without headers (RFC 3261 19.1.1; RFC 4475 3.1.2.11).
	f("INVITE sip:user@example.com?Route=%3Csip:example.com%3E SIP/2.0", vBase, nil, ErrBadURI)
	f("INVITE sips:user@example.com?a=b SIP/2.0", vBase, nil, ErrBadURI)
	f("INVITE sip:bob@biloxi.example.com:99999 SIP/2.0", vBase, nil, ErrBadURI)
	f("INVITE sip:%zz@biloxi.example.com SIP/2.0", vBase, nil, ErrBadURI)
	f("INVITE sip:bob@biloxi.example.com; SIP/2.0", vBase, nil, ErrBadURI) // empty uri-parameter (RFC 3261 25.1)
	f("INVITE sip:bob@biloxi.example.com;lr;transport=tcp SIP/2.0", vBase, nil, nil)

	// Require and Proxy-Require (RFC 3261 8.2.2.3; RFC 4475 3.3.5): 420, except for ACK and CANCEL.
	sup := []string{"100rel", "timer", "replaces"}
	f(invite, vWith("Require: 100rel"), sup, nil)
	f(invite, vWith("Require: 100REL, Timer"), sup, nil) // option tags are tokens: case-insensitive
	f(invite, vWith("Require: 100rel", "Require: replaces"), sup, nil)
	f(invite, vWith("Proxy-Require: timer"), sup, nil)
	f(invite, vWith("Supported: foo, bar"), sup, nil) // Supported is not checked
	f(invite, vWith("Require: 100rel, precondition"), sup, ErrBadExtension)
	f(invite, vWith("Require: 100rel", "Require: precondition"), sup, ErrBadExtension)
	f(invite, vWith("Proxy-Require: foo"), sup, ErrBadExtension)
	f(invite, vWith("Require: 100rel"), nil, ErrBadExtension)
	f("BYE sip:bob@biloxi.example.com SIP/2.0", vSet("CSeq", "CSeq: 1 BYE", "Require: foo"), sup, ErrBadExtension)
	f("ACK sip:bob@biloxi.example.com SIP/2.0", vSet("CSeq", "CSeq: 314159 ACK", "Require: foo", "Proxy-Require: bar"), sup, nil)
	f("CANCEL sip:bob@biloxi.example.com SIP/2.0", vSet("CSeq", "CSeq: 314159 CANCEL", "Require: foo", "Proxy-Require: bar"), sup, nil)
}

// RFC 3261 25.1: Require = "Require" HCOLON option-tag *(COMMA option-tag) and
// Proxy-Require likewise: an empty element makes the request malformed (400,
// RFC 3261 21.4.1), not one asking for an unsupported extension (420, whose
// Unsupported header would then list an empty option tag).
func TestUnitValidateRequireSyntax(t *testing.T) {
	sup := []string{"100rel", "timer"}
	f := func(headers ...string) {
		t.Helper()
		var m Message
		if err := m.Parse(unitMsg(invite, vWith(headers...), "")); err != nil {
			return // rejected by Parse: fine
		}
		if err := m.Validate(sup); errCode(err) != 400 {
			t.Errorf("Validate with %q = %v (code %d), want a 400 error; Unsupported would be %q",
				headers, err, errCode(err), AppendUnsupported(nil, &m, sup))
		}
	}
	f("Require: 100rel,,timer")
	f("Require: ,100rel")
	f("Proxy-Require: timer,,100rel")
	// An unsupported tag in one header, an empty one in the other (found
	// by FuzzParse): still 400, whichever comes first.
	f("Require: foo", "Proxy-Require: ,")
	f("Proxy-Require: foo", "Require: bar,")
}

// Validate on responses: the same mandatory headers, no request-only checks,
// a UTF-8 reason phrase (RFC 3261 25.1 Reason-Phrase).
func TestUnitValidateResponse(t *testing.T) {
	f := func(start string, headers []string, want error) {
		t.Helper()
		var m Message
		if err := m.Parse(unitMsg(start, headers, "")); err != nil {
			t.Errorf("Parse(%q): %v", start, err)
			return
		}
		err := m.Validate(nil)
		if !errors.Is(err, want) {
			t.Errorf("Validate(%q, %q) = %v, want %v", start, headers, err, want)
		}
		if err != nil {
			if _, _, drop := Answer(&m, err); !drop {
				t.Errorf("Validate(%q): a response that fails must be dropped (RFC 3261 18.1.2)", start)
			}
		}
	}
	f("SIP/2.0 200 OK", vBase, nil)
	f("SIP/2.0 200 OK", vSet("CSeq", "CSeq: 1 BYE"), nil) // no method to match
	f("SIP/2.0 420 Bad Extension", vWith("Require: foo", "Unsupported: foo"), nil)
	f("SIP/2.0 200 \xd0\x9e\xd0\x9a", vBase, nil)
	f("SIP/2.0 200 O\xffK", vBase, ErrReasonNotUTF8)
	f("SIP/2.0 200 \xc0\xaf", vBase, ErrReasonNotUTF8) // overlong encoding
	f("SIP/2.0 200 OK", vSet("Call-ID"), ErrMissingCallID)
	f("SIP/2.0 200 OK", vSet("Via", "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK"), ErrBadBranch)
	f("SIP/2.0 200 OK", vWith("To: <sip:x@y>"), ErrDupHeader)

	// From and To URIs are the request's echoed: not parsed in a response,
	// as they are in a request; the rest of the address still is, and a
	// Contact's URI, the dialog's remote target, is parsed.
	badFrom := vSet("From", "From: Alice <sip:alice@bad_host!>;tag=1928301774")
	badTo := vSet("To", "To: <sip:bob@[::1>")
	f("SIP/2.0 200 OK", badFrom, nil)
	f("SIP/2.0 200 OK", badTo, nil)
	f("SIP/2.0 200 OK", vSet("From", "From: Alice <sip:alice@atlanta.example.com>;tag=1;tag=2"), ErrDupTag)
	f("SIP/2.0 200 OK", vSet("To", "To: Bob sip:bob@biloxi.example.com"), ErrBadAddress)
	f("SIP/2.0 200 OK", vWith("Contact: <sip:gw@bad_host!>"), ErrBadURI)
	for _, h := range [][]string{badFrom, badTo} {
		var m Message
		if err := m.Parse(unitMsg(invite, h, "")); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(nil); err == nil {
			t.Errorf("Validate accepted a request with %q", h)
		}
	}
}

// RFC 3261 20.40, 8.2.2.3: the Unsupported header of a 420 lists exactly the
// option tags of Require and Proxy-Require not supported.
func TestUnitAppendUnsupported(t *testing.T) {
	sup := []string{"100rel", "timer", "replaces"}
	f := func(headers []string, want string) {
		t.Helper()
		var m Message
		if err := m.Parse(unitMsg(invite, headers, "")); err != nil {
			t.Errorf("Parse(%q): %v", headers, err)
			return
		}
		got := AppendUnsupported([]byte("Unsupported: "), &m, sup)
		if !strings.HasPrefix(string(got), "Unsupported: ") {
			t.Errorf("AppendUnsupported(%q) overwrote dst: %q", headers, got)
			return
		}
		// The set of tags matters, not their order.
		var tags []string
		v := got[len("Unsupported: "):]
		for item, rest := NextListItem(v); item != nil || rest != nil; item, rest = NextListItem(rest) {
			tags = append(tags, string(item))
		}
		wantTags := strings.Split(want, ", ")
		if want == "" {
			wantTags = nil
		}
		slices.Sort(tags)
		slices.Sort(wantTags)
		if !slices.Equal(tags, wantTags) {
			t.Errorf("AppendUnsupported(%q) = %q, want the tags %q", headers, v, want)
		}
		err := m.Validate(sup)
		if (want == "") != (err == nil) || want != "" && !errors.Is(err, ErrBadExtension) {
			t.Errorf("Validate(%q) = %v with Unsupported %q", headers, err, want)
		}
	}
	f(vBase, "")
	f(vWith("Require: 100rel, timer"), "")
	f(vWith("Require: foo"), "foo")
	f(vWith("Require: 100rel, foo, TIMER, bar"), "foo, bar")
	f(vWith("Require: nothingSupportsThis, nothingSupportsThisEither", "Proxy-Require: noProxiesSupportThis"), // RFC 4475 3.3.5
		"nothingSupportsThis, nothingSupportsThisEither, noProxiesSupportThis")
	f(vWith("Proxy-Require: a", "Require: b", "Require: c"), "b, c, a")
	f(vWith("Supported: foo", "Require: timer"), "")
}

// A header value holds no control character but HTAB and the CRLF of a
// fold (RFC 3261 25.1 TEXT-UTF8char / LWS): a NUL or a bare CR relayed or
// echoed would end the value early at some peers and start a forged
// header at others.
func TestUnitValidateControlCharacters(t *testing.T) {
	f := func(extra string, want error) {
		t.Helper()
		var m Message
		if err := m.Parse(unitMsg(invite, vWith(extra), "")); err != nil {
			t.Fatalf("Parse(%q): %v", extra, err)
		}
		if err := m.Validate(nil); !errors.Is(err, want) {
			t.Errorf("Validate with %q = %v, want %v", extra, err, want)
		}
	}
	f("Subject: hi there", nil)
	f("Subject: hi\tthere, ünïcode", nil)
	f("Subject: a long subject line\r\n folded over two lines", nil)
	f("Subject: hi\x00Via: SIP/2.0/UDP evil", ErrBadHeader)
	f("X-Foo: a\x0bb", ErrBadHeader)
	f("X-Foo: 01234567\x7f", ErrBadHeader)
	f("Content-Type: application/sdp\x00x", ErrBadHeader)
	f("Allow: INVITE, A\x01CK", ErrBadHeader)
}

// HasControl's eight-byte rounds agree with a byte-by-byte check for every
// byte value at every position.
func TestUnitHasCTL(t *testing.T) {
	slow := func(b []byte) bool {
		for _, c := range b {
			if c < ' ' && c != '\t' || c == 0x7f {
				return true
			}
		}
		return false
	}
	buf := []byte("abcdefghijklmnopqrstuvwxyz0123456789")
	for n := 0; n <= len(buf); n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				if c == '\r' {
					continue // a fold's CR is allowed, a bare one checked below
				}
				b := append([]byte(nil), buf[:n]...)
				b[pos] = byte(c)
				if got, want := HasControl(b), slow(b); got != want {
					t.Fatalf("HasControl(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
	for _, s := range []string{"a\rb", "a\r", "a\r\nb", "a\nb", "0123456789\r\n"} {
		if !HasControl([]byte(s)) {
			t.Errorf("HasControl(%q) = false", s)
		}
	}
	if HasControl([]byte("0123456789\r\n 0123456789\r\n\t0")) {
		t.Error("folds are not control characters")
	}
	// A fold, a bare CR and a CRLF without white space at every offset,
	// either side of the eight-byte rounds and of the overlapping last one.
	for n := 3; n <= 26; n++ {
		for pos := 0; pos+3 <= n; pos++ {
			for _, tc := range []struct {
				s    string
				want bool
			}{{"\r\n ", false}, {"\r\n\t", false}, {"\rab", true}, {"\r\nx", true}, {"a\nb", true}} {
				b := append([]byte(nil), buf[:n]...)
				copy(b[pos:], tc.s)
				if got := HasControl(b); got != tc.want {
					t.Fatalf("HasControl(%q) = %v, want %v", b, got, tc.want)
				}
			}
		}
	}
}

// Limits.MaxURILength bounds the URIs of address headers too: a Contact
// becomes the Request-URI of the next request in the dialog.
func TestUnitValidateAddressURILength(t *testing.T) {
	long := "<sip:" + strings.Repeat("a", 600) + "@example.com>"
	var m Message
	if err := m.Parse(unitMsg(invite, vWith("Contact: "+long), "")); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(nil); !errors.Is(err, ErrAddressURITooLong) {
		t.Errorf("a %d-byte Contact URI: %v, want %v", len(long), err, ErrAddressURITooLong)
	}
	lim := DefaultLimits
	lim.MaxURILength = 1024
	if err := m.ParseLimits(unitMsg(invite, vWith("Contact: "+long), ""), &lim); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(nil); err != nil {
		t.Errorf("within a 1024-byte limit: %v", err)
	}
	// A response's are left to the header line limit: a carrier's long
	// Record-Route must not drop its 200.
	resp := append(vSet("CSeq", "CSeq: 314159 INVITE"), "Record-Route: "+long)
	if err := m.Parse(unitMsg("SIP/2.0 200 OK", resp, "")); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(nil); err != nil {
		t.Errorf("a response with a long Record-Route: %v", err)
	}
}

// A quoted string holds no raw control character but HTAB and folds; a
// quoted-pair may escape any byte but CR and LF (RFC 3261 25.1; RFC 4475
// 3.1.1.2 escapes a NUL).
func TestUnitQuotedStringControls(t *testing.T) {
	f := func(to string, ok bool) {
		t.Helper()
		var m Message
		err := m.Parse(unitMsg(invite, vSet("To", "To: "+to), ""))
		if err == nil {
			err = m.Validate(nil)
		}
		if (err == nil) != ok {
			t.Errorf("To: %q: %v, want ok=%v", to, err, ok)
		}
	}
	f(`"Bob" <sip:bob@example.com>`, true)
	f("\"Bob\tSmith\" <sip:bob@example.com>", true)
	f("\"Bob\\\x00Evil\" <sip:bob@example.com>", true) // an escaped NUL
	f("\"Bob\x00Evil\" <sip:bob@example.com>", false)
	f("\"Bob\x0bEvil\" <sip:bob@example.com>", false)
	f("\"Bob\x7f\" <sip:bob@example.com>", false)
}
