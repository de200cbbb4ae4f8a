package embed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/embed"
	"github.com/sipedge/sipedge/parser"
)

// A small end-to-end rig, the server package's trimmed (its helpers are
// not importable): sipedge started through this package on loopback, a
// caller and two carriers, carrier-a and carrier-b, as UDP sockets.

const waitMsg = 3 * time.Second // the longest a message may take to arrive

const sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"

type rig struct {
	t        *testing.T
	srv      *embed.Server
	sip      netip.AddrPort
	caller   *peer
	a, b     *peer
	cdrPath  string
	stopOnce sync.Once
	logs     *lockedBuffer
	stopErr  error
}

// start runs sipedge with policy, the lcr: section given (staticLCR) and
// both carriers' gateway groups.
func start(t *testing.T, policy embed.Options, lcr string) *rig {
	t.Helper()
	r := &rig{t: t, cdrPath: filepath.Join(t.TempDir(), "cdr.jsonl"), logs: &lockedBuffer{}}
	port := freePort(t)
	r.sip = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	r.caller, r.a, r.b = newPeer(t, "caller", r.sip), newPeer(t, "carrier-a", r.sip), newPeer(t, "carrier-b", r.sip)
	yaml := fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
shards: 1
admin: { listen: "127.0.0.1:0" }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - { name: carrier-a, destinations: [{ uri: "sip:%[2]s", address: "%[2]s" }] }
    - { name: carrier-b, destinations: [{ uri: "sip:%[3]s", address: "%[3]s" }] }
%[4]s
cdr: { file: %[5]q }
`, port, r.a.addr(), r.b.addr(), lcr, r.cdrPath)
	cfg, err := embed.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	policy.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if r.srv, err = embed.Start(cfg, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("sipedge log:\n%s", r.logs.String())
		}
	})
	return r
}

// staticLCR is an lcr: section with one static prefix "" over routes (YAML
// flow maps), which the table orders by rate.
func staticLCR(routes ...string) string {
	s := "lcr:\n  static_routes:\n    - prefix: \"\"\n      routes:\n"
	for _, r := range routes {
		s += "        - " + r + "\n"
	}
	return s
}

func (r *rig) shutdown() error {
	r.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.stopErr = r.srv.Shutdown(ctx)
	})
	return r.stopErr
}

// cdr stops sipedge (flushing the CDRs) and returns the only record.
func (r *rig) cdr() map[string]any {
	r.t.Helper()
	if err := r.shutdown(); err != nil {
		r.t.Fatalf("shutdown: %v", err)
	}
	data, err := os.ReadFile(r.cdrPath)
	if err != nil {
		r.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		r.t.Fatalf("%d CDRs, want 1:\n%s", len(lines), data)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// attempts is a CDR's lcr_attempts as "carrier:status" strings.
func attempts(rec map[string]any) []string {
	var out []string
	raw, _ := rec["lcr_attempts"].([]any)
	for _, a := range raw {
		m, _ := a.(map[string]any)
		st, _ := m["status"].(float64)
		out = append(out, fmt.Sprintf("%v:%d", m["carrier_id"], int(st)))
	}
	return out
}

// metric returns the value of the sample named exactly line in /metrics'
// text, -1 when absent.
func (r *rig) metric(line string) float64 {
	var b bytes.Buffer
	r.srv.WriteMetrics(&b)
	for _, l := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(l, line+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// freePort is a port free for UDP on 127.0.0.1, below the ephemeral range
// so nothing bound to port 0 takes it before sipedge binds it.
func freePort(t *testing.T) int {
	for range 100 {
		port := 10000 + rand.IntN(10000)
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
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

// ---- the peers ----

type peer struct {
	t      *testing.T
	name   string
	server netip.AddrPort
	udp    *net.UDPConn
	in     chan string
}

func newPeer(t *testing.T, name string, server netip.AddrPort) *peer {
	t.Helper()
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, name: name, server: server, udp: u, in: make(chan string, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := u.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			p.in <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { u.Close(); <-done })
	return p
}

func (p *peer) addr() netip.AddrPort { return p.udp.LocalAddr().(*net.UDPAddr).AddrPort() }

func (p *peer) send(msg string) {
	p.t.Helper()
	if _, err := p.udp.WriteToUDPAddrPort([]byte(msg), p.server); err != nil {
		p.t.Fatalf("%s: send: %v", p.name, err)
	}
}

// expect takes the next message, which must start with prefix, and parses it.
func (p *peer) expect(prefix string) *parser.Message {
	p.t.Helper()
	select {
	case s := <-p.in:
		if !strings.HasPrefix(s, prefix) {
			first, _, _ := strings.Cut(s, "\r\n")
			p.t.Fatalf("%s: got %q, want %q:\n%s", p.name, first, prefix, s)
		}
		m := new(parser.Message)
		if err := m.Parse([]byte(s)); err != nil {
			p.t.Fatalf("%s: %v\n%s", p.name, err, s)
		}
		return m
	case <-time.After(waitMsg):
		p.t.Fatalf("%s: nothing within %v, want %q", p.name, waitMsg, prefix)
	}
	return nil
}

// nothing checks that no message arrives for a while.
func (p *peer) nothing() {
	p.t.Helper()
	select {
	case s := <-p.in:
		p.t.Fatalf("%s: unexpected message:\n%s", p.name, s)
	case <-time.After(300 * time.Millisecond):
	}
}

// respond has a carrier answer req; a 2xx with a Contact and sdp.
func (p *peer) respond(req *parser.Message, code int, reason string) {
	b := parser.AppendResponse(nil, req, code, reason, []byte("btag9"))
	body := ""
	if code >= 200 && code < 300 && req.Method() == parser.MethodInvite {
		b = append(b, "Contact: <sip:gw@carrier.example.net:5070>\r\nContent-Type: application/sdp\r\n"...)
		body = sdp
	}
	p.send(string(parser.AppendBody(b, "", []byte(body))))
}

// reject has a carrier fail binv and takes sipedge's ACK.
func (p *peer) reject(binv *parser.Message, code int, reason string) {
	p.t.Helper()
	p.respond(binv, code, reason)
	p.expect("ACK ")
}

// ---- the caller ----

type call struct {
	r      *rig
	callID string
	branch string // its INVITE's: a call's own, so that calls do not match one transaction
	dialed string
	toTag  string // sipedge's, once it answered
	target string // sipedge's Contact, once it answered
}

func (c *call) head(method, ruri, branch string, cseq int) string {
	to := "<sip:" + c.dialed + "@" + c.r.sip.String() + ">"
	if c.toTag != "" {
		to += ";tag=" + c.toTag
	}
	return fmt.Sprintf("%s %s SIP/2.0\r\nVia: SIP/2.0/UDP caller.example.org:5061;branch=%s;rport\r\n"+
		"Max-Forwards: 70\r\nFrom: <sip:+13105550199@caller.example.org>;tag=atag1\r\nTo: %s\r\n"+
		"Call-ID: %s\r\nCSeq: %d %s\r\n", method, ruri, branch, to, c.callID, cseq, method)
}

// dial sends the caller's INVITE for dialed and takes the 100 Trying.
func (r *rig) dial(dialed string) *call {
	r.t.Helper()
	c := &call{r: r, dialed: dialed, callID: fmt.Sprintf("a-%016x@caller.example.org", rand.Uint64()),
		branch: fmt.Sprintf("z9hG4bKinv%016x", rand.Uint64())}
	inv := c.head("INVITE", "sip:"+dialed+"@"+r.sip.String(), c.branch, 10) +
		"Contact: <sip:alice@caller.example.org:5061>\r\nContent-Type: application/sdp\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(sdp), sdp)
	r.caller.send(inv)
	r.caller.expect("SIP/2.0 100 Trying")
	return c
}

// final takes the caller's final failure, which must start with
// "SIP/2.0 code reason", and ACKs it.
func (c *call) final(status string) {
	c.r.t.Helper()
	m := c.r.caller.expect("SIP/2.0 " + status + "\r\n")
	ack := c.head("ACK", "sip:"+c.dialed+"@"+c.r.sip.String(), c.branch, 10)
	ack = strings.Replace(ack, "To: <sip:"+c.dialed+"@"+c.r.sip.String()+">", "To: "+string(m.Get(parser.HeaderTo)), 1)
	c.r.caller.send(ack + "Content-Length: 0\r\n\r\n")
}

// answered takes sipedge's 200 at the caller and ACKs it, then the ACK at
// carrier p; the call is up.
func (c *call) answered(p *peer) {
	c.r.t.Helper()
	ok := c.r.caller.expect("SIP/2.0 200 OK")
	var to, contact parser.Address
	if err := ok.To(&to); err != nil {
		c.r.t.Fatal(err)
	}
	if err := ok.Contact(0, &contact); err != nil {
		c.r.t.Fatal(err)
	}
	c.toTag, c.target = string(to.Tag), string(contact.URI)
	c.r.caller.send(c.head("ACK", c.target, "z9hG4bKack1", 10) + "Content-Length: 0\r\n\r\n")
	p.expect("ACK ")
}

// hangUp ends an answered call from the caller; p is the carrier on it.
func (c *call) hangUp(p *peer) {
	c.r.t.Helper()
	c.r.caller.send(c.head("BYE", c.target, "z9hG4bKbye1", 11) + "Content-Length: 0\r\n\r\n")
	c.r.caller.expect("SIP/2.0 200 OK")
	p.respond(p.expect("BYE "), 200, "OK")
}
