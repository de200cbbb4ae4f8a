package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// Configuration reload end-to-end tests (POST /v1/reload): the rigs write
// their YAML to e.configPath, the file the server reloads; a test edits
// it and asks for the reload while calls run.

// reloadAnswer is POST /v1/reload's 200 body, as documented.
type reloadAnswer struct {
	GatewayGroups reloadChanges `json:"gateway_groups"`
	Trunks        reloadChanges `json:"trunks"`
	StaticRoutes  struct {
		Replaced bool `json:"replaced"`
		Prefixes int  `json:"prefixes"`
	} `json:"static_routes"`
	RestartRequired []string `json:"restart_required"`
}

type reloadChanges struct {
	Added    []string `json:"added"`
	Replaced []string `json:"replaced"`
	Removed  []string `json:"removed"`
}

// editConfig rewrites the configuration file, replacing each pairs[i] (which
// must occur) by pairs[i+1], once.
func (e *e2e) editConfig(pairs ...string) {
	e.t.Helper()
	b, err := os.ReadFile(e.configPath)
	if err != nil {
		e.t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			e.t.Fatalf("the configuration has no %q:\n%s", pairs[i], s)
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	if err := os.WriteFile(e.configPath, []byte(s), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// reloadOK posts /v1/reload, with the bearer token when not "", and
// returns its 200 answer.
func (e *e2e) reloadOK(token string) reloadAnswer {
	e.t.Helper()
	code, body := e.reloadDo(token)
	var a reloadAnswer
	if code != http.StatusOK {
		e.t.Fatalf("POST /v1/reload: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		e.t.Fatalf("POST /v1/reload: %v\n%s", err, body)
	}
	if a.GatewayGroups.Added == nil || a.Trunks.Removed == nil || a.RestartRequired == nil {
		e.t.Errorf("POST /v1/reload: empty lists are not []: %s", body)
	}
	return a
}

func (e *e2e) reloadDo(token string) (int, string) {
	e.t.Helper()
	r := &lcrRig{e2e: e}
	return r.adminDo("POST", "/v1/reload", token, "")
}

func sameNames(got []string, want ...string) bool {
	return slices.Equal(got, want) || len(got) == 0 && len(want) == 0
}

func checkChanges(t *testing.T, what string, got reloadChanges, added, replaced, removed []string) {
	t.Helper()
	if !sameNames(got.Added, added...) || !sameNames(got.Replaced, replaced...) || !sameNames(got.Removed, removed...) {
		t.Errorf("%s changes %+v, want added %v, replaced %v, removed %v", what, got, added, replaced, removed)
	}
}

// A reload that adds a gateway group and a static table routing to it: the
// next call goes to the new carrier at the new rate, while the call up
// before the reload, routed by the old table, goes on to its end. Without
// the admin token the reload is refused and changes nothing.
func TestReloadAddsGroupAndStaticTableE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newHealthRig(t, "carrier-a", "carrier-x", healthToken, carrierAOnly, staticLCR(yRouteA))
	x := r.b

	c1 := r.call(dialed, "")
	inv1 := c1.invite(r.a, dialed)
	c1.answer(r.a, inv1)

	r.editConfig("lcr:\n", fmt.Sprintf(`    - name: carrier-x
      destinations:
        - { uri: "sip:127.0.0.1:%[1]d", address: "127.0.0.1:%[1]d" }
lcr:
`, x.addr().Port()), yRouteA, `{ carrier_id: carrier-x, gateway_group: carrier-x, rate: 0.007, currency: EUR }`)
	if code, body := r.reloadDo(""); code != http.StatusUnauthorized {
		t.Fatalf("POST /v1/reload without the token: %d %s, want 401", code, body)
	}
	if code, _ := r.adminDo("GET", "/v1/gateway/groups/carrier-x", healthToken, ""); code != http.StatusNotFound {
		t.Fatalf("carrier-x after the unauthorised reload: %d, want 404", code)
	}

	a := r.reloadOK(healthToken)
	checkChanges(t, "gateway_groups", a.GatewayGroups, []string{"carrier-x"}, nil, nil)
	checkChanges(t, "trunks", a.Trunks, nil, nil, nil)
	if !a.StaticRoutes.Replaced || a.StaticRoutes.Prefixes != 1 || len(a.RestartRequired) != 0 {
		t.Errorf("reload answer %+v, want the static table replaced (1 prefix), nothing needing a restart", a)
	}
	code, body := r.adminDo("GET", "/v1/gateway/groups/carrier-x", healthToken, "")
	if g := decodeGroup(t, body); code != 200 || !g.Fixed {
		t.Errorf("carrier-x after the reload: %d %s, want a fixed group", code, body)
	}
	if lines := r.metricLines(healthToken, "sipedge_config_reloads_total", `result="ok"`); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Errorf("sipedge_config_reloads_total ok: %q, want 1", lines)
	}
	if !strings.Contains(r.logs.String(), "configuration reloaded") {
		t.Error("the reload is not logged")
	}

	c2 := r.call(dialed, "")
	inv2 := c2.invite(x, dialed)
	c2.answer(x, inv2)
	c2.bye(x)
	r.a.expectNothing(0)
	c1.bye(r.a)
	x.expectNothing(0)

	rec1, rec2 := r.cdrOf(c1.u.callID), r.cdrOf(c2.u.callID)
	checkCDR(t, rec1, 200, "caller")
	checkFields(t, rec1, map[string]any{"carrier_id": "carrier-a", "rate": 0.004, "b_call_id": hdr(inv1, parser.HeaderCallID)})
	checkCDR(t, rec2, 200, "caller")
	checkFields(t, rec2, map[string]any{"carrier_id": "carrier-x", "rate": 0.007, "currency": "EUR",
		"b_call_id": hdr(inv2, parser.HeaderCallID)})
}

// A trunk added in the file takes calls after the reload; removed from
// the file, it stops matching while its call in progress goes on to its
// end and its CDR. A runtime trunk the file now names becomes the file's,
// fixed; other runtime trunks and the unchanged YAML trunk stay as they
// are.
func TestReloadTrunksE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	for _, body := range []string{`{"name":"rt","sources":["127.0.0.9"]}`, `{"name":"promo","sources":["127.0.0.8"]}`} {
		if code, resp := e.adminDo("POST", "/v1/trunks", body); code != http.StatusCreated {
			t.Fatalf("POST /v1/trunks %s: %d %s", body, code, resp)
		}
	}
	e.newCallerOn("127.0.0.2")
	e.inviteDropped()

	const acme = `  - { name: acme, trunk_group: acme-tg, sources: ["127.0.0.2/32"] }` + "\n"
	const promo = `  - { name: promo, sources: ["127.0.0.7/32"] }` + "\n"
	e.editConfig("gateway:\n", acme+promo+"gateway:\n") // after the YAML's trunk
	a := e.reloadOK("")
	checkChanges(t, "trunks", a.Trunks, []string{"acme"}, []string{"promo"}, nil)
	checkChanges(t, "gateway_groups", a.GatewayGroups, nil, nil, nil)
	if a.StaticRoutes.Replaced {
		t.Error("the unchanged static table is reported replaced")
	}
	var trunks []struct {
		Name    string   `json:"name"`
		Sources []string `json:"sources"`
		Fixed   bool     `json:"fixed"`
	}
	code, body := e.httpGet("/v1/trunks")
	if err := json.Unmarshal([]byte(body), &trunks); code != 200 || err != nil {
		t.Fatalf("GET /v1/trunks: %d %v %s", code, err, body)
	}
	got := fmt.Sprint(trunks)
	if want := "[{local [127.0.0.1/32] true} {acme [127.0.0.2/32] true} {promo [127.0.0.7/32] true} {rt [127.0.0.9/32] false}]"; got != want {
		t.Errorf("trunks after the reload: %s, want %s", got, want)
	}
	c := e.answered()

	e.editConfig(acme, "")
	a = e.reloadOK("")
	checkChanges(t, "trunks", a.Trunks, nil, nil, []string{"acme"})
	e.inviteDropped()
	c.byeFromCaller(11)

	e.checkAcmeCallCDR(c.u.callID)
}

// A file that does not load is refused with 400 naming the field and its
// line, as at start, and nothing in it is applied: a call routes as before.
func TestReloadBadFileChangesNothingE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	e.editConfig("rate: 0.004", "rate: -1", "trunks:\n", "trunks:\n  - { name: acme, sources: [\"127.0.0.2\"] }\n")
	code, body := e.reloadDo("")
	if code != http.StatusBadRequest {
		t.Fatalf("POST /v1/reload of a bad file: %d %s, want 400", code, body)
	}
	b, _ := os.ReadFile(e.configPath)
	line := slices.IndexFunc(strings.Split(string(b), "\n"), func(l string) bool { return strings.Contains(l, "rate: -1") }) + 1
	checkAPIError(t, "bad file", body, fmt.Sprintf("%s:%d: lcr.static_routes[0].routes[0].rate", e.configPath, line))
	if code, _ := e.httpGet("/v1/trunks/acme"); code != http.StatusNotFound {
		t.Errorf("the bad file's trunk: %d, want 404 (not applied)", code)
	}
	if got := e.metric(`sipedge_config_reloads_total{result="refused"}`); got != 1 {
		t.Errorf("refused reloads: %v, want 1", got)
	}
	c := e.answered()
	c.byeFromCaller(11)
}

// Changed number_policies refuse the reload with 409: nothing changes.
func TestReloadNumberPoliciesChangedRefusedE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	e.editConfig("trunks:\n", "number_policies:\n  - { name: uk, country_code: \"44\", national_prefix: \"0\" }\n"+
		"trunks:\n  - { name: acme, sources: [\"127.0.0.2\"], number_policy: uk }\n")
	code, body := e.reloadDo("")
	if code != http.StatusConflict {
		t.Fatalf("POST /v1/reload with new number_policies: %d %s, want 409", code, body)
	}
	checkAPIError(t, "number_policies", body, "number_policies changed", "restart")
	if code, _ := e.httpGet("/v1/trunks/acme"); code != http.StatusNotFound {
		t.Errorf("the refused file's trunk: %d, want 404 (not applied)", code)
	}
	c := e.answered()
	c.byeFromCaller(11)
}

// Settings that apply only at start are listed in restart_required and
// logged, not applied; the reloadable parts of the same file are.
func TestReloadRestartRequiredE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e, logs := newE2EBase(t)
	e.carrier = newUDPPeer(t, "carrier", "127.0.0.1", e.sip)
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
log: { level: debug }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - { name: carrier-a, destinations: [{ uri: "sip:%[2]s", address: "%[2]s" }] }
lcr:
  static_routes:
    - { prefix: "", routes: [{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }] }
cdr: { file: %[3]q }
`, e.port, e.carrier.addr(), e.cdrPath), logs)
	e.caller = newUDPPeer(t, "caller", "127.0.0.1", e.sip)

	e.editConfig("level: debug", "level: info", "drain_timeout_secs: 1", "drain_timeout_secs: 2",
		"lcr:\n", "    - { name: carrier-z, destinations: [{ uri: \"sip:127.0.0.1:9\", address: \"127.0.0.1:9\" }] }\nlcr:\n  reroute_causes: [503]\n",
		"rate: 0.004", "rate: 0.006")
	a := e.reloadOK("")
	if want := []string{"log", "b2bua.drain_timeout_secs", "lcr.reroute_causes"}; !reflect.DeepEqual(a.RestartRequired, want) {
		t.Errorf("restart_required %q, want %q", a.RestartRequired, want)
	}
	checkChanges(t, "gateway_groups", a.GatewayGroups, []string{"carrier-z"}, nil, nil)
	if !a.StaticRoutes.Replaced {
		t.Error("the static table is not replaced")
	}
	if !strings.Contains(logs.String(), `settings=log,b2bua.drain_timeout_secs,lcr.reroute_causes`) {
		t.Error("no warning lists the settings that need a restart")
	}
	c := e.answered()
	c.byeFromCaller(11)
	checkFields(t, e.cdrOf(c.u.callID), map[string]any{"rate": 0.006})
}

// A reload of the same file leaves the groups untouched: a member marked
// down by a call stays down, and the next call still skips it.
func TestReloadUnchangedGroupKeepsHealthE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newHealthRig(t, "carrier-a", "carrier-p", "", passiveGroups(600), passiveRoutes)
	state := func() string {
		t.Helper()
		code, body := r.adminDo("GET", "/v1/gateway/groups/carrier-p", "", "")
		g := decodeGroup(t, body)
		if code != 200 || len(g.Members) != 1 {
			t.Fatalf("GET carrier-p: %d %s", code, body)
		}
		return g.Members[0].State
	}
	r.markCarrierPDown()
	if s := state(); s != "down" {
		t.Fatalf("carrier-p after its 503s: %q, want down", s)
	}

	a := r.reloadOK("")
	checkChanges(t, "gateway_groups", a.GatewayGroups, nil, nil, nil)
	checkChanges(t, "trunks", a.Trunks, nil, nil, nil)
	if a.StaticRoutes.Replaced || a.StaticRoutes.Prefixes != 1 || len(a.RestartRequired) != 0 {
		t.Errorf("reload of the same file: %+v, want no change", a)
	}
	if s := state(); s != "down" {
		t.Errorf("carrier-p after reloading the same file: %q, want still down", s)
	}
	if strings.Contains(r.logs.String(), "gateway group updated") {
		t.Error("reloading the same file replaced a group")
	}
	c := r.call(dialed, "")
	c.answer(r.a, c.invite(r.a, dialed))
	c.bye(r.a)
	r.b.expectNothing(100 * time.Millisecond)
}

// A server started on the embedded example has no file to reload: 409.
func TestReloadEmbeddedExampleRefusedE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e, logs := newE2EBase(t)
	e.embedded = true
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
admin: { listen: "127.0.0.1:0" }
cdr: { file: %q }
`, e.port, e.cdrPath), logs)
	code, body := e.reloadDo("")
	if code != http.StatusConflict {
		t.Fatalf("POST /v1/reload: %d %s, want 409", code, body)
	}
	checkAPIError(t, "embedded example", body, "started on the embedded example: no file to reload")
	if code, _ := e.httpGet("/v1/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/reload: %d, want 405", code)
	}
}

// A file that moves lcr.fallback_gateway_group to another group and drops
// the old one is refused with 409: the fallback applies only at start, so
// the old group would be removed while the running fallback still named
// it, and a call the API could not route would find no group. Nothing
// changes: such a call still reaches the old fallback.
func TestReloadRemovingRunningFallbackGroupRefusedE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000, fallback_gateway_group: carrier-b }", closedURL(t))})
	b, err := os.ReadFile(r.configPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "    - name: carrier-b\n")
	j := strings.Index(s, "\nlcr:")
	if i < 0 || j < i {
		t.Fatalf("no carrier-b group before lcr: in\n%s", s)
	}
	r.editConfig(s[i:j+1], "", "fallback_gateway_group: carrier-b", "fallback_gateway_group: carrier-a")
	code, body := r.reloadDo("")
	if code != http.StatusConflict {
		t.Fatalf("POST /v1/reload removing the running fallback group: %d %s, want 409", code, body)
	}
	checkAPIError(t, "fallback group", body, "lcr.fallback_gateway_group", "carrier-b", "restart")
	if code, _ := r.adminDo("GET", "/v1/gateway/groups/carrier-b", "", ""); code != http.StatusOK {
		t.Errorf("GET carrier-b after the refused reload: %d, want 200", code)
	}
	c := r.call(dialed, "")
	c.answer(r.b, c.invite(r.b, dialed))
	c.bye(r.b)
}
