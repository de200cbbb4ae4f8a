package shard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// freePort returns a port free for both UDP and TCP on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// responder answers OPTIONS with 200 OK and counts what each shard saw.
type responder struct {
	mu      sync.Mutex
	byShard map[int]int
	wrong   atomic.Int32 // messages delivered to a shard that does not own their Call-ID
}

func (r *responder) handler(sh *Shard) Handler {
	var out []byte
	return Handler{Message: func(sh *Shard, m *parser.Message, from transport.Peer) {
		if sh.srv.OwnerOf(m.CallID()) != sh.Index() {
			r.wrong.Add(1)
		}
		r.mu.Lock()
		r.byShard[sh.Index()]++
		r.mu.Unlock()
		if m.IsRequest() && m.Method() == parser.MethodOptions {
			var via parser.Via
			if m.TopVia(&via) != nil {
				return
			}
			out = parser.AppendResponse(out[:0], m, 200, "OK", []byte("srv1"))
			out = parser.AppendBody(out, "", nil)
			sh.Send(ResponseTarget(&via, from), out)
		}
	}}
}

func startServer(t *testing.T, shards int, cfg Config) (*Server, *responder, int) {
	t.Helper()
	port := freePort(t)
	cfg.Listen = listens(fmt.Sprintf("udp://127.0.0.1:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port))
	cfg.Shards = shards
	r := &responder{byShard: make(map[int]int)}
	return runServer(t, cfg, r.handler, nil), r, port
}

// runServer starts the server New makes of its arguments; it shuts down
// when the test ends.
func runServer(t *testing.T, cfg Config, newHandler func(*Shard) Handler, set *metrics.Set) *Server {
	t.Helper()
	s, err := New(cfg, newHandler, nil, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx, nil); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// dialUDP dials a server's UDP port on loopback; the socket closes when the
// test ends.
func dialUDP(t *testing.T, port int) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func options(callID, branch, transport string, port int) string {
	return "OPTIONS sip:srv@127.0.0.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/" + transport + " 127.0.0.1:" + fmt.Sprint(port) + ";branch=z9hG4bK" + branch + ";rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:srv@127.0.0.1>\r\n" +
		"Call-ID: " + callID + "\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
}

func readUDP(t *testing.T, c *net.UDPConn) string {
	t.Helper()
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return string(buf[:n])
}

func TestUDPOptionsAcrossShards(t *testing.T) {
	testtier.RequiresSockets(t)
	s, r, port := startServer(t, 2, Config{})
	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	for i := 0; i < 40; i++ {
		callID := fmt.Sprintf("call-%d@test", i)
		if _, err := c.Write([]byte(options(callID, fmt.Sprint(i), "UDP", local))); err != nil {
			t.Fatal(err)
		}
		reply := readUDP(t, c)
		if !strings.HasPrefix(reply, "SIP/2.0 200 OK\r\n") || !strings.Contains(reply, "Call-ID: "+callID+"\r\n") {
			t.Fatalf("reply %d: %q", i, reply)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byShard) != 2 {
		t.Errorf("messages reached shards %v, want both", r.byShard)
	}
	if r.wrong.Load() != 0 {
		t.Errorf("%d messages handled off their owner shard", r.wrong.Load())
	}
	var handoffs uint64
	for _, sh := range s.Shards() {
		handoffs += sh.m.handoffsOut.Get()
	}
	// Datagrams from one socket land on one loop; about half the Call-IDs
	// belong to the other shard.
	if handoffs == 0 {
		t.Error("no message was handed over between shards")
	}
}

func TestUDPMalformedRequestAnswered400(t *testing.T) {
	testtier.RequiresSockets(t)
	s, _, port := startServer(t, 2, Config{})
	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	bad := strings.Replace(options("bad@test", "x1", "UDP", local), "CSeq: 1 OPTIONS", "CSeq: 1 INVITE", 1)
	c.Write([]byte(bad))
	reply := readUDP(t, c)
	if !strings.HasPrefix(reply, "SIP/2.0 400 CSeq Method Mismatch\r\n") {
		t.Fatalf("reply: %q", reply)
	}
	// A To tag, as on every response but a 100 (RFC 3261 8.2.6.2).
	var m parser.Message
	var to parser.Address
	if m.Parse([]byte(reply)) != nil || m.To(&to) != nil || len(to.Tag) == 0 {
		t.Fatalf("400 without a To tag: %q", reply)
	}
	// A malformed response is dropped silently, and counted.
	c.Write([]byte("SIP/2.0 2000 OK\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKx\r\n\r\n"))
	// An oversize datagram is dropped and counted.
	c.Write([]byte(strings.Repeat("x", parser.DefaultLimits.MaxMessageSize+10)))
	c.Write([]byte(options("after@test", "x2", "UDP", local)))
	if reply := readUDP(t, c); !strings.HasPrefix(reply, "SIP/2.0 200 OK") {
		t.Fatalf("reply after junk: %q", reply)
	}
	var dropped, oversize, errs400 uint64
	for _, sh := range s.Shards() {
		dropped += sh.m.droppedResp.Get()
		oversize += sh.m.oversize.Get()
		errs400 += sh.m.parseErrors[0].Get()
	}
	if dropped != 1 || oversize != 1 || errs400 != 1 {
		t.Errorf("dropped responses %d, oversize %d, 400s %d; want 1 each", dropped, oversize, errs400)
	}
}

func TestTCPOptionsKeepAliveAndFraming(t *testing.T) {
	testtier.RequiresSockets(t)
	s, _, port := startServer(t, 2, Config{})
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	readMsg := func() string {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var sb strings.Builder
		cl := 0
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("read: %v (so far %q)", err, sb.String())
			}
			sb.WriteString(line)
			if strings.HasPrefix(line, "Content-Length: ") {
				fmt.Sscan(strings.TrimSpace(line[16:]), &cl)
			}
			if line == "\r\n" {
				body := make([]byte, cl)
				io.ReadFull(rd, body)
				return sb.String() + string(body)
			}
		}
	}
	// Two requests in one write, for Call-IDs of both shards: replies come
	// back on this connection whichever shard answers.
	c.Write([]byte(options("t1@test", "t1", "TCP", 5060) + options("t2@test", "t2", "TCP", 5060)))
	got := readMsg() + readMsg()
	if !strings.Contains(got, "Call-ID: t1@test") || !strings.Contains(got, "Call-ID: t2@test") {
		t.Fatalf("replies: %q", got)
	}
	// RFC 5626 keep-alive: CRLFCRLF ping, CRLF pong.
	c.Write([]byte("\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	pong := make([]byte, 2)
	if _, err := io.ReadFull(rd, pong); err != nil || string(pong) != "\r\n" {
		t.Fatalf("pong %q, %v", pong, err)
	}
	// A message split over writes is framed once complete.
	msg := options("t3@test", "t3", "TCP", 5060)
	c.Write([]byte(msg[:50]))
	time.Sleep(50 * time.Millisecond)
	c.Write([]byte(msg[50:]))
	if r := readMsg(); !strings.Contains(r, "Call-ID: t3@test") {
		t.Fatalf("split message reply: %q", r)
	}
	// A framing error (no Content-Length) closes the connection.
	c.Write([]byte(strings.Replace(options("t4@test", "t4", "TCP", 5060), "Content-Length: 0\r\n", "", 1)))
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("connection not closed after a framing error: %v", err)
	}
	var framing uint64
	for _, sh := range s.Shards() {
		framing += sh.m.framingErrors.Get()
	}
	if framing != 1 {
		t.Errorf("framing errors %d, want 1", framing)
	}
}

func TestTCPConnectionCapPerIP(t *testing.T) {
	testtier.RequiresSockets(t)
	_, _, port := startServer(t, 1, Config{TCP: TCPConfig{MaxConnsPerIP: 2}})
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	c := conns[2]
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection from one IP not closed: %v", err)
	}
}

// A connection id holds its shard in 8 bits and a peer its listener in 8:
// more shards or listeners than that would route bytes to the wrong loop.
func TestNewRefusesWhatIDsCannotHold(t *testing.T) {
	h := func(*Shard) Handler { return Handler{} }
	if _, err := New(Config{Listen: listens("udp://127.0.0.1:5999"), Shards: 256, HandoffQueue: 1}, h, nil, nil); err != nil {
		t.Fatalf("256 shards: %v", err)
	}
	if _, err := New(Config{Listen: listens("udp://127.0.0.1:5999"), Shards: 257, HandoffQueue: 1}, h, nil, nil); err == nil || !strings.Contains(err.Error(), "shards") {
		t.Fatalf("257 shards: %v", err)
	}
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprintf("udp://127.0.0.1:%d", 6000+i)
	}
	if _, err := New(Config{Listen: listens(many...), Shards: 1}, h, nil, nil); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("257 listeners: %v", err)
	}
}

// A listen address the runtime cannot bind is refused by New, naming it:
// port 0 (every loop binds the port with SO_REUSEPORT), no address, a
// transport the runtime does not serve.
func TestNewRefusesAnUnservableListen(t *testing.T) {
	h := func(*Shard) Handler { return Handler{} }
	good := listens("udp://127.0.0.1:5999")[0]
	for _, l := range []transport.Listen{
		{},
		{Transport: transport.UDP, Addr: netip.AddrPortFrom(good.Addr.Addr(), 0)},
		{Transport: transport.TCP, Addr: netip.AddrPortFrom(netip.Addr{}, 5999)},
		{Transport: transport.TLS, Addr: good.Addr},
	} {
		if _, err := New(Config{Listen: []transport.Listen{good, l}, Shards: 1}, h, nil, nil); err == nil || !strings.Contains(err.Error(), "listen[1]") {
			t.Errorf("%v: %v, want an error naming listen[1]", l, err)
		}
	}
}

func TestMintCallIDHashesToShard(t *testing.T) {
	s, err := New(Config{Listen: listens("udp://127.0.0.1:5999"), Shards: 4}, func(*Shard) Handler { return Handler{} }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sh := range s.Shards() {
		for i := 0; i < 100; i++ {
			id := sh.MintCallID(nil, "@sipedge")
			if s.OwnerOf(id) != sh.Index() || !strings.HasSuffix(string(id), "@sipedge") || seen[string(id)] {
				t.Fatalf("shard %d minted %q (owner %d, repeat %v)", sh.Index(), id, s.OwnerOf(id), seen[string(id)])
			}
			seen[string(id)] = true
		}
	}
}

func TestFloodBanExemptsTrunks(t *testing.T) {
	testtier.RequiresSockets(t)
	exempt := netip.MustParseAddr("127.0.0.2")
	s, r, port := startServer(t, 1, Config{Flood: FloodConfig{PerSecond: 5, Ban: time.Minute,
		Exempt: func(a netip.Addr) bool { return a == exempt }}})
	send := func(local string, n int) int {
		t.Helper()
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(local)}, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		lp := c.LocalAddr().(*net.UDPAddr).Port
		replies := 0
		for i := 0; i < n; i++ {
			c.Write([]byte(options(fmt.Sprintf("flood-%s-%d", local, i), fmt.Sprint(i), "UDP", lp)))
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := c.Read(make([]byte, 4096)); err == nil {
				replies++
			}
		}
		return replies
	}
	if got := send("127.0.0.3", 10); got != 5 {
		t.Fatalf("a flooding source got %d replies, want 5 before its ban", got)
	}
	if got := send("127.0.0.3", 2); got != 0 {
		t.Fatalf("a banned source got %d replies", got)
	}
	if got := send("127.0.0.2", 10); got != 10 {
		t.Fatalf("an exempt source (a trunk) got %d replies of 10", got)
	}
	_ = r
	if s.Shards()[0].m.floodBans.Get() != 1 {
		t.Fatalf("bans %d", s.Shards()[0].m.floodBans.Get())
	}
}

// TestIPv6Listeners: an IPv6 UDP and TCP listener answer over [::1], and a
// UDP reply leaves from the listening port.
func TestIPv6Listeners(t *testing.T) {
	testtier.RequiresSockets(t)
	l, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		// Said on stderr too, so that a run without -v does not hide it.
		fmt.Fprintf(os.Stderr, "SKIP TestIPv6Listeners: no IPv6 loopback: %v\n", err)
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	r := &responder{byShard: make(map[int]int)}
	runServer(t, Config{Shards: 2, Listen: listens(fmt.Sprintf("udp://[::1]:%d", port), fmt.Sprintf("tcp://[::1]:%d", port))},
		r.handler, nil)
	c, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: net.IPv6loopback, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.UDPAddr).Port
	req := strings.Replace(options("v6@test", "v6", "UDP", local), "127.0.0.1:"+fmt.Sprint(local), fmt.Sprintf("[::1]:%d", local), 1)
	c.Write([]byte(req))
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, from, err := c.ReadFromUDP(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "SIP/2.0 200 OK") {
		t.Fatalf("reply %q, %v", buf[:n], err)
	}
	if from.Port != port {
		t.Fatalf("the reply came from port %d, not the listening port %d", from.Port, port)
	}
	tc, err := net.Dial("tcp6", fmt.Sprintf("[::1]:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.Write([]byte(options("v6t@test", "v6t", "TCP", 5060)))
	tc.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := tc.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "SIP/2.0 200 OK") {
		t.Fatalf("TCP reply %q, %v", buf[:n], err)
	}
}

// A datagram to a peer of the other address family than the listener it
// names (a B-leg names listener 0) leaves from a listener of its family.
func TestUDPSendPicksFamily(t *testing.T) {
	testtier.RequiresSockets(t)
	v6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		fmt.Fprintf(os.Stderr, "SKIP TestUDPSendPicksFamily: no IPv6 loopback: %v\n", err)
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer v6.Close()
	v4, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer v4.Close()
	port := freePort(t)
	s := runServer(t, Config{Shards: 1, Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port), fmt.Sprintf("udp://[::1]:%d", port))},
		func(*Shard) Handler { return Handler{} }, nil)
	sh := s.Shards()[0]
	for i, tc := range []struct {
		listener uint8
		to       *net.UDPConn
	}{{0, v6}, {1, v4}, {0, v4}, {1, v6}} {
		to := tc.to.LocalAddr().(*net.UDPAddr).AddrPort()
		to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
		msg := fmt.Sprintf("OPTIONS sip:x SIP/2.0\r\nX: %d\r\n\r\n", i)
		onShard(sh, func() {
			sh.Send(transport.Peer{Addr: to, Transport: transport.UDP, Conn: uint64(tc.listener)}, []byte(msg))
		})
		buf := make([]byte, 1024)
		tc.to.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := tc.to.ReadFromUDP(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Fatalf("send %d (listener %d to %v): got %q, %v; send errors %d", i, tc.listener, to, buf[:n], err, sh.m.sendErrors.Get())
		}
		if from.Port != port {
			t.Errorf("send %d left from port %d, not the listening port %d", i, from.Port, port)
		}
	}
}

// A second server on a port one already serves fails to start, naming the
// address: SO_REUSEPORT would otherwise let it bind too, and the kernel
// would split the port's traffic (dialogs included) between the two.
func TestStartRefusesAPortInUse(t *testing.T) {
	testtier.RequiresSockets(t)
	_, _, port := startServer(t, 1, Config{})
	for _, l := range []string{fmt.Sprintf("udp://127.0.0.1:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port)} {
		s, err := New(Config{Shards: 1, Listen: listens(l)}, func(*Shard) Handler { return Handler{} }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start()
		if err == nil {
			s.Shutdown(t.Context(), nil)
			t.Fatalf("a second server started on %s", l)
		}
		if !strings.Contains(err.Error(), "listen[0]") || !strings.Contains(err.Error(), l) {
			t.Errorf("%s: error %q does not name the address", l, err)
		}
	}
	// A free address still starts after a failed one.
	s, err := New(Config{Shards: 1, Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", freePort(t)))}, func(*Shard) Handler { return Handler{} }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	s.Shutdown(t.Context(), nil)
}

// listens parses listen addresses, as the configuration does.
func listens(addrs ...string) []transport.Listen {
	ls := make([]transport.Listen, len(addrs))
	for i, a := range addrs {
		l, err := transport.ParseListen(a)
		if err != nil {
			panic(err)
		}
		ls[i] = l
	}
	return ls
}
