package shard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/shard/timer"
	"github.com/sipedge/sipedge/transport"
)

// optionsBatch is n OPTIONS requests in one write, each to be answered.
func optionsBatch(n int) []byte {
	var b strings.Builder
	for i := range n {
		b.WriteString(options(fmt.Sprintf("batch-%d@test", i), fmt.Sprint(i), "TCP", 5060))
	}
	return []byte(b.String())
}

// onShard runs f on the shard's loop and waits for it.
func onShard(sh *Shard, f func()) {
	done := make(chan struct{})
	sh.Post(func() { f(); close(done) })
	<-done
}

// A peer that sends requests and never reads the answers is closed once
// MaxQueued bytes wait for it (past what the kernel holds), instead of
// growing the shard's memory without bound.
func TestTCPPeerThatDoesNotReadIsClosed(t *testing.T) {
	testtier.RequiresSockets(t)
	const maxQueued = 256 << 10
	s, _, port := startServer(t, 1, Config{TCP: TCPConfig{MaxQueued: maxQueued}})
	// A small receive buffer, and never read. Set before connecting: set
	// after, the window already offered is larger than the buffer, and the
	// kernel drops what the server sends into it and prunes the queue.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := optionsBatch(90)
	sh := s.Shards()[0]
	closed := false
	for sent := 0; sent < 64<<20 && !closed; sent += len(b) {
		// A server that stops reading never resumes: the long deadline only
		// delays that failure, and rides out a loaded machine.
		_ = c.SetWriteDeadline(time.Now().Add(15 * time.Second))
		if _, err := c.Write(b); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The server's view, to tell a server that stopped reading
				// from a kernel that stopped delivering.
				onShard(sh, func() {
					for id, tc := range sh.conns {
						if tc.c != nil {
							t.Logf("server: conn %v stalled=%v outbound=%d inbound=%d last read at %v, now %v",
								id, tc.stalled, tc.c.OutboundBuffered(), tc.c.InboundBuffered(), tc.lastRead, sh.Now())
						}
					}
				})
				t.Fatalf("the server stopped reading after %d bytes but kept the connection", sent)
			}
			closed = true // reset by the server
		}
		var queued int
		onShard(sh, func() {
			for _, tc := range sh.conns {
				if tc.c != nil {
					queued += tc.c.OutboundBuffered()
				}
			}
		})
		if queued > maxQueued {
			t.Fatalf("%d bytes queued for a peer that does not read, over MaxQueued %d", queued, maxQueued)
		}
	}
	if !closed {
		t.Fatal("the connection of a peer that never reads stayed open")
	}
	if n := sh.m.tcpStalled.Get(); n != 1 {
		t.Errorf("sipedge_tcp_stalled_total %d, want 1: one connection closed once", n)
	}
}

// The flood bound counts messages, not reads: a source packing 90 requests
// into each segment is banned like one sending them one by one.
func TestTCPFloodCountsMessages(t *testing.T) {
	testtier.RequiresSockets(t)
	s, r, port := startServer(t, 1, Config{Flood: FloodConfig{PerSecond: 200, Ban: time.Minute}})
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Read(make([]byte, 1<<20)) }() // drain a little; the ban closes it
	b := optionsBatch(90)
	for range 20 {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(b); err != nil {
			break // banned: the server closed the connection
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	r.mu.Lock()
	handled := r.byShard[0]
	r.mu.Unlock()
	if handled > 400 {
		t.Errorf("%d requests handled in about 0.4 s from a source bound to 200/s", handled)
	}
	if s.Shards()[0].m.floodBans.Get() == 0 {
		t.Error("the source was not banned")
	}
}

// An outbound dial the sweep gave up (no connection within
// FirstDataTimeout) stays given up when the kernel completes it later: the
// connection is closed at once and what was queued for it, counted lost, is
// not sent. It used to live outside the shard's tables, never swept nor
// reused, and sent a message the caller had moved past.
func TestTCPLateDialIsClosed(t *testing.T) {
	testtier.RequiresSockets(t)
	s, _, _ := startServer(t, 1, Config{TCP: TCPConfig{FirstDataTimeout: time.Second}})
	// A listener whose accept queue is full drops SYNs: the client
	// retransmits them at about 1 s and 3 s.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(os.NewFile(uintptr(fd), "full"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	for range 2 { // fill the accept queue
		c, err := net.DialTimeout("tcp", addr.String(), 300*time.Millisecond)
		if err != nil {
			break
		}
		defer c.Close()
	}
	sh := s.Shards()[0]
	onShard(sh, func() {
		sh.Send(transport.Peer{Addr: netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()), Transport: transport.TCP}, []byte("STALE\r\n"))
	})
	time.Sleep(2200 * time.Millisecond) // the sweep drops the dial between 1 s and 2 s
	var lost int
	onShard(sh, func() { lost = int(sh.m.sendErrors.Get()) })
	if lost != 1 {
		t.Fatalf("send errors %d after the dial timed out, want 1", lost)
	}
	got := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 100)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, _ := c.Read(buf)
				got <- string(buf[:n])
			}(c)
		}
	}()
	// The queued connections come first, then the late dial's, if the
	// kernel completes it (its SYN retransmitted at about 3 s).
	deadline := time.After(6 * time.Second)
	for {
		select {
		case g := <-got:
			if g == "STALE\r\n" {
				t.Fatal("a dial given up sent what it had queued")
			}
		case <-deadline:
			var conns, dials int
			onShard(sh, func() { conns, dials = len(sh.conns), len(sh.dials) })
			if conns != 0 || dials != 0 {
				t.Errorf("the shard tracks %d connections and %d dials, want none", conns, dials)
			}
			if g := sh.m.tcpConns.Get(); g != 0 {
				t.Errorf("the connection gauge reads %v, want 0", g)
			}
			return
		}
	}
}

// A message for a stream connection that is gone when its owner gets it
// from another shard goes on a new connection to the peer's address (RFC
// 3261 18.2.2: for a response, the sent-by port), as on the owner itself.
func TestTCPHandedOverToAClosedConnectionDials(t *testing.T) {
	testtier.RequiresSockets(t)
	s, _, _ := startServer(t, 2, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 100)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := c.Read(buf)
		got <- string(buf[:n])
	}()
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	gone := newConnID(0, 1<<20) // a connection of shard 0 that no longer exists
	from := s.Shards()[1]
	onShard(from, func() {
		from.Send(transport.Peer{Addr: netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()), Transport: transport.TCP, Conn: uint64(gone)}, []byte("SIP/2.0 200 OK\r\n"))
	})
	select {
	case g := <-got:
		if g != "SIP/2.0 200 OK\r\n" {
			t.Fatalf("the peer got %q", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message for a closed connection was dropped, not sent on a new one")
	}
}

// The per-source connection cap counts an IPv6 source by its /64: one host
// commonly holds the whole prefix.
func TestTCPSourceKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::"},
		{"2001:db8:1:3::1", "2001:db8:1:3::"},
	} {
		if got := sourceKey(netip.MustParseAddr(c.in)); got != netip.MustParseAddr(c.want) {
			t.Errorf("sourceKey(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// A datagram is answered from the UDP socket it came in on, also when a TCP
// listener on the same address and port comes first in the list.
func TestListenerOfMatchesTransport(t *testing.T) {
	testtier.RequiresSockets(t)
	port := freePort(t)
	s, err := New(Config{Listen: listens(fmt.Sprintf("tcp://127.0.0.1:%d", port), fmt.Sprintf("udp://127.0.0.1:%d", port))},
		(&responder{byShard: map[int]int{}}).handler, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.listenerOf(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); got != 1 {
		t.Errorf("UDP listener %d, want 1", got)
	}
	if got := s.listenerOf(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); got != 0 {
		t.Errorf("TCP listener %d, want 0", got)
	}
}

// A malformed request whose From holds a bare CR gets no stateless reply:
// the reply would copy the CR, a line end to some peers, forging a header
// at whatever address the datagram claims to come from. The same request
// without it is answered 400.
func TestNoReplyEchoesABareCR(t *testing.T) {
	testtier.RequiresSockets(t)
	_, _, port := startServer(t, 1, Config{})
	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	bad := strings.Replace(options("cr@test", "cr1", "UDP", local), "From: <sip:a@127.0.0.1>;tag=1\r\n",
		"From: <sip:a@127.0.0.1>;tag=1\rX-Injected: evil\r\n", 1)
	c.Write([]byte(bad))
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 4096)
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("a reply echoing the bare CR: %q", buf[:n])
	}
	plain := strings.Replace(options("nocr@test", "cr2", "UDP", local), "CSeq: 1 OPTIONS", "CSeq: 1 INVITE", 1)
	c.Write([]byte(plain))
	if reply := readUDP(t, c); !strings.HasPrefix(reply, "SIP/2.0 400 ") {
		t.Fatalf("reply: %q", reply)
	}
}

// A lone CRLF (a keep-alive some peers send, RFC 3261 7.5: CRLFs before a
// start line are ignored) is not the start of a message: the whole-message
// timeout must not close the connection for it.
func TestTCPLoneCRLFNotTimedOut(t *testing.T) {
	testtier.RequiresSockets(t)
	s, _, port := startServer(t, 1, Config{TCP: TCPConfig{MessageTimeout: time.Second}})
	sh := s.Shards()[0]
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("\r\n"))
	for read := false; !read; {
		onShard(sh, func() {
			for _, tc := range sh.conns {
				read = read || tc.gotData
			}
		})
	}
	onShard(sh, func() { sh.sweepTCP(sh.Now() + 2*time.Second + sweepEvery) })
	if n := sh.m.tcpTimeouts.Get(); n != 0 {
		t.Fatalf("a connection that sent a lone CRLF was timed out (%d)", n)
	}
	c.Write([]byte(options("crlf@test", "c1", "TCP", 5060)))
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 4096)
	if n, err := c.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "SIP/2.0 200 OK") {
		t.Fatalf("reply %q, %v", buf[:n], err)
	}
	// The start of a message that never ends is timed out.
	c.Write([]byte("OPTIONS sip:srv@127.0.0.1 SIP/2.0\r\n"))
	for started := false; !started; {
		onShard(sh, func() {
			for _, tc := range sh.conns {
				started = started || tc.partial >= 0
			}
		})
	}
	onShard(sh, func() { sh.sweepTCP(sh.Now() + 4*time.Second + sweepEvery) })
	if n := sh.m.tcpTimeouts.Get(); n != 1 {
		t.Fatalf("a half-sent message was not timed out (%d)", n)
	}
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("the connection was not closed: %v", err)
	}
}

// A timer a handler starts outside a message (here SendFailed, as the
// engine's failover does when a carrier refuses the connection) is
// published to the ticker: a shard with it pending is woken every tick, not
// once a second.
func TestTimerStartedOnSendFailedKeepsShardAwake(t *testing.T) {
	testtier.RequiresSockets(t)
	port := freePort(t)
	failed := make(chan struct{}, 1)
	s := runServer(t, Config{Shards: 1, Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port))}, func(*Shard) Handler {
		return Handler{SendFailed: func(sh *Shard, _ transport.Peer) {
			sh.Timers().StartAt(sh.Now()+time.Hour, timer.Payload{})
			failed <- struct{}{}
		}}
	}, nil)
	closed := freePort(t) // nothing listens: the dial is refused
	sh := s.Shards()[0]
	onShard(sh, func() {
		sh.Send(transport.Peer{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(closed)), Transport: transport.TCP}, []byte("X\r\n"))
	})
	<-failed
	var pending int64
	onShard(sh, func() { pending = sh.pending.Load() })
	if pending != 1 {
		t.Fatalf("pending timers published %d, want 1", pending)
	}
}

// The flood bound counts an IPv6 source by its /64, as the connection cap
// does: a host holds its /64 whole and could otherwise take a fresh
// budget, and escape its ban, with every address. Exemption is by the
// exact address.
func TestFloodCountsIPv6By64(t *testing.T) {
	carrier := netip.MustParseAddr("2001:db8::ff")
	s, err := New(Config{Listen: listens("udp://127.0.0.1:5999"), Shards: 1,
		Flood: FloodConfig{PerSecond: 5, Ban: time.Minute, Exempt: func(a netip.Addr) bool { return a == carrier }}},
		func(*Shard) Handler { return Handler{} }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sh := s.Shards()[0]
	now := time.Hour
	dropped := 0
	for i := range 20 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)})
		if sh.floodDrop(a, now) {
			dropped++
		}
	}
	if dropped != 15 {
		t.Fatalf("%d of 20 messages from 20 addresses of one /64 dropped, want 15", dropped)
	}
	if sh.floodDrop(carrier, now) {
		t.Fatal("a carrier in the banned /64 was dropped")
	}
	if sh.floodDrop(netip.MustParseAddr("2001:db8:0:1::1"), now) {
		t.Fatal("another /64 was dropped")
	}
}

// An outbound TCP connection leaves from the listen address, as UDP does
// (the listening socket): it is the address sipedge advertises in its Via
// and Contact, and the one carriers allow-list; the kernel's choice of
// source (the route's) may be another of the host's addresses.
func TestTCPDialFromListenAddress(t *testing.T) {
	testtier.RequiresSockets(t)
	port := freePort(t)
	s := runServer(t, Config{Shards: 1, Listen: listens(fmt.Sprintf("tcp://127.0.0.2:%d", port))},
		func(*Shard) Handler { return Handler{} }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sh := s.Shards()[0]
	to := ln.Addr().(*net.TCPAddr).AddrPort()
	onShard(sh, func() {
		sh.Send(transport.Peer{Addr: netip.AddrPortFrom(to.Addr().Unmap(), to.Port()), Transport: transport.TCP}, []byte("X\r\n"))
	})
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(3 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if from := c.RemoteAddr().(*net.TCPAddr).IP.String(); from != "127.0.0.2" {
		t.Fatalf("the connection came from %s, not the listen address 127.0.0.2", from)
	}
	buf := make([]byte, 8)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "X\r\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

// dialFrom never binds a connection to a remote peer to a loopback listen
// address, which could not reach it.
func TestDialFrom(t *testing.T) {
	s, err := New(Config{Shards: 1, Listen: listens("tcp://127.0.0.1:5999", "udp://192.0.2.7:5999", "tcp://[2001:db8::7]:5999")},
		func(*Shard) Handler { return Handler{} }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for peer, want := range map[string]string{"127.0.0.9": "127.0.0.1", "198.51.100.1": "192.0.2.7",
		"2001:db8::9": "2001:db8::7", "::1": "invalid IP"} {
		if got := s.dialFrom(netip.MustParseAddr(peer), transport.TCP).String(); got != want {
			t.Errorf("to %s from %s, want %s", peer, got, want)
		}
	}
}
