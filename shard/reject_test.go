package shard

import (
	"net"
	"strings"
	"testing"
)

// A malformed ACK gets no reply: an ACK is never answered (RFC 3261 17.1.1.3:
// the ACK to a non-2xx is part of the INVITE transaction; the ACK to a 2xx is
// a transaction of its own that has no response, 13.2.2.4).
func TestUDPMalformedACKNotAnswered(t *testing.T) {
	s, _, port := startServer(t, 1, Config{})
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
