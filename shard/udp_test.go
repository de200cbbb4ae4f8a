package shard

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sys/unix"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/transport"
)

func TestSockaddrRoundTrip(t *testing.T) {
	f := func(ap string, v4 bool, wantLen uint32, want string) {
		t.Helper()
		var b [sockaddrLen]byte
		n := encodeSockaddr(&b, netip.MustParseAddrPort(ap), v4)
		if n != wantLen {
			t.Fatalf("%s: length %d, want %d", ap, n, wantLen)
		}
		got, ok := decodeSockaddr(b[:n])
		if !ok || got.String() != want {
			t.Fatalf("%s: decoded %v %v, want %s", ap, got, ok, want)
		}
	}
	f("192.0.2.1:5060", true, unix.SizeofSockaddrInet4, "192.0.2.1:5060")
	f("[::ffff:192.0.2.1]:5061", true, unix.SizeofSockaddrInet4, "192.0.2.1:5061")
	f("[2001:db8::1]:65535", false, unix.SizeofSockaddrInet6, "[2001:db8::1]:65535")
	f("[::ffff:192.0.2.1]:5062", false, unix.SizeofSockaddrInet6, "192.0.2.1:5062") // unmapped, as addrPortOf does

	if _, ok := decodeSockaddr([]byte{1}); ok {
		t.Fatal("a truncated address decoded")
	}
	var unixAddr [sockaddrLen]byte
	unixAddr[0] = unix.AF_UNIX
	if _, ok := decodeSockaddr(unixAddr[:]); ok {
		t.Fatal("an AF_UNIX address decoded")
	}
}

// A burst of datagrams is read in batches and answered in batches: every
// one answered, in order, each from the listening port.
func TestUDPBurst(t *testing.T) {
	testtier.RequiresSockets(t)
	const burst = 3*udpBatch + 5
	_, r, port := startServer(t, 1, Config{})
	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	for i := range burst {
		if _, err := c.Write([]byte(options(fmt.Sprintf("burst-%d", i), strconv.Itoa(i), "UDP", local))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range burst {
		reply := readUDP(t, c)
		if !strings.HasPrefix(reply, "SIP/2.0 200 OK") || !strings.Contains(reply, fmt.Sprintf("Call-ID: burst-%d\r\n", i)) {
			t.Fatalf("reply %d:\n%s", i, reply)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byShard[0] != burst {
		t.Fatalf("the shard got %d messages, want %d", r.byShard[0], burst)
	}
}

// A datagram the kernel refuses is counted and dropped; those queued with
// it still leave.
func TestUDPFlushSkipsRefused(t *testing.T) {
	testtier.RequiresSockets(t)
	set := metrics.NewSet()
	port := freePort(t)
	s := runServer(t, Config{Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port)), Shards: 1},
		func(*Shard) Handler { return Handler{} }, set)
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	to := sink.LocalAddr().(*net.UDPAddr).AddrPort()
	refused := netip.AddrPortFrom(to.Addr(), 0) // sendto refuses port 0 (EINVAL)
	sh := s.Shards()[0]
	done := make(chan struct{})
	sh.Post(func() {
		sh.Send(transport.Peer{Addr: to, Transport: transport.UDP}, []byte("one"))
		sh.Send(transport.Peer{Addr: refused, Transport: transport.UDP}, []byte("lost"))
		sh.Send(transport.Peer{Addr: to, Transport: transport.UDP}, []byte("two"))
		close(done)
	})
	<-done
	buf := make([]byte, 64)
	for _, want := range []string{"one", "two"} {
		sink.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, err := sink.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("got %q, %v; want %q", buf[:n], err, want)
		}
	}
	var b bytes.Buffer
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), `sipedge_transport_send_errors_total{shard="0"} 1`) {
		t.Fatalf("the refused datagram is not counted:\n%s", b.String())
	}
}
