package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// CPS end-to-end tests, one per rule of docs/design/cps.md: real sipedge
// Servers over loopback UDP between scripted callers
// and carriers, the fleet limiter on a real redis-server. See
// cps_e2e_helpers_test.go.

// cpsGroup is a gateway group entry (YAML, under gateway.groups) for a
// carrier peer, with extra lines (cps:, cps_reject:) indented as entries.
func cpsGroup(name string, p *cpsCarrier, extra ...string) string {
	s := "    - name: " + name + "\n"
	for _, e := range extra {
		s += "      " + e + "\n"
	}
	return s + fmt.Sprintf("      destinations:\n        - { uri: \"sip:127.0.0.1:%[1]d\", address: \"127.0.0.1:%[1]d\" }\n", p.port())
}

// cpsYAML is a node's configuration: the trunk for 127.0.0.1, groups,
// lcr and ratelimit sections (from column 0) and more top-level YAML.
func cpsYAML(port int, cdrFile, trunkLimits, groups, lcr, more string) string {
	trunk := `{ name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }`
	if trunkLimits != "" {
		trunk = `{ name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"], limits: ` + trunkLimits + ` }`
	}
	return fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - %[2]s
gateway:
  groups:
%[3]s%[4]s
%[5]s
cdr: { file: %[6]q }
`, port, trunk, groups, lcr, more, cdrFile)
}

// TestCPSCampaignTwoNodesSharedRedis: a campaign of 10
// calls on carrier A at 2 CPS and 10 on B at 4 CPS, dialled as one burst
// through two sipedge nodes sharing one Redis: neither carrier ever gets
// more than its CPS in any sliding second, and every call is answered.
func TestCPSCampaignTwoNodesSharedRedis(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	a := newCPSCarrier(t, "carrier-a", nil)
	b := newCPSCarrier(t, "carrier-b", nil)
	yaml := func(port int, cdr string) string {
		groups := cpsGroup("carrier-a", a, "cps: { rate: 2, burst: 1, max_wait_ms: 10000 }") +
			cpsGroup("carrier-b", b, "cps: { rate: 4, burst: 1, max_wait_ms: 10000 }")
		lcr := `lcr:
  static_routes:
    - prefix: "1"
      routes:
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
    - prefix: "2"
      routes:
        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }`
		// The deadline is generous: this test is about the limit held
		// across nodes through Redis. A decision that misses the 20 ms
		// default (the first ones under -race can) falls back to the
		// in-process limiter at rate/nodes, whose first slot on each node
		// is free: the documented cost of a mode switch, which the
		// failure-mode tests cover.
		return cpsYAML(port, cdr, "", groups, lcr, fmt.Sprintf("ratelimit: { redis: %q, nodes: 2, deadline_ms: 500 }", redis.URL()))
	}
	n1 := startCPSNode(t, "node1", yaml)
	n2 := startCPSNode(t, "node2", yaml)
	c1 := newCPSCaller(t, "caller1", "127.0.0.1", n1.sip)
	c2 := newCPSCaller(t, "caller2", "127.0.0.1", n2.sip)

	// The burst: 5 + 5 calls per node, interleaved, all within ~100 ms.
	var calls []*cpsCall
	start := time.Now()
	for i := range 5 {
		for j, k := range []*cpsCaller{c1, c2} {
			calls = append(calls, k.invite(fmt.Sprintf("1555%d%03d", j, i)))
			calls = append(calls, k.invite(fmt.Sprintf("2555%d%03d", j, i)))
		}
		time.Sleep(15 * time.Millisecond)
	}
	sent := time.Since(start)
	if sent > 150*time.Millisecond {
		t.Logf("the burst took %v (wanted ~100 ms)", sent)
	}

	// A: 10 slots 1/2 × 1.15 = 575 ms apart: ~5.2 s.
	for _, c := range waitAll(calls, 15*time.Second) {
		t.Errorf("call to %s (sent %v after the burst began) got no final response", c.dialed, c.sentAt.Sub(start))
	}
	for _, c := range calls {
		if code := c.code(); code != 200 {
			t.Errorf("call to %s: final %d, want 200 (no call may be lost)", c.dialed, code)
		}
	}

	for _, x := range []struct {
		p    *cpsCarrier
		rate int
	}{{a, 2}, {b, 4}} {
		invs := x.p.received()
		ts := arrivals(invs)
		if len(ts) != 10 {
			t.Errorf("%s received %d INVITEs, want 10 (one per call): %v", x.p.name, len(ts), invs)
		}
		if len(ts) == 0 {
			continue
		}
		n, at := maxInWindow(ts, time.Second)
		t.Logf("%s: INVITEs at ms after the burst: %s; min gap %v; max in any sliding 1 s window %d (from %d ms), limit %d; retransmissions %d",
			x.p.name, offsets(ts, start), minGap(ts), n, ts[at].Sub(start).Milliseconds(), x.rate, x.p.retrans)
		if n > x.rate {
			t.Errorf("%s: %d INVITEs within 1 s starting %d ms after the burst, over its %d CPS; arrivals (ms): %s",
				x.p.name, n, ts[at].Sub(start).Milliseconds(), x.rate, offsets(ts, start))
		}
		// Both nodes dialled this carrier (the limit is the fleet's).
		users := map[byte]int{}
		for _, v := range invs {
			if len(v.user) > 4 {
				users[v.user[4]]++
			}
		}
		if users['0'] != 5 || users['1'] != 5 {
			t.Errorf("%s: INVITEs per node %v, want 5 from each", x.p.name, users)
		}
	}
	for _, n := range []*cpsNode{n1, n2} {
		if v := n.metric("sipedge_ratelimit_redis_calls_total", ""); v < 10 {
			t.Errorf("%s: sipedge_ratelimit_redis_calls_total %v: the nodes did not pace through Redis", n.name, v)
		}
		if v := n.metric("sipedge_ratelimit_redis_up", ""); v != 1 {
			t.Errorf("%s: sipedge_ratelimit_redis_up %v, want 1", n.name, v)
		}
	}
	byeAll(t, calls)
}

// TestCPSRejectsConvergeToRealLimit: sipedge is told carrier A takes 10
// CPS; the carrier really takes 3 per sliding second and rejects the rest
// with "503 CPS Limit Exceeded". The rejects are retried on fresh B-legs
// after 0.6 to 1.6 s, at most twice (docs/design/cps.md 6), and the account's
// effective rate backs off towards the real limit, so later INVITEs are
// rejected less than earlier ones.
func TestCPSRejectsConvergeToRealLimit(t *testing.T) {
	testtier.RequiresSockets(t)
	const realLimit = 3
	a := newCPSCarrier(t, "carrier-a", func(inv cpsInvite, earlier []cpsInvite) (int, string) {
		n := 0
		for _, e := range earlier {
			if e.code == 200 && inv.at.Sub(e.at) < time.Second {
				n++
			}
		}
		if n >= realLimit {
			return 503, "CPS Limit Exceeded"
		}
		return 200, "OK"
	})
	n := startCPSNode(t, "node", func(port int, cdr string) string {
		return cpsYAML(port, cdr, "",
			cpsGroup("carrier-a", a, "cps: { rate: 10, burst: 1, max_wait_ms: 30000 }", `cps_reject: [{ code: 503, reason: "CPS" }]`),
			staticLCR(yRouteA), "")
	})
	k := newCPSCaller(t, "caller", "127.0.0.1", n.sip)

	// The effective rate, sampled while the campaign runs.
	type sample struct {
		at   time.Duration
		rate float64
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(sampled)
		for {
			if body, err := n.scrape(); err == nil {
				if v, ok := metricIn(body, "sipedge_ratelimit_effective_rate", `key="carrier-a"`); ok {
					mu.Lock()
					samples = append(samples, sample{time.Since(start), v})
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// 30 calls over 6 s: 5 offered per second against a real limit of 3.
	var calls []*cpsCall
	for i := range 30 {
		calls = append(calls, k.invite(fmt.Sprintf("1555%04d", i)))
		time.Sleep(200 * time.Millisecond)
	}
	missing := waitAll(calls, 30*time.Second)
	close(stop)
	<-sampled
	for _, c := range missing {
		t.Errorf("call to %s got no final response", c.dialed)
	}

	invs := a.received()
	byUser := map[string][]cpsInvite{}
	rejected := 0
	for _, v := range invs {
		byUser[v.user] = append(byUser[v.user], v)
		if v.code != 200 {
			rejected++
		}
	}
	ts := arrivals(invs)
	var accepted []time.Time
	for _, v := range invs {
		if v.code == 200 {
			accepted = append(accepted, v.at)
		}
	}
	t.Logf("carrier-a: %d INVITEs, %d rejected; arrivals (ms): %s", len(invs), rejected, offsets(ts, start))
	var sb strings.Builder
	for _, v := range invs {
		fmt.Fprintf(&sb, "%d:%d ", v.at.Sub(start).Milliseconds(), v.code)
	}
	t.Logf("carrier-a outcomes (ms:code): %s", sb.String())

	// Rejected less later than earlier: by thirds of the INVITEs.
	third := len(invs) / 3
	frac := func(vs []cpsInvite) float64 {
		r := 0
		for _, v := range vs {
			if v.code != 200 {
				r++
			}
		}
		return float64(r) / float64(len(vs))
	}
	if third == 0 {
		t.Fatalf("carrier-a got %d INVITEs", len(invs))
	}
	early, late := frac(invs[:third]), frac(invs[len(invs)-third:])
	t.Logf("rejected fraction: first third %.2f, last third %.2f", early, late)
	if early == 0 {
		t.Errorf("no CPS rejects in the first third: the carrier's limit was never hit, the test proves nothing")
	}
	if late >= early {
		t.Errorf("rejected fraction did not drop: first third %.2f, last third %.2f", early, late)
	}

	// The learned rate.
	mu.Lock()
	minRate, minAt := 1e9, time.Duration(0)
	var trace strings.Builder
	for i, s := range samples {
		if s.rate < minRate {
			minRate, minAt = s.rate, s.at
		}
		if i%10 == 0 {
			fmt.Fprintf(&trace, "%d ms: %.2f; ", s.at.Milliseconds(), s.rate)
		}
	}
	mu.Unlock()
	t.Logf("sipedge_ratelimit_effective_rate{key=\"carrier-a\"}: min %.2f at %v; trace %s", minRate, minAt, trace.String())
	if minRate >= 10 {
		t.Errorf("effective rate never went below the configured 10 (min %.2f): no backoff on CPS rejects", minRate)
	} else if minRate > 2*realLimit {
		t.Errorf("effective rate went down only to %.2f, not near the real limit %d", minRate, realLimit)
	}
	if w, at := maxInWindow(accepted, time.Second); w > realLimit {
		t.Errorf("the carrier accepted %d in one second (from %d ms): its meter is broken", w, accepted[at].Sub(start).Milliseconds())
	}

	// Rejects were retried on the same carrier with fresh B-legs, after the
	// jittered delay, at most twice; the caller's outcome follows the last.
	retried := 0
	for _, c := range calls {
		legs := byUser[c.dialed]
		if len(legs) == 0 {
			t.Errorf("call to %s never reached the carrier", c.dialed)
			continue
		}
		if len(legs) > 3 {
			t.Errorf("call to %s: %d INVITEs, want at most 3 (2 retries)", c.dialed, len(legs))
		}
		seen := map[string]bool{}
		for i, l := range legs {
			if seen[l.callID] {
				t.Errorf("call to %s: a retry reused B-leg Call-ID %s", c.dialed, l.callID)
			}
			seen[l.callID] = true
			if i == 0 {
				continue
			}
			retried++
			if legs[i-1].code == 200 {
				t.Errorf("call to %s: INVITE after an answered one", c.dialed)
			}
			if gap := l.at.Sub(legs[i-1].at); gap < 550*time.Millisecond {
				t.Errorf("call to %s: retried %v after the CPS reject, want at least 0.6 s", c.dialed, gap)
			}
		}
		last := legs[len(legs)-1]
		switch code := c.code(); {
		case last.code == 200 && code != 200:
			t.Errorf("call to %s: the carrier answered, the caller got %d", c.dialed, code)
		case last.code != 200 && len(legs) < 3:
			t.Errorf("call to %s: CPS reject not retried (%d INVITEs), caller got %d", c.dialed, len(legs), code)
		case last.code != 200 && code == 200:
			t.Errorf("call to %s: rejected 3 times, yet the caller got 200", c.dialed)
		}
	}
	if retried == 0 {
		t.Error("no CPS reject was retried")
	}
	if v := n.metric("sipedge_cps_rejects_total", ""); int(v) != retried {
		t.Logf("sipedge_cps_rejects_total %v, retries seen by the carrier %d", v, retried)
	}
	byeAll(t, calls)
}

// TestCPSRedisStoppedFallsBackToLocal: Redis frozen (SIGSTOP) then killed
// during a run: calls keep flowing in failure_mode local, none waits much
// more than the 20 ms deadline, the mode change shows in /metrics and is
// logged once per transition; Redis back (SIGCONT, then a new redis-server
// on the same port): Redis mode resumes.
func TestCPSRedisStoppedFallsBackToLocal(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	a := newCPSCarrier(t, "carrier-a", nil)
	n := startCPSNode(t, "node", func(port int, cdr string) string {
		return cpsYAML(port, cdr, "",
			cpsGroup("carrier-a", a, "cps: { rate: 20, burst: 1, max_wait_ms: 2000 }"),
			staticLCR(yRouteA),
			fmt.Sprintf("ratelimit: { redis: %q, deadline_ms: 20, failure_mode: local, nodes: 1 }", redis.URL()))
	})
	k := newCPSCaller(t, "caller", "127.0.0.1", n.sip)
	if v, ok := n.waitMetric("sipedge_ratelimit_redis_up", "", 2*time.Second, func(v float64) bool { return v == 1 }); !ok {
		t.Fatalf("sipedge_ratelimit_redis_up %v at start, want 1", v)
	}

	type tagged struct {
		phase string
		c     *cpsCall
	}
	var calls []tagged
	seq := 0
	// run offers a call every 100 ms (half the paced rate: no pacing wait)
	// for at least d, then until until() holds (nil: no condition) or max.
	run := func(phase string, d, max time.Duration, until func() bool) bool {
		t.Helper()
		start := time.Now()
		for {
			calls = append(calls, tagged{phase, k.invite(fmt.Sprintf("1555%04d", seq))})
			seq++
			time.Sleep(100 * time.Millisecond)
			el := time.Since(start)
			if el >= d && (until == nil || until()) {
				return true
			}
			if el >= max {
				return false
			}
		}
	}
	up := func() float64 { return n.metric("sipedge_ratelimit_redis_up", "") }

	run("redis", time.Second, time.Second, nil)
	calls0 := n.metric("sipedge_ratelimit_redis_calls_total", "")
	if calls0 < 5 {
		t.Errorf("sipedge_ratelimit_redis_calls_total %v after 10 calls in Redis mode", calls0)
	}

	redis.Freeze()
	run("frozen", 1500*time.Millisecond, 1500*time.Millisecond, nil)
	if v := up(); v != 0 {
		t.Errorf("Redis frozen: sipedge_ratelimit_redis_up %v, want 0", v)
	}
	if v := n.metric("sipedge_ratelimit_failure_mode_total", `mode="local"`); v < 1 {
		t.Errorf("Redis frozen: sipedge_ratelimit_failure_mode_total{mode=\"local\"} %v, want > 0", v)
	}
	if v := n.metric("sipedge_ratelimit_redis_errors_total", ""); v < 1 {
		t.Errorf("Redis frozen: sipedge_ratelimit_redis_errors_total %v, want > 0", v)
	}

	redis.Thaw()
	thawAt := time.Now()
	if !run("thawed", 300*time.Millisecond, 5*time.Second, func() bool { return up() == 1 }) {
		t.Errorf("Redis thawed: sipedge_ratelimit_redis_up still 0 after 5 s")
	} else {
		t.Logf("Redis mode resumed %v after SIGCONT", time.Since(thawAt).Round(time.Millisecond))
	}
	run("thawed", 500*time.Millisecond, 500*time.Millisecond, nil)

	redis.Stop()
	run("killed", 1500*time.Millisecond, 1500*time.Millisecond, nil)
	if v := up(); v != 0 {
		t.Errorf("Redis killed: sipedge_ratelimit_redis_up %v, want 0", v)
	}

	redis.Restart()
	restartAt := time.Now()
	if !run("restarted", 300*time.Millisecond, 5*time.Second, func() bool { return up() == 1 }) {
		t.Errorf("Redis restarted: sipedge_ratelimit_redis_up still 0 after 5 s")
	} else {
		t.Logf("Redis mode resumed %v after the restart", time.Since(restartAt).Round(time.Millisecond))
	}
	run("restarted", 500*time.Millisecond, 500*time.Millisecond, nil)
	// The new redis-server holds the account's key: decisions are Redis' again.
	if reply, err := redis.Do("EXISTS {sipedge:cps}:carrier-a"); err != nil || reply != ":1" {
		t.Errorf("after the restart, EXISTS {sipedge:cps}:carrier-a = %q, %v: Redis not used", reply, err)
	}

	all := make([]*cpsCall, len(calls))
	for i, c := range calls {
		all[i] = c.c
	}
	for _, c := range waitAll(all, 10*time.Second) {
		t.Errorf("call to %s got no final response", c.dialed)
	}
	byUser := map[string]cpsInvite{}
	for _, v := range a.received() {
		byUser[v.user] = v
	}
	worst := map[string]time.Duration{}
	var order []string
	for _, c := range calls {
		if code := c.c.code(); code != 200 {
			t.Errorf("%s: call to %s got %d, want 200", c.phase, c.c.dialed, code)
		}
		inv, ok := byUser[c.c.dialed]
		if !ok {
			t.Errorf("%s: call to %s never reached the carrier", c.phase, c.c.dialed)
			continue
		}
		d := inv.at.Sub(c.c.sentAt)
		if _, ok := worst[c.phase]; !ok {
			order = append(order, c.phase)
		}
		worst[c.phase] = max(worst[c.phase], d)
		if d > 500*time.Millisecond {
			t.Errorf("%s: call to %s reached the carrier %v after the caller's INVITE, want < 500 ms", c.phase, c.c.dialed, d)
		}
	}
	var sb strings.Builder
	for _, p := range order {
		fmt.Fprintf(&sb, "%s %v; ", p, worst[p].Round(100*time.Microsecond))
	}
	t.Logf("%d calls; worst caller-INVITE to carrier-INVITE delay per phase: %s", len(calls), sb.String())

	downs := n.metric("sipedge_ratelimit_redis_down_total", "")
	logs := n.logs.String()
	unavailable := strings.Count(logs, "ratelimit: redis unavailable")
	resumed := strings.Count(logs, "redis mode resumed")
	t.Logf("redis_down_total %v, %q logged %d times, %q %d times, failure_mode_total{local} %v",
		downs, "redis unavailable", unavailable, "redis mode resumed", resumed,
		n.metric("sipedge_ratelimit_failure_mode_total", `mode="local"`))
	if downs != 2 {
		t.Errorf("sipedge_ratelimit_redis_down_total %v, want 2 (frozen, killed)", downs)
	}
	if unavailable != int(downs) || resumed != 2 {
		t.Errorf("transitions logged: %d down, %d up; want one per transition (%v down, 2 up)", unavailable, resumed, downs)
	}
	byeAll(t, all)
}

// TestIngressTrunkOverCPSGets503RetryAfter: a trunk over its CPS gets 503
// with Retry-After before any routing work: the LCR API is asked only for
// the admitted calls.
func TestIngressTrunkOverCPSGets503RetryAfter(t *testing.T) {
	testtier.RequiresSockets(t)
	a := newCPSCarrier(t, "carrier-a", nil)
	var hits atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"cache_ttl_secs": 0, "routes": []map[string]any{
			{"carrier_id": "carrier-a", "gateway_group": "carrier-a", "rate": 0.004}}})
	}))
	t.Cleanup(api.Close)
	n := startCPSNode(t, "node", func(port int, cdr string) string {
		return cpsYAML(port, cdr, "{ cps: 2, burst: 1 }", cpsGroup("carrier-a", a),
			fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.URL+"/route"), "")
	})
	k := newCPSCaller(t, "caller", "127.0.0.1", n.sip)

	var calls []*cpsCall
	start := time.Now()
	for i := range 6 {
		calls = append(calls, k.invite(fmt.Sprintf("1555%04d", i)))
		time.Sleep(30 * time.Millisecond)
	}
	t.Logf("6 INVITEs sent within %v", time.Since(start).Round(time.Millisecond))
	for _, c := range waitAll(calls, 5*time.Second) {
		t.Errorf("call to %s got no final response", c.dialed)
	}
	admitted, limited := 0, 0
	var codes []string
	for _, c := range calls {
		m := c.wait(0)
		if m == nil {
			continue
		}
		codes = append(codes, fmt.Sprintf("%s:%d", c.dialed, m.StatusCode()))
		switch m.StatusCode() {
		case 200:
			admitted++
		case 503:
			ra, ok, err := m.RetryAfter()
			if !ok || err != nil || ra.Seconds < 1 {
				t.Errorf("call to %s: 503 without a valid Retry-After (%q):\n%s", c.dialed, m.Get(parser.HeaderRetryAfter), m.Bytes())
				continue
			}
			limited++
		default:
			t.Errorf("call to %s: final %d, want 200 or 503", c.dialed, m.StatusCode())
		}
	}
	a.waitInvites(admitted, time.Second)
	time.Sleep(100 * time.Millisecond) // any INVITE over the limit would arrive now
	invs := a.received()
	t.Logf("finals %v; admitted %d, 503+Retry-After %d; carrier INVITEs %d; LCR API requests %d",
		codes, admitted, limited, len(invs), hits.Load())
	if limited < 3 {
		t.Errorf("%d calls got 503 with Retry-After, want at least 3 (trunk at 2 CPS, 6 INVITEs in 200 ms)", limited)
	}
	if len(invs) > 3 || len(invs) != admitted {
		t.Errorf("carrier got %d INVITEs for %d admitted calls, want them equal and at most 3", len(invs), admitted)
	}
	if h := hits.Load(); int(h) != admitted {
		t.Errorf("LCR API asked %d times for %d admitted calls: a refused call did routing work", h, admitted)
	}
	if v := n.metric("sipedge_trunk_limited_total", ""); int(v) != limited {
		t.Logf("sipedge_trunk_limited_total %v, 503s %d", v, limited)
	}
	byeAll(t, calls)
}

// TestIngressFloodBannedTrunkUnaffected: an unknown source (127.0.0.9)
// sending 400 OPTIONS and INVITEs in a second is banned and then gets no
// answer at all, while the trunk's caller (127.0.0.1) completes calls
// during the flood and after it.
func TestIngressFloodBannedTrunkUnaffected(t *testing.T) {
	testtier.RequiresSockets(t)
	a := newCPSCarrier(t, "carrier-a", nil)
	n := startCPSNode(t, "node", func(port int, cdr string) string {
		return cpsYAML(port, cdr, "", cpsGroup("carrier-a", a), staticLCR(yRouteA), "")
	})
	k := newCPSCaller(t, "caller", "127.0.0.1", n.sip)

	fl, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 9)})
	if err != nil {
		t.Skipf("cannot bind 127.0.0.9: %v", err)
	}
	defer fl.Close()
	var (
		mu      sync.Mutex
		answers []time.Time
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 65536)
		for {
			if _, _, err := fl.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			mu.Lock()
			answers = append(answers, time.Now())
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { fl.Close(); <-readDone })
	answered := func(after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for _, x := range answers {
			if !x.Before(after) {
				c++
			}
		}
		return c
	}
	local := fl.LocalAddr().(*net.UDPAddr).AddrPort().String()
	flood := func(i int) {
		method, uri := "OPTIONS", "sip:"+n.sip.String()
		cseq := fmt.Sprintf("CSeq: %d OPTIONS\r\n", i+1)
		if i%4 == 3 {
			method, uri = "INVITE", fmt.Sprintf("sip:1555%04d@%s", i, n.sip)
			cseq = "CSeq: 1 INVITE\r\n"
		}
		msg := withBody(method+" "+uri+" SIP/2.0\r\n"+
			fmt.Sprintf("Via: SIP/2.0/UDP %s;branch=z9hG4bKflood%d;rport\r\n", local, i)+
			"Max-Forwards: 70\r\n"+
			fmt.Sprintf("From: <sip:flood@%s>;tag=f%d\r\n", local, i)+
			"To: <"+uri+">\r\n"+
			fmt.Sprintf("Call-ID: flood-%d@127.0.0.9\r\n", i)+
			cseq+
			"Contact: <sip:flood@"+local+">\r\n", "")
		if _, err := fl.WriteToUDPAddrPort([]byte(msg), n.sip); err != nil {
			t.Errorf("flood send: %v", err)
		}
	}

	// Before the flood, the unknown source's OPTIONS is answered.
	flood(0)
	time.Sleep(200 * time.Millisecond)
	if answered(time.Time{}) != 1 {
		t.Fatalf("the unknown source's first OPTIONS got %d answers, want 1", answered(time.Time{}))
	}

	// The flood: 400 messages in ~1 s; a trunk call in the middle of it.
	var during *cpsCall
	floodStart := time.Now()
	for i := 1; i <= 400; i++ {
		flood(i)
		if i == 200 {
			during = k.invite("15550001")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("flood: 400 messages in %v, %d answered", time.Since(floodStart).Round(time.Millisecond), answered(floodStart))

	if m := during.wait(waitMsg); m == nil || m.StatusCode() != 200 {
		t.Errorf("the trunk's call during the flood: %v, want 200", m)
	} else {
		t.Logf("trunk call during the flood answered in %v", during.finalAt.Sub(during.sentAt).Round(time.Microsecond))
	}
	bans := n.metric("sipedge_flood_bans_total", "")
	if bans < 1 {
		t.Errorf("sipedge_flood_bans_total %v, want >= 1", bans)
	}

	// Banned: further messages get nothing.
	time.Sleep(100 * time.Millisecond)
	quietFrom := time.Now()
	for i := 401; i <= 420; i++ {
		flood(i)
		time.Sleep(10 * time.Millisecond)
	}
	after := k.invite("15550002")
	time.Sleep(quiet)
	if c := answered(quietFrom); c != 0 {
		t.Errorf("banned source got %d answers after the flood, want none", c)
	}
	if m := after.wait(waitMsg); m == nil || m.StatusCode() != 200 {
		t.Errorf("the trunk's call after the flood: %v, want 200", m)
	}
	invs := a.received()
	if len(invs) != 2 {
		t.Errorf("carrier got %d INVITEs, want the trunk's 2 (the unknown source's INVITEs never route)", len(invs))
	}
	t.Logf("sipedge_flood_bans_total %v, sipedge_flood_dropped_total %v, answers to the flood %d",
		bans, n.metric("sipedge_flood_dropped_total", ""), answered(time.Time{}))
	byeAll(t, []*cpsCall{during, after})
}

// TestIngressFloodConfigured: ratelimit.flood sets the threshold and the
// ban. At 10 messages/s and a 1 s ban, an unknown source sending 30 OPTIONS
// in 150 ms gets at most its first 10 answered (then it is banned), and is
// answered again once the ban is over.
func TestIngressFloodConfigured(t *testing.T) {
	testtier.RequiresSockets(t)
	a := newCPSCarrier(t, "carrier-a", nil)
	n := startCPSNode(t, "node", func(port int, cdr string) string {
		return cpsYAML(port, cdr, "", cpsGroup("carrier-a", a), staticLCR(yRouteA),
			"ratelimit: { flood: { messages_per_sec: 10, ban_secs: 1 } }")
	})
	fl, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 9)})
	if err != nil {
		t.Skipf("cannot bind 127.0.0.9: %v", err)
	}
	defer fl.Close()
	local := fl.LocalAddr().(*net.UDPAddr).AddrPort().String()
	options := func(i int) {
		msg := withBody("OPTIONS sip:"+n.sip.String()+" SIP/2.0\r\n"+
			fmt.Sprintf("Via: SIP/2.0/UDP %s;branch=z9hG4bKconf%d;rport\r\n", local, i)+
			"Max-Forwards: 70\r\n"+
			fmt.Sprintf("From: <sip:flood@%s>;tag=f%d\r\n", local, i)+
			"To: <sip:"+n.sip.String()+">\r\n"+
			fmt.Sprintf("Call-ID: conf-%d@127.0.0.9\r\n", i)+
			fmt.Sprintf("CSeq: %d OPTIONS\r\n", i+1), "")
		if _, err := fl.WriteToUDPAddrPort([]byte(msg), n.sip); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	// answers counts the responses that arrive within d.
	answers := func(d time.Duration) int {
		buf := make([]byte, 65536)
		c := 0
		fl.SetReadDeadline(time.Now().Add(d))
		for {
			if _, _, err := fl.ReadFromUDPAddrPort(buf); err != nil {
				return c
			}
			c++
		}
	}
	for i := range 30 {
		options(i)
		time.Sleep(5 * time.Millisecond)
	}
	if got := answers(300 * time.Millisecond); got == 0 || got > 10 {
		t.Errorf("30 OPTIONS in 150 ms at messages_per_sec 10: %d answered, want 1 to 10", got)
	}
	if bans := n.metric("sipedge_flood_bans_total", ""); bans != 1 {
		t.Errorf("sipedge_flood_bans_total %v, want 1", bans)
	}
	time.Sleep(time.Second) // ban_secs 1, from the ban ~150 ms in
	options(100)
	if got := answers(500 * time.Millisecond); got != 1 {
		t.Errorf("after the 1 s ban: %d answers, want 1", got)
	}
}

// TestCPSBatchConfigured: ratelimit.batch makes a node reserve blocks of
// slots in Redis for a fast key (60/s, above batch_min_rate 50) while its
// demand keeps up with the rate: 40 calls offered at ~66/s take fewer
// Redis decisions than calls, every call is answered, and the carrier
// never gets more than its 60 CPS in a second.
func TestCPSBatchConfigured(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	a := newCPSCarrier(t, "carrier-a", nil)
	n := startCPSNode(t, "node", func(port int, cdr string) string {
		return cpsYAML(port, cdr, "", cpsGroup("carrier-a", a, "cps: { rate: 60, burst: 1, max_wait_ms: 2000 }"),
			staticLCR(yRouteA), fmt.Sprintf("ratelimit: { redis: %q, batch: 8 }", redis.URL()))
	})
	k := newCPSCaller(t, "caller", "127.0.0.1", n.sip)
	var calls []*cpsCall
	for i := range 40 {
		calls = append(calls, k.invite(fmt.Sprintf("1555%04d", i)))
		time.Sleep(15 * time.Millisecond)
	}
	for _, c := range waitAll(calls, 10*time.Second) {
		t.Errorf("call to %s got no final response", c.dialed)
	}
	for _, c := range calls {
		if code := c.code(); code != 200 {
			t.Errorf("call to %s: final %d, want 200", c.dialed, code)
		}
	}
	ts := arrivals(a.received())
	if m, _ := maxInWindow(ts, time.Second); m > 60 || len(ts) != 40 {
		t.Errorf("carrier-a: %d INVITEs, at most %d in a second; want 40, at most 60", len(ts), m)
	}
	held := n.metric("sipedge_ratelimit_batch_slots_total", "")
	redisCalls := n.metric("sipedge_ratelimit_redis_calls_total", "")
	t.Logf("40 calls: %v Redis decisions, %v slots handed out from blocks", redisCalls, held)
	if held == 0 || redisCalls >= 40 {
		t.Errorf("batch 8: %v slots from blocks and %v Redis decisions for 40 calls; want blocks, and fewer decisions than calls", held, redisCalls)
	}
	byeAll(t, calls)
}
