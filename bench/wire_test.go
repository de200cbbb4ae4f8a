package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/embed"
)

// The wire rig runs sipedge as a program embeds it (cmd/sipedge/embed), on
// loopback, between the load peers (wirepeer_test.go): calls from a trunk
// routed by a static table to one carrier, over UDP or TCP, on the shards
// asked for. Everything sipedge does for a call on the wire runs: gnet's
// loops, the shards, the parser, transactions, the B2BUA engine, the CDR.

// The caller's requests over the wire: the rig's, with the Via's transport
// the socket's (a stream's responses go on its connection, RFC 3261
// 18.2.2).
var wireTmpl = map[bool][3]template{
	false: {inviteTmpl, ackTmpl, byeTmpl},
	true:  {viaTCP(inviteTmpl), viaTCP(ackTmpl), viaTCP(byeTmpl)},
}

func viaTCP(t template) template {
	parts := make([]string, len(t.parts))
	for i, p := range t.parts {
		parts[i] = strings.ReplaceAll(p, "SIP/2.0/UDP", "SIP/2.0/TCP")
	}
	return template{parts: parts, holes: t.holes}
}

func wireInvite(tcp bool) *template { t := wireTmpl[tcp]; return &t[0] }
func wireAck(tcp bool) *template    { t := wireTmpl[tcp]; return &t[1] }
func wireBye(tcp bool) *template    { t := wireTmpl[tcp]; return &t[2] }

// wireRig is sipedge with its peers.
type wireRig struct {
	tb    testing.TB
	srv   *embed.Server
	peers *loadPeers
	cdr   string
	logs  *syncBuffer
	once  sync.Once
}

// startWire starts sipedge with shards event loops, the carrier reached
// over TCP when tcp, and the peers' goroutine; everything stops at the
// test's end.
func startWire(tb testing.TB, tcp bool, shards int) *wireRig {
	tb.Helper()
	// The peers' thread blocks in epoll_wait holding a P, as a process of
	// their own would hold a core: they get a P of their own, so that
	// sipedge's goroutines see the Ps they would see alone. Without it,
	// every P sits in a system call at once and the runtime's sysmon wakes
	// every 20 us to take one back, CPU that would count as sipedge's.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + 1)
	tb.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	port := freeWirePort(tb)
	sip := netip.AddrPortFrom(netip.AddrFrom4(loopback), uint16(port))
	peers, err := newLoadPeers(tcp, sip)
	if err != nil {
		tb.Fatal(err)
	}
	r := &wireRig{tb: tb, peers: peers, cdr: filepath.Join(tb.TempDir(), "cdr.jsonl"), logs: &syncBuffer{}}
	transport, uri := "udp", "sip:"+peers.carrierAddr().String()
	if tcp {
		transport, uri = "tcp", uri+";transport=tcp"
	}
	yaml := fmt.Sprintf(`
listen: ["udp://%[1]s", "tcp://%[1]s"]
shards: %[2]d
sip: { socket_receive_buffer_kb: %[7]d }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: caller, trunk_group: callers, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - name: carrier-a
      transport: %[3]s
      destinations: [{ uri: %[4]q, address: %[5]q }]
lcr:
  static_routes:
    - prefix: ""
      routes: [{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD }]
cdr: { file: %[6]q }
`, sip, shards, transport, uri, peers.carrierAddr(), r.cdr, receiveBufferKB())
	cfg, err := embed.ParseConfig([]byte(yaml))
	if err != nil {
		peers.close()
		tb.Fatalf("config: %v\n%s", err, yaml)
	}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if r.srv, err = embed.Start(cfg, embed.Options{Logger: log}); err != nil {
		peers.close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		r.peers.stop()
		if err := r.shutdown(); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if tb.Failed() {
			tb.Logf("sipedge's log:\n%s", r.logs.String())
		}
	})
	if err := peers.connect(); err != nil {
		tb.Fatal(err)
	}
	go peers.run()
	<-peers.ready
	return r
}

func (r *wireRig) shutdown() (err error) {
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = r.srv.Shutdown(ctx)
	})
	return err
}

// calls places n calls with at most window in flight and waits until every
// one ended.
func (r *wireRig) calls(n uint64, window int) {
	r.tb.Helper()
	if err := r.peers.do(loadCmd{calls: n, window: window}); err != nil {
		r.tb.Fatal(err)
	}
}

// paced places n calls at rate a second and waits until every one ended.
func (r *wireRig) paced(n uint64, rate float64) {
	r.tb.Helper()
	if err := r.peers.do(loadCmd{calls: n, rate: rate}); err != nil {
		r.tb.Fatal(err)
	}
}

// cdrs stops sipedge (flushing the CDRs) and counts the records and those
// of calls answered 200 and hung up by the caller.
func (r *wireRig) cdrs() (all, answered int) {
	r.tb.Helper()
	r.peers.stop()
	if err := r.shutdown(); err != nil {
		r.tb.Fatal(err)
	}
	f, err := os.Open(r.cdr)
	if err != nil {
		r.tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		all++
		if bytes.Contains(sc.Bytes(), []byte(`"final_code":200,`)) && bytes.Contains(sc.Bytes(), []byte(`"hangup_side":"caller"`)) {
			answered++
		}
	}
	return all, answered
}

// receiveBufferKB is sipedge's default socket receive buffer, or what the
// kernel allows (net.core.rmem_max) when that is less, so that sipedge
// has no cause to warn.
func receiveBufferKB() int {
	const def = 4096
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return def
	}
	return min(def, n>>10)
}

// freeWirePort is a port free for UDP and TCP on 127.0.0.1, below the
// ephemeral range so that nothing bound to port 0 takes it first.
func freeWirePort(tb testing.TB) int {
	for range 100 {
		port := 10000 + rand.IntN(20000)
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			continue
		}
		t, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		u.Close()
		if err == nil {
			t.Close()
			return port
		}
	}
	tb.Fatal("no free port")
	return 0
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWireCalls proves BenchmarkWireCallFlow's peers make real calls
// through sipedge: over UDP and TCP, on one shard and two, every call is
// answered and hung up with each message of its flow exactly once (the
// peers count them: a retransmission or a loss fails), in a window and
// paced, and sipedge writes a CDR of an answered call for each.
func TestWireCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("wire calls: opens sockets")
	}
	for _, tcp := range []bool{false, true} {
		for _, shards := range []int{1, 2} {
			t.Run(fmt.Sprintf("tcp=%v/shards=%d", tcp, shards), func(t *testing.T) {
				r := startWire(t, tcp, shards)
				r.calls(300, 16)
				r.calls(1, 1)
				r.paced(100, 500)
				// The carrier's 200 to the last BYE may still be on its way.
				deadline := time.Now().Add(5 * time.Second)
				for r.srv.LiveCalls() != 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := r.srv.LiveCalls(); n != 0 {
					t.Errorf("%d live calls after every call ended", n)
				}
				all, answered := r.cdrs()
				if all != 401 || answered != 401 {
					t.Errorf("%d CDRs, %d of answered calls hung up by the caller; want 401", all, answered)
				}
				if logs := r.logs.String(); logs != "" {
					t.Errorf("sipedge logged warnings:\n%s", logs)
				}
			})
		}
	}
}
