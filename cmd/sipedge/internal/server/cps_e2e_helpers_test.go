package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/parser"
)

// CPS end-to-end rig: real Servers built from YAML, a real
// redis-server, and scripted peers on loopback UDP that run many calls at
// once. Unlike the e2e rig's sipPeer, whose test goroutine reads one
// message at a time, these peers answer on their own goroutine and
// timestamp every message as it is read: the carrier meters the INVITEs it
// receives the way a carrier's CPS limit does.

// ---- a node ----

// cpsNode is one sipedge instance.
type cpsNode struct {
	t     *testing.T
	name  string
	srv   *Server
	port  int
	sip   netip.AddrPort
	admin string
	logs  *lockedBuffer
	once  sync.Once
	err   error
}

// startCPSNode builds a Server from the YAML yaml returns for its SIP port
// and CDR file, and starts it; t.Cleanup shuts it down.
func startCPSNode(t *testing.T, name string, yaml func(port int, cdrFile string) string) *cpsNode {
	t.Helper()
	n := &cpsNode{t: t, name: name, port: e2eFreePort(t), logs: &lockedBuffer{}}
	n.sip = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(n.port))
	t.Cleanup(func() {
		if t.Failed() {
			s := n.logs.String()
			if len(s) > 40000 {
				s = "...\n" + s[len(s)-40000:]
			}
			t.Logf("%s log:\n%s", name, s)
		}
	})
	y := yaml(n.port, filepath.Join(t.TempDir(), "cdr.jsonl"))
	cfg, err := config.Parse([]byte(y), nil)
	if err != nil {
		t.Fatalf("%s config: %v\n%s", name, err, y)
	}
	log := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
	if n.srv, err = New(cfg, log); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := n.srv.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	n.admin = n.srv.AdminAddr()
	t.Cleanup(func() {
		checkMetricsDocumented(t, n.srv)
		if err := n.shutdown(); err != nil {
			t.Errorf("%s shutdown: %v", name, err)
		}
	})
	return n
}

func (n *cpsNode) shutdown() error {
	n.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.err = n.srv.Shutdown(ctx)
	})
	return n.err
}

// scrape returns /metrics; safe from any goroutine.
func (n *cpsNode) scrape() (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + n.admin + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("/metrics: %d", resp.StatusCode)
	}
	return string(b), err
}

// metricIn sums the samples of metric name whose labels contain labels
// ("" = any); ok is false when there is none.
func metricIn(body, name, labels string) (sum float64, ok bool) {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if labels != "" && !strings.Contains(line, labels) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

// metric is metricIn on a fresh scrape; the test fails when the metric is
// missing.
func (n *cpsNode) metric(name, labels string) float64 {
	n.t.Helper()
	body, err := n.scrape()
	if err != nil {
		n.t.Fatalf("%s: %v", n.name, err)
	}
	v, ok := metricIn(body, name, labels)
	if !ok {
		n.t.Fatalf("%s: metric %s{%s} not in /metrics:\n%s", n.name, name, labels, body)
	}
	return v
}

// waitMetric polls metric name until cond holds or timeout passes; it
// returns the last value and whether cond held.
func (n *cpsNode) waitMetric(name, labels string, timeout time.Duration, cond func(float64) bool) (float64, bool) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := n.metric(name, labels)
		if cond(v) {
			return v, true
		}
		if time.Now().After(deadline) {
			return v, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- the carrier ----

// cpsInvite is one B-leg INVITE as a carrier received it.
type cpsInvite struct {
	at     time.Time
	callID string
	user   string // the Request-URI's user: the dialled number
	code   int    // what the carrier answered
}

// cpsCarrier is a carrier on a UDP socket of its own: it answers every new
// INVITE at once with what decide says (nil: 200 OK with SDP), BYE and
// CANCEL and OPTIONS with 200, ignores ACKs, re-sends its answer to an
// INVITE retransmission (not counted again), and records every INVITE.
type cpsCarrier struct {
	t      *testing.T
	name   string
	conn   *net.UDPConn
	decide func(inv cpsInvite, earlier []cpsInvite) (code int, reason string)
	wg     sync.WaitGroup

	mu      sync.Mutex
	invites []cpsInvite
	answers map[string][]byte // Call-ID -> the answer to its INVITE
	retrans int
	byes    int
	errs    []string
}

func newCPSCarrier(t *testing.T, name string, decide func(cpsInvite, []cpsInvite) (int, string)) *cpsCarrier {
	t.Helper()
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &cpsCarrier{t: t, name: name, conn: u, decide: decide, answers: make(map[string][]byte)}
	p.wg.Add(1)
	go p.read()
	t.Cleanup(func() {
		u.Close()
		p.wg.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.errs {
			t.Errorf("%s: %s", name, e)
		}
	})
	return p
}

func (p *cpsCarrier) port() int { return p.conn.LocalAddr().(*net.UDPAddr).Port }

func (p *cpsCarrier) read() {
	defer p.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		at := time.Now()
		raw := append([]byte(nil), buf[:n]...)
		p.handle(raw, from, at)
	}
}

func (p *cpsCarrier) errorf(format string, args ...any) {
	p.mu.Lock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *cpsCarrier) handle(raw []byte, from netip.AddrPort, at time.Time) {
	for _, s := range []string{"CALLERCID", "caller.example.org", "atag-"} {
		if strings.Contains(string(raw), s) {
			p.errorf("topology leak: %q in\n%s", s, raw)
		}
	}
	m := new(parser.Message)
	if err := m.Parse(raw); err != nil {
		p.errorf("sipedge sent a message that does not parse: %v\n%s", err, raw)
		return
	}
	if m.IsResponse() {
		return
	}
	switch m.Method() {
	case parser.MethodAck:
		return
	case parser.MethodInvite:
	default:
		if m.Method() == parser.MethodBye {
			p.mu.Lock()
			p.byes++
			p.mu.Unlock()
		}
		p.send(parser.AppendBody(parser.AppendResponse(nil, m, 200, "OK", []byte("ctag")), "", nil), from)
		return
	}
	cid := string(m.CallID())
	p.mu.Lock()
	if ans, ok := p.answers[cid]; ok { // a retransmission
		p.retrans++
		p.mu.Unlock()
		p.send(ans, from)
		return
	}
	var ruri parser.URI
	_ = parser.ParseURI(m.RequestURI(), &ruri)
	inv := cpsInvite{at: at, callID: cid, user: string(ruri.User)}
	code, reason := 200, "OK"
	if p.decide != nil {
		code, reason = p.decide(inv, p.invites)
	}
	inv.code = code
	p.invites = append(p.invites, inv)
	tag := fmt.Sprintf("ctag%d", len(p.invites))
	b := parser.AppendResponse(nil, m, code, reason, []byte(tag))
	if code >= 200 && code < 300 {
		b = append(b, fmt.Sprintf("Contact: <sip:gw@127.0.0.1:%d>\r\n", p.port())...)
		b = parser.AppendBody(b, "application/sdp", []byte(carrierSDP))
	} else {
		b = parser.AppendBody(b, "", nil)
	}
	p.answers[cid] = b
	p.mu.Unlock()
	p.send(b, from)
}

func (p *cpsCarrier) send(b []byte, to netip.AddrPort) {
	if _, err := p.conn.WriteToUDPAddrPort(b, to); err != nil && !strings.Contains(err.Error(), "closed") {
		p.errorf("send: %v", err)
	}
}

// received returns the INVITEs so far, in arrival order.
func (p *cpsCarrier) received() []cpsInvite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]cpsInvite(nil), p.invites...)
}

// waitInvites waits until the carrier has received n INVITEs.
func (p *cpsCarrier) waitInvites(n int, timeout time.Duration) []cpsInvite {
	deadline := time.Now().Add(timeout)
	for {
		got := p.received()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- the caller ----

// cpsCaller is a customer's UA on a UDP socket of its own, bound to ip,
// sending to one sipedge; it runs any number of calls at once, matched by
// Call-ID, ACKing final responses as they come.
type cpsCaller struct {
	t      *testing.T
	name   string
	conn   *net.UDPConn
	local  netip.AddrPort
	server netip.AddrPort
	wg     sync.WaitGroup

	mu    sync.Mutex
	calls map[string]*cpsCall
	stray int
	errs  []string
}

func newCPSCaller(t *testing.T, name, ip string, server netip.AddrPort) *cpsCaller {
	t.Helper()
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	k := &cpsCaller{t: t, name: name, conn: u, server: server, calls: make(map[string]*cpsCall)}
	k.local = u.LocalAddr().(*net.UDPAddr).AddrPort()
	k.wg.Add(1)
	go k.read()
	t.Cleanup(func() {
		u.Close()
		k.wg.Wait()
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, e := range k.errs {
			t.Errorf("%s: %s", name, e)
		}
	})
	return k
}

// cpsCall is one call of a cpsCaller.
type cpsCall struct {
	k       *cpsCaller
	callID  string
	dialed  string
	branch  string
	fromTag string
	sentAt  time.Time
	done    chan struct{} // closed on the first final response to the INVITE
	byeDone chan struct{} // closed on the final response to the BYE
	byeOnce sync.Once

	mu      sync.Mutex
	final   *parser.Message
	finalAt time.Time
	trying  bool
	toTag   string
	target  string
}

// invite starts a call to dialed and returns at once.
func (k *cpsCaller) invite(dialed string) *cpsCall {
	c := &cpsCall{k: k, dialed: dialed,
		callID:  fmt.Sprintf("CALLERCID-%016x@caller.example.org", rand.Uint64()),
		branch:  fmt.Sprintf("z9hG4bKCALLER%016x", rand.Uint64()),
		fromTag: fmt.Sprintf("atag-%08x", rand.Uint32()),
		done:    make(chan struct{}), byeDone: make(chan struct{})}
	k.mu.Lock()
	k.calls[c.callID] = c
	k.mu.Unlock()
	c.sentAt = time.Now()
	k.send(c.inviteMsg())
	return c
}

func (k *cpsCaller) send(s string) {
	if _, err := k.conn.WriteToUDPAddrPort([]byte(s), k.server); err != nil {
		k.errorf("send: %v", err)
	}
}

func (k *cpsCaller) errorf(format string, args ...any) {
	k.mu.Lock()
	k.errs = append(k.errs, fmt.Sprintf(format, args...))
	k.mu.Unlock()
}

func (k *cpsCaller) read() {
	defer k.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, _, err := k.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		at := time.Now()
		raw := append([]byte(nil), buf[:n]...)
		k.handle(raw, at)
	}
}

func (k *cpsCaller) handle(raw []byte, at time.Time) {
	m := new(parser.Message)
	if err := m.Parse(raw); err != nil {
		k.errorf("sipedge sent a message that does not parse: %v\n%s", err, raw)
		return
	}
	k.mu.Lock()
	c := k.calls[string(m.CallID())]
	if c == nil {
		k.stray++
	}
	k.mu.Unlock()
	if c == nil {
		return
	}
	if !m.IsResponse() { // a request in the call's dialog: accept it
		k.send(string(parser.AppendBody(parser.AppendResponse(nil, m, 200, "OK", nil), "", nil)))
		return
	}
	cs, err := m.CSeq()
	if err != nil {
		k.errorf("response without a CSeq:\n%s", raw)
		return
	}
	code := m.StatusCode()
	switch cs.Method {
	case parser.MethodInvite:
		if code < 200 {
			c.mu.Lock()
			c.trying = true
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		first := c.final == nil
		if first {
			c.final, c.finalAt = m, at
			if code < 300 {
				var to, contact parser.Address
				if m.To(&to) == nil {
					c.toTag = string(to.Tag)
				}
				if m.Contact(0, &contact) == nil {
					c.target = string(contact.URI)
				}
			}
		}
		c.mu.Unlock()
		if code < 300 {
			k.send(c.inDialog("ACK", 10))
		} else {
			k.send(c.ackFailure(m))
		}
		if first {
			close(c.done)
		}
	case parser.MethodBye:
		if code >= 200 {
			c.byeOnce.Do(func() { close(c.byeDone) })
		}
	}
}

func (c *cpsCall) ruri() string { return "sip:" + c.dialed + "@" + c.k.server.String() }

func (c *cpsCall) via(branch string) string {
	return "Via: SIP/2.0/UDP " + c.k.local.String() + ";branch=" + branch + ";rport\r\n"
}

func (c *cpsCall) from() string {
	return "From: <sip:" + callerNumber + "@caller.example.org>;tag=" + c.fromTag + "\r\n"
}

func (c *cpsCall) inviteMsg() string {
	return withBody("INVITE "+c.ruri()+" SIP/2.0\r\n"+
		c.via(c.branch)+
		"Max-Forwards: 70\r\n"+
		c.from()+
		"To: <"+c.ruri()+">\r\n"+
		"Call-ID: "+c.callID+"\r\n"+
		"CSeq: 10 INVITE\r\n"+
		"Contact: <sip:alice@"+c.k.local.String()+">\r\n", callerSDP)
}

// ackFailure is the ACK of a non-2xx final response (RFC 3261 17.1.1.3).
func (c *cpsCall) ackFailure(resp *parser.Message) string {
	return withBody("ACK "+c.ruri()+" SIP/2.0\r\n"+
		c.via(c.branch)+
		"Max-Forwards: 70\r\n"+
		c.from()+
		"To: "+string(resp.Get(parser.HeaderTo))+"\r\n"+
		"Call-ID: "+c.callID+"\r\n"+
		"CSeq: 10 ACK\r\n", "")
}

// inDialog is a request in the confirmed dialog: the 2xx's ACK, a BYE.
func (c *cpsCall) inDialog(method string, cseq int) string {
	c.mu.Lock()
	target, toTag := c.target, c.toTag
	c.mu.Unlock()
	return withBody(method+" "+target+" SIP/2.0\r\n"+
		c.via(fmt.Sprintf("z9hG4bKCALLER%s%016x", strings.ToLower(method), rand.Uint64()))+
		"Max-Forwards: 70\r\n"+
		c.from()+
		"To: <"+c.ruri()+">;tag="+toTag+"\r\n"+
		"Call-ID: "+c.callID+"\r\n"+
		fmt.Sprintf("CSeq: %d %s\r\n", cseq, method), "")
}

// wait returns the final response to the INVITE, nil after timeout.
func (c *cpsCall) wait(timeout time.Duration) *parser.Message {
	select {
	case <-c.done:
	default:
		select {
		case <-c.done:
		case <-time.After(timeout):
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.final
}

// code is the final status, 0 while there is none.
func (c *cpsCall) code() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.final == nil {
		return 0
	}
	return c.final.StatusCode()
}

// waitAll waits for every call's final response, for at most timeout in
// all; it returns the calls still without one.
func waitAll(calls []*cpsCall, timeout time.Duration) []*cpsCall {
	deadline := time.Now().Add(timeout)
	var missing []*cpsCall
	for _, c := range calls {
		if c.wait(time.Until(deadline)) == nil {
			missing = append(missing, c)
		}
	}
	return missing
}

// byeAll ends the answered calls; it fails the test for a BYE not answered.
func byeAll(t *testing.T, calls []*cpsCall) {
	t.Helper()
	for _, c := range calls {
		if c.code() >= 200 && c.code() < 300 {
			c.k.send(c.inDialog("BYE", 11))
		}
	}
	for _, c := range calls {
		if c.code() >= 200 && c.code() < 300 {
			select {
			case <-c.byeDone:
			case <-time.After(waitMsg):
				t.Errorf("call to %s: BYE not answered", c.dialed)
			}
		}
	}
}

// ---- the carrier's meter ----

// maxInWindow returns the largest number of ts (sorted) in any window
// [s, s+w), and the window's first element: a window holding the most
// elements can always be slid to start at one.
func maxInWindow(ts []time.Time, w time.Duration) (int, int) {
	best, at, j := 0, 0, 0
	for i := range ts {
		if j < i {
			j = i
		}
		for j < len(ts) && ts[j].Sub(ts[i]) < w {
			j++
		}
		if j-i > best {
			best, at = j-i, i
		}
	}
	return best, at
}

// arrivals returns the INVITEs' arrival times, sorted.
func arrivals(invs []cpsInvite) []time.Time {
	ts := make([]time.Time, len(invs))
	for i, v := range invs {
		ts[i] = v.at
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

// offsets formats times as milliseconds since t0.
func offsets(ts []time.Time, t0 time.Time) string {
	var sb strings.Builder
	for i, x := range ts {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%d", x.Sub(t0).Milliseconds())
	}
	return sb.String()
}

// minGap is the smallest interval between consecutive sorted times.
func minGap(ts []time.Time) time.Duration {
	g := time.Duration(-1)
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); g < 0 || d < g {
			g = d
		}
	}
	return g
}
