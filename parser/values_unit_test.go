package parser

import (
	"errors"
	"strings"
	"testing"
)

// RFC 3261 7.1, 25.1: methods are case-sensitive tokens.
func TestUnitLookupMethod(t *testing.T) {
	f := func(in string, want Method) {
		t.Helper()
		if got := LookupMethod([]byte(in)); got != want {
			t.Errorf("LookupMethod(%q) = %v, want %v", in, got, want)
		}
	}
	for m := MethodOther + 1; m < NumMethods; m++ {
		f(m.String(), m)
		f(strings.ToLower(m.String()), MethodOther)
		f(m.String()+"X", MethodOther)
		f(m.String()[:len(m.String())-1], MethodOther)
	}
	f("INVITE", MethodInvite)
	f("Invite", MethodOther)
	f("iNVITE", MethodOther)
	f("INFO", MethodInfo)
	f("REFER", MethodRefer)
	f("REGISTER", MethodRegister)
	f("PRACK", MethodPrack)
	f("PUBLISH", MethodPublish)
	f("INVITF", MethodOther)
	f("INF", MethodOther)
	f("RE%47IST%45R", MethodOther) // RFC 4475 3.1.1.5
	f("NEWMETHOD", MethodOther)
	f("", MethodOther)
	f("A", MethodOther)
	f("AC", MethodOther)
	f("XYZ", MethodOther)
	if MethodOther.String() != "" || MethodInvite.String() != "INVITE" || MethodUpdate.String() != "UPDATE" {
		t.Error("Method.String")
	}
}

// RFC 3261 20.16: CSeq = 1*DIGIT LWS Method; the number fits 32 bits (8.1.1.5).
func TestUnitParseCSeq(t *testing.T) {
	f := func(in string, wantErr error, num uint32, method Method, raw string) {
		t.Helper()
		c, err := ParseCSeq([]byte(in))
		if !errors.Is(err, wantErr) {
			t.Errorf("ParseCSeq(%q): err %v, want %v", in, err, wantErr)
			return
		}
		if err == nil && (c.Num != num || c.Method != method || string(c.MethodRaw) != raw) {
			t.Errorf("ParseCSeq(%q) = %d %v %q, want %d %v %q", in, c.Num, c.Method, c.MethodRaw, num, method, raw)
		}
	}
	f("4711 INVITE", nil, 4711, MethodInvite, "INVITE")
	f("1 ACK", nil, 1, MethodAck, "ACK")
	f("0 OPTIONS", nil, 0, MethodOptions, "OPTIONS")
	f("4294967295 BYE", nil, 4294967295, MethodBye, "BYE") // 2^32-1
	f("0009 INVITE", nil, 9, MethodInvite, "INVITE")       // RFC 4475 3.1.1.1
	f("  1   INVITE  ", nil, 1, MethodInvite, "INVITE")
	f("1\tINVITE", nil, 1, MethodInvite, "INVITE")
	f("1\r\n INVITE", nil, 1, MethodInvite, "INVITE")
	f("1 invite", nil, 1, MethodOther, "invite")
	f("8 NEWMETHOD", nil, 8, MethodOther, "NEWMETHOD")
	f("1 !interesting-Method0123456789_*+`.%indeed'~", nil, 1, MethodOther, "!interesting-Method0123456789_*+`.%indeed'~")
	f("4294967296 INVITE", ErrBadCSeq, 0, 0, "")           // 2^32
	f("36893488147419103232 INVITE", ErrBadCSeq, 0, 0, "") // RFC 4475 3.1.2.4
	f("99999999999999999999999 INVITE", ErrBadCSeq, 0, 0, "")
	f("1", ErrBadCSeq, 0, 0, "") // missing method
	f("1 ", ErrBadCSeq, 0, 0, "")
	f("INVITE", ErrBadCSeq, 0, 0, "") // missing number
	f(" INVITE", ErrBadCSeq, 0, 0, "")
	f("1INVITE", ErrBadCSeq, 0, 0, "")
	f("-1 INVITE", ErrBadCSeq, 0, 0, "")
	f("+1 INVITE", ErrBadCSeq, 0, 0, "")
	f("1.5 INVITE", ErrBadCSeq, 0, 0, "")
	f("1 INVITE BYE", ErrBadCSeq, 0, 0, "")
	f("1 INV@ITE", ErrBadCSeq, 0, 0, "")
	f("1 INVITE;x", ErrBadCSeq, 0, 0, "")
	f("", ErrBadCSeq, 0, 0, "")
}

// The scalar accessors of Message: Max-Forwards 0-255 (RFC 3261 20.22),
// Expires delta-seconds up to 2^32-1 (20.19), CSeq.
func TestUnitMessageScalars(t *testing.T) {
	mf := func(value string, want int, present bool, wantErr error) {
		t.Helper()
		var h []string
		if present {
			h = []string{"Max-Forwards: " + value}
		}
		m := unitParse(t, "OPTIONS sip:a@b SIP/2.0", h, "")
		n, ok, err := m.MaxForwards()
		if n != want || ok != present || !errors.Is(err, wantErr) {
			t.Errorf("Max-Forwards %q: %d %v %v, want %d %v %v", value, n, ok, err, want, present, wantErr)
		}
	}
	mf("70", 70, true, nil)
	mf("0", 0, true, nil) // RFC 4475 3.3.11
	mf("255", 255, true, nil)
	mf("0070", 70, true, nil)
	mf("256", 0, true, ErrBadMaxForwards)
	mf("300", 0, true, ErrBadMaxForwards) // RFC 4475 3.1.2.4
	mf("99999999999999999999", 0, true, ErrBadMaxForwards)
	mf("-1", 0, true, ErrBadMaxForwards)
	mf("7 0", 0, true, ErrBadMaxForwards)
	mf("seventy", 0, true, ErrBadMaxForwards)
	mf("", 0, true, ErrBadMaxForwards)
	mf("", 0, false, nil) // absent, as in RFC 2543 (RFC 4475 3.4.1)

	ex := func(value string, want uint32, present bool, wantErr error) {
		t.Helper()
		var h []string
		if present {
			h = []string{"Expires: " + value}
		}
		m := unitParse(t, "REGISTER sip:a@b SIP/2.0", h, "")
		n, ok, err := m.Expires()
		if n != want || ok != present || !errors.Is(err, wantErr) {
			t.Errorf("Expires %q: %d %v %v, want %d %v %v", value, n, ok, err, want, present, wantErr)
		}
	}
	ex("3600", 3600, true, nil)
	ex("0", 0, true, nil)
	ex("4294967295", 4294967295, true, nil)
	ex("4294967296", 0, true, ErrBadExpires)
	ex("1"+strings.Repeat("0", 100), 0, true, ErrBadExpires) // RFC 4475 3.1.2.4
	ex("Thu, 01 Dec 1994 16:00:00 GMT", 0, true, ErrBadExpires)
	ex("-1", 0, true, ErrBadExpires)
	ex("", 0, false, nil)

	m := unitParse(t, "OPTIONS sip:a@b SIP/2.0", nil, "")
	if _, err := m.CSeq(); !errors.Is(err, ErrMissingCSeq) {
		t.Errorf("CSeq without CSeq: %v", err)
	}
	m = unitParse(t, "OPTIONS sip:a@b SIP/2.0", []string{"CSeq:\r\n 12\r\n OPTIONS"}, "")
	if c, err := m.CSeq(); err != nil || c.Num != 12 || c.Method != MethodOptions {
		t.Errorf("folded CSeq: %+v %v", c, err)
	}
}

// RFC 3261 20.33: Retry-After = delta-seconds [ comment ] *( SEMI retry-param ),
// comment = LPAREN *(ctext / quoted-pair / comment) RPAREN (25.1).
func TestUnitParseRetryAfter(t *testing.T) {
	f := func(in string, wantErr error, sec, dur uint32, comment, params string) {
		t.Helper()
		r, err := ParseRetryAfter([]byte(in))
		if !errors.Is(err, wantErr) {
			t.Errorf("ParseRetryAfter(%q): err %v, want %v", in, err, wantErr)
			return
		}
		if err == nil && (r.Seconds != sec || r.Duration != dur || string(r.Comment) != comment || string(r.Params) != params) {
			t.Errorf("ParseRetryAfter(%q) = %d %d %q %q, want %d %d %q %q", in, r.Seconds, r.Duration, r.Comment, r.Params, sec, dur, comment, params)
		}
	}
	f("18000;duration=3600", nil, 18000, 3600, "", "duration=3600") // RFC 3261 20.33
	f("120 (I'm in a meeting)", nil, 120, 0, "I'm in a meeting", "")
	f("120 (I'm in a meeting);duration=60", nil, 120, 60, "I'm in a meeting", "duration=60")
	f("120 (I'm in a meeting) ; duration = 60 ;x=y", nil, 120, 60, "I'm in a meeting", " duration = 60 ;x=y")
	f("120(meeting)", nil, 120, 0, "meeting", "")
	f("0", nil, 0, 0, "", "")
	f(" 5 ", nil, 5, 0, "", "")
	f("4294967295", nil, 4294967295, 0, "", "")
	f("5;x=y;DURATION=7", nil, 5, 7, "", "x=y;DURATION=7")
	f("5 ()", nil, 5, 0, "", "")
	// Nested comments and quoted-pairs are comment syntax (RFC 3261 25.1).
	f("120 (in a meeting (until noon))", nil, 120, 0, "in a meeting (until noon)", "")
	f(`120 (smile :\))`, nil, 120, 0, `smile :\)`, "")
	f("120 (a (b) c);duration=5", nil, 120, 5, "a (b) c", "duration=5")
	// Errors.
	f("", ErrBadRetryAfter, 0, 0, "", "")
	f("abc", ErrBadRetryAfter, 0, 0, "", "")
	f("-1", ErrBadRetryAfter, 0, 0, "", "")
	f("949302838503028349304023988", ErrBadRetryAfter, 0, 0, "", "") // RFC 4475 3.1.2.5
	f("120 junk", ErrBadRetryAfter, 0, 0, "", "")
	f("120 (unterminated", ErrBadRetryAfter, 0, 0, "", "")
	f("120 (a) (b)", ErrBadRetryAfter, 0, 0, "", "")
	f("120;duration=abc", ErrBadRetryAfter, 0, 0, "", "")
	f("120;duration=", ErrBadRetryAfter, 0, 0, "", "")
	f("120;duration=4294967296", ErrBadRetryAfter, 0, 0, "", "")
	f("120;", ErrBadRetryAfter, 0, 0, "", "")
	f("120;;duration=1", ErrBadRetryAfter, 0, 0, "", "")
	f("Fri, 31 Dec 1999 23:59:59 GMT", ErrBadRetryAfter, 0, 0, "", "") // RFC 2543 date form is gone
}

func TestUnitMessageRetryAfter(t *testing.T) {
	m := unitParse(t, "SIP/2.0 503 Service Unavailable", []string{"Retry-After: 60 (x)"}, "")
	if r, ok, err := m.RetryAfter(); !ok || err != nil || r.Seconds != 60 || string(r.Comment) != "x" {
		t.Errorf("Retry-After: %+v %v %v", r, ok, err)
	}
	m = unitParse(t, "SIP/2.0 503 Service Unavailable", nil, "")
	if _, ok, err := m.RetryAfter(); ok || err != nil {
		t.Errorf("absent Retry-After: %v %v", ok, err)
	}
	m = unitParse(t, "SIP/2.0 503 Service Unavailable", []string{"Retry-After: soon"}, "")
	if _, ok, err := m.RetryAfter(); !ok || !errors.Is(err, ErrBadRetryAfter) {
		t.Errorf("bad Retry-After: %v %v", ok, err)
	}
}

// RFC 3323 4.2: Privacy-hdr = "Privacy" HCOLON priv-value *(";" priv-value);
// priv-value = "header" / "session" / "user" / "none" / "critical" / token;
// RFC 3325 9.3 adds "id".
func TestUnitParsePrivacy(t *testing.T) {
	f := func(in string, wantErr error, want Privacy) {
		t.Helper()
		p, err := ParsePrivacy([]byte(in))
		if !errors.Is(err, wantErr) || p != want {
			t.Errorf("ParsePrivacy(%q) = %b, %v; want %b, %v", in, p, err, want, wantErr)
		}
	}
	f("id", nil, PrivacyID)
	f("header", nil, PrivacyHeader)
	f("session", nil, PrivacySession)
	f("user", nil, PrivacyUser)
	f("none", nil, PrivacyNone)
	f("critical", nil, PrivacyCritical)
	f("history", nil, PrivacyOther) // RFC 4244 extension
	f("header;session;user;id;critical", nil, PrivacyHeader|PrivacySession|PrivacyUser|PrivacyID|PrivacyCritical)
	f("id;critical", nil, PrivacyID|PrivacyCritical)
	f("ID;Header", nil, PrivacyID|PrivacyHeader) // tokens are case-insensitive (RFC 3261 7.3.1)
	f("id;id", nil, PrivacyID)
	f("id;foo", nil, PrivacyID|PrivacyOther)
	f("identity", nil, PrivacyOther) // not "id"
	f("", ErrBadPrivacy, 0)          // at least one priv-value
	f("id;", ErrBadPrivacy, 0)
	f(";id", ErrBadPrivacy, 0)
	f("id;;header", ErrBadPrivacy, 0)
	f("id header", ErrBadPrivacy, 0)
	f("id,header", ErrBadPrivacy, 0)
	f(`"id"`, ErrBadPrivacy, 0)
	f("i@d", ErrBadPrivacy, 0)
}

func TestUnitMessagePrivacy(t *testing.T) {
	f := func(headers []string, wantErr error, want Privacy) {
		t.Helper()
		m := unitParse(t, "INVITE sip:a@b SIP/2.0", headers, "")
		p, err := m.Privacy()
		if !errors.Is(err, wantErr) || p != want {
			t.Errorf("Privacy(%q) = %b, %v; want %b, %v", headers, p, err, want, wantErr)
		}
	}
	f(nil, nil, 0)
	f([]string{"Privacy: id"}, nil, PrivacyID)
	f([]string{"Privacy: id", "Privacy: header;user"}, nil, PrivacyID|PrivacyHeader|PrivacyUser)
	f([]string{"Privacy: id", "Privacy: ;"}, ErrBadPrivacy, 0)
}

// RFC 3326 2: Reason = "Reason" HCOLON reason-value *(COMMA reason-value);
// reason-value = protocol *(SEMI reason-params); cause = 1*DIGIT; text = quoted-string.
func TestUnitParseReason(t *testing.T) {
	f := func(in string, wantErr error, protocol string, cause int, text string) {
		t.Helper()
		r, err := ParseReason([]byte(in))
		if !errors.Is(err, wantErr) {
			t.Errorf("ParseReason(%q): err %v, want %v", in, err, wantErr)
			return
		}
		if err == nil && (string(r.Protocol) != protocol || r.Cause != cause || string(r.Text) != text) {
			t.Errorf("ParseReason(%q) = %q %d %q, want %q %d %q", in, r.Protocol, r.Cause, r.Text, protocol, cause, text)
		}
	}
	// RFC 3326 examples.
	f(`SIP ;cause=200 ;text="Call completed elsewhere"`, nil, "SIP", 200, "Call completed elsewhere")
	f(`Q.850 ;cause=16 ;text="Terminated"`, nil, "Q.850", 16, "Terminated")
	f(`SIP ;cause=600 ;text="Busy Everywhere"`, nil, "SIP", 600, "Busy Everywhere")
	f(`SIP ;cause=580 ;text="Precondition Failure"`, nil, "SIP", 580, "Precondition Failure")
	f(`preemption ;cause=1 ;text="UA Preemption"`, nil, "preemption", 1, "UA Preemption") // RFC 4411
	f("Q.850;cause=16", nil, "Q.850", 16, "")
	f("SIP", nil, "SIP", -1, "")
	f(`SIP;text="x"`, nil, "SIP", -1, "x")
	f(`SIP;text=""`, nil, "SIP", -1, "")
	f(`SIP;text="a \"quoted\" word"`, nil, "SIP", -1, `a \"quoted\" word`)
	f(`SIP;text="semi;colon, comma"`, nil, "SIP", -1, "semi;colon, comma")
	f(`SIP;CAUSE=487;TEXT="Request Terminated"`, nil, "SIP", 487, "Request Terminated")
	f("SIP;cause=200;foo=bar;baz", nil, "SIP", 200, "")
	f("SIP;cause=0200", nil, "SIP", 200, "")
	// Errors.
	f("", ErrBadReasonHdr, "", 0, "")
	f(";cause=1", ErrBadReasonHdr, "", 0, "")
	f("SIP cause=1", ErrBadReasonHdr, "", 0, "")
	f("SIP;cause=abc", ErrBadReasonHdr, "", 0, "")
	f("SIP;cause=", ErrBadReasonHdr, "", 0, "")
	f("SIP;cause", ErrBadReasonHdr, "", 0, "")
	f("SIP;cause=-1", ErrBadReasonHdr, "", 0, "")
	f("SIP;", ErrBadReasonHdr, "", 0, "")
	f("SIP;;cause=1", ErrBadReasonHdr, "", 0, "")
	f(`SIP;text="unterminated`, ErrBadReasonHdr, "", 0, "")
	f(`"SIP";cause=1`, ErrBadReasonHdr, "", 0, "")
}

func TestUnitMessageReason(t *testing.T) {
	m := unitParse(t, "BYE sip:a@b SIP/2.0", []string{
		`Reason: SIP;cause=200;text="Call completed, elsewhere", Q.850;cause=16`,
		"Reason: preemption;cause=1",
	}, "")
	f := func(n int, wantErr error, protocol string, cause int) {
		t.Helper()
		r, err := m.Reason(n)
		if !errors.Is(err, wantErr) || string(r.Protocol) != protocol || r.Cause != cause {
			t.Errorf("Reason(%d) = %q %d %v, want %q %d %v", n, r.Protocol, r.Cause, err, protocol, cause, wantErr)
		}
	}
	f(0, nil, "SIP", 200)
	f(1, nil, "Q.850", 16)
	f(2, nil, "preemption", 1)
	f(3, ErrNoHeader, "", -1)
}

// RFC 3261 20.15: media-type = m-type SLASH m-subtype *(SEMI m-parameter).
func TestUnitMediaType(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := MediaType([]byte(in)); string(got) != want {
			t.Errorf("MediaType(%q) = %q, want %q", in, got, want)
		}
	}
	f("application/sdp", "application/sdp")
	f("application/sdp; charset=utf-8", "application/sdp")
	f("  text/plain ;x=y", "text/plain")
	f(`multipart/mixed;boundary="a;b"`, "multipart/mixed")
	f(`multipart/signed;protocol="application/pkcs7-signature";micalg=sha1;boundary=boundary42`, "multipart/signed")
	f("application/unknownformat", "application/unknownformat")
	f("", "")
	m := unitParse(t, "INVITE sip:a@b SIP/2.0", []string{"c: application/sdp ; charset=x"}, "")
	if got := string(m.ContentType()); got != "application/sdp" {
		t.Errorf("ContentType = %q", got)
	}
	m = unitParse(t, "INVITE sip:a@b SIP/2.0", nil, "")
	if got := m.ContentType(); len(got) != 0 {
		t.Errorf("ContentType without Content-Type = %q", got)
	}
}

// Token lists (RFC 3261 7.3.1): NextListItem iterates, HasOptionTag matches case-insensitively.
func TestUnitNextListItem(t *testing.T) {
	f := func(in string, want ...string) {
		t.Helper()
		var got []string
		for item, rest := NextListItem([]byte(in)); item != nil || rest != nil; item, rest = NextListItem(rest) {
			if item == nil {
				t.Errorf("NextListItem(%q): nil item", in)
				return
			}
			got = append(got, string(item))
			if len(got) > 100 {
				t.Errorf("NextListItem(%q): no end", in)
				return
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("NextListItem(%q) = %q, want %q", in, got, want)
		}
	}
	f("INVITE, ACK , BYE", "INVITE", "ACK", "BYE")
	f("INVITE,ACK,BYE", "INVITE", "ACK", "BYE")
	f("timer", "timer")
	f("  timer  ", "timer")
	f(" a ,\r\n b ", "a", "b")
	f("")
	f("a,,b", "a", "", "b") // an empty element yields an empty item (doc of NextListItem)
	f(",a", "", "a")
	f("a,", "a", "") // idem at the end, or "Require: 100rel," passes unnoticed (RFC 3261 25.1: no empty option-tag)
}

func TestUnitHasOptionTag(t *testing.T) {
	m := unitParse(t, "INVITE sip:a@b SIP/2.0", []string{
		"Supported: timer, 100rel",
		"k: replaces",
		"Require: precondition",
	}, "")
	f := func(kind HeaderKind, tag string, want bool) {
		t.Helper()
		if got := m.HasOptionTag(kind, tag); got != want {
			t.Errorf("HasOptionTag(%v, %q) = %v, want %v", kind, tag, got, want)
		}
	}
	f(HeaderSupported, "timer", true)
	f(HeaderSupported, "100rel", true)
	f(HeaderSupported, "100REL", true)
	f(HeaderSupported, "replaces", true)
	f(HeaderSupported, "precondition", false)
	f(HeaderSupported, "time", false)
	f(HeaderRequire, "precondition", true)
	f(HeaderRequire, "timer", false)
	f(HeaderProxyRequire, "timer", false)
	f(HeaderUnsupported, "timer", false)
}

// scanVisible agrees with scanClass byte for byte: every length to 20, every
// start, a bad byte of each kind at every position, and bytes either side of
// the class boundaries around it (the borrows of its word arithmetic).
func TestUnitScanVisible(t *testing.T) {
	bad := []byte{0, 1, '\t', '\n', '\r', 0x1f, ' ', '>', 0x7f}
	good := []byte{'!', '"', '=', '?', 'a', '~', 0x80, 0xfe, 0xff}
	for n := 0; n <= 20; n++ {
		for pos := -1; pos < n; pos++ {
			for _, c := range bad {
				for _, g := range good {
					b := make([]byte, n)
					for k := range b {
						b[k] = g
					}
					if pos >= 0 {
						b[pos] = c
						if pos+1 < n {
							b[pos+1] = good[(pos+int(c))%len(good)]
						}
					}
					for i := 0; i <= n; i++ {
						for _, tc := range []struct {
							stop  byte
							class uint16
						}{{0, classVisible}, {'>', classInAngle}} {
							if got, want := scanVisible(b, i, tc.stop), scanClass(b, i, tc.class); got != want {
								t.Fatalf("scanVisible(%q, %d, %q) = %d, want %d", b, i, tc.stop, got, want)
							}
						}
					}
				}
			}
		}
	}
	// Every byte value at every position of a word and its tail.
	for c := range 256 {
		for pos := range 13 {
			b := []byte("sip:a@b.c;x=yz")[:13]
			b[pos] = byte(c)
			for i := 0; i <= len(b); i++ {
				if got, want := scanVisible(b, i, '>'), scanClass(b, i, classInAngle); got != want {
					t.Fatalf("scanVisible(%q, %d, '>') = %d, want %d", b, i, got, want)
				}
				if got, want := scanVisible(b, i, 0), scanClass(b, i, classVisible); got != want {
					t.Fatalf("scanVisible(%q, %d, 0) = %d, want %d", b, i, got, want)
				}
			}
		}
	}
	// Bad bytes before i do not count, even in the word read with i's bytes.
	b := []byte("\x00\x00\x00 >\x7f\x01\x00\x21\x21\x21")
	for i := range b {
		if got, want := scanVisible(b, i, '>'), scanClass(b, i, classInAngle); got != want {
			t.Errorf("scanVisible(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
}

// TestUnitReadDigits checks readDigits, whose word-at-a-time path reads up
// to seven digits without a loop, against the digit-by-digit definition:
// runs of every length to ten digits and more, followed by every byte value,
// at every offset from the end of the buffer, under several maxima.
func TestUnitReadDigits(t *testing.T) {
	slow := func(b []byte, i int, max uint64) (uint64, int, bool) {
		var n uint64
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if n = n*10 + uint64(b[i]-'0'); n > max {
				return 0, i, false
			}
		}
		return n, i, true
	}
	runs := []string{"", "0", "7", "42", "123", "5060", "65535", "65536", "314159", "1234567", "9999999", "0000065535", "12345678", "99999999",
		"123456789", "4294967295", "4294967296", "00000000000000000001", "18446744073709551616"}
	stops := []string{"", "x12"}
	for c := 0; c < 256; c++ {
		stops = append(stops, string([]byte{byte(c)}))
	}
	for _, max := range []uint64{65535, maxUint32, 1 << 62} {
		for _, r := range runs {
			for _, s := range stops {
				for pad := 0; pad < 10; pad++ {
					b := []byte("ab" + r + s + "zzzzzzzzz"[:pad])
					wn, we, wok := slow(b, 2, max)
					n, e, ok := readDigits(b, 2, max)
					if ok != wok || ok && (n != wn || e != we) {
						t.Errorf("readDigits(%q, 2, %d) = %d, %d, %v; want %d, %d, %v", b, max, n, e, ok, wn, we, wok)
					}
				}
			}
		}
	}
}

// TestUnitReadPort checks readPort's four-digit word against
// readDigits, on every four bytes of a set around the digits, alone and
// followed by each of them.
func TestUnitReadPort(t *testing.T) {
	set := []byte("/0123456789:;>@ \x00\x7f\x80\xbf\xff")
	var b [6]byte
	for _, c0 := range set {
		for _, c1 := range set {
			for _, c2 := range set {
				for _, c3 := range set {
					for _, c4 := range append([]byte{'x'}, set...) {
						b = [6]byte{'a', c0, c1, c2, c3, c4}
						for _, in := range [][]byte{b[:5], b[:6]} {
							p, end, ok := readPort(in, 1)
							n, wend, wok := readDigits(in, 1, 65535)
							if ok != wok || ok && (p != int(n) || end != wend) {
								t.Fatalf("%q: readPort %d %d %v, readDigits %d %d %v", in, p, end, ok, n, wend, wok)
							}
						}
					}
				}
			}
		}
	}
}
