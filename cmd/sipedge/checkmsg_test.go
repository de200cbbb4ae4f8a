package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/parser"
)

// check-msg says what the server does: no reply where the server sends
// none.
func TestCheckMessageAsTheServer(t *testing.T) {
	const hdrs = "From: <sip:a@b>;tag=1\r\nTo: <sip:b@c>\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
	cases := []struct {
		name, msg string
		stream    bool
		want      string
	}{
		{"ok", "OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n" + hdrs, false, "ok OPTIONS"},
		{"bad header", "OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nMax-Forwards: x\r\n" + hdrs, false, "reject 400"},
		{"top Via unreadable", "OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP\r\n" + hdrs, false, "drop"},
		{"malformed ACK", "ACK sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n" + hdrs, false, "drop"},
		{"CRLF datagram", "\r\n\r\n", false, "ok keep-alive"},
		{"oversize datagram", "OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nSubject: " +
			strings.Repeat("a", parser.DefaultLimits.MaxMessageSize) + "\r\n" + hdrs, false, "drop"},
		{"CRLF ping", "\r\n\r\n", true, "ok keep-alive"},
	}
	for _, c := range cases {
		got, _ := checkMessage([]byte(c.msg), c.stream)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q...", c.name, got, c.want)
		}
	}
}

// Over TCP, the keep-alives before a message are skipped as the server's
// framing skips them; the message after them gets the verdict.
func TestCheckMessageStreamKeepAlives(t *testing.T) {
	const req = "OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\n" +
		"To: <sip:b@c>\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
	cases := []struct{ msg, want string }{
		{"\r\n\r\n" + req, "ok OPTIONS"},
		{"\r\n\r\n\r\n\r\n" + req, "ok OPTIONS"},
		{"\r\n", "ok keep-alive"},
		{"\r\n\r\nOPTIONS sip:a@b SIP/2.0\r\n", "drop Incomplete Message"},
		{"\r\n\r\n" + strings.Replace(req, "Content-Length: 0", "Content-Length: x", 1), "drop Bad Content-Length"},
	}
	for _, c := range cases {
		if got, _ := checkMessage([]byte(c.msg), true); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: %q, want %q...", c.msg, got, c.want)
		}
	}
}

// check-msg on the RFC 4475 corpus says what the server does with each
// message: the parser's verdict (parser.TestRFC4475), except that a request
// is dropped where the server has nowhere to send the answer.
func TestCheckMessageRFC4475(t *testing.T) {
	want := map[string]string{
		"badinv01": "drop Empty List Element (no readable Via", // the Via itself is the malformed header
		"badvers":  "reject 505 Version Not Supported",         // to the source address: a SIP/7.0 Via is not ours to read
		"ltgtruri": "reject 400 Bad Request-Line",
		"lwsruri":  "reject 400 Bad SIP-Version",
		"lwsstart": "reject 400 Bad Request-Line",
		"trws":     "reject 400 Bad SIP-Version",
		"bigcode":  "drop Bad Status Code (a response",
		"scalarlg": "drop Bad CSeq (a response",
		"test":     "drop Bad Request-Line (no readable Via", // no Via at all
		"clerr":    "reject 400 Body Shorter Than Content-Length",
		"unkscm":   "reject 416",
		"bext01":   "reject 420",
		"wsinv":    "ok INVITE",
		"inv2543":  "ok INVITE",
		"bcast":    "ok 200",
	}
	files, err := filepath.Glob("../../parser/testdata/rfc4475/*.dat")
	if err != nil || len(files) < 50 {
		t.Fatalf("corpus: %d files (%v)", len(files), err)
	}
	seen := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".dat")
		buf, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := checkMessage(buf, false)
		if ok != strings.HasPrefix(got, "ok") {
			t.Errorf("%s: %q with ok=%v", name, got, ok)
		}
		if w, listed := want[name]; listed {
			seen++
			if !strings.HasPrefix(got, w) {
				t.Errorf("%s: %q, want %q...", name, got, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d listed messages found", seen, len(want))
	}
}

// The command's contract: one line per file, exit 0 when all are ok, 1
// when any is rejected or dropped, 2 on usage errors.
func TestCheckMsgCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, msg string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(msg), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.sip", "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\n"+
		"To: <sip:b@c>;tag=2\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
	bad := write("bad.sip", "OPTIONS sip:a@b SIP/7.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\n"+
		"To: <sip:b@c>\r\nCall-ID: x\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
	cases := []struct {
		args       []string
		code       int
		out, error string
	}{
		{[]string{ok}, 0, ok + ": ok 200\n", ""},
		{[]string{"-transport", "tcp", ok}, 0, ok + ": ok 200\n", ""},
		{[]string{ok, bad}, 1, ok + ": ok 200\n" + bad + ": reject 505 Version Not Supported\n", ""},
		{[]string{}, 2, "", "no files"},
		{[]string{"-transport", "sctp", ok}, 2, "", "-transport must be udp or tcp"},
		{[]string{"-bogus", ok}, 2, "", "flag provided but not defined"},
		{[]string{filepath.Join(dir, "missing.sip")}, 2, "", "no such file"},
	}
	for _, c := range cases {
		var out, errOut strings.Builder
		code := checkMsgCmd(c.args, &out, &errOut)
		if code != c.code || out.String() != c.out || !strings.Contains(errOut.String(), c.error) {
			t.Errorf("check-msg %q: exit %d, stdout %q, stderr %q; want %d, %q, %q",
				c.args, code, out.String(), errOut.String(), c.code, c.out, c.error)
		}
	}
}
