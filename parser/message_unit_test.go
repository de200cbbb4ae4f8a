package parser

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// Shared helpers for the *_unit_test.go files.

// unitMsg joins a start line and header lines with CRLF, ends the header
// section with the empty line and appends body.
func unitMsg(start string, headers []string, body string) []byte {
	var b strings.Builder
	b.WriteString(start)
	b.WriteString("\r\n")
	for _, h := range headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return []byte(b.String())
}

// unitParse parses start + one header per line + body and fails the test on error.
func unitParse(t *testing.T, start string, headers []string, body string) *Message {
	t.Helper()
	var m Message
	if err := m.Parse(unitMsg(start, headers, body)); err != nil {
		t.Fatalf("Parse(%q, %q): %v", start, headers, err)
	}
	return &m
}

// errCode returns the status code carried by err, 0 when err is not an *Error.
func errCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// inBuf reports whether the view v lies inside buf, capacity included: a
// view must neither read nor, when appended to, write outside the input.
func inBuf(buf, v []byte) bool {
	if cap(v) == 0 {
		return true
	}
	if len(buf) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	hi := lo + uintptr(cap(buf))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	return p >= lo && p+uintptr(cap(v)) <= hi
}

// RFC 3261 7.1: Request-Line = Method SP Request-URI SP SIP-Version CRLF.
func TestUnitRequestLine(t *testing.T) {
	f := func(line string, wantErr error, wantMethod Method, wantURI string) {
		t.Helper()
		var m Message
		err := m.Parse([]byte(line + "\r\n\r\n"))
		if !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", line, err, wantErr)
			return
		}
		if m.IsResponse() {
			t.Errorf("%q: parsed as a response", line)
			return
		}
		if err != nil {
			return
		}
		if m.Method() != wantMethod {
			t.Errorf("%q: method %v, want %v", line, m.Method(), wantMethod)
			return
		}
		if got := string(m.RequestURI()); got != wantURI {
			t.Errorf("%q: URI %q, want %q", line, got, wantURI)
			return
		}
		if got := string(m.MethodBytes()); got != line[:strings.IndexByte(line, ' ')] {
			t.Errorf("%q: method bytes %q", line, got)
			return
		}
		if m.StatusCode() != 0 || len(m.ReasonPhrase()) != 0 {
			t.Errorf("%q: request has status %d %q", line, m.StatusCode(), m.ReasonPhrase())
			return
		}
	}
	f("INVITE sip:bob@biloxi.example.com SIP/2.0", nil, MethodInvite, "sip:bob@biloxi.example.com")
	f("ACK sip:bob@biloxi.example.com SIP/2.0", nil, MethodAck, "sip:bob@biloxi.example.com")
	f("REGISTER sips:example.com SIP/2.0", nil, MethodRegister, "sips:example.com")
	f("OPTIONS tel:+12125551212 SIP/2.0", nil, MethodOptions, "tel:+12125551212")
	f("UPDATE sip:a@b SIP/2.0", nil, MethodUpdate, "sip:a@b")
	// RFC 3261 7.1: methods are case-sensitive; anything else is an extension method.
	f("invite sip:bob@biloxi.example.com SIP/2.0", nil, MethodOther, "sip:bob@biloxi.example.com")
	f("Invite sip:bob@biloxi.example.com SIP/2.0", nil, MethodOther, "sip:bob@biloxi.example.com")
	f("NEWMETHOD sip:bob@biloxi.example.com SIP/2.0", nil, MethodOther, "sip:bob@biloxi.example.com")
	f("RE%47IST%45R sip:a@b SIP/2.0", nil, MethodOther, "sip:a@b") // RFC 4475 3.1.1.5
	// RFC 4475 3.1.1.2: every token character is valid in a method.
	f("!interesting-Method0123456789_*+`.%indeed'~ sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com SIP/2.0",
		nil, MethodOther, "sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com")
	// RFC 3261 7.1: SIP-Version is case-insensitive.
	f("INVITE sip:a@b sip/2.0", nil, MethodInvite, "sip:a@b")
	f("INVITE sip:a@b Sip/2.0", nil, MethodInvite, "sip:a@b")
	// Any scheme is a valid Request-URI for the parser (RFC 4475 3.3.2, 3.3.3).
	f("OPTIONS nobodyKnowsThisScheme:totallyopaquecontent SIP/2.0", nil, MethodOptions, "nobodyKnowsThisScheme:totallyopaquecontent")
	f("OPTIONS soap.beep://192.0.2.103:3002 SIP/2.0", nil, MethodOptions, "soap.beep://192.0.2.103:3002")
	// Another well-formed version: 505 (RFC 3261 21.5.7; RFC 4475 3.1.2.16).
	f("INVITE sip:a@b SIP/3.0", ErrVersion, 0, "")
	f("INVITE sip:a@b SIP/7.0", ErrVersion, 0, "")
	f("INVITE sip:a@b SIP/2.1", ErrVersion, 0, "")
	// Malformed versions: 400.
	f("INVITE sip:a@b SIP/2", ErrBadVersion, 0, "")
	f("INVITE sip:a@b SIP/2.", ErrBadVersion, 0, "")
	f("INVITE sip:a@b SIP/.0", ErrBadVersion, 0, "")
	f("INVITE sip:a@b SIP/2.0.0", ErrBadVersion, 0, "")
	f("INVITE sip:a@b HTTP/1.1", ErrBadVersion, 0, "")
	f("INVITE sip:a@b SIP2.0", ErrBadVersion, 0, "")
	f("INVITE sip:a@b SIP/2.0 ", ErrBadVersion, 0, "")  // trailing SP (RFC 4475 3.1.2.10)
	f("INVITE sip:a@b SIP/2.0  ", ErrBadVersion, 0, "") // RFC 4475 3.1.2.10 trws
	// Malformed Request-Lines: 400.
	f("INVITE  sip:a@b SIP/2.0", ErrBadRequestLine, 0, "")                      // RFC 4475 3.1.2.9
	f("INVITE  sip:a@b  SIP/2.0", ErrBadRequestLine, 0, "")                     // RFC 4475 3.1.2.9
	f("INVITE <sip:a@b> SIP/2.0", ErrBadRequestLine, 0, "")                     // RFC 4475 3.1.2.7
	f("INVITE sip:user@example.com; lr SIP/2.0", ErrBadVersion, 0, "")          // RFC 4475 3.1.2.8: "lr SIP/2.0" is no version
	f("INVITE sip:a@b", ErrBadRequestLine, 0, "")                               // RFC 4475 test.dat
	f("INVITE", ErrBadRequestLine, 0, "")                                       // no URI
	f("INVITE ", ErrBadRequestLine, 0, "")                                      // empty URI
	f(" INVITE sip:a@b SIP/2.0", ErrBadRequestLine, 0, "")                      // leading SP
	f("INV@ITE sip:a@b SIP/2.0", ErrBadRequestLine, 0, "")                      // '@' is not a token character
	f("INVITE\tsip:a@b\tSIP/2.0", ErrBadRequestLine, 0, "")                     // HTAB is not SP
	f("INVITE sip:a\x00b SIP/2.0", ErrBadRequestLine, 0, "")                    // control character in the URI
	f("INVITE bob SIP/2.0", ErrBadRequestLine, 0, "")                           // no scheme
	f("INVITE 1sip:a@b SIP/2.0", ErrBadRequestLine, 0, "")                      // scheme starts with a letter (RFC 3986 3.1)
	f("hello world", ErrBadRequestLine, 0, "")                                  // garbage
	f("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", ErrBadRequestLine, 0, "") // TLS ClientHello on a SIP port
}

// RFC 3261 7.2: Status-Line = SIP-Version SP Status-Code SP Reason-Phrase CRLF;
// Status-Code is 3DIGIT (25.1) and the first digit 1-6 (7.2).
func TestUnitStatusLine(t *testing.T) {
	f := func(line string, wantErr error, wantCode int, wantReason string) {
		t.Helper()
		var m Message
		err := m.Parse([]byte(line + "\r\n\r\n"))
		if !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", line, err, wantErr)
			return
		}
		if !m.IsResponse() || m.IsRequest() {
			t.Errorf("%q: not taken for a response (an error would be answered instead of dropped)", line)
			return
		}
		if err != nil {
			if _, _, drop := Answer(&m, err); !drop {
				t.Errorf("%q: a response that fails must be dropped (RFC 3261 18.1.2)", line)
				return
			}
			return
		}
		if m.StatusCode() != wantCode {
			t.Errorf("%q: code %d, want %d", line, m.StatusCode(), wantCode)
			return
		}
		if got := string(m.ReasonPhrase()); got != wantReason {
			t.Errorf("%q: reason %q, want %q", line, got, wantReason)
			return
		}
		if m.Method() != MethodOther || len(m.MethodBytes()) != 0 || len(m.RequestURI()) != 0 {
			t.Errorf("%q: response has a method or URI", line)
			return
		}
	}
	f("SIP/2.0 200 OK", nil, 200, "OK")
	f("SIP/2.0 180 Ringing", nil, 180, "Ringing")
	f("SIP/2.0 100 Trying", nil, 100, "Trying")
	f("SIP/2.0 699 Whatever", nil, 699, "Whatever")
	f("SIP/2.0 499 Unknown Extension Code", nil, 499, "Unknown Extension Code")
	f("SIP/2.0 200 OK with  several   spaces\tand tab", nil, 200, "OK with  several   spaces\tand tab")
	f("SIP/2.0 200  OK", nil, 200, " OK")                                                       // Reason-Phrase may begin with SP
	f("SIP/2.0 200 = 2**3 * 5**2 \xd0\xbd\xd0\xbe", nil, 200, "= 2**3 * 5**2 \xd0\xbd\xd0\xbe") // RFC 4475 3.1.1.12
	// An empty Reason-Phrase (RFC 4475 3.1.1.13), and a liberal acceptance of the missing SP.
	f("SIP/2.0 100 ", nil, 100, "")
	f("SIP/2.0 100", nil, 100, "")
	// RFC 3261 7.1: SIP-Version is case-insensitive, in responses too.
	f("sip/2.0 200 OK", nil, 200, "OK")
	f("Sip/2.0 486 Busy Here", nil, 486, "Busy Here")
	// Status codes outside 100-699 or not exactly three digits.
	f("SIP/2.0 099 Low", ErrBadStatusCode, 0, "")
	f("SIP/2.0 000 Zero", ErrBadStatusCode, 0, "")
	f("SIP/2.0 700 High", ErrBadStatusCode, 0, "")
	f("SIP/2.0 999 High", ErrBadStatusCode, 0, "")
	f("SIP/2.0 20 OK", ErrBadStatusCode, 0, "")
	f("SIP/2.0 2000 OK", ErrBadStatusCode, 0, "")
	f("SIP/2.0 4294967301 Huge", ErrBadStatusCode, 0, "") // RFC 4475 3.1.2.19: must not wrap to 5
	f("SIP/2.0 2OO OK", ErrBadStatusCode, 0, "")
	f("SIP/2.0 +20 OK", ErrBadStatusCode, 0, "")
	f("SIP/2.0 -200 OK", ErrBadStatusCode, 0, "")
	f("SIP/2.0 200\tOK", ErrBadStatusCode, 0, "")
	f("SIP/2.0  200 OK", ErrBadStatusCode, 0, "")
	f("SIP/2.0 ", ErrBadStatusCode, 0, "")
	f("SIP/2.0", ErrBadStatusLine, 0, "")
	// Versions.
	f("SIP/3.0 200 OK", ErrVersion, 0, "")
	f("SIP/2.0.1 200 OK", ErrBadVersion, 0, "")
	f("SIP/x 200 OK", ErrBadVersion, 0, "")
	f("SIP/2.1 200 OK", ErrVersion, 0, "")
	f("SIP/2.0/200 OK", ErrBadVersion, 0, "")
	f("SIP/2.00 200 OK", ErrVersion, 0, "")
}

// Every code 100-699 is accepted and every other 3-digit code rejected (RFC 3261 7.2, 21).
func TestUnitStatusCodeRange(t *testing.T) {
	for code := 0; code <= 999; code++ {
		line := "SIP/2.0 " + strconv.Itoa(1000 + code)[1:] + " X\r\n\r\n"
		var m Message
		err := m.Parse([]byte(line))
		ok := code >= 100 && code <= 699
		if ok && (err != nil || m.StatusCode() != code) {
			t.Errorf("%q: code %d, err %v", line, m.StatusCode(), err)
		}
		if !ok && !errors.Is(err, ErrBadStatusCode) {
			t.Errorf("%q: err %v, want ErrBadStatusCode", line, err)
		}
	}
}

// RFC 3261 21.4.12 (414) and Limits.MaxURILength.
func TestUnitURITooLong(t *testing.T) {
	lim := DefaultLimits
	lim.MaxURILength = 32
	f := func(uriLen int, wantErr error) {
		t.Helper()
		uri := "sip:" + strings.Repeat("a", uriLen-len("sip:"))
		var m Message
		err := m.ParseLimits([]byte("INVITE "+uri+" SIP/2.0\r\n\r\n"), &lim)
		if !errors.Is(err, wantErr) {
			t.Errorf("URI of %d bytes: err %v, want %v", uriLen, err, wantErr)
			return
		}
		if err != nil {
			if code, _, drop := Answer(&m, err); code != 414 || drop {
				t.Errorf("URI of %d bytes: answer %d drop=%v, want 414", uriLen, code, drop)
				return
			}
		}
	}
	f(31, nil)
	f(32, nil)
	f(33, ErrURITooLong)
	f(1000, ErrURITooLong)
}

// RFC 3261 7.5: CRLFs before the start line are ignored; an empty input is an error.
func TestUnitLeadingCRLF(t *testing.T) {
	f := func(in string, wantErr error, wantResponse bool) {
		t.Helper()
		var m Message
		err := m.Parse([]byte(in))
		if !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", in, err, wantErr)
			return
		}
		if err == nil && m.IsResponse() != wantResponse {
			t.Errorf("%q: response %v", in, m.IsResponse())
			return
		}
	}
	f("\r\nINVITE sip:a@b SIP/2.0\r\n\r\n", nil, false)
	f("\r\n\r\n\r\nINVITE sip:a@b SIP/2.0\r\n\r\n", nil, false)
	f("\r\n\r\nSIP/2.0 200 OK\r\n\r\n", nil, true)
	f("", ErrEmpty, false)
	f("\r\n", ErrEmpty, false)
	f("\r\n\r\n", ErrEmpty, false)
	f("\nINVITE sip:a@b SIP/2.0\r\n\r\n", ErrBadHeader, false) // a bare LF is not a CRLF
	f("\rINVITE sip:a@b SIP/2.0\r\n\r\n", ErrBadHeader, false) // nor a bare CR
	f(" \r\nINVITE sip:a@b SIP/2.0\r\n\r\n", ErrBadRequestLine, false)
}

// Start lines with bad line ends.
func TestUnitStartLineEnd(t *testing.T) {
	f := func(in string, wantErr error) {
		t.Helper()
		var m Message
		if err := m.Parse([]byte(in)); !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", in, err, wantErr)
			return
		}
	}
	f("INVITE sip:a@b SIP/2.0\n\r\n", ErrBadHeader)
	f("INVITE sip:a@b\rSIP/2.0\r\n\r\n", ErrBadHeader)
	// A bare CR anywhere in a start line, before or in place of any byte:
	// Parse looks for one only when the line fails to parse.
	for _, line := range []string{"INVITE sip:a@b SIP/2.0", "SIP/2.0 200 OK", "SIP/2.0 200"} {
		for i := range len(line) + 1 {
			f(line[:i]+"\r"+line[i:]+"\r\n\r\n", ErrBadHeader)
			if i < len(line) {
				f(line[:i]+"\r"+line[i+1:]+"\r\n\r\n", ErrBadHeader)
			}
		}
	}
	f("INVITE sip:a@b SIP/2.0", ErrBadRequestLine)
	f("SIP/2.0 200 OK", ErrBadStatusLine)
	f("INVITE sip:a@b SIP/2.0\r\n", ErrUnterminatedHeaders)
	f("INVITE sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h\r\n", ErrUnterminatedHeaders)
	f("INVITE sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h", ErrUnterminatedHeaders)
}

// RFC 3261 7.3.3 and the IANA registry: every compact form, either case.
func TestUnitCompactHeaders(t *testing.T) {
	f := func(name string, want HeaderKind) {
		t.Helper()
		for _, n := range []string{name, strings.ToUpper(name)} {
			if got := LookupHeader([]byte(n)); got != want {
				t.Errorf("LookupHeader(%q) = %v, want %v", n, got, want)
				return
			}
			m := unitParse(t, "OPTIONS sip:a@b SIP/2.0", []string{n + ": 0"}, "")
			if m.NumHeaders() != 1 || m.HeaderAt(0).Kind != want || m.KindAt(0) != want || string(m.HeaderAt(0).Name) != n {
				t.Errorf("%q: header %+v", n, m.HeaderAt(0))
				return
			}
			if string(m.Get(want)) != "0" || m.Count(want) != 1 {
				t.Errorf("%q: Get = %q", n, m.Get(want))
				return
			}
		}
	}
	f("v", HeaderVia)
	f("f", HeaderFrom)
	f("t", HeaderTo)
	f("i", HeaderCallID)
	f("m", HeaderContact)
	f("l", HeaderContentLength)
	f("c", HeaderContentType)
	f("e", HeaderContentEncoding)
	f("k", HeaderSupported)
	f("s", HeaderSubject)
	f("o", HeaderEvent)
	f("r", HeaderReferTo)
	f("b", HeaderReferredBy)
	f("u", HeaderAllowEvents)
	f("x", HeaderSessionExpires)
	f("y", HeaderIdentity)
	f("n", HeaderIdentityInfo)
	f("a", HeaderAcceptContact)
	f("j", HeaderRejectContact)
	f("d", HeaderRequestDisposition)
	// Letters that are no compact form.
	f("g", HeaderOther)
	f("z", HeaderOther)
	f("q", HeaderOther)
	f("w", HeaderOther)
}

// RFC 3261 7.3.1: field names are case-insensitive.
func TestUnitLookupHeader(t *testing.T) {
	f := func(name string, want HeaderKind) {
		t.Helper()
		if got := LookupHeader([]byte(name)); got != want {
			t.Errorf("LookupHeader(%q) = %v, want %v", name, got, want)
			return
		}
	}
	for k := HeaderKind(1); k < numHeaderKinds; k++ {
		n := k.String()
		f(n, k)
		f(strings.ToLower(n), k)
		f(strings.ToUpper(n), k)
	}
	f("MaX-fOrWaRdS", HeaderMaxForwards) // RFC 4475 3.1.1.1
	f("cAlL-iD", HeaderCallID)
	f("", HeaderOther)
	f("X-Custom", HeaderOther)
	f("Vias", HeaderOther)
	f("Vi", HeaderOther)
	f("Call_ID", HeaderOther)
	f("CallID", HeaderOther)
	f("C%6Fntact", HeaderOther) // RFC 4475 3.1.1.5: not Contact
	f("Fro", HeaderOther)
	f("Content-Lengthx", HeaderOther)
}

// RFC 3261 7.3.1: white space before the colon; values trimmed; names kept as received.
func TestUnitHeaderValues(t *testing.T) {
	f := func(line string, wantKind HeaderKind, wantName, wantValue string) {
		t.Helper()
		m := unitParse(t, "OPTIONS sip:a@b SIP/2.0", []string{line}, "")
		if m.NumHeaders() != 1 {
			t.Errorf("%q: %d headers", line, m.NumHeaders())
			return
		}
		h := m.HeaderAt(0)
		if h.Kind != wantKind || string(h.Name) != wantName || string(h.Value) != wantValue {
			t.Errorf("%q: got %v %q %q, want %v %q %q", line, h.Kind, h.Name, h.Value, wantKind, wantName, wantValue)
			return
		}
	}
	f("Subject: lunch", HeaderSubject, "Subject", "lunch")
	f("Subject:lunch", HeaderSubject, "Subject", "lunch")
	f("Subject   :   lunch  ", HeaderSubject, "Subject", "lunch")
	f("Subject\t:\tlunch\t", HeaderSubject, "Subject", "lunch")
	f("s :", HeaderSubject, "s", "") // RFC 4475 3.1.1.1: empty Subject
	f("SUBJECT: Lunch Today", HeaderSubject, "SUBJECT", "Lunch Today")
	f("X-Custom: a, b; c", HeaderOther, "X-Custom", "a, b; c")
	f("UnknownHeaderWithUnusualValue: ;;,,;;,;", HeaderOther, "UnknownHeaderWithUnusualValue", ";;,,;;,;") // RFC 4475 3.1.1.1
	f("NewFangledHeader:   newfangled value\r\n continued newfangled value", HeaderOther, "NewFangledHeader", "newfangled value\r\n continued newfangled value")
	f("Subject: \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", HeaderSubject, "Subject", "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82")
	f("Allow: INVITE, ACK , BYE", HeaderAllow, "Allow", "INVITE, ACK , BYE") // token list: one value
	f("Supported: timer,100rel", HeaderSupported, "Supported", "timer,100rel")
	f("Require: 100rel", HeaderRequire, "Require", "100rel")
	f("k:", HeaderSupported, "k", "")
}

// Header lines that are errors.
func TestUnitBadHeaderLines(t *testing.T) {
	f := func(section string, wantErr error) {
		t.Helper()
		var m Message
		err := m.Parse([]byte("OPTIONS sip:a@b SIP/2.0\r\n" + section))
		if !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", section, err, wantErr)
			return
		}
		if errCode(err) != 400 {
			t.Errorf("%q: code %d, want 400", section, errCode(err))
			return
		}
	}
	f("Subject lunch\r\n\r\n", ErrBadHeaderName)         // no colon (RFC 4475 test.dat "Foobar roobar")
	f(": lunch\r\n\r\n", ErrBadHeaderName)               // no name
	f(" Subject: lunch\r\n\r\n", ErrBadHeaderName)       // a fold with nothing to continue
	f("\tSubject: lunch\r\n\r\n", ErrBadHeaderName)      // idem
	f("Sub ject: lunch\r\n\r\n", ErrBadHeaderName)       // SP inside the name
	f("Sub@ject: lunch\r\n\r\n", ErrBadHeaderName)       // separator inside the name
	f("Subject: a\nTo: <sip:b@c>\r\n\r\n", ErrBadHeader) // bare LF ends no line
	f("Subject: a\rTo: <sip:b@c>\r\n\r\n", ErrBadHeader) // bare CR inside a line
	f("Subject: a\r\r\n\r\n", ErrBadHeader)              // bare CR before CRLF
	f("Subject: a\r\n\n", ErrBadHeader)                  // empty line ended by a bare LF
	f("Subject: a\r\n\r", ErrUnterminatedHeaders)        // no LF yet
	f("Subject: a\r\n \rb\r\n\r\n", ErrBadHeader)        // bare CR in a continuation line
	f("Subject: a\r\n\tb\n\r\n", ErrBadHeader)           // bare LF ending a continuation line
	f("Subject: a\r\n", ErrUnterminatedHeaders)
}

// RFC 3261 7.3.1: a value may span lines (CRLF then SP or HTAB); the view
// keeps the fold and the typed accessors read it as LWS.
func TestUnitFolding(t *testing.T) {
	m := unitParse(t, "INVITE sip:bob@biloxi.example.com SIP/2.0", []string{
		"Via: SIP/2.0/UDP\r\n  pc33.atlanta.example.com\r\n\t;branch=z9hG4bK776asdhds",
		"Via  :  SIP/2.0\r\n /UDP 192.0.2.1\r\n :\r\n 5060;branch=z9hG4bK1,\r\n SIP/2.0/TCP 192.0.2.2;branch=z9hG4bK2",
		"Max-Forwards:\r\n 70",
		"To: Bob\r\n <sip:bob@biloxi.example.com>",
		"From: \"Alice\r\n Liddell\" <sip:alice@atlanta.example.com>\r\n ;\r\n tag\r\n =\r\n 1928301774",
		"Call-ID: a84b4c76e66710@pc33.atlanta.example.com",
		"CSeq: 314159\r\n INVITE",
		"Subject: I know you're there,\r\n           pick up the phone\r\n\tand talk to me!",
		"Contact: <sip:alice@pc33.atlanta.example.com>,\r\n\t<sip:alice@192.0.2.101>",
		"Content-Length:\r\n 4",
	}, "v=0\r\n")
	if got := string(m.Get(HeaderSubject)); got != "I know you're there,\r\n           pick up the phone\r\n\tand talk to me!" {
		t.Errorf("Subject %q", got)
		return
	}
	if got := string(m.Get(HeaderVia)); got != "SIP/2.0/UDP\r\n  pc33.atlanta.example.com\r\n\t;branch=z9hG4bK776asdhds" {
		t.Errorf("Via %q", got)
		return
	}
	var v Via
	if err := m.TopVia(&v); err != nil || string(v.Host) != "pc33.atlanta.example.com" || string(v.Branch) != "z9hG4bK776asdhds" {
		t.Errorf("top Via %+v %v", v, err)
		return
	}
	if err := m.Via(1, &v); err != nil || string(v.Host) != "192.0.2.1" || v.Port != 5060 || string(v.Branch) != "z9hG4bK1" {
		t.Errorf("second Via %+v %v", v, err)
		return
	}
	if err := m.Via(2, &v); err != nil || string(v.Transport) != "TCP" || string(v.Branch) != "z9hG4bK2" {
		t.Errorf("third Via %+v %v", v, err)
		return
	}
	if m.Count(HeaderVia) != 3 {
		t.Errorf("%d Vias", m.Count(HeaderVia))
		return
	}
	if n, ok, err := m.MaxForwards(); n != 70 || !ok || err != nil {
		t.Errorf("Max-Forwards %d %v %v", n, ok, err)
		return
	}
	var (
		a Address
		u URI
	)
	if err := m.To(&a); err != nil || string(a.Display) != "Bob" || string(a.URI) != "sip:bob@biloxi.example.com" {
		t.Errorf("To %+v %v", a, err)
		return
	}
	if err := a.ParseURI(&u); err != nil || string(u.User) != "bob" {
		t.Errorf("To URI %+v %v", u, err)
		return
	}
	if err := m.From(&a); err != nil || string(a.Display) != "Alice\r\n Liddell" || string(a.Tag) != "1928301774" {
		t.Errorf("From %+v %v", a, err)
		return
	}
	if c, err := m.CSeq(); err != nil || c.Num != 314159 || c.Method != MethodInvite {
		t.Errorf("CSeq %+v %v", c, err)
		return
	}
	if m.Count(HeaderContact) != 2 || string(m.Nth(HeaderContact, 1)) != "<sip:alice@192.0.2.101>" {
		t.Errorf("Contact %d %q", m.Count(HeaderContact), m.Nth(HeaderContact, 1))
		return
	}
	if m.ContentLength() != 4 || string(m.Body()) != "v=0\r" {
		t.Errorf("Content-Length %d body %q", m.ContentLength(), m.Body())
		return
	}
	if err := m.Validate(nil); err != nil {
		t.Errorf("Validate: %v", err)
		return
	}
}

// RFC 3261 7.3.1: list headers are split on commas outside quoted strings
// and <...>; token lists are kept whole.
func TestUnitListSplitting(t *testing.T) {
	f := func(line string, want ...string) {
		t.Helper()
		m := unitParse(t, "OPTIONS sip:a@b SIP/2.0", []string{line}, "")
		if m.NumHeaders() != len(want) {
			t.Errorf("%q: %d values, want %d", line, m.NumHeaders(), len(want))
			return
		}
		for i, w := range want {
			h := m.HeaderAt(i)
			if string(h.Value) != w || h.Kind != m.HeaderAt(0).Kind {
				t.Errorf("%q: value %d = %q, want %q", line, i, h.Value, w)
				return
			}
			if got := string(m.Nth(h.Kind, i)); got != w {
				t.Errorf("%q: Nth(%d) = %q, want %q", line, i, got, w)
				return
			}
		}
		if m.Nth(m.HeaderAt(0).Kind, len(want)) != nil {
			t.Errorf("%q: Nth past the end is not nil", line)
			return
		}
	}
	f("Via: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b;branch=z9hG4bK2", "SIP/2.0/UDP a;branch=z9hG4bK1", "SIP/2.0/UDP b;branch=z9hG4bK2")
	f("v: SIP/2.0/UDP a,SIP/2.0/UDP b ,  SIP/2.0/UDP c", "SIP/2.0/UDP a", "SIP/2.0/UDP b", "SIP/2.0/UDP c")
	f("Via: SIP/2.0/UDP a;x=\"1,2\", SIP/2.0/UDP b", "SIP/2.0/UDP a;x=\"1,2\"", "SIP/2.0/UDP b")
	f(`Contact: "Doe, John" <sip:john@example.com>, <sip:jd@example.net>`, `"Doe, John" <sip:john@example.com>`, "<sip:jd@example.net>")
	f(`Contact: "a \", b" <sip:a@b>, <sip:c@d>`, `"a \", b" <sip:a@b>`, "<sip:c@d>")     // escaped quote (RFC 3261 25.1 quoted-pair)
	f(`Contact: "a \\", <sip:c@d>`, `"a \\"`, "<sip:c@d>")                               // escaped backslash ends the string
	f("Contact: <sip:a,b@example.com>, <sip:c@d>", "<sip:a,b@example.com>", "<sip:c@d>") // ',' is user-unreserved
	f("Contact: <sip:a@b>;expires=60, <sip:c@d>;q=0.5", "<sip:a@b>;expires=60", "<sip:c@d>;q=0.5")
	f(`Contact: <sip:a@b>;p="x,y", <sip:c@d>;p="<,>"`, `<sip:a@b>;p="x,y"`, `<sip:c@d>;p="<,>"`)
	f("m: sip:a@b, sip:c@d", "sip:a@b", "sip:c@d")
	f("Contact: *", "*")
	f("Route: <sip:p1.example.com;lr>,<sip:p2.example.com;lr>", "<sip:p1.example.com;lr>", "<sip:p2.example.com;lr>")
	f("Record-Route: <sip:p1;lr>, <sip:p2;lr>, <sip:p3;lr>", "<sip:p1;lr>", "<sip:p2;lr>", "<sip:p3;lr>")
	f(`P-Asserted-Identity: "Cullen Jennings" <sip:fluffy@cisco.com>, tel:+14085264000`, `"Cullen Jennings" <sip:fluffy@cisco.com>`, "tel:+14085264000")
	f(`Reason: SIP;cause=200;text="Call completed, elsewhere", Q.850;cause=16`, `SIP;cause=200;text="Call completed, elsewhere"`, "Q.850;cause=16")
	f(`Warning: 307 isi.edu "Session parameter 'foo' not understood", 301 isi.edu "Incompatible, network"`, `307 isi.edu "Session parameter 'foo' not understood"`, `301 isi.edu "Incompatible, network"`)
	f("Path: <sip:a@b;lr>, <sip:c@d;lr>", "<sip:a@b;lr>", "<sip:c@d;lr>")
	// Token lists stay one value (read with NextListItem).
	f("Allow: INVITE, ACK, CANCEL, BYE", "INVITE, ACK, CANCEL, BYE")
	f("Supported: timer, 100rel", "timer, 100rel")
	f("Require: 100rel, precondition", "100rel, precondition")
	f("Proxy-Require: foo, bar", "foo, bar")
	f("Accept: application/sdp, text/plain", "application/sdp, text/plain")
	// Single-value headers are not split either: a comma there is content.
	f("Subject: one, two", "one, two")
	f(`From: "x, y" <sip:a@b>`, `"x, y" <sip:a@b>`)
	// Empty list values are kept as such (the typed accessor then fails).
	f("Via:", "")
}

// RFC 3261 7.3.1 / 25.1: "via-parm *(COMMA via-parm)": an empty element is no element.
func TestUnitEmptyListElement(t *testing.T) {
	f := func(line string, wantErr error) {
		t.Helper()
		var m Message
		if err := m.Parse(unitMsg("OPTIONS sip:a@b SIP/2.0", []string{line}, "")); !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", line, err, wantErr)
			return
		}
	}
	f("Via: SIP/2.0/UDP a,,SIP/2.0/UDP b", ErrEmptyListElement)
	f("Via: SIP/2.0/UDP a, ,SIP/2.0/UDP b", ErrEmptyListElement)
	f("Via: SIP/2.0/UDP a,", ErrEmptyListElement)
	f("Via: SIP/2.0/UDP a, ", ErrEmptyListElement)
	f("Via: ,SIP/2.0/UDP a", ErrEmptyListElement)
	f("Via: SIP/2.0/UDP 192.0.2.15;;,;,,", ErrEmptyListElement) // RFC 4475 3.1.2.1
	f("Contact: <sip:a@b>,,<sip:c@d>", ErrEmptyListElement)
	f("Route: <sip:a@b>,\r\n ,<sip:c@d>", ErrEmptyListElement)
	f(`Contact: "unterminated <sip:a@b>, <sip:c@d>`, ErrBadHeader)
}

// Content-Length framing of a datagram (RFC 3261 18.3, 20.14).
func TestUnitContentLength(t *testing.T) {
	f := func(headers []string, body string, wantErr error, wantCL int, wantBody string) {
		t.Helper()
		var m Message
		buf := unitMsg("MESSAGE sip:a@b SIP/2.0", headers, body)
		err := m.Parse(buf)
		if !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", headers, err, wantErr)
			return
		}
		if err != nil {
			return
		}
		if m.ContentLength() != wantCL || string(m.Body()) != wantBody {
			t.Errorf("%q: Content-Length %d body %q, want %d %q", headers, m.ContentLength(), m.Body(), wantCL, wantBody)
			return
		}
		if want := len(buf) - len(body) + len(wantBody); len(m.Bytes()) != want {
			t.Errorf("%q: Bytes has %d bytes, want %d", headers, len(m.Bytes()), want)
			return
		}
	}
	f([]string{"Content-Length: 5"}, "hello", nil, 5, "hello")
	f([]string{"l: 5"}, "hello", nil, 5, "hello")
	f([]string{"L:5"}, "hello", nil, 5, "hello")
	f([]string{"Content-Length: 0"}, "", nil, 0, "")
	f([]string{"Content-Length: 00005"}, "hello", nil, 5, "hello") // leading zeros (RFC 4475 3.1.1.1)
	f([]string{"Content-Length:\r\n 5"}, "hello", nil, 5, "hello") // folded value
	f([]string{"content-length :  5  "}, "hello", nil, 5, "hello")
	// Bytes past Content-Length are ignored (RFC 3261 18.3; RFC 4475 3.1.1.8).
	f([]string{"Content-Length: 5"}, "hello world", nil, 5, "hello")
	f([]string{"Content-Length: 0"}, "INVITE sip:x SIP/2.0\r\n\r\n", nil, 0, "")
	// Without Content-Length the body runs to the end of the datagram (RFC 4475 3.4.1).
	f(nil, "hello world", nil, -1, "hello world")
	f(nil, "", nil, -1, "")
	// A body shorter than Content-Length (RFC 3261 18.3; RFC 4475 3.1.2.2).
	f([]string{"Content-Length: 6"}, "hello", ErrShortBody, 0, "")
	f([]string{"Content-Length: 9999"}, "hello", ErrShortBody, 0, "")
	// Malformed values (RFC 3261 20.14: 1*DIGIT; RFC 4475 3.1.2.3).
	f([]string{"Content-Length: -5"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: -999"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: five"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: 5x"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: +5"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: 0x5"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: 2 3"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: 5.0"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length:"}, "hello", ErrBadContentLength, 0, "")
	f([]string{"Content-Length: 1\r\n 0"}, "hello", ErrBadContentLength, 0, "")
	// Duplicates, in any spelling (RFC 4475 3.3.9: request smuggling).
	f([]string{"Content-Length: 5", "Content-Length: 5"}, "hello", ErrDupContentLength, 0, "")
	f([]string{"Content-Length: 13", "l: 5"}, "hello", ErrDupContentLength, 0, "")
	f([]string{"l: 0", "CONTENT-LENGTH: 0"}, "", ErrDupContentLength, 0, "")
	// Too large: beyond the message size limit, not a wrap (413).
	f([]string{"Content-Length: 99999999999999999999"}, "hello", ErrBodyTooLarge, 0, "")
	f([]string{"Content-Length: 4294967301"}, "hello", ErrBodyTooLarge, 0, "")
	f([]string{"Content-Length: " + strconv.Itoa(DefaultLimits.MaxMessageSize+1)}, "hello", ErrBodyTooLarge, 0, "")
}

// Each limit produces its own error and none truncates.
func TestUnitLimits(t *testing.T) {
	f := func(lim Limits, buf []byte, wantErr error, wantCode int) {
		t.Helper()
		var m Message
		err := m.ParseLimits(buf, &lim)
		if !errors.Is(err, wantErr) {
			t.Errorf("%.60q...: err %v, want %v", buf, err, wantErr)
			return
		}
		if err != nil && errCode(err) != wantCode {
			t.Errorf("%.60q...: code %d, want %d", buf, errCode(err), wantCode)
			return
		}
	}
	lim := func(mod func(*Limits)) Limits {
		l := DefaultLimits
		mod(&l)
		return l
	}
	headers := func(n int) []string {
		h := make([]string, n)
		for i := range h {
			h[i] = "X-H: " + strconv.Itoa(i)
		}
		return h
	}
	req := "OPTIONS sip:a@b SIP/2.0"
	maxHeaders := lim(func(l *Limits) { l.MaxHeaders = 4 })
	f(maxHeaders, unitMsg(req, headers(4), ""), nil, 0)
	f(maxHeaders, unitMsg(req, headers(5), ""), ErrTooManyHeaders, 400)
	f(maxHeaders, unitMsg(req, []string{"Via: SIP/2.0/UDP a, SIP/2.0/UDP b", "Route: <sip:c>, <sip:d>"}, ""), nil, 0)
	f(maxHeaders, unitMsg(req, []string{"Via: SIP/2.0/UDP a, SIP/2.0/UDP b", "Route: <sip:c>, <sip:d>, <sip:e>"}, ""), ErrTooManyHeaders, 400)
	f(DefaultLimits, unitMsg(req, headers(DefaultLimits.MaxHeaders), ""), nil, 0)
	f(DefaultLimits, unitMsg(req, headers(DefaultLimits.MaxHeaders+1), ""), ErrTooManyHeaders, 400)

	// MaxHeaderLine counts from the name to the end of the value, folds included.
	maxLine := lim(func(l *Limits) { l.MaxHeaderLine = 20 })
	f(maxLine, unitMsg(req, []string{"Subject: " + strings.Repeat("a", 11)}, ""), nil, 0)
	f(maxLine, unitMsg(req, []string{"Subject: " + strings.Repeat("a", 12)}, ""), ErrHeaderTooLong, 400)
	f(maxLine, unitMsg(req, []string{"Subject: aaaa\r\n aaaa"}, ""), nil, 0)
	f(maxLine, unitMsg(req, []string{"Subject: aaaa\r\n aaaaa"}, ""), ErrHeaderTooLong, 400)

	maxVias := lim(func(l *Limits) { l.MaxVias = 2 })
	f(maxVias, unitMsg(req, []string{"Via: SIP/2.0/UDP a", "v: SIP/2.0/UDP b"}, ""), nil, 0)
	f(maxVias, unitMsg(req, []string{"Via: SIP/2.0/UDP a", "v: SIP/2.0/UDP b", "Via: SIP/2.0/UDP c"}, ""), ErrTooManyVias, 400)
	f(maxVias, unitMsg(req, []string{"Via: SIP/2.0/UDP a, SIP/2.0/UDP b, SIP/2.0/UDP c"}, ""), ErrTooManyVias, 400)

	msg := unitMsg(req, []string{"Subject: x"}, "")
	exact := lim(func(l *Limits) { l.MaxMessageSize = len(msg) })
	f(exact, msg, nil, 0)
	f(exact, append(msg[:len(msg):len(msg)], 'x'), ErrMessageTooLarge, 513)

	long := lim(func(l *Limits) { l.MaxURILength = 10 })
	f(long, []byte("OPTIONS sip:a@b.co SIP/2.0\r\n\r\n"), nil, 0)
	f(long, []byte("OPTIONS sip:a@bb.co SIP/2.0\r\n\r\n"), ErrURITooLong, 414)
}

// A response too large or too malformed is still known to be a response, so it is dropped.
func TestUnitAnswer(t *testing.T) {
	f := func(in string, wantCode int, wantDrop bool) {
		t.Helper()
		var m Message
		err := m.ParseLimits([]byte(in), &Limits{MaxMessageSize: 64, MaxHeaders: 8, MaxHeaderLine: 64, MaxVias: 2, MaxURILength: 32})
		if err == nil {
			err = m.Validate(nil)
		}
		if err == nil {
			t.Errorf("%q: no error", in)
			return
		}
		code, _, drop := Answer(&m, err)
		if code != wantCode || drop != wantDrop {
			t.Errorf("%q: answer %d drop=%v, want %d drop=%v", in, code, drop, wantCode, wantDrop)
			return
		}
	}
	f("SIP/2.0 200 OK\r\nSubject: "+strings.Repeat("a", 64)+"\r\n\r\n", 0, true)
	f("OPTIONS sip:a@b SIP/2.0\r\nSubject: "+strings.Repeat("a", 64)+"\r\n\r\n", 513, false)
	f("SIP/2.0 200 OK\r\nVia SIP/2.0/UDP a\r\n\r\n", 0, true)
	f("OPTIONS sip:a@b SIP/2.0\r\nVia SIP/2.0/UDP a\r\n\r\n", 400, false)
	f("SIP/2.0 200 OK", 0, true)
	f("SIP/7.0 200 OK\r\n\r\n", 0, true)
	f("OPTIONS sip:a@b SIP/7.0\r\n\r\n", 505, false)
	f("OPTIONS sip:a@b SIP/2.0\r\n\r\n", 400, false) // Validate: no Via
	f("SIP/2.0 200 OK\r\n\r\n", 0, true)             // Validate: no Via
	// An ACK is never answered: dropped, under the code it would have had.
	f("ACK sip:a@b SIP/2.0\r\nVia SIP/2.0/UDP a\r\n\r\n", 400, true)
	f("ACK sip:a@b SIP/2.0\r\n\r\n", 400, true)
	if code, _, drop := Answer(&Message{}, errors.New("other")); code != 500 || drop {
		t.Errorf("foreign error: %d %v", code, drop)
		return
	}
}

// After a bad Request-Line the headers are parsed all the same, so that the
// request can be answered with the start line's code; an ACK is known by
// its CSeq when the method itself could not be read.
func TestUnitBadRequestLineKeepsHeaders(t *testing.T) {
	const hdrs = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\r\nCall-ID: c1\r\nCSeq: 7 %s\r\nContent-Length: 0\r\n\r\n"
	f := func(start, cseqMethod string, wantErr error, wantAck bool) {
		t.Helper()
		var m Message
		err := m.Parse([]byte(start + "\r\n" + fmt.Sprintf(hdrs, cseqMethod)))
		if err != wantErr {
			t.Errorf("%q: error %v, want %v", start, err, wantErr)
			return
		}
		var via Via
		if m.TopVia(&via) != nil || string(via.Branch) != "z9hG4bK1" || string(m.CallID()) != "c1" {
			t.Errorf("%q: headers not parsed after the start line failed", start)
		}
		if m.IsAck() != wantAck {
			t.Errorf("%q: IsAck %v, want %v", start, m.IsAck(), wantAck)
		}
		if _, _, drop := Answer(&m, err); drop != wantAck {
			t.Errorf("%q: drop %v, want %v", start, drop, wantAck)
		}
	}
	f("INVITE <sip:a@b> SIP/2.0", "INVITE", ErrBadRequestLine, false)
	f("INVITE  sip:a@b SIP/2.0", "INVITE", ErrBadRequestLine, false)
	f("INVITE sip:a@b SIP/2.0  ", "INVITE", ErrBadVersion, false)
	f("OPTIONS sip:a@b SIP/7.0", "OPTIONS", ErrVersion, false)
	f("OPTIONS sip:"+strings.Repeat("a", 600)+" SIP/2.0", "OPTIONS", ErrURITooLong, false)
	f("ACK  sip:a@b SIP/2.0", "ACK", ErrBadRequestLine, true)    // method read, URI not
	f("AC\x01K sip:a@b SIP/2.0", "ACK", ErrBadRequestLine, true) // method unreadable: the CSeq says
	f("INV\x01TE sip:a@b SIP/2.0", "INVITE", ErrBadRequestLine, false)
	// A header that fails after a bad start line does not hide the start
	// line's error.
	var m Message
	if err := m.Parse([]byte("OPTIONS sip:a@b SIP/7.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nBad Header\r\n\r\n")); err != ErrVersion {
		t.Errorf("start line error lost: %v", err)
	}
}

// GetByName finds known headers by any spelling and others by name, case-insensitively.
func TestUnitGetByName(t *testing.T) {
	m := unitParse(t, "OPTIONS sip:a@b SIP/2.0", []string{"v: SIP/2.0/UDP a", "X-Foo: 1", "x-foo: 2", "Subject: s"}, "")
	f := func(name, want string, present bool) {
		t.Helper()
		got := m.GetByName(name)
		if (got != nil) != present || string(got) != want {
			t.Errorf("GetByName(%q) = %q, want %q (present %v)", name, got, want, present)
			return
		}
	}
	f("Via", "SIP/2.0/UDP a", true)
	f("VIA", "SIP/2.0/UDP a", true)
	f("v", "SIP/2.0/UDP a", true)
	f("X-Foo", "1", true)
	f("X-FOO", "1", true)
	f("s", "s", true)
	f("X-Bar", "", false)
	f("To", "", false)
	if m.Get(HeaderTo) != nil || m.Count(HeaderTo) != 0 || m.Nth(HeaderTo, 0) != nil {
		t.Fatal("absent header reported")
	}
}

// Every view a Message and its accessors return lies inside the buffer given to Parse.
func TestUnitViewsInBuffer(t *testing.T) {
	if b := make([]byte, 8); inBuf(b[:4:4], b[4:]) || inBuf(b[:4], []byte("x")) || !inBuf(b, b[2:3]) {
		t.Fatal("inBuf is broken")
	}
	check := func(buf []byte, what string, v []byte) {
		t.Helper()
		if !inBuf(buf, v) {
			t.Errorf("%s: view %q (len %d cap %d) is not inside the input", what, v, len(v), cap(v))
			return
		}
	}
	f := func(in string) {
		t.Helper()
		// Parse a copy living in a larger allocation, so that spare capacity
		// past the input exists and a view leaking into it is caught.
		big := make([]byte, len(in), len(in)+64)
		copy(big, in)
		buf := big[:len(in):len(in)]
		var m Message
		if err := m.Parse(buf); err != nil {
			t.Errorf("%q: %v", in, err)
			return
		}
		check(buf, "MethodBytes", m.MethodBytes())
		check(buf, "RequestURI", m.RequestURI())
		check(buf, "ReasonPhrase", m.ReasonPhrase())
		check(buf, "Body", m.Body())
		check(buf, "Bytes", m.Bytes())
		check(buf, "CallID", m.CallID())
		check(buf, "ContentType", m.ContentType())
		for i := 0; i < m.NumHeaders(); i++ {
			h := m.HeaderAt(i)
			check(buf, "name", h.Name)
			check(buf, "value", h.Value)
			check(buf, "Get", m.Get(h.Kind))
			for item, rest := NextListItem(h.Value); item != nil || rest != nil; item, rest = NextListItem(rest) {
				check(buf, "list item", item)
				check(buf, "list rest", rest)
			}
		}
		for i := 0; i < m.Count(HeaderVia); i++ {
			var v Via
			if m.Via(i, &v) == nil {
				for _, x := range [][]byte{v.Transport, v.Host, v.Params, v.Branch, v.Received, v.Maddr, v.RPort} {
					check(buf, "Via", x)
				}
			}
		}
		for _, k := range []HeaderKind{HeaderFrom, HeaderTo, HeaderContact, HeaderRoute, HeaderRecordRoute, HeaderPAssertedIdentity} {
			for i := 0; i < m.Count(k); i++ {
				var (
					a Address
					u URI
				)
				if m.Address(k, i, &a) == nil {
					for _, x := range [][]byte{a.Display, a.URI, a.Params, a.Tag} {
						check(buf, k.String(), x)
					}
					for _, p := range []string{"tag", "expires", "q", "lr"} {
						v, _ := a.Param(p)
						check(buf, "param", v)
					}
				}
				if a.ParseURI(&u) == nil {
					for _, x := range [][]byte{u.SchemeRaw, u.User, u.Password, u.Host, u.Params, u.Headers, u.Opaque} {
						check(buf, k.String()+" URI", x)
					}
					for _, p := range []string{"transport", "lr", "user"} {
						v, _ := u.Param(p)
						check(buf, "uri param", v)
					}
				}
			}
		}
		if c, err := m.CSeq(); err == nil {
			check(buf, "CSeq", c.MethodRaw)
		}
		if r, ok, err := m.RetryAfter(); ok && err == nil {
			check(buf, "Retry-After", r.Comment)
			check(buf, "Retry-After", r.Params)
		}
		for i := 0; i < m.Count(HeaderReason); i++ {
			if r, err := m.Reason(i); err == nil {
				check(buf, "Reason", r.Protocol)
				check(buf, "Reason", r.Text)
				check(buf, "Reason", r.Params)
			}
		}
		var u URI
		if ParseURI(m.RequestURI(), &u) == nil {
			for _, x := range [][]byte{u.SchemeRaw, u.User, u.Password, u.Host, u.Params, u.Headers, u.Opaque} {
				check(buf, "R-URI", x)
			}
		}
	}
	f(string(unitMsg("INVITE sip:bob:pw@biloxi.example.com:5060;transport=tcp?subject=x SIP/2.0", []string{
		"Via: SIP/2.0/UDP [2001:db8::1]:5060;branch=z9hG4bK1;received=192.0.2.1;rport=1;maddr=h, SIP/2.0/TCP b",
		"To: \"Bob \\\"B\\\"\" <sip:bob@biloxi.example.com;lr>;tag=x",
		"From: sip:alice@atlanta.example.com;tag=1",
		"Call-ID: c@h",
		"CSeq: 1 INVITE",
		"Contact: <sip:a@b>;expires=60;q=0.1, *",
		"Route: <sip:p;lr>",
		"Retry-After: 5 (x);duration=10",
		"Reason: Q.850;cause=16;text=\"t\"",
		"Allow: INVITE, ACK",
		"Content-Type: application/sdp",
		"Content-Length: 3",
	}, "abcdef")))
	f("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h\r\nContent-Length: 0\r\n\r\n")
	f("SIP/2.0 100 \r\n\r\n")
	f("SIP/2.0 100\r\n\r\n")
	f("OPTIONS sip:a@b SIP/2.0\r\nSubject:\r\nAllow: a,,b,\r\n\r\nbody")
	f("OPTIONS sip:a@b SIP/2.0\r\n\r\n")
}

// Parsing into a used Message resets it fully.
func TestUnitReset(t *testing.T) {
	var m Message
	first := unitMsg("SIP/2.0 180 Ringing", []string{
		"Via: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b;branch=z9hG4bK2",
		"To: <sip:b@c>;tag=1", "From: <sip:a@c>;tag=2", "Call-ID: x", "CSeq: 1 INVITE",
		"Subject: old", "X-Old: old", "Content-Type: text/plain", "Content-Length: 4",
	}, "body")
	if err := m.Parse(first); err != nil {
		t.Fatal(err)
	}
	f := func(in []byte, wantErr error) {
		t.Helper()
		if err := m.Parse(first); err != nil {
			t.Fatal(err)
		}
		err := m.Parse(in)
		if !errors.Is(err, wantErr) {
			t.Errorf("%q: err %v, want %v", in, err, wantErr)
			return
		}
		if m.StatusCode() != 0 || len(m.ReasonPhrase()) != 0 {
			t.Errorf("%q: stale status %d %q", in, m.StatusCode(), m.ReasonPhrase())
			return
		}
		if m.Get(HeaderSubject) != nil || m.Count(HeaderVia) > 1 || m.GetByName("X-Old") != nil || m.Get(HeaderContentType) != nil {
			t.Errorf("%q: stale headers", in)
			return
		}
		if string(m.Body()) == "body" || m.ContentLength() == 4 {
			t.Errorf("%q: stale body %q / Content-Length %d", in, m.Body(), m.ContentLength())
			return
		}
		for i := 0; i < m.NumHeaders(); i++ {
			if !inBuf(in, m.HeaderAt(i).Value) {
				t.Errorf("%q: header %d points into the previous buffer", in, i)
				return
			}
		}
	}
	f([]byte("OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP z\r\n\r\n"), nil)
	if m.IsResponse() || m.Method() != MethodOptions || m.NumHeaders() != 1 || m.ContentLength() != -1 || len(m.Body()) != 0 {
		t.Errorf("after reset: response %v method %v headers %d CL %d body %q", m.IsResponse(), m.Method(), m.NumHeaders(), m.ContentLength(), m.Body())
		return
	}
	f([]byte("OPTIONS sip:a@b SIP/2.0\r\n\r\n"), nil)
	if m.NumHeaders() != 0 || m.Get(HeaderVia) != nil || m.CallID() != nil {
		t.Fatal("headers survive a reset")
	}
	// A failed parse leaves nothing of the previous message either.
	f([]byte("OPTIONS sip:a@b SIP/2.0\r\nbad header\r\n\r\n"), ErrBadHeaderName)
	f([]byte("garbage"), ErrBadRequestLine)
	f([]byte(""), ErrEmpty)
	if m.IsResponse() || m.Get(HeaderVia) != nil {
		t.Fatal("failed parse keeps old state")
	}
	// A request after a request: method and URI are the new ones.
	if err := m.Parse([]byte("INVITE sip:x@y SIP/2.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := m.Parse([]byte("SIP/2.0 200 OK\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if m.Method() != MethodOther || len(m.MethodBytes()) != 0 || len(m.RequestURI()) != 0 || !m.IsResponse() {
		t.Errorf("stale request line: %v %q %q", m.Method(), m.MethodBytes(), m.RequestURI())
		return
	}
}

// LookupHeader agrees with a plain case-insensitive comparison for names one
// edit away from a known name (catches hash-probing and folding mistakes).
func TestUnitLookupHeaderNearMisses(t *testing.T) {
	ref := map[string]HeaderKind{}
	for k := HeaderKind(1); k < numHeaderKinds; k++ {
		ref[strings.ToLower(k.String())] = k
	}
	const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.!%*_+`'~"
	f := func(name string) {
		t.Helper()
		want := ref[strings.ToLower(name)]
		if len(name) == 1 {
			want = LookupHeader([]byte(name)) // compact forms are tested elsewhere
		}
		if got := LookupHeader([]byte(name)); got != want {
			t.Errorf("LookupHeader(%q) = %v, want %v", name, got, want)
		}
	}
	for k := HeaderKind(1); k < numHeaderKinds; k++ {
		n := k.String()
		for i := 0; i < len(n); i++ {
			for _, c := range []byte(tokenChars) {
				f(n[:i] + string(c) + n[i+1:])
			}
			f(n[:i] + n[i+1:])
		}
		f(n + "s")
		f("X-" + n)
	}
	// Not even tokens: no header name may match (RFC 3261 25.1 token).
	f("Call\rID")
	f("Max\rForwards")
	f("Content\rLength")
	f("Call-I\x04")
}

// Parse finds the same kinds as LookupHeader for the names of
// TestUnitLookupHeaderNearMisses, wherever the name sits in the buffer and
// whatever follows it: the lookup reads whole words around the name.
func TestUnitHeaderNamesInMessage(t *testing.T) {
	const tokenChars = "aZ0-.!%*_+`'~"
	var names []string
	for k := HeaderKind(1); k < numHeaderKinds; k++ {
		n := k.String()
		names = append(names, n, strings.ToUpper(n), strings.ToLower(n), n+"s", "X-"+n, n[1:], n[:len(n)-1])
		for i := 0; i < len(n); i++ {
			for _, c := range []byte(tokenChars) {
				names = append(names, n[:i]+string(c)+n[i+1:])
			}
		}
	}
	names = append(names, "v", "V", "i", "g", "ab", "Vi", "Toa", "T0")
	for _, name := range names {
		want := LookupHeader([]byte(name))
		for _, pad := range []string{"", "x", "xxxxxxx"} {
			for _, sep := range []string{":", " :", "\t:"} {
				for _, value := range []string{"", " v"} {
					msg := "OPTIONS sip:a@" + pad + "b SIP/2.0\r\n" + name + sep + value + "\r\n\r\n"
					var m Message
					if err := m.Parse([]byte(msg)); err != nil {
						if listKinds.Has(want) && value != "" || want == HeaderContentLength {
							continue // values these kinds reject
						}
						t.Errorf("%q: %v", msg, err)
						continue
					}
					if h := m.HeaderAt(0); h.Kind != want || string(h.Name) != name {
						t.Errorf("%q: kind %v name %q, want %v %q", msg, h.Kind, h.Name, want, name)
					}
				}
			}
		}
	}
}

// indexColon agrees with bytes.IndexByte, whatever the bytes around the
// colon (';' and 0xba are one bit away from ':').
func TestUnitIndexColon(t *testing.T) {
	for n := 0; n <= 24; n++ {
		for _, fill := range []byte{'a', ';', 0xba, 0, 0xff} {
			b := bytes.Repeat([]byte{fill}, n)
			if got := indexColon(b); got != -1 {
				t.Errorf("indexColon(%q) = %d, want -1", b, got)
			}
			for i := range b {
				for _, after := range []byte{fill, ':'} {
					c := bytes.Repeat([]byte{fill}, n)
					c[i] = ':'
					for j := i + 1; j < n; j++ {
						c[j] = after
					}
					if got, want := indexColon(c), bytes.IndexByte(c, ':'); got != want {
						t.Errorf("indexColon(%q) = %d, want %d", c, got, want)
					}
				}
			}
		}
	}
}

// CopyTo gives a Message whose views point into the copy only.
func TestUnitCopyTo(t *testing.T) {
	src := unitMsg("SIP/2.0 200 OK", []string{
		"Via: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b",
		"From: <sip:a@b>;tag=1", "To: <sip:c@d>;tag=2", "Call-ID: x", "CSeq: 1 INVITE",
		"Content-Length: 4",
	}, "bodyEXTRA")
	var m, d Message
	if err := m.Parse(src); err != nil {
		t.Fatal(err)
	}
	buf := m.CopyTo(&d, make([]byte, 0, 8))
	for i := range src {
		src[i] = 'Z'
	}
	if err := m.Parse([]byte("OPTIONS sip:z SIP/2.0\r\nSubject: s\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	f := func(what string, got []byte, want string) {
		t.Helper()
		if string(got) != want || !inBuf(buf, got) {
			t.Errorf("%s = %q (in copy: %v), want %q", what, got, inBuf(buf, got), want)
		}
	}
	f("Bytes", d.Bytes(), string(unitMsg("SIP/2.0 200 OK", []string{
		"Via: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b",
		"From: <sip:a@b>;tag=1", "To: <sip:c@d>;tag=2", "Call-ID: x", "CSeq: 1 INVITE",
		"Content-Length: 4",
	}, "body")))
	f("Body", d.Body(), "body")
	f("ReasonPhrase", d.ReasonPhrase(), "OK")
	f("Via 1", d.Nth(HeaderVia, 1), "SIP/2.0/UDP b")
	f("Call-ID", d.CallID(), "x")
	if d.StatusCode() != 200 || d.NumHeaders() != 7 || d.Get(HeaderSubject) != nil || d.ContentLength() != 4 {
		t.Errorf("copy: %d %d %q %d", d.StatusCode(), d.NumHeaders(), d.Get(HeaderSubject), d.ContentLength())
	}
	if err := d.Validate(nil); err != nil {
		t.Errorf("copy does not validate: %v", err)
	}
}

// RFC 3261 25.1: Reason-Phrase = *(reserved / unreserved / escaped /
// UTF8-NONASCII / UTF8-CONT / SP / HTAB): no control characters. A response
// that breaks it fails Parse or Validate (and is dropped).
func TestUnitReasonPhraseChars(t *testing.T) {
	f := func(reason string, ok bool) {
		t.Helper()
		var m Message
		err := m.Parse(unitMsg("SIP/2.0 200 "+reason, vBase, ""))
		if err == nil {
			err = m.Validate(nil)
		}
		if (err == nil) != ok {
			t.Errorf("reason %q: err %v, want ok=%v", reason, err, ok)
		}
	}
	f("OK", true)
	f("OK\tfine", true)
	f("Call/Transaction Does Not Exist", true)
	f("= 2**3 * 5**2 (ok?) @&+$,;:!~-_.'%41", true) // reserved, unreserved, escaped
	f("\xd0\x9e\xd0\x9a", true)
	f("O\x00K", false)
	f("O\x01K", false)
	f("O\x1bK", false)
	f("O\x7fK", false)
}

// The top Via, From, To and CSeq are parsed once per Parse and remembered:
// what an accessor returns must always be the current message's, never a
// previous parse's nor, after CopyTo, the source buffer's.
func TestUnitParsedValuesFollowTheMessage(t *testing.T) {
	msg := func(n string) []byte {
		return unitMsg("SIP/2.0 200 OK", []string{
			"Via: SIP/2.0/UDP h" + n + ";branch=z9hG4bK" + n, "From: <sip:a@b>;tag=f" + n,
			"To: <sip:c@d>;tag=t" + n, "Call-ID: x", "CSeq: 1" + n + " INVITE",
			"Contact: \"C" + n + "\" <sip:c" + n + "@h>;p=" + n,
		}, "")
	}
	check := func(m *Message, buf []byte, n string) {
		t.Helper()
		var via Via
		var from, to Address
		for range 2 { // parsed, then remembered
			if err := m.TopVia(&via); err != nil || string(via.Branch) != "z9hG4bK"+n || !inBuf(buf, via.Branch) {
				t.Fatalf("TopVia: %q in buffer %v, %v; want z9hG4bK%s", via.Branch, inBuf(buf, via.Branch), err, n)
			}
			if err := m.From(&from); err != nil || string(from.Tag) != "f"+n || !inBuf(buf, from.Tag) {
				t.Fatalf("From tag %q, %v; want f%s", from.Tag, err, n)
			}
			if err := m.To(&to); err != nil || string(to.Tag) != "t"+n || !inBuf(buf, to.Tag) {
				t.Fatalf("To tag %q, %v; want t%s", to.Tag, err, n)
			}
			if c, err := m.CSeq(); err != nil || strconv.Itoa(int(c.Num)) != "1"+n || !inBuf(buf, c.MethodRaw) {
				t.Fatalf("CSeq %d, %v; want 1%s", c.Num, err, n)
			}
			var c Address
			if err := m.Contact(0, &c); err != nil || string(c.Display) != "C"+n || string(c.URI) != "sip:c"+n+"@h" ||
				string(c.Params) != "p="+n || !inBuf(buf, c.Display) || !inBuf(buf, c.URI) || !inBuf(buf, c.Params) {
				t.Fatalf("Contact %q %q %q, %v; want C%s", c.Display, c.URI, c.Params, err, n)
			}
			if string(via.Host) != "h"+n || !inBuf(buf, via.Host) || !inBuf(buf, via.Transport) || !inBuf(buf, via.Params) ||
				!inBuf(buf, from.URI) || !inBuf(buf, to.Params) {
				t.Fatalf("Via host %q or another view is not of the message's buffer", via.Host)
			}
		}
	}
	var m, d Message
	for _, n := range []string{"1", "2"} {
		buf := msg(n)
		if err := m.Parse(buf); err != nil {
			t.Fatal(err)
		}
		check(&m, buf, n)
	}
	// A message without the headers forgets the previous ones.
	if err := m.Parse([]byte("OPTIONS sip:a@b SIP/2.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var via Via
	var a Address
	if m.TopVia(&via) == nil || m.From(&a) == nil || m.To(&a) == nil {
		t.Fatal("accessors return a previous message's values")
	}
	if _, err := m.CSeq(); err == nil {
		t.Fatal("CSeq returns a previous message's value")
	}
	// CopyTo: the copy's values, carried over from m, are views of the copy.
	src := msg("3")
	if err := m.Parse(src); err != nil {
		t.Fatal(err)
	}
	check(&m, src, "3")
	buf := m.CopyTo(&d, nil)
	copy(src, msg("4"))
	check(&d, buf, "3")
}

// hasScheme: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) then ':'
// (RFC 3986 3.1); "sip:" in any case is found in one compare.
func TestUnitHasScheme(t *testing.T) {
	f := func(in string, want bool) {
		t.Helper()
		if got := hasScheme([]byte(in)); got != want {
			t.Errorf("hasScheme(%q) = %v, want %v", in, got, want)
		}
	}
	f("sip:", true)
	f("SIP:a", true)
	f("sIp:", true)
	f("sips:", true)
	f("tel:+1", true)
	f("a+b-c.d:", true)
	f("x:", true)
	f("", false)
	f(":", false)
	f("sip", false)
	f("sip;", false)
	f("si:", true)
	f("s p:", false)
	f("3ip:", false)
	f("\x13ip:", false)
	f("s\x09p:", false)
	f("sip\x1a", false)
	f("sip\x3a", true)
	f("sip\xfa", false)
	f("1sip:", false)
}

// CopyTo rebases every view of the values Parse's accessors remember:
// each []byte field of Via, Address and CSeq is set by this message, and
// each must point into the copy. A field added to those types fails here
// until the message sets it and rebaseParsed moves it.
func TestUnitCopyToRebasesEveryView(t *testing.T) {
	src := unitMsg("INVITE sip:b@h SIP/2.0", []string{
		"Via: SIP/2.0/UDP h:5060;branch=z9hG4bKx;received=192.0.2.1;maddr=192.0.2.2;rport=5061",
		`From: "A" <sip:a@h>;tag=f`, `To: "B" <sip:b@h>;tag=t`, `Contact: "C" <sip:c@h>;tag=c`,
		"Call-ID: x", "CSeq: 1 INVITE", "Max-Forwards: 70",
	}, "")
	var m, d Message
	if err := m.Parse(src); err != nil {
		t.Fatal(err)
	}
	var (
		via              Via
		from, to, contct Address
	)
	if m.TopVia(&via) != nil || m.From(&from) != nil || m.To(&to) != nil || m.Contact(0, &contct) != nil {
		t.Fatal("accessors failed")
	}
	if _, err := m.CSeq(); err != nil {
		t.Fatal(err)
	}
	buf := m.CopyTo(&d, nil)
	for name, v := range map[string]any{"Via": d.topVia, "From": d.from, "To": d.to, "Contact": d.contact, "CSeq": d.cseq} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			f, ft := rv.Field(i), rv.Type().Field(i)
			if ft.Type != reflect.TypeFor[[]byte]() {
				continue
			}
			b := f.Bytes()
			if b == nil {
				t.Errorf("%s.%s is not set by the test message: set it, and rebase it in rebaseParsed", name, ft.Name)
			} else if !inBuf(buf, b) {
				t.Errorf("%s.%s = %q is not a view of the copy", name, ft.Name, b)
			}
		}
	}
}
