package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route/lcr"
)

// staticYAML is a configuration with one gateway group, "yaml-gw", one
// number policy, "uk", and a static table of two prefixes.
const staticYAML = `
number_policies: [{ name: uk, country_code: "44", national_prefix: "0" }]
gateway:
  groups:
    - name: yaml-gw
      destinations: [{ uri: "sip:192.0.2.10", address: "192.0.2.10:5060" }]
lcr:
  static_routes:
    - prefix: "1"
      routes:
        - { carrier_id: a, gateway_group: yaml-gw, rate: 0.01, currency: USD, timeout_secs: 20,
            reroute_after_progress: true, tech_prefix: "99#", number_policy: uk, caller_id: "+15550100",
            caller_id_presentation: restricted, ruri: "sip:x@192.0.2.20", headers: { X-Acct: "7" },
            cdr_fields: { deck: q3 }, reroute_causes: [503] }
        - { carrier_id: b, next_hop: "192.0.2.30:5070", rate: 0.005 }
    - prefix: "44"
      routes: []
`

// newTestStatic returns the static table of staticYAML (in API mode with
// api), its health registry and its admin API's handler, whose PUT tables
// go through a fleet of this node alone.
func newTestStatic(t *testing.T, api bool) (*staticRoutes, *health.Registry, http.Handler) {
	t.Helper()
	src := staticYAML
	if api {
		src += "  api_url: http://127.0.0.1:1/route\n"
	}
	cfg, err := config.Parse([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := health.New(health.Options{Groups: cfg.Gateway.Groups, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	table, err := staticTable(cfg.LCR.StaticRoutes)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.New(fleet.Options{Config: fleet.Config{NodeID: "test"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	st := &staticRoutes{cfg: cfg, log: slog.New(slog.DiscardHandler), file: cfg.LCR.StaticRoutes, fileTable: table, fleet: f,
		known: func(g string) bool { _, ok := reg.Group(g); return ok }}
	if !api {
		st.table = new(atomic.Pointer[lcr.StaticTable])
		st.table.Store(table)
	}
	if err := f.Follow(func(ch fleet.Change) error { return st.apply(ch.Doc) }); err != nil {
		t.Fatal(err)
	}
	return st, reg, st.handler()
}

// wantStaticJSON is staticYAML's table as GET shows it.
const wantStaticJSON = `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","rate":0.01,"currency":"USD",` +
	`"timeout_secs":20,"reroute_after_progress":true,"tech_prefix":"99#","number_policy":"uk","caller_id":"+15550100",` +
	`"caller_id_presentation":"restricted","ruri":"sip:x@192.0.2.20","headers":{"X-Acct":"7"},"cdr_fields":{"deck":"q3"},` +
	`"reroute_causes":[503]},{"carrier_id":"b","rate":0.005,"next_hop":"192.0.2.30:5070"}]},{"prefix":"44","routes":[]}]`

// GET shows the YAML's table in its keys; a GET's output PUT back gives the
// same table.
func TestStaticRoutesGetRoundTrip(t *testing.T) {
	st, _, h := newTestStatic(t, false)
	const url = "/v1/lcr/static_routes"
	code, body := do(t, h, "GET", url, "")
	if code != http.StatusOK || strings.TrimSpace(body) != wantStaticJSON {
		t.Fatalf("GET: %d %s\nwant %s", code, body, wantStaticJSON)
	}
	before := st.table.Load()
	if code, put := do(t, h, "PUT", url, body); code != http.StatusOK || put != body {
		t.Fatalf("PUT of the GET: %d %s", code, put)
	}
	if st.table.Load() == before {
		t.Error("the PUT did not publish a new table")
	}
	if _, again := do(t, h, "GET", url, ""); again != body {
		t.Errorf("GET after PUT:\n%s\nwant\n%s", again, body)
	}
}

// A PUT table replaces the one the shards read, and GET shows it.
func TestStaticRoutesPut(t *testing.T) {
	st, reg, h := newTestStatic(t, false)
	const url = "/v1/lcr/static_routes"
	// A group added at run time (the admin API) is known.
	if err := reg.AddGroup(health.GroupConfig{Name: "runtime-gw",
		Destinations: []health.DestConfig{{URI: "sip:192.0.2.40", Address: "192.0.2.40:5060"}}}); err != nil {
		t.Fatal(err)
	}
	old := st.table.Load()
	oldRoutes, _ := old.Lookup("15550123")
	table := `[{"prefix":"+1","routes":[{"carrier_id":"c","gateway_group":"runtime-gw","rate":0.002},` +
		`{"carrier_id":"d","gateway_group":"yaml-gw","rate":0.001,"number_policy":"uk"}]}]`
	code, body := do(t, h, "PUT", url, table)
	if code != http.StatusOK || strings.TrimSpace(body) != table {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if _, got := do(t, h, "GET", url, ""); strings.TrimSpace(got) != table {
		t.Errorf("GET: %s, want %s", got, table)
	}
	routes, ok := st.table.Load().Lookup("+15550123")
	if !ok || len(routes) != 2 || routes[0].CarrierID != "d" || routes[1].CarrierID != "c" {
		t.Errorf("new table's routes: %+v, want d then c (by rate)", routes)
	}
	if _, ok := st.table.Load().Lookup("447700900123"); ok {
		t.Error("the old table's prefix 44 is still there")
	}
	// The old table, which calls in progress hold, is untouched.
	if r, _ := old.Lookup("15550123"); len(r) != 2 || r[0].CarrierID != oldRoutes[0].CarrierID || r[0].CarrierID != "b" {
		t.Errorf("old table changed: %+v", r)
	}
}

// A bad table is refused whole with the field and why; the table in force
// stays.
func TestStaticRoutesPutErrors(t *testing.T) {
	st, _, h := newTestStatic(t, false)
	const url = "/v1/lcr/static_routes"
	ok := `{"carrier_id":"a","gateway_group":"yaml-gw"}`
	for _, c := range []struct{ name, body, want string }{
		{"unknown group", `[{"prefix":"1","routes":[` + ok + `]},{"prefix":"2","routes":[]},{"prefix":"3","routes":[` + ok +
			`,{"carrier_id":"b","gateway_group":"x"}]}]`, `static_routes[2].routes[1].gateway_group: unknown group \"x\"`},
		{"unknown number policy", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","number_policy":"fr"}]}]`,
			`static_routes[0].routes[0].number_policy: unknown number policy \"fr\"`},
		{"bad caller_id", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","caller_id":"anonymous"}]}]`,
			`static_routes[0].routes[0].caller_id: \"anonymous\": want a number`},
		{"duplicate prefix", `[{"prefix":"44","routes":[]},{"prefix":"+44","routes":[]}]`,
			`static_routes[1].prefix: \"+44\": duplicate prefix (also static_routes[0].prefix)`},
		{"prefix not digits", `[{"prefix":"4a","routes":[]}]`, `static_routes[0].prefix: \"4a\": want digits`},
		{"no carrier", `[{"prefix":"1","routes":[{"gateway_group":"yaml-gw"}]}]`, `static_routes[0].routes[0].carrier_id: required`},
		{"negative rate", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","rate":-1}]}]`,
			`static_routes[0].routes[0].rate: -1: must not be negative`},
		{"negative timeout", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","timeout_secs":-1}]}]`,
			`static_routes[0].routes[0].timeout_secs: -1`},
		{"unknown key", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","gateway":"x"}]}]`,
			`unknown field \"gateway\"`},
		{"trailing data", `[] []`, `trailing data`},
		{"not a list", `{"prefix":"1"}`, `cannot decode static routes`},
		{"null", `null`, `null: want a list`},
		{"tech_prefix the API refuses", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","tech_prefix":"9?"}]}]`,
			`static_routes[0].routes[0].tech_prefix: \"9?\": not allowed in a user part`},
		{"ruri with a control character", `[{"prefix":"1","routes":[{"carrier_id":"a","gateway_group":"yaml-gw","ruri":"sip:a\u0001b@1.2.3.4"}]}]`,
			`static_routes[0].routes[0].ruri`},
		{"prefix too long", `[{"prefix":"` + strings.Repeat("1", 33) + `","routes":[]}]`, `static_routes[0].prefix: 33 digits: at most 32`},
	} {
		before := st.table.Load()
		code, body := do(t, h, "PUT", url, c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 with %s", c.name, code, body, c.want)
		}
		if st.table.Load() != before {
			t.Errorf("%s: the table was replaced", c.name)
		}
	}
	if _, got := do(t, h, "GET", url, ""); strings.TrimSpace(got) != wantStaticJSON {
		t.Errorf("GET after refused PUTs: %s", got)
	}
}

// In API mode the static table is not used: PUT is refused, GET shows the
// YAML's.
func TestStaticRoutesAPIMode(t *testing.T) {
	_, _, h := newTestStatic(t, true)
	const url = "/v1/lcr/static_routes"
	code, body := do(t, h, "PUT", url, `[]`)
	var e struct{ Error string }
	if json.Unmarshal([]byte(body), &e); code != http.StatusConflict || !strings.Contains(e.Error, "lcr.api_url is set") {
		t.Errorf("PUT in API mode: %d %s, want 409", code, body)
	}
	if code, body := do(t, h, "GET", url, ""); code != http.StatusOK || strings.TrimSpace(body) != wantStaticJSON {
		t.Errorf("GET in API mode: %d %s", code, body)
	}
}
