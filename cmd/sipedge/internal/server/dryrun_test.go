package server

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/route")

// checkGolden compares got with testdata/route/name, or rewrites it with
// -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "route", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-update rewrites it); got:\n%s\nwant:\n%s", path, got, want)
	}
}

// stateYAML is a static table over carriers each left in a state of its
// own by the test: the reasons a carrier is skipped, and carriers dialled
// with their shaping.
const stateYAML = `
listen: ["udp://127.0.0.1:5060", "tcp://127.0.0.1:5060"]
advertise: "192.0.2.1"
b2bua: { ring_timeout_secs: 45 }
number_policies:
  - { name: uk, country_code: "44", national_prefix: "0" }
  - { name: uk-national, format: national, country_code: "44", national_prefix: "0" }
trunks:
  - { name: pbx, trunk_group: cust-trunks, sources: ["10.1.0.0/16"], number_policy: uk, ring_timeout_secs: 20 }
gateway:
  groups:
    - { name: paced, cps: { rate: 0.01, max_wait_ms: 0 }, destinations: [{ uri: "sip:198.51.100.2", address: "198.51.100.2:5060" }] }
    - { name: trunked, max_concurrent_calls: 1, destinations: [{ uri: "sip:198.51.100.3", address: "198.51.100.3:5060" }] }
    - { name: flaky, destinations: [{ uri: "sip:198.51.100.4", address: "198.51.100.4:5060" }] }
    - { name: scored, destinations: [{ uri: "sip:198.51.100.5", address: "198.51.100.5:5060" }] }
    - name: premium
      algorithm: hash
      transport: tcp
      cps: { rate: 50, max_wait_ms: 500 }
      destinations:
        - { uri: "sip:gw1.premium.example", address: "198.51.100.10:5060" }
        - { uri: "sip:gw2.premium.example", address: "198.51.100.11:5060" }
quality: { mode: demote, prefixes: ["+44"] }
lcr:
  static_routes:
    - prefix: "+44"
      routes:
        - { carrier_id: paced-co, gateway_group: paced, rate: 0.001 }
        - { carrier_id: trunked-co, gateway_group: trunked, rate: 0.002 }
        - { carrier_id: flaky-co, gateway_group: flaky, rate: 0.003 }
        - { carrier_id: scored-co, gateway_group: scored, rate: 0.004 }
        - carrier_id: premium-co
          gateway_group: premium
          rate: 0.02
          currency: GBP
          timeout_secs: 8
          tech_prefix: "#31#"
          number_policy: uk-national
          caller_id: "+442079460000"
          caller_id_presentation: restricted
          headers: { X-Account: "42", X-Route-Tag: gold }
        - { carrier_id: direct-co, next_hop: "sip:203.0.113.9:5080;transport=tcp", gateway_group: gone, rate: 0.05 }
`

// A dry run on a node whose carriers are in every state a dry run tells
// apart: over its CPS and demoted by quality routing, so tried last
// (paced), its channels in use (trunked), its one member cooled down by a
// 503 (flaky), disabled by quality routing (scored), then dialled through
// a hash group with its shaping (premium) and through a next hop
// (direct). Nothing is taken: a call dialled after the dry run gets the
// channel and CPS slots the dry run found free.
func TestDryRunSkipReasons(t *testing.T) {
	cfg, err := config.Parse([]byte(stateYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	dr, closeDR, err := configDryRun(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDR()
	dr.mode, dr.notes = ModeLive, nil
	now := time.Second
	sh := dr.carriers.NewShard(carrier.ShardOptions{Now: func() time.Duration { return now }})
	qm := dr.carriers.Quality()
	prefix := "+44"
	if err := qm.Disable(quality.Target{Carrier: "scored-co", Prefix: &prefix}); err != nil {
		t.Fatal(err)
	}
	dialed := []byte("+442071234567")
	for range 30 { // answered 480 and nothing else: critical
		sh.Report(&carrier.Report{Event: carrier.AttemptFailed, CarrierID: "paced-co", Number: dialed, Code: 480, Dialed: true, At: now})
	}
	now += 5 * time.Second
	sh.Tick(now)
	qm.Update(now)
	reserve := func(group string) *carrier.Dial {
		d := new(carrier.Dial)
		if reason := sh.Reserve(&route.Route{CarrierID: group, GatewayGroup: group}, 0, dialed, d); reason != "" {
			t.Fatalf("%s: %s", group, reason)
		}
		return d
	}
	if p := sh.Pace(reserve("paced"), 0); p != (carrier.Pace{}) { // its one slot of the next 115 s
		t.Fatalf("paced: %+v", p)
	}
	reserve("trunked") // its one channel, held
	sh.Outcome(reserve("flaky"), 503, time.Hour)

	q := RouteQuery{To: "02071234567", From: "07700900123", CallID: "call-1@pbx"}
	a, err := dr.route(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteRoute(&out, a); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "skip_reasons.txt", out.Bytes())

	// The premium carrier's CPS slot and members are still there: a dry
	// run again says the same.
	b, err := dr.route(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	WriteRoute(&again, b)
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Errorf("a second dry run differs:\n%s", again.String())
	}
}

// Questions a dry run cannot answer are ErrBadQuery: no number, a trunk
// that does not exist.
func TestDryRunBadQuery(t *testing.T) {
	cfg, err := config.Parse([]byte(stateYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	dr, closeDR, err := configDryRun(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDR()
	for _, q := range []RouteQuery{{}, {To: "1", Trunk: "nope"}} {
		if _, err := dr.route(context.Background(), q); err == nil || !errors.Is(err, ErrBadQuery) {
			t.Errorf("%+v: %v, want ErrBadQuery", q, err)
		}
	}
}
