package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// Gateway-group end-to-end tests: runtime groups through the admin
// API while calls run, and OPTIONS probing marking a group down so that a
// call skips it without dialling. A real Server on loopback sockets, a
// scripted caller and scripted UDP carriers, built on the LCR rig of
// lcr_e2e_helpers_test.go (lcrCall and the CDR checks).

const healthToken = "s3cret-admin-token"

// newHealthRig starts two UDP carrier peers (r.a named aName, r.b named
// bName), a Server whose gateway: and lcr: sections gateway and lcrSection
// build from the peers, with admin.token set when token is not "", and a
// caller; t.Cleanup shuts them all down.
func newHealthRig(t *testing.T, aName, bName, token string, gateway func(a, b *sipPeer) string, lcrSection string) *lcrRig {
	t.Helper()
	r := newCarrierPair(t, aName, bName)
	e, logs := r.e2e, r.logs

	admin := `admin: { listen: "127.0.0.1:0" }`
	if token != "" {
		admin = fmt.Sprintf(`admin: { listen: "127.0.0.1:0", token: %q }`, token)
	}
	yaml := fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d", "tcp://127.0.0.1:%[1]d"]
shards: 2
%[2]s
log: { level: debug }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }
%[3]s
%[4]s
cdr: { file: %[5]q }
`, e.port, admin, gateway(r.a, r.b), lcrSection, e.cdrPath)
	e.run(yaml, logs)
	e.caller = newUDPPeer(t, "caller", "127.0.0.1", e.sip)
	e.caller.forbid(carrierSecrets...)
	return r
}

// adminDo sends one request to the admin API, with "Authorization: Bearer
// token" when token is not "", and returns the status and body.
func (r *lcrRig) adminDo(method, path, token, body string) (int, string) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+r.admin+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json") // without admin.token a change must be JSON
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: waitMsg}).Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricLines returns the /metrics lines of a metric whose labels contain
// labels.
func (r *lcrRig) metricLines(token, name, labels string) []string {
	r.t.Helper()
	code, body := r.adminDo("GET", "/metrics", token, "")
	if code != 200 {
		r.t.Fatalf("/metrics: %d %s", code, body)
	}
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, labels) {
			out = append(out, line)
		}
	}
	return out
}

// groupStatus is the admin API's view of one group.
type groupStatus struct {
	Name         string `json:"name"`
	Fixed        bool   `json:"fixed"`
	Destinations []struct {
		URI     string `json:"uri"`
		Address string `json:"address"`
	} `json:"destinations"`
	Members []struct {
		URI                 string `json:"uri"`
		Address             string `json:"address"`
		State               string `json:"state"`
		ConsecutiveFailures int    `json:"consecutive_probe_failures"`
		LastProbeCode       int    `json:"last_probe_code"`
	} `json:"members"`
}

func decodeGroup(t *testing.T, body string) groupStatus {
	t.Helper()
	var g groupStatus
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatalf("group JSON: %v\n%s", err, body)
	}
	return g
}

// checkAPIError checks an admin API error body is {"error": "..."}
// containing every one of want.
func checkAPIError(t *testing.T, what, body string, want ...string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Errorf("%s: body %q is not {\"error\": ...}", what, body)
		return
	}
	for _, w := range want {
		if !strings.Contains(e.Error, w) {
			t.Errorf("%s: error %q does not say %q", what, e.Error, w)
		}
	}
}

// TestHealthRuntimeGroupsThroughAdminAPI: a route naming a group that does
// not exist is skipped without dialling; a group added through the admin API
// is used by the very next call, without a restart; removing it steers the
// next call away while the call already up through it completes normally;
// the YAML's groups cannot be removed.
//
// carrierAOnly is the gateway section of a rig whose one YAML group is
// carrier-a, at r.a.
func carrierAOnly(a, _ *sipPeer) string {
	return fmt.Sprintf(`gateway:
  groups:
    - name: carrier-a
      destinations:
        - { uri: "sip:127.0.0.1:%[1]d", address: "127.0.0.1:%[1]d" }`, a.addr().Port())
}

// passiveGroups is the gateway section of a rig whose carrier-p (r.b) is
// marked down for downSecs by two 503s in a row a second apart (see
// markCarrierPDown), and whose carrier-a (r.a) is never marked down by
// calls; passiveRoutes tries carrier-p first.
func passiveGroups(downSecs int) func(a, p *sipPeer) string {
	return func(a, p *sipPeer) string {
		return fmt.Sprintf(`gateway:
  groups:
    - name: carrier-p
      passive: { outcomes: [status_503], failure_threshold: 2, down_secs: %[3]d }
      destinations:
        - { uri: "sip:127.0.0.1:%[1]d", address: "127.0.0.1:%[1]d" }
    - name: carrier-a
      passive: { disabled: true }
      destinations:
        - { uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d" }`, p.addr().Port(), a.addr().Port(), downSecs)
	}
}

// markCarrierPDown takes carrier-p of passiveGroups down: two calls a
// second apart, each rejected 503 by carrier-p, then by carrier-a, the
// caller getting the 500 a carrier's 503 becomes. Calls do not take a
// member down on one failure, nor on a burst shorter than a second
// (health/outlier.go).
func (r *lcrRig) markCarrierPDown() {
	r.t.Helper()
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		c := r.call(dialed, "")
		c.reject(r.b, c.invite(r.b, dialed), 503, "Service Unavailable")
		c.reject(r.a, c.invite(r.a, dialed), 503, "Service Unavailable")
		c.final(500)
	}
}

var passiveRoutes = staticLCR(
	`{ carrier_id: carrier-p, gateway_group: carrier-p, rate: 0.001, currency: USD }`,
	`{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD }`)

// newRuntimeGroupRig starts sipedge with one YAML group, carrier-a (r.a),
// and a routing API that routes every call to carrier-x, through the group
// runtime-x that the test adds at run time (r.b), then to carrier-a.
func newRuntimeGroupRig(t *testing.T) *lcrRig {
	t.Helper()
	api := newLCRAPI(t, 200, `{"routes":[`+
		`{"carrier_id":"carrier-x","gateway_group":"runtime-x","rate":0.001,"currency":"USD"},`+
		`{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,"currency":"USD"}]}`)
	return newHealthRig(t, "carrier-a", "carrier-x", healthToken, carrierAOnly, fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url()))
}

// The routes come from the routing API: the config validator refuses a
// static route whose gateway_group is not in the YAML unless it has a
// next_hop, which would be dialled instead of the route being burned.
func TestHealthRuntimeGroupsThroughAdminAPI(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newRuntimeGroupRig(t)
	x := r.b

	// (1) runtime-x does not exist yet: carrier-x is burned without an
	// INVITE and carrier-a takes the call.
	c1 := r.call(dialed, "")
	inv := c1.invite(r.a, dialed)
	c1.answer(r.a, inv)
	c1.bye(r.a)
	x.expectNothing(0)

	// (2) Adding runtime-x needs the token.
	xPort := x.addr().Port()
	group := fmt.Sprintf(`{"name": "runtime-x", "algorithm": "weighted", "transport": "udp",
		"probe": {"enabled": false, "interval_secs": 5, "timeout_ms": 500},
		"destinations": [{"uri": "sip:127.0.0.1:%[1]d", "address": "127.0.0.1:%[1]d", "weight": 1, "priority": 0}]}`, xPort)
	if code, body := r.adminDo("POST", "/v1/gateway/groups", "", group); code != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d %s, want 401", code, body)
	}
	if code, body := r.adminDo("POST", "/v1/gateway/groups", "wrong-token", group); code != http.StatusUnauthorized {
		t.Fatalf("POST with a wrong token: %d %s, want 401", code, body)
	}
	if code, _ := r.adminDo("GET", "/v1/gateway/groups/runtime-x", healthToken, ""); code != http.StatusNotFound {
		t.Fatalf("a POST refused for its token added runtime-x anyway (GET: %d)", code)
	}
	code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, group)
	if code != http.StatusCreated {
		t.Fatalf("POST runtime-x: %d %s, want 201", code, body)
	}
	g := decodeGroup(t, body)
	if g.Name != "runtime-x" || g.Fixed || len(g.Members) != 1 || g.Members[0].State != "up" ||
		g.Members[0].Address != fmt.Sprintf("127.0.0.1:%d", xPort) {
		t.Errorf("POST runtime-x returned %s, want the runtime group with its one member up", body)
	}
	// The same group again replaces it: 200.
	if code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, group); code != http.StatusOK {
		t.Errorf("POST runtime-x again: %d %s, want 200 (replaced)", code, body)
	}

	// The very next call goes to X.
	c2 := r.call(dialed, "")
	inv = c2.invite(x, dialed)
	c2.answer(x, inv)
	c2.bye(x)
	r.a.expectNothing(0)

	// (3) A call through X is up when runtime-x is removed.
	c3 := r.call(dialed, "")
	inv3 := c3.invite(x, dialed)
	c3.answer(x, inv3)
	if code, body := r.adminDo("DELETE", "/v1/gateway/groups/runtime-x", healthToken, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE runtime-x: %d %s, want 204", code, body)
	}
	if code, body := r.adminDo("GET", "/v1/gateway/groups/runtime-x", healthToken, ""); code != http.StatusNotFound {
		t.Errorf("GET runtime-x after its DELETE: %d %s, want 404", code, body)
	}
	// The next call goes to A, X gets nothing of it.
	c4 := r.call(dialed, "")
	inv = c4.invite(r.a, dialed)
	c4.answer(r.a, inv)
	c4.bye(r.a)
	x.expectNothing(0)
	// The call that was up ends normally through X.
	c3.bye(x)
	x.expectNothing(quiet)
	r.caller.expectNothing(0)

	// (4) The YAML's group is fixed.
	code, body = r.adminDo("DELETE", "/v1/gateway/groups/carrier-a", healthToken, "")
	if code != http.StatusConflict {
		t.Errorf("DELETE carrier-a (a YAML group): %d %s, want 409", code, body)
	}
	checkAPIError(t, "DELETE carrier-a", body, "carrier-a", "YAML", "fixed")
	code, body = r.adminDo("GET", "/v1/gateway/groups", healthToken, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/gateway/groups: %d %s", code, body)
	}
	var list []groupStatus
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("group list JSON: %v\n%s", err, body)
	}
	if len(list) != 1 || list[0].Name != "carrier-a" || !list[0].Fixed || len(list[0].Destinations) != 1 ||
		list[0].Destinations[0].Address != r.a.addr().String() {
		t.Errorf("GET /v1/gateway/groups = %s, want carrier-a alone (fixed, its one destination)", body)
	}
	code, body = r.adminDo("GET", "/v1/gateway/groups/nope", healthToken, "")
	if code != http.StatusNotFound {
		t.Errorf("GET /v1/gateway/groups/nope: %d %s, want 404", code, body)
	}
	checkAPIError(t, "GET nope", body, "nope")
	if code, body := r.adminDo("DELETE", "/v1/gateway/groups/nope", healthToken, ""); code != http.StatusNotFound {
		t.Errorf("DELETE /v1/gateway/groups/nope: %d %s, want 404", code, body)
	}
	if code, _ := r.adminDo("GET", "/v1/gateway/groups", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/gateway/groups without the token: %d, want 401", code)
	}
	// The removed group's member metrics are gone; carrier-x was burned
	// undialled twice (calls 1 and 4).
	if lines := r.metricLines(healthToken, "sipedge_gateway_member_up", `group="runtime-x"`); len(lines) != 0 {
		t.Errorf("runtime-x's member metrics outlive the group: %q", lines)
	}
	if lines := r.metricLines(healthToken, "sipedge_lcr_attempts_total", `carrier="carrier-x",code="503",dialed="false"`); len(lines) != 1 ||
		!strings.HasSuffix(lines[0], " 2") {
		t.Errorf("carrier-x undialled attempts %q, want 2", lines)
	}

	recs := r.cdrs()
	byID := map[string]map[string]any{}
	for _, rec := range recs {
		id, _ := rec["a_call_id"].(string)
		byID[id] = rec
	}
	if len(recs) != 4 {
		t.Errorf("%d CDRs, want 4: %v", len(recs), recs)
	}
	for i, want := range []struct {
		c       *lcrCall
		carrier string
		burned  bool
	}{{c1, "carrier-a", true}, {c2, "carrier-x", false}, {c3, "carrier-x", false}, {c4, "carrier-a", true}} {
		rec := byID[want.c.u.callID]
		if rec == nil {
			t.Errorf("call %d: no CDR", i+1)
			continue
		}
		checkCDR(t, rec, 200, "caller")
		checkFields(t, rec, map[string]any{"carrier_id": want.carrier})
		if want.burned {
			checkAttempts(t, rec, wantAttempt{"carrier-x", 503, false, "unknown_group"})
		} else {
			checkAttempts(t, rec)
		}
	}
}

// probedPeer answers the OPTIONS probes a sipPeer receives: the first
// answer distinct probes (and their retransmissions) 200, then none. Any
// other request is recorded.
type probedPeer struct {
	p      *sipPeer
	answer int
	stop   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	probes []string // the probes' Via branches, in order
	others []string // first lines of anything but OPTIONS
}

func newProbedPeer(t *testing.T, p *sipPeer, server netip.AddrPort, answer int) *probedPeer {
	pp := &probedPeer{p: p, answer: answer, stop: make(chan struct{}), done: make(chan struct{})}
	go pp.run(server)
	t.Cleanup(func() {
		close(pp.stop)
		<-pp.done
	})
	return pp
}

func (pp *probedPeer) run(server netip.AddrPort) {
	defer close(pp.done)
	for {
		var s string
		select {
		case s = <-pp.p.in:
		case <-pp.stop:
			return
		}
		m := new(parser.Message)
		if err := m.Parse([]byte(s)); err != nil || m.Method() != parser.MethodOptions {
			pp.mu.Lock()
			pp.others = append(pp.others, firstLine(s))
			pp.mu.Unlock()
			continue
		}
		branch := hdr(m, parser.HeaderVia)
		pp.mu.Lock()
		idx := -1
		for i, b := range pp.probes {
			if b == branch {
				idx = i
			}
		}
		if idx < 0 {
			idx = len(pp.probes)
			pp.probes = append(pp.probes, branch)
		}
		reply := idx < pp.answer
		pp.mu.Unlock()
		if reply {
			b := parser.AppendResponse(nil, m, 200, "OK", []byte("ptag7"))
			pp.p.udp.WriteToUDPAddrPort(parser.AppendBody(b, "", nil), server)
		}
	}
}

// counts returns the distinct probes seen, those left unanswered, and the
// other messages.
func (pp *probedPeer) counts() (probes, unanswered int, others []string) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return len(pp.probes), max(len(pp.probes)-pp.answer, 0), append([]string(nil), pp.others...)
}

// TestHealthProbeMarksDownAndSkips: a member that stops answering OPTIONS is
// marked down after failure_threshold probes; its group is then skipped by
// a call at once, without an INVITE (dialed false, group_down), and the
// next route takes the call; sipedge_gateway_member_up says 0.
func TestHealthProbeMarksDownAndSkips(t *testing.T) {
	testtier.RequiresSockets(t)
	// interval_secs is a whole number of seconds in the YAML (0 is the 15 s
	// default), so 1 s is the smallest interval the config accepts
	// (health.MinProbeInterval, 10 ms, is only reachable through the API).
	r := newHealthRig(t, "carrier-a", "carrier-p", "", func(a, p *sipPeer) string {
		return fmt.Sprintf(`gateway:
  groups:
    - name: carrier-p
      probe: { enabled: true, interval_secs: 1, timeout_ms: 300, jitter_ms: 0, failure_threshold: 2, success_threshold: 2 }
      destinations:
        - { uri: "sip:127.0.0.1:%[1]d", address: "127.0.0.1:%[1]d" }
    - name: carrier-a
      destinations:
        - { uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d" }`, p.addr().Port(), a.addr().Port())
	}, staticLCR(
		`{ carrier_id: carrier-p, gateway_group: carrier-p, rate: 0.001, currency: USD }`,
		`{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD }`))
	const answered = 2
	pp := newProbedPeer(t, r.b, r.sip, answered)
	pLabel := `group="carrier-p"`

	// The first probes are answered: the member is up.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n, _, _ := pp.counts(); n >= answered {
			break
		}
		if time.Now().After(deadline) {
			n, _, _ := pp.counts()
			t.Fatalf("%d OPTIONS probes within 5 s, want %d (interval_secs 1)", n, answered)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, body := r.adminDo("GET", "/v1/gateway/groups/carrier-p", "", "")
	if g := decodeGroup(t, body); code != 200 || len(g.Members) != 1 || g.Members[0].State != "up" {
		t.Fatalf("carrier-p after %d answered probes: %d %s, want its member up", answered, code, body)
	}
	if lines := r.metricLines("", "sipedge_gateway_member_up", pLabel); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Fatalf("sipedge_gateway_member_up for carrier-p %q, want one sample, 1", lines)
	}

	// Then it goes silent: down after failure_threshold (2) unanswered
	// probes, not before.
	deadline = time.Now().Add(5 * time.Second)
	var g groupStatus
	for {
		_, silentBefore, _ := pp.counts()
		code, body = r.adminDo("GET", "/v1/gateway/groups/carrier-p", "", "")
		g = decodeGroup(t, body)
		if code != 200 || len(g.Members) != 1 {
			t.Fatalf("GET carrier-p: %d %s", code, body)
		}
		if g.Members[0].State == "down" {
			if silentBefore < 2 {
				t.Errorf("carrier-p marked down after %d unanswered probes, want failure_threshold (2)", silentBefore)
			}
			break
		}
		if time.Now().After(deadline) {
			_, silent, _ := pp.counts()
			t.Fatalf("carrier-p not down 5 s after going silent (%d unanswered probes): %s", silent, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g.Members[0].ConsecutiveFailures < 2 {
		t.Errorf("carrier-p down with consecutive_probe_failures %d, want >= 2: %s", g.Members[0].ConsecutiveFailures, body)
	}

	// A call skips carrier-p at once and goes to carrier-a.
	c := r.call(dialed, "")
	inv := c.invite(r.a, dialed)
	if d := time.Since(c.sentAt); d > time.Second {
		t.Errorf("carrier-a got the INVITE %v after the caller's, want at once (carrier-p skipped without a round trip)", d)
	}
	c.answer(r.a, inv)
	c.bye(r.a)

	if lines := r.metricLines("", "sipedge_gateway_member_up", pLabel); len(lines) != 1 || !strings.HasSuffix(lines[0], " 0") {
		t.Errorf("sipedge_gateway_member_up for carrier-p %q, want one sample, 0", lines)
	}
	if lines := r.metricLines("", "sipedge_gateway_member_up", `group="carrier-a"`); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Errorf("sipedge_gateway_member_up for carrier-a %q, want one sample, 1", lines)
	}
	if _, _, others := pp.counts(); len(others) != 0 {
		t.Errorf("carrier-p (down) received %q, want only OPTIONS", others)
	}

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"carrier_id": "carrier-a"})
	checkAttempts(t, rec, wantAttempt{"carrier-p", 503, false, "group_down"})
}

// TestHealthPassiveConfigured: gateway.groups[].passive sets how calls mark
// a member down. With failure_threshold 2, two 503s in a row a second
// apart from carrier-p mark its member down (the default needs 3), and
// the next call skips carrier-p without an INVITE; carrier-a, with passive
// disabled, stays up through its own 503s.
func TestHealthPassiveConfigured(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newHealthRig(t, "carrier-a", "carrier-p", "", passiveGroups(60), passiveRoutes)
	state := func(group string) string {
		t.Helper()
		code, body := r.adminDo("GET", "/v1/gateway/groups/"+group, "", "")
		g := decodeGroup(t, body)
		if code != 200 || len(g.Members) != 1 {
			t.Fatalf("GET %s: %d %s", group, code, body)
		}
		return g.Members[0].State
	}

	// Both carriers answer 503 (carrier-a three times, as many as the
	// default threshold): the caller gets the 500 a carrier's 503 becomes.
	r.markCarrierPDown()
	c := r.call(dialed, "")
	c.reject(r.a, c.invite(r.a, dialed), 503, "Service Unavailable")
	c.final(500)
	if s := state("carrier-p"); s != "down" {
		t.Errorf("carrier-p after two 503s with failure_threshold 2: %q, want down", s)
	}
	if s := state("carrier-a"); s != "up" {
		t.Errorf("carrier-a after three 503s with passive disabled: %q, want up", s)
	}
	// The last call went straight to carrier-a: carrier-p is skipped.
	r.b.expectNothing(0)
	c = r.call(dialed, "")
	c.answer(r.a, c.invite(r.a, dialed))
	c.bye(r.a)
	r.b.expectNothing(100 * time.Millisecond)
}

// TestHealthCooldownVisible: a carrier's 503 with Retry-After puts its
// member in cooldown, and the cooldown shows: "cooling" until a time in
// the admin API, sipedge_gateway_member_up 0, the seconds left in
// sipedge_gateway_member_cooldown_seconds, a transition to cooling; the
// next call skips the carrier without an INVITE.
func TestHealthCooldownVisible(t *testing.T) {
	if testing.Short() {
		t.Skip("health e2e: opens sockets")
	}
	r := newHealthRig(t, "carrier-a", "carrier-p", "", passiveGroups(60), passiveRoutes)
	c := r.call(dialed, "")
	inv := c.invite(r.b, dialed)
	r.b.send(string(parser.AppendBody(append(parser.AppendResponse(nil, inv, 503, "Service Unavailable", []byte("ptag1")),
		"Retry-After: 60\r\n"...), "", nil)))
	r.b.expect("ACK "+string(inv.RequestURI())+" SIP/2.0", waitMsg)
	at := time.Now()
	c.answer(r.a, c.invite(r.a, dialed))
	c.bye(r.a)

	code, body := r.adminDo("GET", "/v1/gateway/groups/carrier-p", "", "")
	var g struct {
		Members []struct {
			State        string `json:"state"`
			CooldownMs   int64  `json:"cooldown_ms"`
			CoolingUntil string `json:"cooling_until"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(body), &g); code != 200 || err != nil || len(g.Members) != 1 {
		t.Fatalf("GET carrier-p: %d %s (%v)", code, body, err)
	}
	m := g.Members[0]
	until, err := time.Parse(time.RFC3339Nano, m.CoolingUntil)
	if m.State != "cooling" || err != nil || until.Before(at.Add(55*time.Second)) || until.After(at.Add(61*time.Second)) ||
		m.CooldownMs < 55000 || m.CooldownMs > 60000 {
		t.Errorf("carrier-p after a 503 with Retry-After: 60: %+v, want cooling for about 60 s", m)
	}
	pLabel := `group="carrier-p"`
	if lines := r.metricLines("", "sipedge_gateway_member_up", pLabel); len(lines) != 1 || !strings.HasSuffix(lines[0], " 0") {
		t.Errorf("sipedge_gateway_member_up for carrier-p %q, want 0 while cooling", lines)
	}
	if lines := r.metricLines("", "sipedge_gateway_member_cooldown_seconds", pLabel); len(lines) != 1 || strings.HasSuffix(lines[0], " 0") {
		t.Errorf("sipedge_gateway_member_cooldown_seconds for carrier-p %q, want the seconds left", lines)
	}
	var cooling []string
	for _, l := range r.metricLines("", "sipedge_gateway_member_transitions_total", `to="cooling"`) {
		if strings.Contains(l, pLabel) {
			cooling = append(cooling, l)
		}
	}
	if lines := cooling; len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Errorf("transitions to cooling for carrier-p %q, want 1", lines)
	}
	// The next call skips carrier-p.
	c = r.call(dialed, "")
	c.answer(r.a, c.invite(r.a, dialed))
	c.bye(r.a)
	r.b.expectNothing(100 * time.Millisecond)
}

// TestHealthBlackHoleTakenOutAndBack: a carrier's only member that stops
// answering is taken out by the calls' evidence, skipped while down, and
// back after passive.down_secs through a half-open trial call. carrier-p
// (r.b) gets each call first with timeout_secs 1; unanswered, the call
// fails over to carrier-a (r.a) and its caller is answered. sip.t1_ms 50
// ends each unanswered INVITE's retransmissions with Timer B in 3.2 s,
// after which the next call comes: three no-answers in a row over more
// than a second take the member down (the evidence at low rates,
// health/outlier.go; how fast at which rate is health's unit tests').
func TestHealthBlackHoleTakenOutAndBack(t *testing.T) {
	if testing.Short() {
		t.Skip("health e2e: opens sockets")
	}
	groups := func(a, p *sipPeer) string {
		return fmt.Sprintf(`gateway:
  groups:
    - name: carrier-p
      passive: { down_secs: 5, half_open_calls: 1 }
      destinations:
        - { uri: "sip:127.0.0.1:%[1]d", address: "127.0.0.1:%[1]d" }
    - name: carrier-a
      passive: { disabled: true }
      destinations:
        - { uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d" }`, p.addr().Port(), a.addr().Port())
	}
	routes := "sip: { t1_ms: 50 }\n" + staticLCR(
		`{ carrier_id: carrier-p, gateway_group: carrier-p, rate: 0.001, currency: USD, timeout_secs: 1 }`,
		`{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD }`)
	r := newHealthRig(t, "carrier-a", "carrier-p", "", groups, routes)
	state := func() string {
		t.Helper()
		code, body := r.adminDo("GET", "/v1/gateway/groups/carrier-p", "", "")
		g := decodeGroup(t, body)
		if code != 200 || len(g.Members) != 1 {
			t.Fatalf("GET carrier-p: %d %s", code, body)
		}
		return g.Members[0].State
	}
	answeredByA := func(c *lcrCall) {
		t.Helper()
		c.answer(r.a, c.invite(r.a, dialed))
		c.bye(r.a)
	}

	// carrier-p answers nothing: each call waits its second, then goes on.
	for i := 1; ; i++ {
		c := r.call(dialed, "")
		inv := c.invite(r.b, dialed)
		answeredByA(c)
		s := state()
		blackHole(t, r.b, inv, 64*50*time.Millisecond)
		if s == "down" && i == 3 {
			break
		}
		if s != "up" || i == 3 {
			t.Fatalf("carrier-p %q after %d calls it did not answer, want up before the third, down after", s, i)
		}
	}
	// Down: the next call skips it at once.
	c := r.call(dialed, "")
	answeredByA(c)
	r.b.expectNothing(0)

	// After down_secs, half-open: one trial call; carrier-p answers it now,
	// and is up.
	deadline := time.Now().Add(5 * time.Second)
	for state() != "half_open" {
		if time.Now().After(deadline) {
			t.Fatalf("carrier-p %q long after going down, want half_open (down_secs 5)", state())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c = r.call(dialed, "")
	c.answer(r.b, c.invite(r.b, dialed))
	c.bye(r.b)
	if s := state(); s != "up" {
		t.Fatalf("carrier-p %q after answering its trial call, want up", s)
	}
}

// blackHole takes at carrier p, unanswered, the retransmissions of binv
// (Timer A) until its Timer B, timerB after it was sent, has passed.
func blackHole(t *testing.T, p *sipPeer, binv *parser.Message, timerB time.Duration) {
	t.Helper()
	end := time.Now().Add(timerB + 300*time.Millisecond)
	for {
		wait := time.Until(end)
		if wait <= 0 {
			return
		}
		s, ok := p.next(wait)
		if !ok {
			return
		}
		if m := p.check(s); m.Method() != parser.MethodInvite || hdr(m, parser.HeaderVia) != hdr(binv, parser.HeaderVia) {
			t.Fatalf("%s: got %q in a black hole, want only the INVITE again", p.name, firstLine(s))
		}
	}
}
