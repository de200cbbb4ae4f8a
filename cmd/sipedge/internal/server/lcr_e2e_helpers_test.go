package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route/lcr"
)

// LCR end-to-end rig: the e2e rig of e2e_helpers_test.go with two carrier
// peers, carrier-a and carrier-b, each a UDP socket and a gateway group of
// its own, and the lcr: section (static table or routing API) given by the
// test. Topology hiding is checked on every message as in the e2e rig.

// The static routes most tests use; the table orders routes by rate.
const (
	yRouteA = `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD }`
	yRouteB = `{ carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005, currency: USD }`
)

// staticLCR is an lcr: section with one static prefix "" over routes (YAML
// flow maps), ordered by their rates.
func staticLCR(routes ...string) string {
	s := "lcr:\n  static_routes:\n    - prefix: \"\"\n      routes:\n"
	for _, r := range routes {
		s += "        - " + r + "\n"
	}
	return s
}

type lcrOpts struct {
	lcr   string // the lcr: section, from column 0
	b2bua string // more entries of the b2bua: flow map, e.g. "ring_timeout_secs: 2"
	extra string // more top-level YAML: cache:, number_policies:
	// trunks are the trunks: entries, one "  - {...}" line each; "" = one
	// trunk, local, for 127.0.0.1, trunk_group cust-trunks.
	trunks string
	// groupA is more keys of carrier-a's gateway group, YAML lines of a
	// block map ("reroute_causes: [404, 503]"); "" = none.
	groupA string
}

type lcrRig struct {
	*e2e          // carrier is carrier-a
	a, b *sipPeer // carrier-a and carrier-b
	logs *lockedBuffer
	// legs are the B-leg INVITEs seen so far, to check each carrier gets a
	// fresh dialog.
	legs []*parser.Message
}

// newCarrierPair prepares a Server's e2e (not started) and two UDP carrier
// peers, r.a named aName (the e2e's carrier) and r.b named bName, which
// must never see the caller's identifiers.
func newCarrierPair(t *testing.T, aName, bName string) *lcrRig {
	t.Helper()
	e, logs := newE2EBase(t)
	r := &lcrRig{e2e: e, logs: logs}
	r.a = newUDPPeer(t, aName, "127.0.0.1", e.sip)
	r.b = newUDPPeer(t, bName, "127.0.0.1", e.sip)
	r.a.forbid(callerSecrets...)
	r.b.forbid(callerSecrets...)
	e.carrier = r.a
	return r
}

// newLCR starts carrier-a and carrier-b, a Server routing as o says and a
// caller; t.Cleanup shuts them all down.
func newLCR(t *testing.T, o lcrOpts) *lcrRig {
	t.Helper()
	r := newCarrierPair(t, "carrier-a", "carrier-b")
	e, logs := r.e2e, r.logs

	trunks := o.trunks
	if trunks == "" {
		trunks = `  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }`
	}
	groupA := ""
	for _, l := range strings.Split(o.groupA, "\n") {
		if l != "" {
			groupA += "      " + l + "\n"
		}
	}
	b2 := "drain_timeout_secs: 1"
	if o.b2bua != "" {
		b2 += ", " + o.b2bua
	}
	yaml := fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d", "tcp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
log: { level: debug }
b2bua: { %[2]s }
trunks:
%[8]s
gateway:
  groups:
    - name: carrier-a
%[9]s      destinations:
        - { uri: "sip:127.0.0.1:%[3]d", address: "127.0.0.1:%[3]d" }
    - name: carrier-b
      destinations:
        - { uri: "sip:127.0.0.1:%[4]d", address: "127.0.0.1:%[4]d" }
%[5]s
%[6]s
cdr: { file: %[7]q }
`, e.port, b2, r.a.addr().Port(), r.b.addr().Port(), o.lcr, o.extra, e.cdrPath, trunks, groupA)
	e.run(yaml, logs)
	e.caller = newUDPPeer(t, "caller", "127.0.0.1", e.sip)
	e.caller.forbid(carrierSecrets...)
	return r
}

// metricWith sums the samples of a metric whose labels contain labels
// (e.g. `tier="redis"`); 0 when there is none.
func (r *lcrRig) metricWith(name, labels string) float64 {
	r.t.Helper()
	code, body := r.httpGet("/metrics")
	if code != 200 {
		r.t.Fatalf("/metrics: %d", code)
	}
	sum := 0.0
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
			r.t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// ---- one call ----

// callerNumber is the calling number every LCR call presents in From.
const callerNumber = "+13105550199"

type lcrCall struct {
	r      *lcrRig
	u      *uac
	sentAt time.Time // when the caller's INVITE left
	extra  string    // headers added to the caller's INVITE
}

// caller's messages present callerNumber rather than alice.
func (c *lcrCall) fix(s string) string {
	return strings.ReplaceAll(s, "sip:alice@caller.example.org>;tag=atag1", "sip:"+callerNumber+"@caller.example.org>;tag=atag1")
}

// call sends the caller's INVITE for dialed (with extra headers, "" for
// none) and takes sipedge's 100 Trying.
func (r *lcrRig) call(dialed, extra string) *lcrCall {
	r.t.Helper()
	c := &lcrCall{r: r, u: newUAC(r.caller, dialed), extra: extra}
	inv := c.fix(c.u.invite())
	if extra != "" {
		inv = strings.Replace(inv, "Supported: timer\r\n", "Supported: timer\r\n"+extra, 1)
	}
	c.sentAt = time.Now()
	r.caller.send(inv)
	r.caller.expect("SIP/2.0 100 Trying", waitMsg)
	return c
}

// invite takes the B-leg INVITE at carrier p, whose Request-URI user must
// be ruriUser ("" = any), and checks it is a fresh dialog of sipedge's own.
func (c *lcrCall) invite(p *sipPeer, ruriUser string) *parser.Message {
	r := c.r
	t := r.t
	t.Helper()
	start := "INVITE sip:"
	if ruriUser != "" {
		start = fmt.Sprintf("INVITE sip:%s@127.0.0.1:%d SIP/2.0", ruriUser, p.addr().Port())
	}
	m := p.expect(start, waitMsg)
	cid, tag := hdr(m, parser.HeaderCallID), tagOf(t, m, parser.HeaderFrom)
	r.caller.forbid(cid, tag)
	if cid == c.u.callID || tag == "atag1" || tag == "" {
		t.Fatalf("B-leg INVITE reuses the A leg's identifiers:\n%s", m.Bytes())
	}
	for _, prev := range r.legs {
		if hdr(prev, parser.HeaderCallID) == cid || tagOf(t, prev, parser.HeaderFrom) == tag {
			t.Fatalf("carrier %s got a B-leg Call-ID or From tag another attempt used (want a fresh dialog per carrier):\n%s\nearlier:\n%s",
				p.name, m.Bytes(), prev.Bytes())
		}
	}
	r.legs = append(r.legs, m)
	if n := m.Count(parser.HeaderVia); n != 1 {
		t.Fatalf("B-leg INVITE has %d Vias, want sipedge's only:\n%s", n, m.Bytes())
	}
	if string(m.Body()) != callerSDP {
		t.Fatalf("B-leg INVITE SDP changed:\n%s", m.Bytes())
	}
	return m
}

// respond has carrier p answer binv.
func respond(p *sipPeer, binv *parser.Message, code int, reason, body string) {
	p.send(uasResponse(p, binv, code, reason, body))
}

// reject has carrier p fail binv with code and takes sipedge's ACK.
func (c *lcrCall) reject(p *sipPeer, binv *parser.Message, code int, reason string) {
	c.r.t.Helper()
	respond(p, binv, code, reason, "")
	ack := p.expect("ACK "+string(binv.RequestURI())+" SIP/2.0", waitMsg)
	if hdr(ack, parser.HeaderVia) != hdr(binv, parser.HeaderVia) || hdr(ack, parser.HeaderCallID) != hdr(binv, parser.HeaderCallID) {
		c.r.t.Fatalf("ACK for the %d is not the INVITE's (RFC 3261 17.1.1.3):\n%s", code, ack.Bytes())
	}
}

// cancelled takes sipedge's CANCEL of binv at p, answers it 200 and the
// INVITE 487, and takes the ACK. It returns when the CANCEL arrived.
func (c *lcrCall) cancelled(p *sipPeer, binv *parser.Message, timeout time.Duration) time.Time {
	t := c.r.t
	t.Helper()
	bc := p.expect("CANCEL "+string(binv.RequestURI())+" SIP/2.0", timeout)
	at := time.Now()
	if hdr(bc, parser.HeaderCallID) != hdr(binv, parser.HeaderCallID) || hdr(bc, parser.HeaderVia) != hdr(binv, parser.HeaderVia) {
		t.Fatalf("CANCEL does not match the B-leg INVITE (RFC 3261 9.1):\n%s", bc.Bytes())
	}
	respond(p, bc, 200, "OK", "")
	respond(p, binv, 487, "Request Terminated", "")
	for {
		// On a loaded machine the 200 can reach sipedge after Timer E
		// fired: a retransmitted CANCEL, answered again, may come first.
		s, ok := p.next(waitMsg)
		if !ok {
			t.Fatalf("%s: no ACK for the 487 within %v", p.name, waitMsg)
		}
		if m := p.check(s); m.Method() == parser.MethodCancel && hdr(m, parser.HeaderVia) == hdr(bc, parser.HeaderVia) {
			respond(p, m, 200, "OK", "")
			continue
		}
		if !strings.HasPrefix(s, "ACK "+string(binv.RequestURI())+" SIP/2.0\r\n") {
			t.Fatalf("%s: got %q, want the ACK for the 487:\n%s", p.name, firstLine(s), s)
		}
		return at
	}
}

// final takes the caller's final failure, which must start with
// "SIP/2.0 code", and ACKs it.
func (c *lcrCall) final(code int) *parser.Message {
	c.r.t.Helper()
	m := c.r.caller.expect(fmt.Sprintf("SIP/2.0 %d ", code), waitMsg)
	if tagOf(c.r.t, m, parser.HeaderTo) == "" {
		c.r.t.Fatalf("a final response without a To tag:\n%s", m.Bytes())
	}
	c.r.caller.send(c.fix(c.u.ackFailure(m)))
	return m
}

// answer has carrier p answer binv 200 with SDP, takes the 200 at the
// caller, ACKs it and takes the ACK at p.
func (c *lcrCall) answer(p *sipPeer, binv *parser.Message) {
	r := c.r
	t := r.t
	t.Helper()
	respond(p, binv, 200, "OK", carrierSDP)
	ok := r.caller.expect("SIP/2.0 200 OK", waitMsg)
	if string(ok.Body()) != carrierSDP {
		t.Fatalf("200 SDP not relayed unchanged:\n%s", ok.Bytes())
	}
	c.u.toTag = tagOf(t, ok, parser.HeaderTo)
	c.u.target = contactURI(t, ok)
	r.a.forbid(c.u.toTag)
	r.b.forbid(c.u.toTag)
	r.caller.send(c.fix(c.u.request("ACK", 10, "")))
	p.expect("ACK sip:gw@carrier.example.net:5070", waitMsg)
}

// bye ends an answered call from the caller; p is the carrier that won.
func (c *lcrCall) bye(p *sipPeer) {
	r := c.r
	r.t.Helper()
	r.caller.send(c.fix(c.u.request("BYE", 11, "")))
	r.caller.expect("SIP/2.0 200 OK", waitMsg)
	bye := p.expect("BYE sip:gw@carrier.example.net:5070", waitMsg)
	respond(p, bye, 200, "OK", "")
}

// ---- the CDR ----

type wantAttempt struct {
	carrier string
	status  int
	dialed  bool
	reason  string // "" = not checked
}

// checkAttempts checks a CDR's lcr_attempts against want, in order, and
// returns them.
func checkAttempts(t *testing.T, rec map[string]any, want ...wantAttempt) []map[string]any {
	t.Helper()
	raw, ok := rec["lcr_attempts"].([]any)
	if !ok {
		t.Fatalf("CDR lcr_attempts %v is not an array: %v", rec["lcr_attempts"], rec)
	}
	var got []map[string]any
	for _, a := range raw {
		m, _ := a.(map[string]any)
		got = append(got, m)
	}
	if len(got) != len(want) {
		t.Fatalf("CDR lcr_attempts %v, want %d entries %+v", raw, len(want), want)
	}
	for i, w := range want {
		g := got[i]
		st, _ := g["status"].(float64)
		dialed, _ := g["dialed"].(bool)
		if g["carrier_id"] != w.carrier || int(st) != w.status || dialed != w.dialed {
			t.Errorf("CDR lcr_attempts[%d] = %v, want carrier_id %s status %d dialed %v", i, g, w.carrier, w.status, w.dialed)
		}
		if w.reason != "" && g["reason"] != w.reason {
			t.Errorf("CDR lcr_attempts[%d] reason %v, want %q", i, g["reason"], w.reason)
		}
		if _, ok := g["elapsed_ms"].(float64); !ok {
			t.Errorf("CDR lcr_attempts[%d] has no elapsed_ms: %v", i, g)
		}
	}
	return got
}

func elapsedMs(a map[string]any) int {
	f, _ := a["elapsed_ms"].(float64)
	return int(f)
}

// checkFields checks string and number fields of a CDR.
func checkFields(t *testing.T, rec map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g := rec[k]
		if wi, ok := w.(int); ok {
			w = float64(wi)
		}
		if g != w {
			t.Errorf("CDR %s = %v (%T), want %v: %v", k, g, g, w, rec)
		}
	}
}

// ---- the routing API ----

// lcrAPI is a routing API on loopback (httptest): it answers every POST
// with status and body, and counts and keeps the requests.
type lcrAPI struct {
	srv   *httptest.Server
	hits  atomic.Int64
	block chan struct{} // closed at cleanup; a blocking API waits on it

	mu     sync.Mutex
	status int
	body   string
	wait   bool
	delay  time.Duration // how long each answer takes
	reqs   []lcr.Request
}

func newLCRAPI(t *testing.T, status int, body string) *lcrAPI {
	t.Helper()
	a := &lcrAPI{status: status, body: body, block: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(func() {
		close(a.block)
		a.srv.Close()
	})
	return a
}

func (a *lcrAPI) url() string { return a.srv.URL + "/route" }

func (a *lcrAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.hits.Add(1)
	var req lcr.Request
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &req)
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	status, body, wait, delay := a.status, a.body, a.wait, a.delay
	a.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-a.block:
		case <-r.Context().Done():
			return
		}
	}
	if wait {
		select {
		case <-a.block:
		case <-r.Context().Done():
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (a *lcrAPI) requests() []lcr.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]lcr.Request(nil), a.reqs...)
}

// closedURL is an API URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/route"
}
