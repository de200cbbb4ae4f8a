package b2bua

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

// headerLines returns the header lines of a message sipedge sent, split on
// CRLF, without the start line.
func headerLines(msg string) []string {
	head, _, _ := strings.Cut(msg, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	return lines[1:]
}

// assertClean fails when a message sipedge sent holds a control byte in a
// header line, or a folded line: what the caller wrote must not reach the
// carrier in a form another parser splits differently.
func assertClean(t *testing.T, msg string) {
	t.Helper()
	for _, l := range headerLines(msg) {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			t.Fatalf("a folded line (%q) relayed:\n%q", l, msg)
		}
		if parser.HasControl([]byte(l)) {
			t.Fatalf("a control byte relayed in %q:\n%q", l, msg)
		}
	}
}

// RFC 4475 3.1.1.2 makes a NUL or DEL in a quoted-pair of a display name
// valid, so Validate lets it through; the caller's display name then goes
// on the carrier's From. A NUL there ends the header early at some
// parsers: sipedge writes no control byte of the caller's on the B-leg,
// and no fold.
func TestCallerDisplayNameControlNotRelayed(t *testing.T) {
	for _, from := range []string{
		"\"Al\\\x00ice\\\x7f\"",       // quoted-pairs of NUL and DEL
		"\"Al\\\x00\"",                // one that would leave a dangling backslash
		"\"Al\r\n ice\"",              // a fold inside the quoted string
		"Al\r\n ice",                  // a fold between tokens
		"\"A\\\"l\\\\\\\x01ice\\\t\"", // quoted-pairs that stay: \" \\ and HTAB
	} {
		r := newRig(t, nil)
		inv := strings.Replace(callerInvite("1", "a-call-1", "15551234"), `From: "Alice"`, "From: "+from, 1)
		r.recv(caller, inv)
		r.expect(caller, "SIP/2.0 100 Trying")
		got := r.take(carrierA)
		if len(got) != 1 {
			t.Fatalf("From %q: %d messages to the carrier", from, len(got))
		}
		assertClean(t, got[0])
		var m parser.Message
		if err := m.Parse([]byte(got[0])); err != nil {
			t.Fatalf("From %q: the carrier's INVITE does not parse: %v\n%q", from, err, got[0])
		}
		if err := m.Validate(nil); err != nil {
			t.Fatalf("From %q: the carrier's INVITE does not validate: %v\n%q", from, err, got[0])
		}
		var a parser.Address
		if err := m.From(&a); err != nil || !bytes.HasPrefix(a.Display, []byte("A")) {
			t.Errorf("From %q: the carrier's From display %q (%v), want the caller's, cleaned", from, a.Display, err)
		}
	}
}

// A caller may split its Privacy over two header lines (RFC 3261 7.3.1
// reads them as one value); parser.Message.Privacy combines them. The
// B2BUA read the first line alone, so "Privacy: none" followed by
// "Privacy: id" sent the caller's number to the carrier in the clear.
// Every line counts (RFC 3323 4.2, RFC 3325 9.3).
func TestShapingCallerPrivacyOverLines(t *testing.T) {
	plain := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a"}
	for _, c := range []struct {
		extra, want string
	}{
		{"Privacy: none\r\nPrivacy: id\r\n", "id"},
		{"Privacy: session\r\nPrivacy: user\r\n", "session;user;id"},
	} {
		_, m := shapedInviteWith(t, plain, nil, c.extra)
		var from parser.Address
		m.From(&from)
		if string(from.URI) != "sip:anonymous@anonymous.invalid" {
			t.Errorf("caller %q: From %s, want anonymous", c.extra, from.URI)
		}
		if got := hdr(m, parser.HeaderPrivacy); got != c.want {
			t.Errorf("caller %q: carrier's Privacy %q, want %q", c.extra, got, c.want)
		}
	}
}
