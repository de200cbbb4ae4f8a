package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/server"
	"github.com/sipedge/sipedge/internal/testtier"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/route")

// routeOut runs `sipedge route args...` and returns its exit status and
// output.
func routeOut(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"route"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// golden compares got with testdata/route/name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "route", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs (-update rewrites it); got:\n%s\nwant:\n%s", path, got, want)
	}
}

// writeConfig writes yaml to a file of the test's and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sipedge.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const staticYAML = `
listen: ["udp://127.0.0.1:5060"]
number_policies:
  - { name: nanp, country_code: "1", national_prefix: "" }
trunks:
  - { name: pbx, sources: ["10.1.0.0/16"], number_policy: nanp }
  - { name: wholesale, trunk_group: carriers, sources: ["10.2.0.0/16"], ring_timeout_secs: 0 }
gateway:
  groups:
    - name: carrier-a
      algorithm: round_robin
      destinations:
        - { uri: "sip:198.51.100.1:5060", address: "198.51.100.1:5060", priority: 1 }
        - { uri: "sip:198.51.100.2:5060", address: "198.51.100.2:5060" }
    - { name: carrier-b, transport: tcp, destinations: [{ uri: "sip:carrier-b.example", address: "198.51.100.20:5060" }] }
lcr:
  static_routes:
    - prefix: "1"
      routes:
        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005, currency: USD, tech_prefix: "1010", headers: { X-Acct: "7" } }
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD, caller_id: "+13105550100" }
    - prefix: "1900"
      routes: []
`

// sipedge route on a static table, from the configuration alone: the
// numbers normalised by the trunk's policy, the prefix that matched, each
// carrier cheapest first with how it would be dialled; a blocked prefix
// and no match say what the caller gets; JSON is POST /v1/route's shape.
// Usage errors exit 2, a query the configuration cannot answer 1.
func TestRouteStatic(t *testing.T) {
	path := writeConfig(t, staticYAML)
	var out strings.Builder
	for _, args := range [][]string{
		{"-to", "2025550123", "-from", "(310) 555-0199"},
		{"-to", "19005550000", "-trunk", "pbx"},
		{"-to", "442071234567", "-trunk", "wholesale"},
	} {
		code, stdout, stderr := routeOut(append([]string{"-config", path}, args...)...)
		if code != 0 || stderr != "" {
			t.Fatalf("route %q: %d %s", args, code, stderr)
		}
		fmt.Fprintf(&out, "$ sipedge route %s\n%s\n", strings.Join(args, " "), stdout)
	}
	golden(t, "static.txt", out.String())

	code, stdout, _ := routeOut("-config", path, "-to", "2025550123", "-json")
	var a server.RouteAnswer
	if err := json.Unmarshal([]byte(stdout), &a); code != 0 || err != nil || a.Mode != server.ModeConfig ||
		len(a.Carriers) != 2 || a.Carriers[0].Dial == nil || a.Carriers[0].Dial.CPSKey != "" {
		t.Errorf("-json: %d %v %+v", code, err, a)
	}
	if code, _, stderr := routeOut("-config", path); code != 2 || !strings.Contains(stderr, "-to NUMBER is required") {
		t.Errorf("no -to: %d %s", code, stderr)
	}
	if code, _, stderr := routeOut("-config", path, "-to", "1", "-trunk", "nope"); code != 1 || !strings.Contains(stderr, `unknown trunk "nope"`) {
		t.Errorf("unknown trunk: %d %s", code, stderr)
	}
}

// apiStub is a routing API: 12025550123 gets three carriers (a group that
// does not exist, a next hop that is a DNS name, carrier-a paced and
// shaped), 19005550000 a reject, any other number a 500.
func apiStub(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			DialedNumber string `json:"dialed_number"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		switch req.DialedNumber {
		case "12025550123":
			io.WriteString(w, `{"routes": [
				{"carrier_id": "gone-co", "gateway_group": "gone", "rate": 0.001},
				{"carrier_id": "dns-co", "next_hop": "sip:gw.carrier.example", "rate": 0.002},
				{"carrier_id": "carrier-a", "gateway_group": "carrier-a", "rate": 0.003, "currency": "EUR",
				 "timeout_secs": 5, "number_policy": "e164", "caller_id_presentation": "restricted",
				 "headers": {"X-Plan": "gold"}, "cps": {"rate": 5, "key": "acct-9"}}],
				"cache_ttl_secs": 60}`)
		case "19005550000":
			io.WriteString(w, `{"reject": {"code": 403, "reason": "Premium Blocked"}}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// freeUDPPort is a UDP port free on 127.0.0.1 a moment ago, below the
// ephemeral range.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	for port := 10000 + os.Getpid()%10000; ; port++ {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err == nil {
			u.Close()
			return port
		}
	}
}

// sipedge route with an LCR API: the API's carriers and every skip reason
// a configuration alone can show (a group that does not exist, a next hop
// that needs DNS), an API reject, and the fallback group when the API
// fails (golden). A running node asked with -admin (POST /v1/route)
// answers the same JSON as the configuration alone, but for its mode:
// nothing has happened on it yet.
func TestRouteAPI(t *testing.T) {
	testtier.RequiresSockets(t)
	api := apiStub(t)
	yaml := fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
admin: { listen: "127.0.0.1:0", token: s3cret }
b2bua: { drain_timeout_secs: 0 }
number_policies: [{ name: e164, country_code: "1" }]
trunks: [{ name: pbx, trunk_group: cust-trunks, sources: ["127.0.0.0/8"], attributes: { customer: acme } }]
gateway:
  groups:
    - { name: carrier-a, destinations: [{ uri: "sip:198.51.100.1:5060", address: "198.51.100.1:5060" }] }
lcr: { api_url: %q, fallback_gateway_group: carrier-a }
cdr: { file: %q }
`, freeUDPPort(t), api.URL, filepath.Join(t.TempDir(), "cdr.jsonl"))
	path := writeConfig(t, yaml)
	queries := [][]string{{"-to", "12025550123", "-from", "13105550199"}, {"-to", "19005550000"}, {"-to", "15550000"}}
	var out strings.Builder
	for _, args := range queries {
		code, stdout, stderr := routeOut(append([]string{"-config", path}, args...)...)
		if code != 0 {
			t.Fatalf("route %q: %d %s", args, code, stderr)
		}
		fmt.Fprintf(&out, "$ sipedge route %s\n%s\n", strings.Join(args, " "), stdout)
	}
	golden(t, "api.txt", out.String())

	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	answer := func(args ...string) server.RouteAnswer {
		t.Helper()
		code, stdout, stderr := routeOut(append(args, "-json")...)
		var a server.RouteAnswer
		if err := json.Unmarshal([]byte(stdout), &a); code != 0 || err != nil {
			t.Fatalf("route %q: %d %v %s", args, code, err, stderr)
		}
		return a
	}
	for _, args := range queries {
		alone := answer(append([]string{"-config", path}, args...)...)
		live := answer(append([]string{"-config", path, "-admin", srv.AdminAddr()}, args...)...)
		if alone.Mode != server.ModeConfig || live.Mode != server.ModeLive {
			t.Errorf("%q: modes %q and %q", args, alone.Mode, live.Mode)
		}
		alone.Mode, alone.Notes, live.Mode, live.Notes = "", nil, "", nil
		if !reflect.DeepEqual(alone, live) {
			t.Errorf("%q: the node answers\n%+v\nthe configuration alone\n%+v", args, live, alone)
		}
	}
	// Without the node's token (no -config): refused, and said so.
	if code, _, stderr := routeOut("-admin", "http://"+srv.AdminAddr(), "-to", "15551234"); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("without the token: %d %s", code, stderr)
	}
}
