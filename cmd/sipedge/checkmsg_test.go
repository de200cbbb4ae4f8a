package main

import (
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
