package health

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// metricValue returns the value of the metric line that starts with name
// and has the member's labels, "" if none.
func metricValue(t *testing.T, r *Registry, name string, s *state) string {
	t.Helper()
	var b bytes.Buffer
	r.set.WritePrometheus(&b)
	prefix := name + `{group="g",uri="` + s.uri + `",address="` + s.address + `"`
	for _, l := range strings.Split(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest[strings.LastIndexByte(rest, ' ')+1:]
		}
	}
	return ""
}

// A 503's Retry-After cooldown is visible: the member's state is cooling
// until a time the admin API shows, sipedge_gateway_member_up is 0 and
// sipedge_gateway_member_cooldown_seconds counts down, and the start is a
// transition to cooling (an extension is not).
func TestCooldownVisible(t *testing.T) {
	r, clk, logs := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(2)})
	h := r.Handler()
	member := func(i int) MemberStatus {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/gateway/groups/g", nil))
		var gs GroupStatus
		if err := json.NewDecoder(w.Body).Decode(&gs); err != nil {
			t.Fatalf("GET: %d %v", w.Code, err)
		}
		return gs.Members[i]
	}
	s := st(t, r, "g", 0)
	check := func(what, state, until string, cooldownMs int64, up, left, cooling string) {
		t.Helper()
		m := member(0)
		if m.State != state || m.CoolingUntil != until || m.CooldownMs != cooldownMs {
			t.Errorf("%s: state %q cooling_until %q cooldown_ms %d; want %q %q %d", what, m.State, m.CoolingUntil, m.CooldownMs, state, until, cooldownMs)
		}
		if got := metricValue(t, r, "sipedge_gateway_member_up", s); got != up {
			t.Errorf("%s: sipedge_gateway_member_up %s, want %s", what, got, up)
		}
		if got := metricValue(t, r, "sipedge_gateway_member_cooldown_seconds", s); got != left {
			t.Errorf("%s: sipedge_gateway_member_cooldown_seconds %s, want %s", what, got, left)
		}
		if got := metricValue(t, r, "sipedge_gateway_member_transitions_total", s); got == "" {
			t.Errorf("%s: no transitions counted", what)
		}
		var b bytes.Buffer
		r.set.WritePrometheus(&b)
		want := `sipedge_gateway_member_transitions_total{group="g",uri="` + s.uri + `",address="` + s.address + `",to="cooling"} ` + cooling
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("%s: no line %s", what, want)
		}
	}
	until := func(d time.Duration) string {
		return r.epoch.Add(clk.now() + d).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	check("fresh", "up", "", 0, "1", "0", "0")

	var sel Selector
	m, _ := r.Pick("g", 0, &sel)
	for m.Index != 0 {
		m, _ = r.Pick("g", 0, &sel)
	}
	r.Cooldown(m, 30*time.Second)
	check("cooling", "cooling", until(30*time.Second), 30000, "0", "30", "1")
	clk.advance(10 * time.Second)
	check("20 s left", "cooling", until(20*time.Second), 20000, "0", "20", "1")
	r.Cooldown(m, 60*time.Second) // extended: no new transition
	check("extended", "cooling", until(60*time.Second), 60000, "0", "60", "1")
	if n := logs.count(`msg="gateway member in cooldown"`); n != 1 {
		t.Errorf("%d cooldown lines, want 1", n)
	}

	clk.advance(61 * time.Second)
	r.tick(clk.now())
	check("over", "up", "", 0, "1", "0", "1")
	if n := logs.count(`msg="gateway member cooldown over"`); n != 1 {
		t.Errorf("%d cooldown-over lines, want 1", n)
	}

	// A member down keeps its cooldown: state down, the time shown.
	r.Cooldown(m, 30*time.Second)
	r.toDown(s, false, "test", nil)
	check("down and cooling", "down", until(30*time.Second), 30000, "0", "30", "2")
}
