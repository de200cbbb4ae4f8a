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
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/internal/testtier"
)

// The wire rig runs sipedge as a program embeds it (cmd/sipedge/embed), on
// loopback, between the load peers (wirepeer_test.go): calls from a trunk
// routed by a static table to one carrier, over UDP or TCP, on the shards
// asked for. Everything sipedge does for a call on the wire runs: gnet's
// loops, the shards, the parser, transactions, the B2BUA engine, the CDR.

// The caller's requests over the wire: the rig's, with the Via's transport
// the socket's (a stream's responses go on its connection, RFC 3261
// 18.2.2) and the call number in 12 digits, so that every call's messages
// are as long as the last's: sipedge's buffers, which keep their size from
// call to call, then reach theirs in the warm-up, as they do in service
// once they have held the longest messages.
var (
	wireUDP = wireTemplates("UDP")
	wireTCP = wireTemplates("TCP")
)

func wireTemplates(transport string) [3]enginerig.Template {
	var w [3]enginerig.Template
	for i, t := range [...]enginerig.Template{inviteTmpl, ackTmpl, byeTmpl} {
		w[i] = t.Rewrite("SIP/2.0/UDP", "SIP/2.0/"+transport, true)
	}
	return w
}

func wireTmpls(tcp bool) *[3]enginerig.Template {
	if tcp {
		return &wireTCP
	}
	return &wireUDP
}

func wireInvite(tcp bool) *enginerig.Template { return &wireTmpls(tcp)[0] }
func wireAck(tcp bool) *enginerig.Template    { return &wireTmpls(tcp)[1] }
func wireBye(tcp bool) *enginerig.Template    { return &wireTmpls(tcp)[2] }

// wireOptions shape a rig.
type wireOptions struct {
	tcp    bool // the caller and the carrier on TCP
	shards int
	// loopbackT1 runs sipedge with T1 100 ms rather than 500 (RFC 3261
	// 17.1.1.1 lets a closed network that knows its round trip use less;
	// loopback's is microseconds): transactions then end 6.4 s after
	// their call, not 32 s, so that a warm-up of that long brings the
	// transaction tables to the size they keep, and what is measured
	// after it is the steady state, not their growth. The tables' budget
	// (sip.max_txn_memory_mb) is raised so that it never cuts in.
	loopbackT1 bool
}

// wireRig is sipedge with its peers.
type wireRig struct {
	srv     *embed.Server
	peers   *loadPeers
	dir     string // sipedge's CDR file is there
	cdr     string
	logs    *syncBuffer
	down    sync.Once
	downErr error
}

// startWire starts sipedge and the peers' goroutine. stop stops them.
// Whatever places calls should run under peersP.
func startWire(tb testing.TB, o wireOptions) *wireRig {
	tb.Helper()
	r := &wireRig{logs: &syncBuffer{}}
	fail := func(format string, args ...any) {
		tb.Helper()
		r.stop(tb)
		tb.Fatalf(format, args...)
	}
	var err error
	if r.dir, err = os.MkdirTemp("", "sipedge-wire-"); err != nil {
		fail("%v", err)
	}
	r.cdr = filepath.Join(r.dir, "cdr.jsonl")
	sip := netip.AddrPortFrom(netip.AddrFrom4(loopback), uint16(freeWirePort(tb)))
	if r.peers, err = newLoadPeers(o.tcp, sip); err != nil {
		fail("%v", err)
	}
	transport, uri := "udp", "sip:"+r.peers.carrierAddr().String()
	if o.tcp {
		transport, uri = "tcp", uri+";transport=tcp"
	}
	timers := ""
	if o.loopbackT1 {
		timers += ", t1_ms: 100, max_txn_memory_mb: 4096"
	}
	yaml := fmt.Sprintf(`
listen: ["udp://%[1]s", "tcp://%[1]s"]
shards: %[2]d
sip: { socket_receive_buffer_kb: %[7]d%[8]s }
admin: { listen: "127.0.0.1:0" }
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
`, sip, o.shards, transport, uri, r.peers.carrierAddr(), r.cdr, receiveBufferKB(), timers)
	cfg, err := embed.ParseConfig([]byte(yaml))
	if err != nil {
		fail("config: %v\n%s", err, yaml)
	}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if r.srv, err = embed.Start(cfg, embed.Options{Logger: log}); err != nil {
		fail("%v", err)
	}
	if err := r.peers.connect(); err != nil {
		fail("%v", err)
	}
	go r.peers.run()
	<-r.peers.ready
	return r
}

// stop stops the peers and sipedge (flushing the CDRs), once; sipedge's
// log is shown when tb, if not nil, failed.
func (r *wireRig) stop(tb testing.TB) error {
	r.down.Do(func() {
		if r.peers != nil {
			r.peers.stop()
		}
		if r.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r.downErr = r.srv.Shutdown(ctx)
		}
		if tb != nil && tb.Failed() {
			tb.Logf("sipedge's log:\n%s", r.logs.String())
		}
	})
	return r.downErr
}

// peersP gives the peers a P of their own until the returned func is
// called. Their thread blocks in epoll_wait holding a P, as a process of
// their own would hold a core; with a P more, sipedge's goroutines see
// the Ps they would see alone. Without it every P can sit in a system
// call at once, and the runtime's sysmon then wakes every 20 us to take
// one back: CPU and wake-ups that would count as sipedge's. (A benchmark
// run sets GOMAXPROCS itself before each run: call it in each.)
func peersP() (restore func()) {
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + 1)
	return func() { runtime.GOMAXPROCS(procs) }
}

// remove deletes the rig's files, once stopped.
func (r *wireRig) remove() {
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

// calls places n calls with at most window in flight and waits until every
// one ended; it returns the messages that came more than once.
func (r *wireRig) calls(tb testing.TB, n uint64, window int) uint64 {
	tb.Helper()
	return r.result(tb, r.peers.do(loadCmd{calls: n, window: window}))
}

// paced places n calls at rate a second and waits until every one ended;
// it returns the messages that came more than once.
func (r *wireRig) paced(tb testing.TB, n uint64, rate float64) uint64 {
	tb.Helper()
	return r.result(tb, r.peers.do(loadCmd{calls: n, rate: rate}))
}

func (r *wireRig) result(tb testing.TB, res loadResult) uint64 {
	tb.Helper()
	if res.err != nil {
		tb.Fatalf("%v\nsipedge's log:\n%s", res.err, r.logs.String())
	}
	return res.dups
}

// warm places calls for d, harder than load: four times its window, or a
// quarter more than its rate. With loopbackT1 that is long enough for the
// transaction tables to fill, and harder so that they are as large as a
// peak makes them: the load measured then needs no slot they lack, even
// when this shared machine runs faster during the measurement than
// during the warm-up. A server in service has seen its peak before.
func (r *wireRig) warm(tb testing.TB, load wireLoad, d time.Duration) {
	tb.Helper()
	if load.rate > 0 {
		rate := load.rate * 1.25
		r.paced(tb, uint64(rate*d.Seconds())+1, rate)
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		r.calls(tb, 1000, 4*load.window)
	}
}

// cdrs stops sipedge (flushing the CDRs) and counts the records and those
// of calls answered 200 and hung up by the caller.
func (r *wireRig) cdrs(tb testing.TB) (all, answered int) {
	tb.Helper()
	if err := r.stop(tb); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(r.cdr)
	if err != nil {
		tb.Fatal(err)
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
// peers count them: a loss fails, and with the default T1 nothing is
// retransmitted), in a window and paced, and sipedge writes a CDR of an
// answered call for each.
func TestWireCalls(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, tcp := range []bool{false, true} {
		for _, shards := range []int{1, 2} {
			t.Run(fmt.Sprintf("tcp=%v/shards=%d", tcp, shards), func(t *testing.T) {
				t.Cleanup(peersP())
				r := startWire(t, wireOptions{tcp: tcp, shards: shards})
				t.Cleanup(func() { r.stop(t); r.remove() })
				dups := r.calls(t, 300, 16)
				dups += r.calls(t, 1, 1)
				dups += r.paced(t, 100, 500)
				if dups != 0 {
					t.Errorf("%d messages came twice", dups)
				}
				// The carrier's 200 to the last BYE may still be on its way.
				deadline := time.Now().Add(5 * time.Second)
				for r.srv.LiveCalls() != 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := r.srv.LiveCalls(); n != 0 {
					t.Errorf("%d live calls after every call ended", n)
				}
				all, answered := r.cdrs(t)
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
