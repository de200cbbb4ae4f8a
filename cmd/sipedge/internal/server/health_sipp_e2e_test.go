package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Gateway health under load, end to end with SIPp (sipp_e2e_helpers_test.go):
// what calls mark down must be a carrier that stopped answering, never a
// few packets lost among thousands of calls; and the last carrier of a
// call is dialled whatever calls marked.
//
// These tests hold sipedge to rates and deadlines (500 calls/s, down
// within 2 s), which the race detector, slowing it several-fold, would
// miss: they skip under -race (loadTest), and run in every other build
// (go test ./..., without -short).

// memberState is the admin API's state of a group's only member.
func (r *lcrRig) memberState(group string) string {
	r.t.Helper()
	code, body := r.adminDo("GET", "/v1/gateway/groups/"+group, "", "")
	g := decodeGroup(r.t, body)
	if code != 200 || len(g.Members) != 1 {
		r.t.Fatalf("GET %s: %d %s", group, code, body)
	}
	return g.Members[0].State
}

// cdrsBy counts the CDRs by final_code and, for the calls with attempts,
// by their first attempt's carrier, status and reason.
func cdrsBy(recs []map[string]any) (codes map[int]int, attempts map[string]int) {
	codes, attempts = map[int]int{}, map[string]int{}
	for _, rec := range recs {
		fc, _ := rec["final_code"].(float64)
		codes[int(fc)]++
		if as, _ := rec["lcr_attempts"].([]any); len(as) > 0 {
			a, _ := as[0].(map[string]any)
			st, _ := a["status"].(float64)
			attempts[fmt.Sprintf("%v %d %v", a["carrier_id"], int(st), a["reason"])]++
		}
	}
	return codes, attempts
}

// TestHealthSIPpScatteredNoAnswersKeepCarrierUp: a carrier's only member
// that leaves six INVITEs unanswered, three in a row twice, among 10,000
// calls at 500 calls/s (the failure that once took a working carrier out
// for passive.down_secs) stays up: no transition to down is counted, and no
// call is refused but those six, each after the route's timeout_secs
// (sipedge's own 503, the attempt a 408 ring_timeout).
//
// The figure is 20,000 calls at 1,000 calls/s; on the 2-core
// machine sipedge is developed on, shared and loaded (load average 10 to
// 16), SIPp's carrier then fell seconds behind now and then: 0.2 to 5 % of
// the calls rang out, in bursts that took the member down by the
// evidence, as they should. At 500 calls/s one call in 20,000 at most did.
// Such calls are more of the same evidence, scattered, which must not
// take the member down either; they are counted and logged.
func TestHealthSIPpScatteredNoAnswersKeepCarrierUp(t *testing.T) {
	loadTest(t)
	const rate, calls = 500, 10000
	p := sippCarrier(t, "carrier-p", "uas.xml")
	r := newSIPpRig(t, "gateway:\n  groups:\n"+gatewayGroup("carrier-p", "", p),
		staticLCR(`{ carrier_id: carrier-p, gateway_group: carrier-p, rate: 0.001, timeout_secs: 5 }`))
	numbers := make([]string, calls)
	for i := range numbers {
		numbers[i] = fmt.Sprintf("1555%07d", i)
	}
	silent := map[string]bool{}
	for _, i := range []int{2500, 2501, 2502, 7000, 7001, 7002} {
		numbers[i] = fmt.Sprintf("9995%07d", i)
		silent[numbers[i]] = true
	}
	start := time.Now()
	caller := sippCaller(t, "caller", r.sip, numbers, rate, calls, 0)
	caller.wait(time.Duration(calls/rate)*time.Second + time.Minute)
	st := caller.stats()
	t.Logf("%d calls at %d/s in %v: SIPp created %d, succeeded %d, failed %d, %d retransmissions",
		calls, rate, time.Since(start).Round(time.Millisecond), st.created, st.succeeded, st.failed, st.retransmissions)
	if st.created != calls || st.failed != 0 {
		t.Errorf("SIPp caller: %d of %d calls made, %d failed; want all made, none failed", st.created, calls, st.failed)
	}
	if s := r.memberState("carrier-p"); s != "up" {
		t.Errorf("carrier-p's member %q after the calls, want up", s)
	}
	if n := r.metricWith("sipedge_gateway_member_transitions_total", `to="down"`); n != 0 {
		t.Errorf("%v transitions to down, want none", n)
	}
	recs := r.cdrs()
	answered, late := 0, 0
	for _, rec := range recs {
		callee, _ := rec["callee"].(string)
		fc, _ := rec["final_code"].(float64)
		as, _ := rec["lcr_attempts"].([]any)
		switch {
		case fc == 200 && len(as) == 0 && !silent[callee]:
			answered++
		case fc == 503 && len(as) == 1 && attemptIs(as[0], "carrier-p", 408, "ring_timeout"):
			if silent[callee] {
				delete(silent, callee)
			} else {
				late++
			}
		default:
			t.Errorf("CDR %v: want answered, or refused 503 after carrier-p rang out", rec)
		}
	}
	t.Logf("CDRs: %d answered, %d refused after the silent INVITEs, %d more refused for an answer later than 5 s",
		answered, 6-len(silent), late)
	if len(recs) != calls || len(silent) != 0 {
		t.Errorf("%d CDRs for %d calls; silent calls without a 503 after a ring-out: %v", len(recs), calls, silent)
	}
}

// attemptIs reports whether a CDR's lcr_attempts entry is a dialled attempt
// of carrier that ended in status for reason.
func attemptIs(a any, carrier string, status int, reason string) bool {
	m, _ := a.(map[string]any)
	st, _ := m["status"].(float64)
	r, _ := m["reason"].(string)
	return m["carrier_id"] == carrier && int(st) == status && r == reason && m["dialed"] == true
}

// memberWatch records the admin API's state of a group's members, polled
// every 20 ms, each change with when it was seen.
type memberWatch struct {
	stop, done chan struct{}

	mu      sync.Mutex
	changes []memberChange
	err     error
}

type memberChange struct {
	at     time.Time
	member int
	state  string
}

// watchMembers polls group's members' states until the test ends.
func (r *lcrRig) watchMembers(group string) *memberWatch {
	w := &memberWatch{stop: make(chan struct{}), done: make(chan struct{})}
	url := "http://" + r.admin + "/v1/gateway/groups/" + group
	go func() {
		defer close(w.done)
		client := &http.Client{Timeout: time.Second}
		last := map[int]string{}
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var g groupStatus
			resp, err := client.Get(url)
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&g)
				resp.Body.Close()
			}
			now := time.Now()
			w.mu.Lock()
			if err != nil {
				w.err = err
			}
			for i, m := range g.Members {
				if last[i] != m.State {
					last[i] = m.State
					w.changes = append(w.changes, memberChange{at: now, member: i, state: m.State})
				}
			}
			w.mu.Unlock()
		}
	}()
	r.t.Cleanup(w.end)
	return w
}

// end stops the polling.
func (w *memberWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// first returns when member was first seen in state at or after since.
func (w *memberWatch) first(member int, state string, since time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.changes {
		if c.member == member && c.state == state && !c.at.Before(since) {
			return c.at, true
		}
	}
	return time.Time{}, false
}

// waitFor waits until every member given is seen in state at or after
// since, failing the test after timeout.
func (w *memberWatch) waitFor(t *testing.T, state string, since time.Time, timeout time.Duration, members ...int) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var latest time.Time
		all := true
		for _, m := range members {
			at, ok := w.first(m, state, since)
			all = all && ok
			if at.After(latest) {
				latest = at
			}
		}
		if all {
			return latest
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %v not %s within %v: %s", members, state, timeout, w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// String lists the changes seen.
func (w *memberWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, c := range w.changes {
		fmt.Fprintf(&b, "\n\t%s member %d %s", c.at.Format("15:04:05.000"), c.member, c.state)
	}
	if w.err != nil {
		fmt.Fprintf(&b, "\n\tlast error: %v", w.err)
	}
	return b.String()
}

// invitedAfter reports whether a CDR's call came in after t.
func invitedAfter(t *testing.T, rec map[string]any, at time.Time) bool {
	t.Helper()
	s, _ := rec["time_invite"].(string)
	ti, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("CDR time_invite %q: %v", s, err)
	}
	return ti.After(at)
}

// TestHealthSIPpBlackHoleTakenOutAndBack: a carrier's only member that
// goes silent for 3 s under 200 calls/s (its SIPp frozen with SIGSTOP) is
// taken out by the calls' evidence within 2 s of going silent, its calls
// skipping it for the next carrier without a dial meanwhile; after
// passive.down_secs it is back (half-open, then up on its trial calls)
// and takes calls again. No caller loses a call: until the member is out,
// each call to it fails over after its timeout_secs (1 s), the evidence
// (no answer) counted as it does.
func TestHealthSIPpBlackHoleTakenOutAndBack(t *testing.T) {
	loadTest(t)
	const rate, seconds = 200, 10
	p := sippCarrier(t, "carrier-p", "uas.xml")
	b := sippCarrier(t, "carrier-b", "uas.xml")
	r := newSIPpRig(t, "gateway:\n  groups:\n"+
		gatewayGroup("carrier-p", "passive: { down_secs: 3 }", p)+
		gatewayGroup("carrier-b", "passive: { disabled: true }", b),
		staticLCR(`{ carrier_id: carrier-p, gateway_group: carrier-p, rate: 0.001, timeout_secs: 1 }`,
			`{ carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.002 }`))
	w := r.watchMembers("carrier-p")
	caller := sippCaller(t, "caller", r.sip, []string{"15551234"}, rate, rate*seconds, 0)
	time.Sleep(2 * time.Second)
	silent := time.Now()
	p.signal(syscall.SIGSTOP)
	time.Sleep(3 * time.Second)
	p.signal(syscall.SIGCONT)
	back := time.Now()
	caller.wait(seconds*time.Second + time.Minute)
	w.end()

	down, ok := w.first(0, "down", silent)
	if !ok {
		t.Fatalf("carrier-p never down after going silent for 3 s: %s", w)
	}
	t.Logf("carrier-p silent at %s, down %v later; states: %s", silent.Format("15:04:05.000"), down.Sub(silent).Round(time.Millisecond), w)
	if d := down.Sub(silent); d > 2*time.Second {
		t.Errorf("carrier-p down %v after going silent, want within 2 s", d)
	}
	up, ok := w.first(0, "up", back)
	if !ok {
		t.Fatalf("carrier-p not up again after it answered again: %s", w)
	}
	if s := r.memberState("carrier-p"); s != "up" {
		t.Errorf("carrier-p %q at the end, want up", s)
	}
	st := caller.stats()
	if st.created != rate*seconds || st.failed != 0 {
		t.Errorf("SIPp caller: %+v, want %d calls made, none failed", st, rate*seconds)
	}
	skipped, toP := 0, 0
	for _, rec := range r.cdrs() {
		as, _ := rec["lcr_attempts"].([]any)
		if fc, _ := rec["final_code"].(float64); fc != 200 {
			t.Errorf("a call failed: %v", rec)
		}
		if len(as) == 1 && attemptIsUndialled(as[0], "carrier-p", "group_down") {
			skipped++
		}
		if rec["carrier_id"] == "carrier-p" && invitedAfter(t, rec, up) {
			toP++
		}
	}
	t.Logf("%d calls skipped carrier-p while it was out; %d went to it once it was up again", skipped, toP)
	if skipped == 0 || toP == 0 {
		t.Errorf("%d calls skipped carrier-p while out, %d answered by it once back: want some of each", skipped, toP)
	}
}

// attemptIsUndialled reports whether a CDR's lcr_attempts entry is
// carrier skipped without a dial, for reason.
func attemptIsUndialled(a any, carrier, reason string) bool {
	m, _ := a.(map[string]any)
	st, _ := m["status"].(float64)
	r, _ := m["reason"].(string)
	return m["carrier_id"] == carrier && int(st) == 503 && r == reason && m["dialed"] == false
}

// blackHoleMember is a gateway that answers nothing, OPTIONS included,
// and counts the INVITEs it gets.
type blackHoleMember struct {
	conn    *net.UDPConn
	invites atomic.Int64
}

func newBlackHoleMember(t *testing.T) *blackHoleMember {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	m := &blackHoleMember{conn: c}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if strings.HasPrefix(string(buf[:n]), "INVITE ") {
				m.invites.Add(1)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return m
}

func (m *blackHoleMember) dest() string {
	a := m.conn.LocalAddr().String()
	return fmt.Sprintf("        - { uri: \"sip:%[1]s\", address: \"%[1]s\" }\n", a)
}

// TestHealthSIPpTwoOfThreeDownStillSendsToTheThird: a group of three
// members, two of which answer nothing, OPTIONS probes included: probes
// hold those two down, the group is in panic (a third of it up, under
// the 50 % threshold), and panic never brings back what probes hold down,
// so every call goes to the third member, and is answered.
func TestHealthSIPpTwoOfThreeDownStillSendsToTheThird(t *testing.T) {
	loadTest(t)
	const rate, calls = 200, 1000
	dead1, dead2 := newBlackHoleMember(t), newBlackHoleMember(t)
	live := sippCarrier(t, "carrier-live", "uas.xml", "-aa") // -aa: SIPp answers OPTIONS 200
	r := newSIPpRig(t, "gateway:\n  groups:\n"+
		"    - name: carrier-g\n"+
		"      probe: { enabled: true, interval_secs: 1, timeout_ms: 300, jitter_ms: 0, failure_threshold: 2, success_threshold: 1 }\n"+
		"      destinations:\n"+dead1.dest()+dead2.dest()+
		fmt.Sprintf("        - { uri: \"sip:%[1]s\", address: \"%[1]s\" }\n", live.addr()),
		staticLCR(`{ carrier_id: carrier-g, gateway_group: carrier-g, rate: 0.001, timeout_secs: 2 }`))
	w := r.watchMembers("carrier-g")
	start := time.Now()
	w.waitFor(t, "down", start, 10*time.Second, 0, 1)
	if at, ok := w.first(2, "down", start); ok {
		t.Fatalf("the live member went down at %s: %s", at.Format("15:04:05.000"), w)
	}
	code, body := r.adminDo("GET", "/v1/gateway/groups/carrier-g", "", "")
	if !strings.Contains(body, `"panic":true`) {
		t.Errorf("carrier-g with one member of three up is not in panic: %d %s", code, body)
	}

	caller := sippCaller(t, "caller", r.sip, []string{"15551234"}, rate, calls, 0)
	caller.wait(calls/rate*time.Second + time.Minute)
	if st := caller.stats(); st.created != calls || st.failed != 0 {
		t.Errorf("SIPp caller: %+v, want %d calls made, none failed", st, calls)
	}
	if n1, n2 := dead1.invites.Load(), dead2.invites.Load(); n1+n2 != 0 {
		t.Errorf("the members probes hold down got %d and %d INVITEs, want none", n1, n2)
	}
	codes, attempts := cdrsBy(r.cdrs())
	if codes[200] != calls || len(codes) != 1 || len(attempts) != 0 {
		t.Errorf("CDRs by final code %v, failed attempts %v; want all %d answered at the first try", codes, attempts, calls)
	}
}

// TestHealthSIPpLastCarrierTriedWhenEveryGroupIsDown: two carriers, each a
// gateway group of one member, both silent for a while (SIGSTOP) under
// 100 calls/s, until calls mark both down (passive.down_secs 60). When
// they answer again, the next calls skip the first carrier without a dial
// (group_down) but still dial the last one, which calls marked down too:
// with no carrier left to fail over to, its group gives the member anyway
// (a last-resort pick, counted), and its answers bring it back long
// before down_secs, while the first carrier stays down.
func TestHealthSIPpLastCarrierTriedWhenEveryGroupIsDown(t *testing.T) {
	loadTest(t)
	const rate, seconds = 100, 12
	q := sippCarrier(t, "carrier-q", "uas.xml")
	p := sippCarrier(t, "carrier-p", "uas.xml")
	r := newSIPpRig(t, "gateway:\n  groups:\n"+
		gatewayGroup("carrier-q", "passive: { down_secs: 60 }", q)+
		gatewayGroup("carrier-p", "passive: { down_secs: 60 }", p),
		staticLCR(`{ carrier_id: carrier-q, gateway_group: carrier-q, rate: 0.001, timeout_secs: 1 }`,
			`{ carrier_id: carrier-p, gateway_group: carrier-p, rate: 0.002, timeout_secs: 1 }`))
	wq, wp := r.watchMembers("carrier-q"), r.watchMembers("carrier-p")
	caller := sippCaller(t, "caller", r.sip, []string{"15551234"}, rate, rate*seconds, 0)
	time.Sleep(time.Second)
	silent := time.Now()
	q.signal(syscall.SIGSTOP)
	p.signal(syscall.SIGSTOP)
	wq.waitFor(t, "down", silent, 8*time.Second, 0)
	wp.waitFor(t, "down", silent, 8*time.Second, 0)
	q.signal(syscall.SIGCONT)
	p.signal(syscall.SIGCONT)
	back := time.Now()
	caller.wait(seconds*time.Second + time.Minute)
	t.Logf("silent at %s, answering again at %s; carrier-q: %s\ncarrier-p: %s", silent.Format("15:04:05.000"),
		back.Format("15:04:05.000"), wq, wp)

	if _, ok := wp.first(0, "up", back); !ok {
		t.Errorf("carrier-p, the last carrier, not up again once it answered: %s", wp)
	}
	if s := r.memberState("carrier-q"); s != "down" {
		t.Errorf("carrier-q %q at the end, want down (down_secs 60, no call sent to it)", s)
	}
	if n := r.metricWith("sipedge_gateway_rescue_picks_total", `group="carrier-p",mode="last_resort"`); n == 0 {
		t.Errorf("no last-resort pick counted for carrier-p")
	}
	if n := r.metricWith("sipedge_gateway_rescue_picks_total", `group="carrier-q"`); n != 0 {
		t.Errorf("%v rescue picks for carrier-q, which is not the last carrier", n)
	}
	// A second after they answer again (the calls in flight then ring
	// out), every call is answered by carrier-p, carrier-q skipped.
	answered, other := 0, 0
	for _, rec := range r.cdrs() {
		if !invitedAfter(t, rec, back.Add(time.Second)) {
			continue
		}
		as, _ := rec["lcr_attempts"].([]any)
		fc, _ := rec["final_code"].(float64)
		if fc == 200 && rec["carrier_id"] == "carrier-p" && len(as) == 1 && attemptIsUndialled(as[0], "carrier-q", "group_down") {
			answered++
		} else {
			other++
			if other <= 3 {
				t.Errorf("a call after both carriers answered again: %v; want answered by carrier-p, carrier-q skipped", rec)
			}
		}
	}
	t.Logf("%d calls answered by the last carrier after both answered again, %d otherwise", answered, other)
	if answered < rate*2 {
		t.Errorf("%d calls answered by carrier-p after both answered again, want %d at least", answered, rate*2)
	}
}
