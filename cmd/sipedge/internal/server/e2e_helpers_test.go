package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/parser"
)

// End-to-end rig: a real Server on loopback sockets between a scripted
// caller (UAC, the A side) and a scripted carrier (UAS, the B side).
//
// Topology hiding is checked on every message a peer receives: the carrier
// must never see anything of the caller (callerSecrets, the A Call-ID,
// sipedge's A-leg tag) and the caller nothing of the carrier
// (carrierSecrets, the B Call-ID, sipedge's B-leg tag).

const (
	waitMsg = 3 * time.Second        // the longest a message may take to arrive
	quiet   = 300 * time.Millisecond // how long "nothing arrives" is watched
)

var (
	callerSecrets  = []string{"caller.example.org", "z9hG4bKCALLER", "atag1", "CALLERCID"}
	carrierSecrets = []string{"carrier.example.net", "z9hG4bKCARRIER", "btag9"}
)

// Bodies carry no secrets: SDP passes through unchanged by design.
const (
	callerSDP  = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	carrierSDP = "v=0\r\no=- 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0\r\n"
	reinvSDP   = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4002 RTP/AVP 0\r\na=sendonly\r\n"
)

type e2eOpts struct {
	callerTCP, carrierTCP bool
	trunkSource           string // default 127.0.0.1/32
	drainSecs             int    // default 1
	listenHost            string // default 127.0.0.1 (::1 with ipv6)
	ipv6                  bool   // sipedge and the peers on ::1
	group                 string // more keys of carrier-a's group, as "key: value, ..."
	advertise             string // config advertise; default none
	fleet                 string // the fleet section's keys, "redis: ..., node_id: ..."; default none
	trunk                 string // more keys of the trunk, as "key: value, ..."
}

type e2e struct {
	t       *testing.T
	srv     *Server
	port    int            // sipedge's SIP port, UDP and TCP
	sip     netip.AddrPort // 127.0.0.1:port
	admin   string
	cdrPath string
	// configPath is the file run writes the YAML to, which the server
	// reloads (POST /v1/reload); "" before run, and with embedded set.
	configPath string
	embedded   bool // run as if started on the embedded example: no file to reload
	caller     *sipPeer
	carrier    *sipPeer
	// advertised is the IP:port sipedge writes in its Via and Contact.
	advertised string
	stopOnce   sync.Once
	stopErr    error
}

// newE2EBase prepares a Server's e2e on a free port, not started, and the
// buffer its log goes to, printed when the test fails.
func newE2EBase(t *testing.T) (*e2e, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sipedge log:\n%s", logs.String())
		}
	})
	e := &e2e{t: t, port: e2eFreePort(t), cdrPath: filepath.Join(t.TempDir(), "cdr.jsonl")}
	e.sip = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(e.port))
	e.advertised = e.sip.String()
	return e, logs
}

// newE2E starts a carrier peer, a Server routing every number to it, and a
// caller peer; t.Cleanup shuts them all down.
func newE2E(t *testing.T, o e2eOpts) *e2e {
	t.Helper()
	loopback := "127.0.0.1"
	if o.ipv6 {
		loopback = "::1"
	}
	if o.trunkSource == "" {
		o.trunkSource = netip.PrefixFrom(netip.MustParseAddr(loopback), 128).Masked().String()
		if !o.ipv6 {
			o.trunkSource = "127.0.0.1/32"
		}
	}
	if o.drainSecs == 0 {
		o.drainSecs = 1
	}
	if o.listenHost == "" {
		o.listenHost = loopback
	}
	group, trunk := "", ""
	if o.group != "" {
		group = ", " + o.group
	}
	if o.trunk != "" {
		trunk = ", " + o.trunk
	}
	e, logs := newE2EBase(t)
	e.sip = netip.AddrPortFrom(netip.MustParseAddr(loopback), uint16(e.port))
	e.advertised = e.sip.String()
	listen := netip.AddrPortFrom(netip.MustParseAddr(o.listenHost), uint16(e.port))
	advertise := ""
	if o.advertise != "" {
		advertise = fmt.Sprintf("advertise: %q", o.advertise)
		e.advertised = o.advertise
		if _, err := netip.ParseAddrPort(o.advertise); err != nil {
			e.advertised = fmt.Sprintf("%s:%d", o.advertise, e.port)
		}
	}
	if o.carrierTCP {
		e.carrier = listenTCPPeer(t, "carrier", e.sip)
	} else {
		e.carrier = newUDPPeer(t, "carrier", loopback, e.sip)
	}
	e.carrier.forbid(callerSecrets...)

	transport := "udp"
	if o.carrierTCP {
		transport = "tcp"
	}
	yaml := fmt.Sprintf(`
listen: ["udp://%[7]s", "tcp://%[7]s"]
%[8]s
shards: 2
admin: { listen: "127.0.0.1:0" }
log: { level: debug }
b2bua: { drain_timeout_secs: %[2]d }
trunks:
  - { name: local, trunk_group: cust-trunks, sources: ["%[3]s"]%[11]s }
gateway:
  groups:
    - { name: carrier-a, transport: %[4]s, destinations: [{ uri: "sip:%[5]s", address: "%[5]s" }]%[9]s }
lcr:
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
cdr: { file: %[6]q }
fleet: { %[10]s }
`, e.port, o.drainSecs, o.trunkSource, transport, e.carrier.addr(), e.cdrPath, listen, advertise, group, o.fleet, trunk)
	e.run(yaml, logs)

	if o.callerTCP {
		e.caller = dialTCPPeer(t, "caller", e.sip)
	} else {
		e.caller = newUDPPeer(t, "caller", loopback, e.sip)
	}
	e.caller.forbid(carrierSecrets...)
	return e
}

// run builds a server from yaml, logging into logs, starts it, and
// shuts it down when the test ends. Unless e.embedded, the YAML is written
// to e.configPath, the file the server reloads.
func (e *e2e) run(yaml string, logs *lockedBuffer) {
	t := e.t
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if e.srv, err = New(cfg, log); err != nil {
		t.Fatal(err)
	}
	if !e.embedded {
		e.configPath = filepath.Join(t.TempDir(), "sipedge.yaml")
		if err := os.WriteFile(e.configPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		e.srv.SetConfigFile(e.configPath)
	}
	if err := e.srv.Start(); err != nil {
		t.Fatal(err)
	}
	e.admin = e.srv.AdminAddr()
	t.Cleanup(func() {
		checkMetricsDocumented(t, e.srv)
		if err := e.shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
}

// e2eFreePort returns a port free for both UDP and TCP on 127.0.0.1, picked
// at random below the kernel's ephemeral range (32768 on Linux), and below
// the ports redistest picks for redis-servers (20000 and up) in the packages
// whose tests run alongside. The port is released before the server binds
// it: one the kernel chose (port 0) was handed out again in between, as the
// ephemeral port of a socket bound to port 0 (this rig's peers are made
// before the server starts, its admin listener, a client's connection in
// any test process), and the server failed with "bind: address already in
// use". Nothing takes a port under 20000 without asking for it by number.
func e2eFreePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 10000 + rand.IntN(10000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
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

// shutdown drains and stops the server once; later calls return the first
// call's result.
func (e *e2e) shutdown() error {
	e.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.stopErr = e.srv.Shutdown(ctx)
	})
	return e.stopErr
}

// cdrs shuts the server down (flushing the CDRs) and returns the records.
func (e *e2e) cdrs() []map[string]any {
	e.t.Helper()
	if err := e.shutdown(); err != nil {
		e.t.Fatalf("shutdown: %v", err)
	}
	data, err := os.ReadFile(e.cdrPath)
	if err != nil {
		e.t.Fatal(err)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			e.t.Fatalf("CDR line is not JSON: %v\n%s", err, line)
		}
		recs = append(recs, r)
	}
	return recs
}

// cdrOf returns the one CDR of an A-leg Call-ID.
func (e *e2e) cdrOf(aCallID string) map[string]any {
	e.t.Helper()
	recs := e.cdrs()
	var found []map[string]any
	for _, r := range recs {
		if r["a_call_id"] == aCallID {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("%d CDRs for %s, want 1; all: %v", len(found), aCallID, recs)
	}
	return found[0]
}

func checkCDR(t *testing.T, r map[string]any, code int, side string) {
	t.Helper()
	if fc, _ := r["final_code"].(float64); int(fc) != code {
		t.Errorf("CDR final_code %v, want %d: %v", r["final_code"], code, r)
	}
	if r["hangup_side"] != side {
		t.Errorf("CDR hangup_side %v, want %q: %v", r["hangup_side"], side, r)
	}
}

// httpGet fetches an admin URL path and returns the status and body.
func (e *e2e) httpGet(path string) (int, string) {
	e.t.Helper()
	c := &http.Client{Timeout: waitMsg}
	resp, err := c.Get("http://" + e.admin + path)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric sums a metric's samples over its labels in /metrics.
func (e *e2e) metric(name string) float64 {
	e.t.Helper()
	code, body := e.httpGet("/metrics")
	if code != 200 {
		e.t.Fatalf("/metrics: %d", code)
	}
	sum, seen := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			e.t.Fatalf("metric line %q: %v", line, err)
		}
		sum, seen = sum+v, true
	}
	if !seen {
		e.t.Fatalf("metric %s not in /metrics:\n%s", name, body)
	}
	return sum
}

// waitMetric waits for a metric's sum in /metrics to reach want: the
// engines count a call as it ends on its shard, which may be just after
// the last message a peer saw.
func (e *e2e) waitMetric(name string, want float64) {
	e.t.Helper()
	deadline := time.Now().Add(waitMsg)
	for {
		got := e.metric(name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s = %v, want %v", name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sipPeer is a scripted SIP endpoint on loopback: UDP, a TCP client (the
// caller) or a TCP server (the carrier).
type sipPeer struct {
	t      *testing.T
	name   string
	tcp    bool
	server netip.AddrPort // sipedge
	udp    *net.UDPConn
	ln     net.Listener
	in     chan string
	wg     sync.WaitGroup

	mu      sync.Mutex
	conn    net.Conn // TCP: where send writes
	conns   []net.Conn
	secrets []string
	closed  bool
}

func newPeer(t *testing.T, name string, server netip.AddrPort) *sipPeer {
	return &sipPeer{t: t, name: name, server: server, in: make(chan string, 256)}
}

func newUDPPeer(t *testing.T, name, ip string, server netip.AddrPort) *sipPeer {
	t.Helper()
	p := newPeer(t, name, server)
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	p.udp = u
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, _, err := u.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			p.in <- string(buf[:n])
		}
	}()
	t.Cleanup(p.close)
	return p
}

func listenTCPPeer(t *testing.T, name string, server netip.AddrPort) *sipPeer {
	t.Helper()
	p := newPeer(t, name, server)
	p.tcp = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.Close()
				return
			}
			p.conn = c
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			p.readStream(c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

func dialTCPPeer(t *testing.T, name string, server netip.AddrPort) *sipPeer {
	t.Helper()
	p := newPeer(t, name, server)
	p.tcp = true
	c, err := net.DialTimeout("tcp", server.String(), waitMsg)
	if err != nil {
		t.Fatal(err)
	}
	p.conn = c
	p.conns = append(p.conns, c)
	p.readStream(c)
	t.Cleanup(p.close)
	return p
}

// readStream frames SIP messages off a stream by Content-Length
// (RFC 3261 18.3) in a goroutine of its own.
func (p *sipPeer) readStream(c net.Conn) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		r := bufio.NewReader(c)
		for {
			msg, err := readFramed(r)
			if err != nil {
				return
			}
			p.in <- msg
		}
	}()
}

func readFramed(r *bufio.Reader) (string, error) {
	var sb strings.Builder
	length := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if sb.Len() == 0 && strings.TrimSpace(line) == "" {
			continue // keep-alive CRLFs
		}
		sb.WriteString(line)
		if line == "\r\n" || line == "\n" {
			break
		}
		if name, val, ok := strings.Cut(line, ":"); ok {
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "content-length", "l":
				length, _ = strconv.Atoi(strings.TrimSpace(val))
			}
		}
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	sb.Write(body)
	return sb.String(), nil
}

// addr is the peer's own address.
func (p *sipPeer) addr() netip.AddrPort {
	var a net.Addr
	switch {
	case p.udp != nil:
		a = p.udp.LocalAddr()
	case p.ln != nil:
		a = p.ln.Addr()
	default:
		a = p.conn.LocalAddr()
	}
	ap := a.(interface{ AddrPort() netip.AddrPort }).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// transport is the peer's Via transport.
func (p *sipPeer) transport() string {
	if p.tcp {
		return "TCP"
	}
	return "UDP"
}

// forbid adds strings the peer must never receive.
func (p *sipPeer) forbid(s ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range s {
		if x != "" {
			p.secrets = append(p.secrets, x)
		}
	}
}

// leak returns the first forbidden string in msg, "" if none.
func (p *sipPeer) leak(msg string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.secrets {
		if strings.Contains(msg, s) {
			return s
		}
	}
	return ""
}

// send sends a message to sipedge.
func (p *sipPeer) send(msg string) {
	p.t.Helper()
	if p.tcp {
		p.mu.Lock()
		c := p.conn
		p.mu.Unlock()
		if c == nil {
			p.t.Fatalf("%s: no TCP connection to send on", p.name)
		}
		if _, err := c.Write([]byte(msg)); err != nil {
			p.t.Fatalf("%s: send: %v", p.name, err)
		}
		return
	}
	if _, err := p.udp.WriteToUDPAddrPort([]byte(msg), p.server); err != nil {
		p.t.Fatalf("%s: send: %v", p.name, err)
	}
}

// next returns the next message, or false after timeout.
func (p *sipPeer) next(timeout time.Duration) (string, bool) {
	select {
	case s := <-p.in:
		return s, true
	case <-time.After(timeout):
		return "", false
	}
}

// expect waits for the next message, which must start with startLine (a
// prefix of its start line), parse, validate and leak nothing.
func (p *sipPeer) expect(startLine string, timeout time.Duration) *parser.Message {
	p.t.Helper()
	s, ok := p.next(timeout)
	if !ok {
		p.t.Fatalf("%s: no message within %v, want %q", p.name, timeout, startLine)
	}
	if !strings.HasPrefix(firstLine(s), startLine) {
		p.t.Fatalf("%s: got %q, want %q:\n%s", p.name, firstLine(s), startLine, s)
	}
	return p.check(s)
}

// check parses a received message over a copy and asserts topology hiding.
func (p *sipPeer) check(s string) *parser.Message {
	p.t.Helper()
	if leak := p.leak(s); leak != "" {
		p.t.Fatalf("%s: topology leak: %q in\n%s", p.name, leak, s)
	}
	m := new(parser.Message)
	if err := m.Parse([]byte(s)); err != nil {
		p.t.Fatalf("%s: sipedge sent a message that does not parse: %v\n%s", p.name, err, s)
	}
	if err := m.Validate(nil); err != nil {
		p.t.Fatalf("%s: sipedge sent a message that does not validate: %v\n%s", p.name, err, s)
	}
	if m.IsResponse() {
		p.checkStamped(m)
	}
	return m
}

// checkStamped checks that a response's top Via, the peer's own (every
// peer's sent-by is a name and asks for rport), came back stamped with the
// request's source: received=the peer's address and rport with a value
// (RFC 3261 18.2.1, RFC 3581 4).
func (p *sipPeer) checkStamped(m *parser.Message) {
	p.t.Helper()
	var via parser.Via
	if err := m.TopVia(&via); err != nil {
		p.t.Fatalf("%s: top Via: %v\n%s", p.name, err, m.Bytes())
	}
	src := p.addr()
	if string(via.Received) != src.Addr().String() || via.HasRPort && string(via.RPort) != strconv.Itoa(int(src.Port())) {
		p.t.Fatalf("%s: top Via %q not stamped with received and rport from %s\n%s", p.name, m.Get(parser.HeaderVia), src, m.Bytes())
	}
}

// expectNothing fails if any message arrives within d.
func (p *sipPeer) expectNothing(d time.Duration) {
	p.t.Helper()
	if s, ok := p.next(d); ok {
		p.t.Fatalf("%s: unexpected message:\n%s", p.name, s)
	}
}

// close closes the sockets and checks what arrived unread for leaks.
func (p *sipPeer) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	if p.udp != nil {
		p.udp.Close()
	}
	if p.ln != nil {
		p.ln.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	for {
		select {
		case s := <-p.in:
			if leak := p.leak(s); leak != "" {
				p.t.Errorf("%s: topology leak (unread message): %q in\n%s", p.name, leak, s)
			}
		default:
			return
		}
	}
}

func firstLine(s string) string {
	if i := strings.Index(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

func hdr(m *parser.Message, k parser.HeaderKind) string { return string(m.Get(k)) }

func tagOf(t *testing.T, m *parser.Message, k parser.HeaderKind) string {
	t.Helper()
	var a parser.Address
	if err := m.Address(k, 0, &a); err != nil {
		t.Fatalf("%v: %v\n%s", k, err, m.Bytes())
	}
	return string(a.Tag)
}

func contactURI(t *testing.T, m *parser.Message) string {
	t.Helper()
	var a parser.Address
	if err := m.Contact(0, &a); err != nil {
		t.Fatalf("Contact: %v\n%s", err, m.Bytes())
	}
	return string(a.URI)
}

func cseqOf(t *testing.T, m *parser.Message) parser.CSeq {
	t.Helper()
	c, err := m.CSeq()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ---- the caller (A side) ----

// uac is one dialog of the caller: its identifiers live at
// caller.example.org and must never reach the carrier.
type uac struct {
	p      *sipPeer
	callID string
	dialed string
	ruri   string // the initial INVITE's Request-URI
	branch string // the initial INVITE's branch
	target string // sipedge's Contact, once answered
	toTag  string // sipedge's A-leg tag
}

func newUAC(p *sipPeer, dialed string) *uac {
	u := &uac{p: p, dialed: dialed,
		callID: fmt.Sprintf("CALLERCID-%016x@caller.example.org", rand.Uint64()),
		branch: fmt.Sprintf("z9hG4bKCALLER%08x", rand.Uint32())}
	u.ruri = "sip:" + dialed + "@" + p.server.String()
	return u
}

func (u *uac) contact() string {
	if u.p.tcp {
		return "<sip:alice@caller.example.org:5061;transport=tcp>"
	}
	return "<sip:alice@caller.example.org:5061>"
}

func (u *uac) via(branch string) string {
	return "Via: SIP/2.0/" + u.p.transport() + " caller.example.org:5061;branch=" + branch + ";rport\r\n"
}

func (u *uac) toHdr(tag string) string {
	s := "To: <sip:" + u.dialed + "@" + u.p.server.String() + ">"
	if tag != "" {
		s += ";tag=" + tag
	}
	return s + "\r\n"
}

func withBody(head, body string) string {
	if body != "" {
		head += "Content-Type: application/sdp\r\n"
	}
	return head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// invite is the initial INVITE.
func (u *uac) invite() string {
	return withBody("INVITE "+u.ruri+" SIP/2.0\r\n"+
		u.via(u.branch)+
		"Max-Forwards: 70\r\n"+
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n"+
		u.toHdr("")+
		"Call-ID: "+u.callID+"\r\n"+
		"CSeq: 10 INVITE\r\n"+
		"Contact: "+u.contact()+"\r\n"+
		"Record-Route: <sip:rr.caller.example.org;lr>\r\n"+
		"Supported: timer\r\n", callerSDP)
}

// cancel cancels the initial INVITE (RFC 3261 9.1).
func (u *uac) cancel() string {
	return withBody("CANCEL "+u.ruri+" SIP/2.0\r\n"+
		u.via(u.branch)+
		"Max-Forwards: 70\r\n"+
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n"+
		u.toHdr("")+
		"Call-ID: "+u.callID+"\r\n"+
		"CSeq: 10 CANCEL\r\n", "")
}

// ackFailure acknowledges a non-2xx final response to the initial INVITE
// (RFC 3261 17.1.1.3): same branch and Request-URI, the response's To.
func (u *uac) ackFailure(resp *parser.Message) string {
	return withBody("ACK "+u.ruri+" SIP/2.0\r\n"+
		u.via(u.branch)+
		"Max-Forwards: 70\r\n"+
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n"+
		"To: "+hdr(resp, parser.HeaderTo)+"\r\n"+
		"Call-ID: "+u.callID+"\r\n"+
		"CSeq: 10 ACK\r\n", "")
}

// request builds an in-dialog request (RFC 3261 12.2.1.1): the ACK of a
// 2xx, BYE, re-INVITE.
func (u *uac) request(method string, cseq int, body string) string {
	s := method + " " + u.target + " SIP/2.0\r\n" +
		u.via(fmt.Sprintf("z9hG4bKCALLER%s%08x", strings.ToLower(method), rand.Uint32())) +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n" +
		u.toHdr(u.toTag) +
		"Call-ID: " + u.callID + "\r\n" +
		fmt.Sprintf("CSeq: %d %s\r\n", cseq, method)
	if method == "INVITE" {
		s += "Contact: " + u.contact() + "\r\n"
	}
	return withBody(s, body)
}

// answer responds to a request sipedge sent to the caller.
func (u *uac) answer(req *parser.Message, code int, reason string) string {
	return string(parser.AppendBody(parser.AppendResponse(nil, req, code, reason, nil), "", nil))
}

// ---- the carrier (B side) ----

// uasResponse answers a request the carrier received, as a UAS at
// carrier.example.net would, record-routing through rr.carrier.example.net.
func uasResponse(p *sipPeer, req *parser.Message, code int, reason, body string) string {
	b := parser.AppendResponse(nil, req, code, reason, []byte("btag9"))
	if code > 100 && code < 300 && req.Method() == parser.MethodInvite {
		if p.tcp {
			b = append(b, "Contact: <sip:gw@carrier.example.net:5070;transport=tcp>\r\n"...)
		} else {
			b = append(b, "Contact: <sip:gw@carrier.example.net:5070>\r\n"...)
		}
		if hdr(req, parser.HeaderTo) != "" && !strings.Contains(hdr(req, parser.HeaderTo), "tag=") {
			b = append(b, "Record-Route: <sip:rr.carrier.example.net;lr>\r\n"...)
		}
	}
	if body != "" {
		b = append(b, "Content-Type: application/sdp\r\n"...)
	}
	return string(parser.AppendBody(b, "", []byte(body)))
}

// uasRequest builds a request the carrier sends in the B dialog.
func uasRequest(t *testing.T, p *sipPeer, binv *parser.Message, method string, cseq int) string {
	t.Helper()
	var from parser.Address
	if err := binv.From(&from); err != nil {
		t.Fatal(err)
	}
	return withBody(method+" "+contactURI(t, binv)+" SIP/2.0\r\n"+
		"Via: SIP/2.0/"+p.transport()+" carrier.example.net:5070;branch=z9hG4bKCARRIER"+
		fmt.Sprintf("%s%08x", strings.ToLower(method), rand.Uint32())+";rport\r\n"+
		"Max-Forwards: 70\r\n"+
		"From: <sip:15551234@carrier.example.net>;tag=btag9\r\n"+
		"To: <"+string(from.URI)+">;tag="+string(from.Tag)+"\r\n"+
		"Call-ID: "+hdr(binv, parser.HeaderCallID)+"\r\n"+
		fmt.Sprintf("CSeq: %d %s\r\n", cseq, method), "")
}

// ---- call flows ----

// call is one call through sipedge as the test drives it.
type call struct {
	e    *e2e
	u    *uac
	binv *parser.Message // the B-leg INVITE as the carrier got it
}

// dialed is the number every call dials.
const dialed = "15551234"

// start sends the caller's INVITE and takes the 100 Trying and the B-leg
// INVITE, checking the B leg is a dialog of sipedge's own.
func (e *e2e) start() *call {
	e.t.Helper()
	t := e.t
	c := &call{e: e, u: newUAC(e.caller, dialed)}
	e.caller.send(c.u.invite())
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	c.binv = e.carrier.expect(fmt.Sprintf("INVITE sip:%s@%s", dialed, e.carrier.addr()), waitMsg)
	// Nothing of the B dialog may go back to the caller.
	e.caller.forbid(hdr(c.binv, parser.HeaderCallID), tagOf(t, c.binv, parser.HeaderFrom))
	if n := c.binv.Count(parser.HeaderVia); n != 1 {
		t.Fatalf("B-leg INVITE has %d Vias, want sipedge's only:\n%s", n, c.binv.Bytes())
	}
	if via := hdr(c.binv, parser.HeaderVia); !strings.Contains(via, " "+e.advertised+";") ||
		!strings.HasPrefix(via, "SIP/2.0/"+e.carrier.transport()) {
		t.Fatalf("B-leg Via %q", via)
	}
	if ct := contactURI(t, c.binv); !strings.Contains(ct, "@"+e.advertised) {
		t.Fatalf("B-leg Contact %q is not sipedge's", ct)
	}
	if string(c.binv.Body()) != callerSDP {
		t.Fatalf("B-leg INVITE SDP changed:\n%s", c.binv.Bytes())
	}
	if hdr(c.binv, parser.HeaderRoute) != "" || hdr(c.binv, parser.HeaderRecordRoute) != "" {
		t.Fatalf("B-leg INVITE carries routes:\n%s", c.binv.Bytes())
	}
	return c
}

// provisional relays a carrier provisional and returns it at the caller.
func (c *call) provisional(code int, reason, body string) *parser.Message {
	c.e.t.Helper()
	c.e.carrier.send(uasResponse(c.e.carrier, c.binv, code, reason, body))
	m := c.e.caller.expect(fmt.Sprintf("SIP/2.0 %d %s", code, reason), waitMsg)
	c.learnTag(m)
	return m
}

func (c *call) learnTag(m *parser.Message) {
	t := c.e.t
	t.Helper()
	tag := tagOf(t, m, parser.HeaderTo)
	if tag == "" {
		t.Fatalf("response to the caller without a To tag:\n%s", m.Bytes())
	}
	if c.u.toTag != "" && c.u.toTag != tag {
		t.Fatalf("one B-leg dialog got A-leg tags %q and %q", c.u.toTag, tag)
	}
	if c.u.toTag == "" {
		c.u.toTag = tag
		c.e.carrier.forbid(tag) // sipedge's A-leg tag is the caller's business
	}
}

// answer has the carrier answer 200 with SDP, takes the 200 at the caller,
// ACKs it and checks the ACK reaches the carrier.
func (c *call) answer() (ok *parser.Message) {
	c.e.t.Helper()
	t := c.e.t
	c.e.carrier.send(uasResponse(c.e.carrier, c.binv, 200, "OK", carrierSDP))
	ok = c.e.caller.expect("SIP/2.0 200 OK", waitMsg)
	c.learnTag(ok)
	if string(ok.Body()) != carrierSDP {
		t.Fatalf("200 SDP not relayed unchanged:\n%s", ok.Bytes())
	}
	c.u.target = contactURI(t, ok)
	if !strings.Contains(c.u.target, "@"+c.e.advertised) {
		t.Fatalf("200 Contact %q is not sipedge's", c.u.target)
	}
	// The caller's own Record-Route comes back (RFC 3261 12.1.1), never
	// the carrier's.
	if rr := hdr(ok, parser.HeaderRecordRoute); rr != "<sip:rr.caller.example.org;lr>" || strings.Contains(string(ok.Bytes()), "rr.carrier") {
		t.Fatalf("the 200's Record-Route is not the caller's own:\n%s", ok.Bytes())
	}
	c.e.caller.send(c.u.request("ACK", 10, ""))
	ack := c.e.carrier.expect("ACK sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(ack, 1)
	return ok
}

// checkInB checks a request the carrier got is in the B dialog.
func (c *call) checkInB(m *parser.Message, cseq uint32) {
	t := c.e.t
	t.Helper()
	if hdr(m, parser.HeaderCallID) != hdr(c.binv, parser.HeaderCallID) ||
		tagOf(t, m, parser.HeaderFrom) != tagOf(t, c.binv, parser.HeaderFrom) || tagOf(t, m, parser.HeaderTo) != "btag9" {
		t.Fatalf("request not in the B dialog:\n%s", m.Bytes())
	}
	if r := hdr(m, parser.HeaderRoute); r != "<sip:rr.carrier.example.net;lr>" {
		t.Fatalf("request does not follow the carrier's route set (Route %q):\n%s", r, m.Bytes())
	}
	if got := cseqOf(t, m).Num; got != cseq {
		t.Fatalf("CSeq %d, want %d:\n%s", got, cseq, m.Bytes())
	}
}

// answered runs a call to the confirmed state: 100, 180, 200, ACK.
func (e *e2e) answered() *call {
	e.t.Helper()
	c := e.start()
	c.provisional(180, "Ringing", "")
	c.answer()
	return c
}

// byeFromCaller ends a confirmed call from the A side.
func (c *call) byeFromCaller(cseq int) {
	c.e.t.Helper()
	c.e.caller.send(c.u.request("BYE", cseq, ""))
	ok := c.e.caller.expect("SIP/2.0 200 OK", waitMsg)
	if m := cseqOf(c.e.t, ok).Method; m != parser.MethodBye {
		c.e.t.Fatalf("200 is not for the BYE:\n%s", ok.Bytes())
	}
	bye := c.e.carrier.expect("BYE sip:gw@carrier.example.net:5070", waitMsg)
	c.checkInB(bye, 2)
	c.e.carrier.send(uasResponse(c.e.carrier, bye, 200, "OK", ""))
}
