package health

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/transport"
)

func TestAdminHandler(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "yaml", Destinations: dests(1)})
	h := r.Handler()
	do := func(method, path, body string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		return w.Code, w.Body.String()
	}
	f := func(method, path, body string, wantCode int, wantIn ...string) string {
		t.Helper()
		code, got := do(method, path, body)
		if code != wantCode {
			t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, code, got, wantCode)
		}
		for _, w := range wantIn {
			if !strings.Contains(got, w) {
				t.Fatalf("%s %s: body %s lacks %s", method, path, got, w)
			}
		}
		return got
	}
	const carrier = `{"name": "carrier-b", "algorithm": "hash", "transport": "tcp", "reroute_causes": [404, 503],
		"probe": {"enabled": true, "interval_secs": 30, "timeout_ms": 1500, "failure_threshold": 4, "healthy_codes": [200, 404]},
		"passive": {"outcomes": ["no_response"], "half_open_calls": 2, "failure_percent": 80, "min_calls": 50},
		"panic_threshold_percent": 0,
		"destinations": [
			{"uri": "sip:b1.example.com", "address": "127.0.0.1:5090", "weight": 3, "priority": 1},
			{"uri": "sip:b2.example.com", "address": "127.0.0.2:5090"}]}`

	f("GET", "/v1/gateway/groups", "", 200, `"name":"yaml"`, `"fixed":true`, `"interval_secs":15`, `"jitter_ms":0`,
		`"failure_percent":50`, `"min_calls":20`, `"panic_threshold_percent":50`)
	got := f("POST", "/v1/gateway/groups", carrier, 201, `"name":"carrier-b"`, `"fixed":false`, `"state":"up"`)
	var gs GroupStatus
	if err := json.Unmarshal([]byte(got), &gs); err != nil {
		t.Fatal(err)
	}
	p := gs.Probe
	if !p.Enabled || p.Interval != 30*time.Second || p.Timeout != 1500*time.Millisecond || p.FailureThreshold != 4 ||
		p.SuccessThreshold != DefaultSuccessThreshold || p.Jitter != DefaultProbeJitter || len(p.HealthyCodes) != 2 {
		t.Fatalf("probe config %+v", p)
	}
	if gs.Algorithm != AlgorithmHash || gs.Transport != transport.TCP || len(gs.RerouteCauses) != 2 || gs.Passive.HalfOpenCalls != 2 ||
		gs.Passive.FailurePercent != 80 || gs.Passive.MinCalls != 50 || *gs.PanicThreshold != 0 ||
		gs.Destinations[0].Weight != 3 || gs.Destinations[1].Weight != 1 || len(gs.Members) != 2 || gs.Members[1].Resolved != "127.0.0.2:5090" {
		t.Fatalf("group %+v", gs)
	}
	var sel Selector
	if m, res := r.Pick("carrier-b", 1, &sel); res != OK || m.Transport != transport.TCP {
		t.Fatalf("Pick after POST: %v %+v", res, m)
	}
	f("POST", "/v1/gateway/groups", strings.Replace(carrier, `"weight": 3`, `"weight": 4`, 1), 200, `"weight":4`)
	f("GET", "/v1/gateway/groups", "", 200, `"name":"yaml"`, `"name":"carrier-b"`)
	f("GET", "/v1/gateway/groups/carrier-b", "", 200, `"members":[`, `"uri":"sip:b2.example.com"`, `"consecutive_probe_failures":0`,
		`"panic":false`, `"recent_calls":0`, `"recent_call_failures":0`)
	r.toDown(st(t, r, "carrier-b", 0), false, "test", nil)
	r.toDown(st(t, r, "carrier-b", 1), true, "test", nil)
	f("GET", "/v1/gateway/groups/carrier-b", "", 200, `"state":"down","down_by":"calls"`, `"state":"down","down_by":"probe"`)

	// Errors.
	f("POST", "/v1/gateway/groups", `{"name": "x", `, 400, `"error":"cannot decode group`)
	f("POST", "/v1/gateway/groups", `{"name": "x", "destinations": [{"uri": "sip:a", "address": "1.2.3.4:5060"}], "colour": 1}`, 400, `unknown field`)
	f("POST", "/v1/gateway/groups", `{"name": "x", "probe": {"interval": 3}, "destinations": []}`, 400, `unknown field`)
	f("POST", "/v1/gateway/groups", `{"name": "x", "probe": {"timeout_ms": -1}, "destinations": [{"uri": "sip:a", "address": "1.2.3.4:5060"}]}`, 400, `timeout_ms`)
	f("POST", "/v1/gateway/groups", `{"name": "x", "probe": {"interval_secs": 0.001}, "destinations": [{"uri": "sip:a", "address": "1.2.3.4:5060"}]}`, 400, `interval_secs: 1ms: must be at least 10ms`)
	f("POST", "/v1/gateway/groups", `{"name": "x", "algorithm": "random", "destinations": [{"uri": "http://a", "address": "a b:0"}]}`, 400,
		`algorithm: \"random\"`, `destinations[0].uri`, `destinations[0].address`)
	f("POST", "/v1/gateway/groups", `{"name": "x"}`, 400, `destinations: at least one destination required`)
	f("POST", "/v1/gateway/groups", `{"name": "yaml", "destinations": [{"uri": "sip:a", "address": "1.2.3.4:5060"}]}`, 409, `fixed`)
	f("GET", "/v1/gateway/groups/nope", "", 404, `unknown gateway group`)
	f("DELETE", "/v1/gateway/groups/nope", "", 404, `unknown gateway group`)
	f("DELETE", "/v1/gateway/groups/yaml", "", 409, `cannot remove group \"yaml\"`)
	f("PUT", "/v1/gateway/groups/yaml", "", 405)

	f("DELETE", "/v1/gateway/groups/carrier-b", "", 204)
	f("GET", "/v1/gateway/groups/carrier-b", "", 404)
	if _, res := r.Pick("carrier-b", 1, &sel); res != UnknownGroup {
		t.Fatalf("Pick after DELETE: %v", res)
	}
}

// The JSON of a group is the YAML's shape and round-trips.
func TestGroupConfigJSON(t *testing.T) {
	panic0 := 0
	in := GroupConfig{Name: "g", Algorithm: AlgorithmRoundRobin, Transport: transport.UDP,
		Probe: ProbeConfig{Enabled: true, Interval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond, FailureThreshold: 1, SuccessThreshold: 1, Jitter: 5 * time.Millisecond},
		Passive: PassiveConfig{Outcomes: []string{PassiveTransportError}, FailureThreshold: 2, FailurePercent: 70, MinCalls: 40,
			HalfOpenCalls: 1, DownTime: 10 * time.Second, MaxRetryAfter: 60 * time.Second},
		PanicThreshold: &panic0, Destinations: dests(1)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"interval_secs":0.02`, `"timeout_ms":50`, `"jitter_ms":5`, `"failure_threshold":1`, `"down_secs":10`, `"max_retry_after_secs":60`, `"outcomes":["transport_error"]`, `"address":"127.0.0.1:5061"`,
		`"failure_percent":70`, `"min_calls":40`, `"panic_threshold_percent":0`} {
		if !strings.Contains(string(b), key) {
			t.Fatalf("%s lacks %s", b, key)
		}
	}
	var out GroupConfig
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Probe.Interval != in.Probe.Interval || out.Probe.Timeout != in.Probe.Timeout || out.Probe.Jitter != in.Probe.Jitter ||
		out.Passive.DownTime != in.Passive.DownTime || out.Passive.MaxRetryAfter != in.Passive.MaxRetryAfter || out.Passive.Outcomes[0] != PassiveTransportError || out.Destinations[0] != in.Destinations[0] ||
		out.Passive.FailurePercent != 70 || out.Passive.MinCalls != 40 || out.PanicThreshold == nil || *out.PanicThreshold != 0 {
		t.Fatalf("round trip: %+v", out)
	}
}

func TestGroupConfigValidate(t *testing.T) {
	ok := func() GroupConfig { return GroupConfig{Name: "g", Destinations: dests(2)} }
	f := func(edit func(g *GroupConfig), wantErr string) {
		t.Helper()
		g := ok()
		edit(&g)
		_, err := g.normalize()
		switch {
		case wantErr == "" && err != nil:
			t.Fatalf("unexpected error: %v", err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
	}
	f(func(g *GroupConfig) {}, "")
	f(func(g *GroupConfig) { g.Destinations[0].Address = "gw-1.example.net:5060" }, "")
	f(func(g *GroupConfig) { g.Destinations[0].Address = "[2001:db8::1]:5060" }, "")
	f(func(g *GroupConfig) { g.Destinations[0].URI = "sips:carrier@gw.example.net;transport=tcp" }, "")
	f(func(g *GroupConfig) { g.Name = "" }, "name: required")
	f(func(g *GroupConfig) { g.Transport = transport.TLS }, `transport: "TLS": want udp or tcp`)
	f(func(g *GroupConfig) { g.RerouteCauses = []int{503, 200} }, "reroute_causes[1]: 200")
	f(func(g *GroupConfig) { g.Probe.HealthyCodes = []int{99} }, "probe.healthy_codes[0]: 99")
	f(func(g *GroupConfig) { g.Probe.FailureThreshold = -1 }, "probe.failure_threshold: -1")
	f(func(g *GroupConfig) { g.Probe.Jitter = -time.Second }, "probe.jitter_ms")
	f(func(g *GroupConfig) { g.Passive.Outcomes = []string{"busy"} }, `passive.outcomes[0]: "busy"`)
	f(func(g *GroupConfig) { g.Passive.HalfOpenCalls = -2 }, "passive.half_open_calls")
	f(func(g *GroupConfig) { g.Passive.FailurePercent = 101 }, "passive.failure_percent: 101: want 1 to 100")
	f(func(g *GroupConfig) { g.Passive.FailurePercent = -1 }, "passive.failure_percent: -1")
	f(func(g *GroupConfig) { g.Passive.MinCalls = -1 }, "passive.min_calls: -1: want 1 to 1000000")
	f(func(g *GroupConfig) { g.Passive.MinCalls = MaxMinCalls + 1 }, "passive.min_calls: 1000001")
	f(func(g *GroupConfig) { p := 101; g.PanicThreshold = &p }, "panic_threshold_percent: 101: want 0 to 100")
	f(func(g *GroupConfig) { p := 0; g.PanicThreshold = &p }, "")
	f(func(g *GroupConfig) { g.Passive.MaxRetryAfter = 500 * time.Millisecond }, "passive.max_retry_after_secs: 500ms: want 1 s to 24h0m0s")
	f(func(g *GroupConfig) { g.Passive.MaxRetryAfter = 25 * time.Hour }, "passive.max_retry_after_secs: 90000: at most 86400 (a day)")
	f(func(g *GroupConfig) { g.Destinations[1].URI = "tel:+12025550123" }, "destinations[1].uri")
	f(func(g *GroupConfig) { g.Destinations[1].Address = "127.0.0.1" }, "destinations[1].address: \"127.0.0.1\": missing port")
	f(func(g *GroupConfig) { g.Destinations[1].Address = "127.0.0.1:0" }, `"127.0.0.1:0": port must not be 0`)
	f(func(g *GroupConfig) { g.Destinations[1].Address = "bad_host!:5060" }, "neither an IP address nor a DNS name")
	f(func(g *GroupConfig) { g.Destinations[1].Weight = -1 }, "destinations[1].weight")
	f(func(g *GroupConfig) { g.Destinations[1].Priority = -1 }, "destinations[1].priority")
	f(func(g *GroupConfig) { g.Destinations[1] = g.Destinations[0] }, "destinations[1]: duplicate of destinations[0]")
	f(func(g *GroupConfig) { g.Destinations = nil; g.Algorithm = "x" }, `algorithm: "x"`) // all problems at once
	f(func(g *GroupConfig) { g.Destinations = nil; g.Algorithm = "x" }, "at least one destination")

	n, err := GroupConfig{Name: "g", Destinations: []DestConfig{{URI: "sip:a", Address: "1.2.3.4:5"}}}.normalize()
	if err != nil || n.Algorithm != AlgorithmWeighted || n.Transport != transport.UDP || n.Probe.Timeout != DefaultProbeTimeout ||
		n.Probe.SuccessThreshold != DefaultSuccessThreshold || n.Probe.Jitter != 0 || n.Passive.HalfOpenCalls != DefaultHalfOpenCalls ||
		n.Passive.DownTime != DefaultPassiveDownTime || n.Passive.MaxRetryAfter != DefaultMaxRetryAfter || n.Destinations[0].Weight != 1 ||
		n.Passive.FailurePercent != DefaultFailurePercent || n.Passive.MinCalls != DefaultMinCalls || n.PanicThreshold == nil || *n.PanicThreshold != DefaultPanicThreshold {
		t.Fatalf("defaults: %+v %v", n, err)
	}
}

// A group's cps and cps_reject, as in the YAML, are stored and shown, not
// interpreted: OnAdd hears of a runtime group once it is valid and may
// refuse it (the server registers the limit there), OnRemove of its
// removal; YAML groups are the server's own business at start.
func TestAdminGroupCPS(t *testing.T) {
	var added []GroupConfig
	var removed []string
	refuse := false
	r, _ := newTestRegistry(t, Options{
		OnAdd: func(g GroupConfig) error {
			if refuse {
				return errors.New("the limiter says no")
			}
			added = append(added, g)
			return nil
		},
		OnRemove: func(name string) { removed = append(removed, name) },
	}, GroupConfig{Name: "yaml", Destinations: dests(1), CPS: &CPSConfig{Rate: 5}})
	if len(added) != 0 {
		t.Fatalf("OnAdd heard of the YAML group: %+v", added)
	}
	h := r.Handler()
	do := func(method, path, body string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		return w.Code, w.Body.String()
	}
	const group = `{"name": "paced", "cps": {"rate": 2.5, "burst": 3, "max_wait_ms": 0, "key": "acct-1"},
		"cps_reject": [{"code": 503, "reason": "CPS"}, {"code": 480}],
		"destinations": [{"uri": "sip:b1.example.com", "address": "127.0.0.1:5090"}]}`
	code, body := do("POST", "/v1/gateway/groups", group)
	if code != 201 || !strings.Contains(body, `"cps":{"rate":2.5,"burst":3,"max_wait_ms":0,"key":"acct-1"}`) ||
		!strings.Contains(body, `"cps_reject":[{"code":503,"reason":"CPS"},{"code":480}]`) {
		t.Fatalf("POST: %d %s", code, body)
	}
	cps, rejects := r.CPS("paced")
	if len(added) != 1 || cps == nil || cps.Rate != 2.5 || cps.Burst != 3 || cps.MaxWait() != 0 || cps.Key != "acct-1" || len(rejects) != 2 {
		t.Fatalf("stored %+v %+v, OnAdd %d times", cps, rejects, len(added))
	}
	if c, _ := r.CPS("yaml"); c == nil || c.MaxWait() != time.Second {
		t.Fatalf("YAML group's cps %+v, want rate 5 and the default max wait of 1 s", c)
	}
	for _, bad := range []struct{ edit, want string }{
		{`"rate": 0`, "cps.rate"},
		{`"burst": -1`, "cps.burst"},
		{`"max_wait_ms": -5`, "cps.max_wait_ms"},
		{`"code": 200`, "cps_reject[0].code"},
	} {
		old := map[string]string{"cps.rate": `"rate": 2.5`, "cps.burst": `"burst": 3`, "cps.max_wait_ms": `"max_wait_ms": 0`, "cps_reject[0].code": `"code": 503`}[bad.want]
		if code, body := do("POST", "/v1/gateway/groups", strings.Replace(group, old, bad.edit, 1)); code != 400 || !strings.Contains(body, bad.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", bad.edit, code, body, bad.want)
		}
	}
	refuse = true
	if code, body := do("POST", "/v1/gateway/groups", strings.Replace(group, `"paced"`, `"other"`, 1)); code != 400 || !strings.Contains(body, "the limiter says no") {
		t.Fatalf("OnAdd refusing: %d %s", code, body)
	}
	if _, ok := r.Group("other"); ok {
		t.Fatal("a group OnAdd refused was added")
	}
	if code, _ := do("DELETE", "/v1/gateway/groups/paced", ""); code != 204 || len(removed) != 1 || removed[0] != "paced" {
		t.Fatalf("DELETE: %d, OnRemove %v", code, removed)
	}
	if c, _ := r.CPS("paced"); c != nil {
		t.Fatal("a removed group still has a cps")
	}
}

// A group's account is stored for Registry.Auth and checked, and its
// password is write-only: the admin API never shows it.
func TestAdminGroupAuth(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	h := r.Handler()
	do := func(method, path, body string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		return w.Code, w.Body.String()
	}
	const group = `{"name": "authed", "auth": {"username": "acct-1", "password": "s3cret-pw", "realm": "carrier.example"},
		"destinations": [{"uri": "sip:b1.example.com", "address": "127.0.0.1:5090"}]}`
	code, body := do("POST", "/v1/gateway/groups", group)
	if code != 201 || !strings.Contains(body, `"auth":{"username":"acct-1","realm":"carrier.example"}`) || strings.Contains(body, "s3cret-pw") {
		t.Fatalf("POST: %d %s", code, body)
	}
	for _, path := range []string{"/v1/gateway/groups", "/v1/gateway/groups/authed"} {
		if code, body := do("GET", path, ""); code != 200 || !strings.Contains(body, `"username":"acct-1"`) || strings.Contains(body, "s3cret-pw") {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	if a := r.Auth("authed"); a == nil || *a != (AuthConfig{Username: "acct-1", Password: "s3cret-pw", Realm: "carrier.example"}) {
		t.Fatalf("stored %+v", a)
	}
	if r.Auth("nope") != nil {
		t.Fatal("an unknown group has an account")
	}
	if code, body := do("POST", "/v1/gateway/groups", strings.Replace(group, `"s3cret-pw"`, `""`, 1)); code != 400 || !strings.Contains(body, "auth.password") {
		t.Fatalf("no password: %d %s", code, body)
	}
}
