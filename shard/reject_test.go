package shard

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
)

// A malformed ACK gets no reply: an ACK is never answered (RFC 3261 17.1.1.3:
// the ACK to a non-2xx is part of the INVITE transaction; the ACK to a 2xx is
// a transaction of its own that has no response, 13.2.2.4).
func TestUDPMalformedACKNotAnswered(t *testing.T) {
	testtier.RequiresSockets(t)
	s, _, port := startServer(t, 1, Config{})
	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	ack := strings.NewReplacer("OPTIONS sip:", "ACK sip:", "CSeq: 1 OPTIONS", "CSeq: 1 INVITE").
		Replace(options("ack@test", "a1", "UDP", local))
	c.Write([]byte(ack))
	c.Write([]byte(options("after-ack@test", "a2", "UDP", local)))
	if reply := readUDP(t, c); !strings.HasPrefix(reply, "SIP/2.0 200 OK") {
		t.Fatalf("first reply %q: the malformed ACK was answered", reply)
	}
	if n := s.Shards()[0].m.parseErrors[0].Get(); n != 1 {
		t.Errorf("400-class parse errors %d, want the ACK counted", n)
	}
}

// A request with a bad Request-Line is answered with the start line's
// code where its Via says (RFC 4475 3.1.2.7-10: 400); one of another SIP
// version gets 505 (RFC 3261 21.5.7, RFC 4475 3.1.2.16) at the
// address it came from, since its Via, of that version, cannot be read.
func TestUDPBadRequestLineAnswered(t *testing.T) {
	testtier.RequiresSockets(t)
	_, _, port := startServer(t, 2, Config{})
	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	cases := []struct{ from, to, want string }{
		{"OPTIONS sip:srv@127.0.0.1 SIP/2.0", "OPTIONS <sip:srv@127.0.0.1> SIP/2.0", "SIP/2.0 400 Bad Request-Line\r\n"},
		{"OPTIONS sip:srv@127.0.0.1 SIP/2.0", "OPTIONS  sip:srv@127.0.0.1 SIP/2.0", "SIP/2.0 400 Bad Request-Line\r\n"},
		{"OPTIONS sip:srv@127.0.0.1 SIP/2.0", "OPTIONS sip:" + strings.Repeat("a", 600) + " SIP/2.0", "SIP/2.0 414 Request-URI Too Long\r\n"},
		// The Via names port 1: the 505 still reaches the source port.
		{"Via: SIP/2.0/UDP 127.0.0.1:" + fmt.Sprint(local) + ";", "Via: SIP/7.0/UDP 127.0.0.1:1;", "SIP/2.0 505 Version Not Supported\r\n"},
	}
	for i, tc := range cases {
		msg := options(fmt.Sprintf("bad-start-%d@test", i), fmt.Sprint("s", i), "UDP", local)
		if !strings.Contains(msg, tc.from) {
			t.Fatalf("%q not in %q", tc.from, msg)
		}
		msg = strings.Replace(msg, tc.from, tc.to, 1)
		if strings.Contains(tc.want, "505") {
			msg = strings.Replace(msg, "SIP/2.0\r\n", "SIP/7.0\r\n", 1)
		}
		c.Write([]byte(msg))
		reply := readUDP(t, c)
		if !strings.HasPrefix(reply, tc.want) {
			t.Errorf("%q: reply %q, want %q", tc.to, reply, tc.want)
		}
		if !strings.Contains(reply, fmt.Sprintf("Call-ID: bad-start-%d@test\r\n", i)) {
			t.Errorf("%q: reply lacks the request's Call-ID: %q", tc.to, reply)
		}
	}
}
