package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
)

// newTestTrunks returns the trunk registry of a configuration with one
// YAML trunk, "yaml", and one number policy, "uk", and its admin API's
// handler.
func newTestTrunks(t *testing.T) (*trunks, http.Handler) {
	t.Helper()
	cfg, err := config.Parse([]byte(`
number_policies: [{ name: uk, country_code: "44", national_prefix: "0" }]
trunks: [{ name: yaml, sources: ["198.51.100.0/24"] }]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := trunksOf(t, cfg)
	return tr, tr.handler()
}

// trunksOf builds cfg's trunks with an in-process ingress limiter and one
// metrics set, a trunk name's stats made once, as the server does, and
// their admin API's changes going through a fleet of this node alone.
func trunksOf(t *testing.T, cfg *config.Config) *trunks {
	t.Helper()
	ingress, err := ratelimit.NewLocal(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, stats := metrics.NewSet(), map[string]*b2bua.TrunkStats{}
	statsOf := func(name string) *b2bua.TrunkStats {
		if stats[name] == nil {
			stats[name] = b2bua.NewTrunkStats(set, name)
		}
		return stats[name]
	}
	tr, err := newTrunks(cfg, ingress, statsOf, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if tr.fleet, err = fleet.New(fleet.Options{Config: fleet.Config{NodeID: "test"}, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.fleet.Close)
	if err := tr.fleet.Follow(func(ch fleet.Change) error { return tr.apply(ch.Name, ch.Doc) }); err != nil {
		t.Fatal(err)
	}
	return tr
}

// do sends a request to an admin API handler in-process (a recorder, no
// socket) and returns the status and body.
func do(t *testing.T, h http.Handler, method, target, body string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, strings.NewReader(body)))
	return w.Code, w.Body.String()
}

// The trunks admin API adds, replaces, lists, shows and removes runtime
// trunks, and the engines' set follows; YAML trunks are fixed.
func TestTrunkAdmin(t *testing.T) {
	tr, h := newTestTrunks(t)
	const url = "/v1/trunks"
	matches := func(ap string) string {
		t.Helper()
		if bt := tr.set.Load().Match(netip.MustParseAddrPort(ap)); bt != nil {
			return bt.Name
		}
		return ""
	}

	acme := `{"name":"acme","sources":["10.0.0.0/8","192.0.2.1:5060","[2001:db8::/32]:5060"],
		"limits":{"cps":5,"burst":2,"max_concurrent_calls":10},"force_rport":true,"number_policy":"uk",
		"attributes":{"customer":"acme"}}`
	code, body := do(t, h, "POST", url, acme)
	if code != http.StatusCreated || !strings.Contains(body, `"trunk_group":"acme"`) {
		t.Fatalf("add: %d %s, want 201 with trunk_group defaulted to the name", code, body)
	}
	if code, body = do(t, h, "POST", url, `{"name":"beta","trunk_group":"wholesale","sources":["203.0.113.7"]}`); code != http.StatusCreated {
		t.Fatalf("add beta: %d %s", code, body)
	}
	if got := matches("10.1.2.3:5060"); got != "acme" {
		t.Errorf("10.1.2.3 matches %q, want acme", got)
	}
	if got := matches("[2001:db8::1]:5060"); got != "acme" {
		t.Errorf("2001:db8::1 port 5060 matches %q, want acme", got)
	}
	if got := matches("[2001:db8::1]:5061"); got != "" {
		t.Errorf("2001:db8::1 port 5061 matches %q, want none", got)
	}
	bt := tr.set.Load().Match(netip.MustParseAddrPort("10.1.2.3:5060"))
	if bt.Ingress == nil || bt.Attributes["customer"] != "acme" ||
		bt.Normalize == nil || bt.Normalize.CountryCode != "44" || !bt.ForceRPort || bt.MaxCalls != 10 {
		t.Fatalf("acme's engine form %+v", bt)
	}
	acmeCalls := bt.Stats

	// Replaced: new sources, no limit, its place and its call counter kept.
	code, body = do(t, h, "POST", url, `{"name":"acme","sources":["172.16.0.0/12"]}`)
	if code != http.StatusOK {
		t.Fatalf("replace: %d %s, want 200", code, body)
	}
	if got, got2 := matches("10.1.2.3:5060"), matches("172.16.1.1:5060"); got != "" || got2 != "acme" {
		t.Errorf("after the replace 10.1.2.3 matches %q, 172.16.1.1 %q; want none and acme", got, got2)
	}
	bt2 := tr.set.Load().Match(netip.MustParseAddrPort("172.16.1.1:5060"))
	if bt2 == bt || bt2.Stats != acmeCalls || bt2.Ingress != nil || bt.Attributes["customer"] != "acme" {
		t.Errorf("the replacement: a new version %v, same counter %v, paced %v; the old version's attributes %v",
			bt2 != bt, bt2.Stats == acmeCalls, bt2.Ingress != nil, bt.Attributes)
	}

	code, body = do(t, h, "GET", url, "")
	var list []struct {
		Name  string `json:"name"`
		Fixed bool   `json:"fixed"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("list: %d %s %v", code, body, err)
	}
	if len(list) != 3 || list[0] != (struct {
		Name  string `json:"name"`
		Fixed bool   `json:"fixed"`
	}{"yaml", true}) || list[1].Name != "acme" || list[1].Fixed || list[2].Name != "beta" {
		t.Errorf("list %+v, want yaml (fixed), acme, beta", list)
	}

	code, body = do(t, h, "GET", url+"/beta", "")
	if code != http.StatusOK || !strings.Contains(body, `"trunk_group":"wholesale"`) || !strings.Contains(body, `"sources":["203.0.113.7/32"]`) {
		t.Errorf("get beta: %d %s", code, body)
	}
	if code, _ = do(t, h, "GET", url+"/nope", ""); code != http.StatusNotFound {
		t.Errorf("get unknown: %d, want 404", code)
	}
	if code, body = do(t, h, "POST", url, `{"name":"yaml","sources":["192.0.2.9"]}`); code != http.StatusConflict {
		t.Errorf("replace a YAML trunk: %d %s, want 409", code, body)
	}

	if code, body = do(t, h, "DELETE", url+"/acme", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if got := matches("172.16.1.1:5060"); got != "" {
		t.Errorf("after the delete 172.16.1.1 matches %q", got)
	}
	if code, _ = do(t, h, "DELETE", url+"/acme", ""); code != http.StatusNotFound {
		t.Errorf("delete again: %d, want 404", code)
	}
	if code, _ = do(t, h, "DELETE", url+"/yaml", ""); code != http.StatusConflict {
		t.Errorf("delete a YAML trunk: %d, want 409", code)
	}
	if got := matches("198.51.100.1:5060"); got != "yaml" {
		t.Errorf("the YAML trunk matches %q", got)
	}
}

// A bad trunk is refused with 400, naming the field and why, and changes
// nothing.
func TestTrunkAdminBadInput(t *testing.T) {
	tr, h := newTestTrunks(t)
	for _, c := range []struct{ body, want string }{
		{`{"name":"x","sources":["10.0.0.0/8","10.0.0.300"]}`, `sources[1]: \"10.0.0.300\": invalid CIDR or address`},
		{`{"name":"x","sources":["10.0.0.0/8:0"]}`, `sources[0]: \"10.0.0.0/8:0\": port must not be 0`},
		{`{"name":"x"}`, `sources: at least one source required`},
		{`{"sources":["10.0.0.0/8"]}`, `name: required`},
		{`{"name":"x","sources":["10.0.0.0/8"],"limits":{"cps":0.0001}}`, `limits: rate 0.0001`},
		{`{"name":"x","sources":["10.0.0.0/8"],"limits":{"cps":5,"burst":-1}}`, `limits: burst -1`},
		{`{"name":"x","sources":["10.0.0.0/8"],"limits":{"cps":"fast"}}`, `limits.cps`},
		{`{"name":"x","sources":["10.0.0.0/8"],"number_policy":"fr"}`, `number_policy: unknown number policy \"fr\"`},
		{`{"name":"x","sources":["10.0.0.0/8"],"attributes":{"customer":"a,b"}}`, `attributes.customer: \"a,b\"`},
		{`{"name":"x","sources":["10.0.0.0/8"],"cps":5}`, `unknown field \"cps\"`},
		{`{"name":"x","sources":["10.0.0.0/8"]} {}`, `trailing data`},
		{`{"name":"x","sources":["10.0.0.0/8"],"limits":{"cps":-3}}`, `none may be negative`},
		{`{"name":"x","sources":["10.0.0.0/8"],"limits":{"max_concurrent_calls":-1}}`, `none may be negative`},
		{`{"name":"x","sources":["10.0.0.0/8"],"limits":{"max_concurrent_calls":9999999999}}`, `nor max_concurrent_calls above`},
		{`{"name":"..","sources":["10.0.0.0/8"]}`, `name: \"..\": not a path segment`},
		{`{"name":"a/b","sources":["10.0.0.0/8"]}`, `not a path segment`},
	} {
		code, body := do(t, h, "POST", "/v1/trunks", c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 with %s", c.body, code, body, c.want)
		}
	}
	if n := len(tr.list); n != 1 {
		t.Errorf("%d trunks after bad input, want the YAML's alone", n)
	}
}

// What GET shows can be POSTed back, and posting a trunk as it is changes
// nothing: a controller that re-syncs its trunks every few seconds makes
// no new versions, whose per-trunk entries the node keeps for its life.
func TestTrunkRePost(t *testing.T) {
	tr, h := newTestTrunks(t)
	body := `{"name": "acme", "sources": ["192.0.2.0/24"], "limits": {"cps": 5}}`
	if code, b := do(t, h, "POST", "/v1/trunks", body); code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, b)
	}
	code, shown := do(t, h, "GET", "/v1/trunks/acme", "")
	if code != http.StatusOK || !strings.Contains(shown, `"fixed":false`) {
		t.Fatalf("GET: %d %s", code, shown)
	}
	version := func() *b2bua.Trunk { return tr.set.Load().Match(netip.MustParseAddrPort("192.0.2.1:5060")) }
	first := version()
	for range 100 {
		if code, b := do(t, h, "POST", "/v1/trunks", shown); code != http.StatusOK {
			t.Fatalf("POST of what GET shows: %d %s", code, b)
		}
	}
	if version() != first {
		t.Fatal("re-posting the same trunk made a new version")
	}
	if code, _ := do(t, h, "POST", "/v1/trunks", strings.Replace(body, `"cps": 5`, `"cps": 6`, 1)); code != http.StatusOK ||
		version() == first {
		t.Fatalf("a changed trunk: %d, a new version %v, want 200 and a new version", code, version() != first)
	}
}

// A trunk's ring_timeout_secs in the admin API: absent, b2bua's (shown, and
// what the engines get); 0, no ring bound; negative, a 400 naming it.
func TestTrunkAdminRingTimeout(t *testing.T) {
	cfg, err := config.Parse([]byte(`
b2bua: { ring_timeout_secs: 45 }
trunks: [{ name: yaml, sources: ["198.51.100.0/24"], ring_timeout_secs: 20 }]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := trunksOf(t, cfg)
	h := tr.handler()
	ring := func(ap string) time.Duration {
		t.Helper()
		return tr.set.Load().Match(netip.MustParseAddrPort(ap)).RingTimeout
	}
	if got := ring("198.51.100.1:5060"); got != 20*time.Second {
		t.Errorf("the YAML trunk's ring bound %v, want 20s", got)
	}
	f := func(body string, wantCode int, wantJSON string, wantRing time.Duration) {
		t.Helper()
		code, out := do(t, h, "POST", "/v1/trunks", body)
		if code != wantCode || !strings.Contains(out, wantJSON) {
			t.Fatalf("POST %s: %d %s, want %d with %s", body, code, out, wantCode, wantJSON)
		}
		if wantCode < 300 {
			if got := ring("10.0.0.1:5060"); got != wantRing {
				t.Errorf("POST %s: the engines' ring bound %v, want %v", body, got, wantRing)
			}
		}
	}
	f(`{"name":"a","sources":["10.0.0.0/8"]}`, http.StatusCreated, `"ring_timeout_secs":45`, 45*time.Second)
	f(`{"name":"a","sources":["10.0.0.0/8"],"ring_timeout_secs":0}`, http.StatusOK, `"ring_timeout_secs":0`, route.NoRingBound)
	f(`{"name":"a","sources":["10.0.0.0/8"],"ring_timeout_secs":9}`, http.StatusOK, `"ring_timeout_secs":9`, 9*time.Second)
	f(`{"name":"a","sources":["10.0.0.0/8"],"ring_timeout_secs":-1}`, http.StatusBadRequest, `ring_timeout_secs: -1`, 0)
	if code, out := do(t, h, "GET", "/v1/trunks/yaml", ""); code != http.StatusOK || !strings.Contains(out, `"ring_timeout_secs":20`) {
		t.Errorf("GET the YAML trunk: %d %s, want its ring_timeout_secs 20", code, out)
	}
}
