package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/transport"
)

// envOf returns a lookup over m, for Parse.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func mustParse(t *testing.T, text string, env map[string]string) *Config {
	t.Helper()
	c, err := Parse([]byte(text), envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v\n--- input:\n%s", err, text)
	}
	return c
}

// minimalConfig is the smallest configuration that routes a call: one
// trunk, one gateway group, one static route. It must work as written.
const minimalConfig = `listen: ["udp://127.0.0.1:5060", "tcp://127.0.0.1:5060"]
admin: { listen: "127.0.0.1:9090" }
trunks:
  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - name: carrier-a
      destinations:
        - { uri: "sip:127.0.0.1:5070", address: "127.0.0.1:5070" }
lcr:
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
cdr: { file: "cdr.jsonl" }
`

// apiLCRConfig asks the routing API (docs/design/lcr.md 2.8), with a
// decision cache and a fallback group.
const apiLCRConfig = `listen: ["udp://127.0.0.1:5060"]
lcr:
  api_url: "${LCR_API_URL:-http://127.0.0.1:8080/route}"
  timeout_ms: 2000
  cache: "lcr"                         # a name from the cache: list (optional)
  cache_ttl_secs: 300                  # default TTL when the API omits one
  auth_header: "Bearer ${LCR_TOKEN}"   # optional
  fallback_gateway_group: "carrier-a"  # optional

cache:
  - name: "lcr"
    url: "redis://127.0.0.1:6379"
    local_ttl_secs: 60

gateway:
  groups:
    - name: "carrier-a"
      probe: { enabled: true, interval_secs: 15, failure_threshold: 3 }
      destinations:
        - { uri: "sip:gw1.carrier-a.example:5060", address: "198.51.100.11:5060", weight: 2 }
    - name: "carrier-b"
      probe: { enabled: true }
      destinations:
        - { uri: "sip:gw1.carrier-b.example:5060", address: "203.0.113.21:5060" }
`

func TestExamplesLoad(t *testing.T) {
	checkMinimal := func(t *testing.T, c *Config) {
		t.Helper()
		want := []transport.Listen{
			{Transport: transport.UDP, Addr: netip.MustParseAddrPort("127.0.0.1:5060")},
			{Transport: transport.TCP, Addr: netip.MustParseAddrPort("127.0.0.1:5060")},
		}
		if !reflect.DeepEqual(c.Listen, want) {
			t.Errorf("Listen = %v, want %v", c.Listen, want)
		}
		if got := c.Admin.Listen.String(); got != "127.0.0.1:9090" {
			t.Errorf("Admin.Listen = %q", got)
		}
		if len(c.Trunks) != 1 || c.Trunks[0].Name != "local" || c.Trunks[0].TrunkGroup != "cust-trunks" ||
			!reflect.DeepEqual(c.Trunks[0].Sources, []b2bua.Source{{Prefix: netip.MustParsePrefix("127.0.0.1/32")}}) {
			t.Errorf("Trunks = %+v", c.Trunks)
		}
		g := c.Group("carrier-a")
		if g == nil || len(g.Destinations) != 1 || g.Destinations[0].URI != "sip:127.0.0.1:5070" ||
			g.Destinations[0].Address != "127.0.0.1:5070" {
			t.Fatalf("group carrier-a = %+v", g)
		}
		sr := c.LCR.StaticRoutes
		if len(sr) != 1 || sr[0].Prefix != "" || len(sr[0].Routes) != 1 ||
			sr[0].Routes[0].CarrierID != "carrier-a" || sr[0].Routes[0].GatewayGroup != "carrier-a" || sr[0].Routes[0].Rate != 0.004 {
			t.Errorf("StaticRoutes = %+v", sr)
		}
		if c.CDR.File != "cdr.jsonl" {
			t.Errorf("CDR.File = %q", c.CDR.File)
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"minimal config as written", func(t *testing.T) {
			checkMinimal(t, mustParse(t, minimalConfig, nil))
		}},
		{"Example is the minimal shape", func(t *testing.T) {
			checkMinimal(t, mustParse(t, Example, nil))
		}},
		{"testdata/sipedge.yaml is Example", func(t *testing.T) {
			b, err := os.ReadFile("testdata/sipedge.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != Example {
				t.Fatal("testdata/sipedge.yaml and example.yaml differ; keep them identical")
			}
		}},
		{"Load testdata/sipedge.yaml", func(t *testing.T) {
			c, err := Load("testdata/sipedge.yaml")
			if err != nil {
				t.Fatal(err)
			}
			checkMinimal(t, c)
		}},
		{"API LCR config with environment", func(t *testing.T) {
			c := mustParse(t, apiLCRConfig, map[string]string{"LCR_TOKEN": "s3cret"})
			if c.LCR.APIURL != "http://127.0.0.1:8080/route" || c.LCR.AuthHeader != "Bearer s3cret" ||
				c.LCR.Cache != "lcr" || c.LCR.CacheTTL != 300*time.Second || c.LCR.FallbackGatewayGroup != "carrier-a" {
				t.Errorf("LCR = %+v", c.LCR)
			}
			if len(c.Cache) != 1 || c.Cache[0].URL != "redis://127.0.0.1:6379" || c.Cache[0].LocalTTL != time.Minute {
				t.Errorf("Cache = %+v", c.Cache)
			}
			a, b := c.Group("carrier-a"), c.Group("carrier-b")
			if !a.Probe.Enabled || a.Destinations[0].Weight != 2 || !b.Probe.Enabled || b.Probe.Interval != 15*time.Second {
				t.Errorf("groups = %+v / %+v", a, b)
			}
		}},
		{"API LCR config without LCR_TOKEN fails", func(t *testing.T) {
			_, err := Parse([]byte(apiLCRConfig), envOf(nil))
			if err == nil || !strings.Contains(err.Error(), "line 7: ") || !strings.Contains(err.Error(), "LCR_TOKEN is not set") {
				t.Fatalf("err = %v, want LCR_TOKEN not set at line 7", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// group is a valid gateway section to build failing cases on.
const group = `
gateway:
  groups:
    - name: carrier-a
      destinations:
        - { uri: "sip:127.0.0.1:5070", address: "127.0.0.1:5070" }
`

func TestRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // "line N: path: why", a substring of the error
	}{
		// listen, shards, admin, log
		{"listen scheme", `listen: ["sctp://127.0.0.1:5060"]`, `line 1: listen[0]: "sctp://127.0.0.1:5060": transport "sctp" is not udp or tcp`},
		{"listen no scheme", `listen: ["127.0.0.1:5060"]`, `line 1: listen[0]: "127.0.0.1:5060": want udp://host:port or tcp://host:port`},
		{"listen missing port", "listen:\n  - udp://127.0.0.1:5060\n  - udp://127.0.0.2", `line 3: listen[1]: "udp://127.0.0.2": missing port`},
		{"listen port 0", `listen: ["tcp://[::1]:0"]`, `line 1: listen[0]: "tcp://[::1]:0": port must not be 0`},
		{"listen host name", `listen: ["udp://localhost:5060"]`, `listen[0]: "udp://localhost:5060": host "localhost" is not an IP address`},
		{"listen empty", `listen: []`, `line 1: listen: at least one address required`},
		{"listen duplicate", `listen: ["udp://127.0.0.1:5060", "udp://127.0.0.1:5060"]`, `listen[1]: "udp://127.0.0.1:5060": duplicate of listen[0]`},
		{"listen not a list", `listen: udp://127.0.0.1:5060`, `line 1: listen: want a list, got "udp://127.0.0.1:5060"`},
		{"listen unspecified", `listen: ["udp://0.0.0.0:5060"]`, `line 1: listen[0]: "udp://0.0.0.0:5060": an unspecified address needs advertise`},
		{"listen unspecified v6", "listen:\n  - udp://127.0.0.1:5060\n  - tcp://[::]:5060", `line 3: listen[1]: "tcp://[::]:5060": an unspecified address needs advertise`},
		{"advertise not an address", `advertise: sip.example.com`, `line 1: advertise: "sip.example.com": want an IP address, "IP:port" or "[IPv6]:port"`},
		{"advertise unspecified", `advertise: "0.0.0.0:5060"`, `line 1: advertise: "0.0.0.0:5060": want the address peers send to`},
		{"advertise port 0", `advertise: "192.0.2.1:0"`, `line 1: advertise: "192.0.2.1:0": port must not be 0`},
		{"advertise of no listen family", "listen: [\"udp://0.0.0.0:5060\"]\nadvertise: \"2001:db8::1\"", `line 2: advertise: "2001:db8::1": no listen address of its family`},
		{"shards negative", `shards: -1`, `line 1: shards: -1: must not be negative`},
		{"shards not a number", `shards: many`, `line 1: shards: want an integer, got "many"`},
		{"shards too many", `shards: 257`, `line 1: shards: 257: at most 256`},
		{"admin listen port", "admin:\n  listen: \"x:y\"", `line 2: admin.listen: "x:y": invalid port`},
		{"admin listen no port", `admin: { listen: "127.0.0.1" }`, `admin.listen: "127.0.0.1": missing port`},
		{"admin not a mapping", `admin: [1]`, `line 1: admin: want a mapping, got a list`},
		{"admin metrics_auth without token", "admin:\n  listen: \"127.0.0.1:9090\"\n  metrics_auth: true", `line 3: admin.metrics_auth: true without admin.token: there is no token to require`},
		{"admin metrics_auth not a bool", `admin: { metrics_auth: sometimes }`, `admin.metrics_auth`},
		{"log level", "log:\n  level: verbose", `line 2: log.level: "verbose": want one of "debug", "info", "warn", "error"`},
		// sip
		{"t2 below t1", "sip: { t1_ms: 1000, t2_ms: 500 }", `sip.t2_ms: 500: must not be below t1_ms (1000)`},
		{"max_message_size too large", "sip:\n  max_message_size: 1000000000", `line 2: sip.max_message_size: 1000000000: at most 65535`},
		{"max_txn_memory_mb too large", "sip:\n  max_txn_memory_mb: 65537", `line 2: sip.max_txn_memory_mb: 65537: at most 65536`},
		{"max_txn_memory_mb negative", "sip: { max_txn_memory_mb: -1 }", `sip.max_txn_memory_mb: -1: must not be negative`},
		{"socket buffer too large", "sip:\n  socket_receive_buffer_kb: 1048577", `line 2: sip.socket_receive_buffer_kb: 1048577: at most 1048576`},
		{"socket buffer negative", "sip: { socket_send_buffer_kb: -1 }", `sip.socket_send_buffer_kb: -1: must not be negative`},
		{"batch interval too long", "sip:\n  batch_interval_us: 100001", `line 2: sip.batch_interval_us: 100001: at most 100000`},
		{"batch interval negative", "sip: { batch_interval_us: -1 }", `sip.batch_interval_us: -1: must not be negative`},
		{"batch interval max too long", "sip:\n  batch_interval_max_us: 100001", `line 2: sip.batch_interval_max_us: 100001: at most 100000`},
		{"batch interval max negative", "sip: { batch_interval_max_us: -1 }", `sip.batch_interval_max_us: -1: must not be negative`},
		{"t1 fractional", "sip:\n  t1_ms: 1.5", `line 2: sip.t1_ms: want a whole number of milliseconds, got "1.5"`},
		{"tcp timeout negative", "sip:\n  tcp:\n    idle_timeout_ms: -1", `line 3: sip.tcp.idle_timeout_ms: -1: must not be negative`},
		{"duration too large", "b2bua: { drain_timeout_secs: 99999999999999 }", `b2bua.drain_timeout_secs: 99999999999999: too large`},
		// b2bua
		{"unknown_source", "b2bua:\n  unknown_source: ignore", `line 2: b2bua.unknown_source: "ignore": want one of "drop", "reject"`},
		{"refer_response", "b2bua: { refer_response: 200 }", `b2bua.refer_response: 200: want a SIP failure code, 400 to 699`},
		{"session_timer mode", "b2bua:\n  session_timer:\n    mode: refresh", `line 3: b2bua.session_timer.mode: "refresh": want one of "relay", "uphold"`},
		{"session_timer min_se", "b2bua:\n  session_timer: { min_se: 60 }", `line 2: b2bua.session_timer.min_se: 60: want 90 (RFC 4028 4) to 86400`},
		{"session_timer interval below min_se", "b2bua:\n  session_timer:\n    min_se: 600\n    interval_secs: 300", `line 4: b2bua.session_timer.interval_secs: 300: want min_se (600) to 86400`},
		{"session_timer interval", "b2bua: { session_timer: { interval_secs: 90000 } }", `b2bua.session_timer.interval_secs: 90000: want min_se (90) to 86400`},
		{"default_number_policy", "b2bua:\n  default_number_policy: e164", `line 2: b2bua.default_number_policy: unknown number policy "e164"`},
		{"header_policy name", "b2bua:\n  header_policy:\n    allow: [Allow, \"X Bad\"]", `line 3: b2bua.header_policy.allow[1]: "X Bad": not a header name`},
		{"assert_identity", "b2bua: { assert_identity: maybe }", `b2bua.assert_identity: want true or false, got "maybe"`},
		{"ring_timeout negative", "b2bua: { ring_timeout_secs: -30 }", `b2bua.ring_timeout_secs: -30: must not be negative`},
		// number policies
		{"policy format", "number_policies:\n  - { name: x, format: local, country_code: \"1\" }", `line 2: number_policies[0].format: "local": want one of "e164", "national"`},
		{"policy country code", "number_policies:\n  - { name: x, country_code: \"+1\" }", `line 2: number_policies[0].country_code: "+1": want 1 to 3 digits`},
		{"policy national prefix", "number_policies:\n  - { name: x, country_code: 1, national_prefix: O }", `number_policies[0].national_prefix: "O": want digits`},
		{"policy no name", "number_policies:\n  - { country_code: 44 }", `line 2: number_policies[0].name: required`},
		{"trunk policy unknown", "trunks:\n  - { name: t, sources: [\"192.0.2.0/24\"], number_policy: uk }", `trunks[0].number_policy: unknown number policy "uk"`},
		{"policy duplicate", "number_policies:\n  - { name: x, country_code: 1 }\n  - { name: x, country_code: 44 }", `line 3: number_policies[1].name: "x": duplicate name (also number_policies[0].name)`},
		// trunks
		{"source CIDR", "trunks:\n  - name: t\n    sources: [\"10.0.0.0/33\"]", `line 3: trunks[0].sources[0]: "10.0.0.0/33": invalid CIDR`},
		{"source port", "trunks:\n  - { name: t, sources: [\"10.0.0.0/8:x\"] }", `trunks[0].sources[0]: "10.0.0.0/8:x": invalid port`},
		{"source garbage", "trunks:\n  - { name: t, sources: [\"carrier\"] }", `trunks[0].sources[0]: "carrier": invalid CIDR or address`},
		{"trunk no sources", "trunks:\n  - { name: t }", `line 2: trunks[0].sources: at least one source required`},
		{"trunk duplicate", "trunks:\n  - { name: t, sources: [10.0.0.1] }\n  - { name: t, sources: [10.0.0.2] }", `line 3: trunks[1].name: "t": duplicate name`},
		{"trunk limits negative", "trunks:\n  - { name: t, sources: [10.0.0.1], limits: { cps: -5 } }", `trunks[0].limits.cps: -5: must not be negative`},
		{"trunk attribute name", "trunks:\n  - name: t\n    sources: [10.0.0.1]\n    attributes: { \"cust omer\": acme }", `line 4: trunks[0].attributes["cust omer"]: "cust omer": want 1 to 64 letters, digits, '_', '-' or '.'`},
		{"trunk attribute value separator", "trunks:\n  - { name: t, sources: [10.0.0.1], attributes: { customer: \"acme,tier=gold\" } }", `trunks[0].attributes.customer: "acme,tier=gold": want up to 128 printable characters but ',' and ':'`},
		{"trunk attribute value control", "trunks:\n  - { name: t, sources: [10.0.0.1], attributes: { customer: \"a\\tb\" } }", `trunks[0].attributes.customer: "a\tb": want up to 128 printable characters`},
		{"trunk attribute value long", "trunks:\n  - { name: t, sources: [10.0.0.1], attributes: { customer: " + strings.Repeat("v", 129) + " } }", `trunks[0].attributes.customer: "` + strings.Repeat("v", 129) + `": want up to 128 printable characters`},
		{"trunk attributes too many", "trunks:\n  - name: t\n    sources: [10.0.0.1]\n    attributes: {" + strings.Repeat(" a:,", 0) + manyAttributes(17) + "}", `line 4: trunks[0].attributes: 17 attributes: at most 16`},
		// gateway groups
		{"group address port", group + `    - name: carrier-b
      destinations:
        - { uri: "sip:gw", address: "x:y" }
`, `line 9: gateway.groups[1].destinations[0].address: "x:y": invalid port`},
		{"address missing port", group + "    - { name: b, destinations: [{ uri: \"sip:b\", address: \"gw.example\" }] }", `gateway.groups[1].destinations[0].address: "gw.example": missing port`},
		{"address port 0", group + "    - { name: b, destinations: [{ uri: \"sip:b\", address: \"gw.example:0\" }] }", `gateway.groups[1].destinations[0].address: "gw.example:0": port must not be 0`},
		{"address bad host", group + "    - { name: b, destinations: [{ uri: \"sip:b\", address: \"gw!:5060\" }] }", `gateway.groups[1].destinations[0].address: "gw!:5060": host "gw!" is neither an IP address nor a DNS name`},
		{"address missing", group + "    - { name: b, destinations: [{ uri: \"sip:b\" }] }", `line 7: gateway.groups[1].destinations[0].address: required`},
		{"destination uri", group + "    - { name: b, destinations: [{ uri: \"http://b\", address: \"b:5060\" }] }", `gateway.groups[1].destinations[0].uri: "http://b": want a sip: or sips: URI`},
		{"weight negative", group + "    - { name: b, destinations: [{ uri: \"sip:b\", address: \"b:5060\", weight: -1 }] }", `gateway.groups[1].destinations[0].weight: -1: must not be negative`},
		{"no destinations", group + "    - name: b\n", `line 7: gateway.groups[1].destinations: at least one destination required`},
		{"group no name", group + "    - destinations: [{ uri: \"sip:b\", address: \"b:5060\" }]", `line 7: gateway.groups[1].name: required`},
		{"group duplicate", group + "    - { name: carrier-a, destinations: [{ uri: \"sip:b\", address: \"b:5060\" }] }", `line 7: gateway.groups[1].name: "carrier-a": duplicate name (also gateway.groups[0].name)`},
		{"algorithm", group + "      algorithm: random", `line 7: gateway.groups[0].algorithm: "random": want one of "weighted", "round_robin", "hash"`},
		{"transport", group + "      transport: sctp", `line 7: gateway.groups[0].transport: "sctp": want one of "udp", "tcp"`},
		{"group reroute cause", group + "      reroute_causes: [503, 200]", `line 7: gateway.groups[0].reroute_causes[1]: 200: want a SIP failure code, 300 to 699`},
		{"probe interval negative", group + "      probe: { interval_secs: -15 }", `gateway.groups[0].probe.interval_secs: -15: must not be negative`},
		{"probe healthy code", group + "      probe: { healthy_codes: [200, 99] }", `gateway.groups[0].probe.healthy_codes[1]: 99: want a SIP status code, 100 to 699`},
		{"max_concurrent_calls negative", group + "      max_concurrent_calls: -1", `line 7: gateway.groups[0].max_concurrent_calls: -1: must not be negative`},
		{"auth without password", group + "      auth: { username: acct-1 }", `line 7: gateway.groups[0].auth.password: want 1 to 256 bytes, got 0`},
		{"auth without username", group + "      auth: { password: s3cret }", `line 7: gateway.groups[0].auth.username: "": want 1 to 256 printable characters`},
		{"auth username control", group + "      auth: { username: \"a\\r\\nb\", password: x }", `gateway.groups[0].auth.username: "a\r\nb": want 1 to 256 printable characters`},
		{"auth unknown key", group + "      auth: { user: a, password: x }", `gateway.groups[0].auth.user: unknown key`},
		{"cps rate negative", group + "      cps: { rate: -1 }", `line 7: gateway.groups[0].cps.rate: -1: must not be negative`},
		// The limiter's bounds (ratelimit.Limit), checked here so that check-config
		// finds them with the field's path and line, not the start.
		{"cps burst over an hour", group + "      cps: { rate: 1, burst: 5000 }", `line 7: gateway.groups[0].cps: burst 5000 at rate 1: more than an hour of calls at once`},
		{"cps rate under one an hour", group + "      cps: { rate: 0.0001 }", `line 7: gateway.groups[0].cps: rate 0.0001: one call an hour or more`},
		{"trunk limits burst over an hour", "trunks:\n  - { name: t, sources: [10.0.0.1], limits: { cps: 1, burst: 4000 } }", `line 2: trunks[0].limits: burst 4000 at rate 1: more than an hour of calls at once`},
		{"cps rate not a number", group + "      cps: { rate: fast }", `gateway.groups[0].cps.rate: want a number, got "fast"`},
		{"cps_reject code", group + "      cps_reject: [{ code: 429 }, { code: 180 }]", `gateway.groups[0].cps_reject[1].code: 180: want a SIP failure code, 400 to 699`},
		// lcr
		{"static route unknown group", group + `lcr:
  static_routes:
    - prefix: "1"
      routes:
        - { carrier_id: a, gateway_group: carrier-a }
        - { carrier_id: b, gateway_group: carrier-a }
        - { carrier_id: z, gateway_group: carrier-z }
`, `line 13: lcr.static_routes[0].routes[2].gateway_group: unknown group "carrier-z"`},
		{"route without destination", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a }]", `line 9: lcr.static_routes[0].routes[0]: want gateway_group, next_hop or ruri`},
		{"route without carrier_id", group + "lcr:\n  static_routes:\n    - routes: [{ gateway_group: carrier-a }]", `lcr.static_routes[0].routes[0].carrier_id: required`},
		{"route carrier_id control", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: \"a\\tb\", gateway_group: carrier-a }]", `lcr.static_routes[0].routes[0].carrier_id: "a\tb": want up to 128 printable characters`},
		{"route carrier_id long", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: " + strings.Repeat("c", 129) + ", gateway_group: carrier-a }]", `lcr.static_routes[0].routes[0].carrier_id: "` + strings.Repeat("c", 129) + `": want up to 128 printable characters`},
		{"route number policy", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, number_policy: intl }]", `lcr.static_routes[0].routes[0].number_policy: unknown number policy "intl"`},
		{"route presentation", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, caller_id_presentation: hidden }]", `lcr.static_routes[0].routes[0].caller_id_presentation: "hidden": want one of "", "allowed", "restricted"`},
		{"route rate negative", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, rate: -0.1 }]", `lcr.static_routes[0].routes[0].rate: -0.1: must not be negative`},
		{"route timeout negative", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, timeout_secs: -6 }]", `lcr.static_routes[0].routes[0].timeout_secs: -6: must not be negative`},
		{"route currency", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, currency: usd }]", `lcr.static_routes[0].routes[0].currency: "usd": want a three-letter ISO 4217 code`},
		{"route caller_id", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, caller_id: \"tel:123\" }]", `lcr.static_routes[0].routes[0].caller_id: "tel:123": want a number`},
		{"route reroute cause", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, reroute_causes: [700] }]", `lcr.static_routes[0].routes[0].reroute_causes[0]: 700: want a SIP failure code, 300 to 699`},
		{"route header name", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, headers: { \"X Account\": 42 } }]", `lcr.static_routes[0].routes[0].headers["X Account"]: "X Account": not a header name`},
		{"route header identity", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, headers: { P-Asserted-Identity: \"<sip:+1@x>\" } }]", `lcr.static_routes[0].routes[0].headers.P-Asserted-Identity: identity goes through caller_id and caller_id_presentation`},
		{"route header dialog", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, gateway_group: carrier-a, headers: { call-id: x } }]", `lcr.static_routes[0].routes[0].headers.call-id: the B2BUA owns it`},
		{"route next_hop", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"gw:x\" }]", `lcr.static_routes[0].routes[0].next_hop: "gw:x": want a sip: URI or host:port`},
		{"route next_hop name", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"gw.example:5060\" }]", `lcr.static_routes[0].routes[0].next_hop: "gw.example:5060": want an IP address`},
		{"route next_hop URI name", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"sip:gw.example\" }]", `lcr.static_routes[0].routes[0].next_hop: "sip:gw.example": want an IP address`},
		{"route next_hop port 0", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"192.0.2.5:0\" }]", `lcr.static_routes[0].routes[0].next_hop: "192.0.2.5:0": port must not be 0`},
		{"route next_hop URI port 0", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"sip:192.0.2.5:0;transport=tcp\" }]", `lcr.static_routes[0].routes[0].next_hop: "sip:192.0.2.5:0;transport=tcp": port must not be 0`},
		{"route next_hop URI bad port", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"sip:[2001:db8::5]:99999\" }]", `lcr.static_routes[0].routes[0].next_hop: "sip:[2001:db8::5]:99999": invalid port`},
		{"route ruri port 0 alone", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, ruri: \"sip:1@192.0.2.5:0\" }]", `lcr.static_routes[0].routes[0].ruri: "sip:1@192.0.2.5:0": port must not be 0`},
		{"route next_hop sips", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, next_hop: \"sips:192.0.2.5:5061\" }]", `lcr.static_routes[0].routes[0]: a sips: destination needs TLS`},
		{"route ruri name alone", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, ruri: \"sip:1@gw.example\" }]", `lcr.static_routes[0].routes[0].ruri: "sip:1@gw.example": with no gateway_group or next_hop the call goes to its host, which must be an IP address`},
		{"route ruri", group + "lcr:\n  static_routes:\n    - routes: [{ carrier_id: a, ruri: \"tel:+1\" }]", `lcr.static_routes[0].routes[0].ruri: "tel:+1": want a sip: or sips: URI`},
		{"duplicate prefix", group + "lcr:\n  static_routes:\n    - { prefix: \"1\", routes: [] }\n    - { prefix: \"1\", routes: [] }", `line 10: lcr.static_routes[1].prefix: "1": duplicate prefix (also lcr.static_routes[0].prefix)`},
		{"duplicate prefix plus", group + "lcr:\n  static_routes:\n    - { prefix: \"44\", routes: [] }\n    - { prefix: \"+44\", routes: [] }", `line 10: lcr.static_routes[1].prefix: "+44": duplicate prefix (also lcr.static_routes[0].prefix)`},
		{"prefix not digits", group + "lcr:\n  static_routes:\n    - { prefix: \"1a\", routes: [] }", `line 9: lcr.static_routes[0].prefix: "1a": want digits with an optional leading +`},
		{"lcr cache", "lcr:\n  cache: lcr", `line 2: lcr.cache: unknown cache "lcr"`},
		{"lcr fallback", "lcr:\n  fallback_gateway_group: carrier-z", `line 2: lcr.fallback_gateway_group: unknown group "carrier-z"`},
		{"lcr api_url", "lcr: { api_url: \"ftp://x/route\" }", `lcr.api_url: "ftp://x/route": want an http:// or https:// URL`},
		{"lcr api_url password not shown", "lcr: { api_url: \"ftp://u:s3cret@x/route\" }", `lcr.api_url: "ftp://u:xxxxx@x/route": want an http:// or https:// URL`},
		{"lcr timeout negative", "lcr: { timeout_ms: -1 }", `lcr.timeout_ms: -1: must not be negative`},
		{"lcr reroute cause", "lcr:\n  reroute_causes: [408, 299]", `line 2: lcr.reroute_causes[1]: 299: want a SIP failure code, 300 to 699`},
		{"lcr attribute name", "lcr:\n  attributes: [customer, \"a,b\"]", `line 2: lcr.attributes[1]: "a,b": want 1 to 64 letters, digits, '_', '-' or '.'`},
		{"lcr attribute empty", "lcr:\n  attributes: [\"\"]", `line 2: lcr.attributes[0]: "": want 1 to 64 letters`},
		{"lcr attributes too many", "lcr:\n  attributes: [" + manyAttributeNames(17) + "]", `line 2: lcr.attributes: 17 names: at most 16`},
		// cache, ratelimit, cdr
		{"cache url", "cache:\n  - { name: lcr, url: \"http://127.0.0.1:6379\" }", `line 2: cache[0].url: "http://127.0.0.1:6379": want a redis:// URL`},
		{"cache no url", "cache:\n  - { name: lcr }", `cache[0].url: "": want a redis:// URL`},
		{"cache duplicate", "cache:\n  - { name: c, url: \"redis://a:6379\" }\n  - { name: c, url: \"redis://b:6379\" }", `line 3: cache[1].name: "c": duplicate name`},
		{"cache ttl negative", "cache:\n  - { name: c, url: \"redis://a:6379\", local_ttl_secs: -60 }", `cache[0].local_ttl_secs: -60: must not be negative`},
		{"failure_mode", "ratelimit:\n  failure_mode: fail", `line 2: ratelimit.failure_mode: "fail": want one of "local", "open", "closed"`},
		{"ratelimit redis", "ratelimit: { redis: \"127.0.0.1:6379\" }", `ratelimit.redis: "127.0.0.1:6379": want a redis:// URL`},
		{"redis trailing slash", "ratelimit: { redis: \"redis://127.0.0.1:6379/\" }", `ratelimit.redis: "redis://127.0.0.1:6379/": the path must be a database number (/0) or nothing`},
		{"redis database path", "cache:\n  - { name: c, url: \"redis://a:6379/one\" }", `line 2: cache[0].url: "redis://a:6379/one": the path must be a database number (/0) or nothing`},
		{"redis database query", "ratelimit: { redis: \"redis://a:6379?db=x\" }", `ratelimit.redis: "redis://a:6379?db=x": db=x is not a database number`},
		{"redis cluster database", "cache:\n  - { name: c, url: \"redis://a:7000/1?addr=b:7000&addr=c:7000\" }", `line 2: cache[0].url: "redis://a:7000/1?addr=b:7000&addr=c:7000": database 1 with more seed nodes (addr=): a Redis Cluster has only database 0`},
		{"redis password not shown", "cache:\n  - { name: c, url: \"redis://:s3cret@a:6379/one\" }", `line 2: cache[0].url: "redis://:xxxxx@a:6379/one": the path must be a database number (/0) or nothing`},
		{"redis password not shown unparsed", "ratelimit: { redis: \"redis://u:s3cret@a:port\" }", `ratelimit.redis: "redis://xxxxx@a:port": want a redis:// URL`},
		{"redis cluster db query", "ratelimit: { redis: \"redis://a:7000?addr=b:7000&db=2\" }", `ratelimit.redis: "redis://a:7000?addr=b:7000&db=2": database 2 with more seed nodes (addr=): a Redis Cluster has only database 0`},
		{"passive outcome", "gateway:\n  groups:\n    - name: g\n      passive: { outcomes: [status_503, status_500] }\n      destinations: [{ uri: \"sip:127.0.0.1:5070\", address: \"127.0.0.1:5070\" }]",
			`line 4: gateway.groups[0].passive.outcomes[1]: "status_500": want one of "no_response", "status_503", "transport_error"`},
		{"passive max_retry_after too large", "gateway:\n  groups:\n    - name: g\n      passive: { max_retry_after_secs: 90000 }\n      destinations: [{ uri: \"sip:127.0.0.1:5070\", address: \"127.0.0.1:5070\" }]",
			`line 4: gateway.groups[0].passive.max_retry_after_secs: 90000: at most 86400 (a day)`},
		{"passive failure_percent too large", "gateway:\n  groups:\n    - name: g\n      passive: { failure_percent: 120 }\n      destinations: [{ uri: \"sip:127.0.0.1:5070\", address: \"127.0.0.1:5070\" }]",
			`line 4: gateway.groups[0].passive.failure_percent: 120: want 1 to 100`},
		{"passive min_calls too large", "gateway:\n  groups:\n    - name: g\n      passive:\n        min_calls: 2000000\n      destinations: [{ uri: \"sip:127.0.0.1:5070\", address: \"127.0.0.1:5070\" }]",
			`line 5: gateway.groups[0].passive.min_calls: 2000000: want 1 to 1000000`},
		{"panic threshold over 100", "gateway:\n  groups:\n    - name: g\n      panic_threshold_percent: 150\n      destinations: [{ uri: \"sip:127.0.0.1:5070\", address: \"127.0.0.1:5070\" }]",
			`line 4: gateway.groups[0].panic_threshold_percent: 150: want 0 to 100`},
		{"batch one", "ratelimit: { batch: 1 }", `ratelimit.batch: 1: want 0 (off) or 2 to 16`},
		{"batch too large", "ratelimit:\n  batch: 32", `line 2: ratelimit.batch: 32: want 0 (off) or 2 to 16`},
		{"flood negative", "ratelimit:\n  flood: { messages_per_sec: -5 }", `line 2: ratelimit.flood.messages_per_sec: -5: must not be negative`},
		{"flood without ban", "ratelimit:\n  flood: { ban_secs: 0 }", `line 2: ratelimit.flood.ban_secs: 0s: want a positive ban while flood protection is on`},
		{"flood ban negative", "ratelimit:\n  flood: { ban_secs: -1 }", `line 2: ratelimit.flood.ban_secs: -1: must not be negative`},
		{"cdr queue negative", "cdr: { queue: -1 }", `cdr.queue: -1: must not be negative`},
		{"fleet redis", "fleet:\n  redis: \"127.0.0.1:6379\"", `line 2: fleet.redis: "127.0.0.1:6379": want a redis:// URL`},
		{"fleet redis password not shown", "fleet: { redis: \"redis://:s3cret@a:6379/one\" }", `fleet.redis: "redis://:xxxxx@a:6379/one": the path must be a database number (/0) or nothing`},
		{"fleet redis cluster database", "fleet: { redis: \"redis://a:7000/1?addr=b:7000\" }", `fleet.redis: "redis://a:7000/1?addr=b:7000": database 1 with more seed nodes (addr=): a Redis Cluster has only database 0`},
		{"fleet node_id", "fleet:\n  redis: \"redis://a:6379\"\n  node_id: \"edge 1\"", `line 3: fleet.node_id: "edge 1": want 1 to 64 letters, digits, '.', '_' or '-'`},
		{"fleet node_id colon", "fleet: { node_id: \"edge:1\" }", `fleet.node_id: "edge:1": want 1 to 64 letters`},
		{"fleet lease_secs", "fleet:\n  redis: \"redis://a:6379\"\n  lease_secs: 7200", `line 3: fleet.lease_secs: 7200: want 1 to 3600 (0: 10)`},
		{"fleet lease_secs negative", "fleet: { lease_secs: -1 }", `fleet.lease_secs: -1: must not be negative`},
		{"fleet journal without redis", "fleet:\n  call_journal: true", `line 2: fleet.call_journal: needs fleet.redis: the journal lives in Redis`},
		{"cdr not a mapping", "cdr: cdr.jsonl", `line 1: cdr: want a mapping, got "cdr.jsonl"`},
		// quality
		{"quality mode", "quality:\n  mode: best", `line 2: quality.mode: "best": want off, demote or sort`},
		{"quality prefix", "quality:\n  prefixes: [\"\", \"+4x\"]", `line 2: quality.prefixes[1]: "+4x": want digits with an optional leading +`},
		{"quality prefix duplicate", "quality: { prefixes: [\"44\", \"+44\"] }", `quality.prefixes[1]: "+44": duplicate prefix (also prefixes[0])`},
		{"quality history below sampling", "quality:\n  sampling_interval_secs: 10\n  history_span_secs: 5", `line 3: quality.history_span_secs: 5: want 10 (one sampling interval) to`},
		{"quality confidence", "quality:\n  confidence: 1.5", `line 2: quality.confidence: 1.5: want a probability above 0.5 and below 1`},
		{"quality threshold negative", "quality:\n  bad_dst_threshold: -2", `line 2: quality.bad_dst_threshold: -2: want a number from 0, or -1 to disable`},
		{"quality webhook", "quality: { webhook_url: \"ftp://x\" }", `quality.webhook_url: "ftp://x": want an http:// or https:// URL`},
		{"quality profile critical", "quality:\n  profiles:\n    - name: p\n      asr: { warning: 0.2, critical: 0.5 }",
			`line 4: quality.profiles[0].asr.critical: 0.5: want it below warning (0.2)`},
		{"quality profile prefix", "quality:\n  profiles:\n    - name: p\n      prefixes: [\"33\"]",
			`line 4: quality.profiles[0].prefixes[0]: "33": not one of quality.prefixes`},
		{"quality profile unknown key", "quality:\n  profiles:\n    - { name: p, asr: { critcal: 0.2 } }", `line 3: quality.profiles[0].asr.critcal: unknown key (did you mean critical?)`},
		{"send_quality without an API", "lcr:\n  send_quality: true", `line 2: lcr.send_quality: true without lcr.api_url`},
		// file level
		{"empty", "# nothing\n", `the configuration is empty`},
		{"two documents", "shards: 1\n---\nshards: 2\n", `more than one YAML document`},
		{"syntax", "listen: [\"udp://127.0.0.1:5060\"\nshards: 1\n", `did not find expected ',' or ']'`},
		{"top level list", "- shards: 1", `line 1: want a mapping, got a list`},
		{"duplicate key", "shards: 1\nshards: 2", `line 2: shards: duplicate key (first at line 1)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
			var el ErrorList
			if !errors.As(err, &el) {
				t.Fatalf("error is %T, want ErrorList", err)
			}
		})
	}
}

// manyAttributes is n attributes of a flow mapping: "a0: v, a1: v, ...".
func manyAttributes(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf("a%d: v", i))
	}
	return strings.Join(parts, ", ")
}

// manyAttributeNames is n names of a flow sequence: "a0, a1, ...".
func manyAttributeNames(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf("a%d", i))
	}
	return strings.Join(parts, ", ")
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"top level", "listen: [\"udp://127.0.0.1:5060\"]\nlisten_addr: x", `line 2: listen_addr: unknown key`},
		{"top level suggestion", "lisen: [\"udp://127.0.0.1:5060\"]", `line 1: lisen: unknown key (did you mean listen?)`},
		{"depth 2", "admin:\n  listen: \"127.0.0.1:9090\"\n  tokn: abc", `line 3: admin.tokn: unknown key (did you mean token?)`},
		{"depth 3", "sip:\n  tcp:\n    max_connections: 5", `line 3: sip.tcp.max_connections: unknown key`},
		{"in a list item", group + "      probe: { enabled: true, intervall_secs: 5 }", `line 7: gateway.groups[0].probe.intervall_secs: unknown key (did you mean interval_secs?)`},
		{"in a nested list item", group + "        - { uri: \"sip:b\", address: \"b:5060\", wieght: 2 }", `line 7: gateway.groups[0].destinations[1].wieght: unknown key (did you mean weight?)`},
		{"in a route", group + "lcr:\n  static_routes:\n    - prefix: \"44\"\n      routes:\n        - carrier_id: a\n          gateway_group: carrier-a\n          carrier_rate: 1", `line 13: lcr.static_routes[0].routes[0].carrier_rate: unknown key`},
		{"anchor holder at top level", "base: &b { shards: 1 }\n", `line 1: base: unknown key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := Parse([]byte("log: { level: loud }\nb2bua: { unknown_source: maybe }\nratelimit: { nodes: 0, failure_mode: x }\n"), nil)
	var el ErrorList
	if !errors.As(err, &el) {
		t.Fatalf("err = %v, want ErrorList", err)
	}
	if len(el) != 3 {
		t.Fatalf("got %d errors, want 3:\n%v", len(el), err)
	}
	for i, want := range []string{"log.level", "b2bua.unknown_source", "ratelimit.failure_mode"} {
		if el[i].Path != want || el[i].Line != i+1 {
			t.Errorf("error %d = %q at line %d, want %s at line %d", i, el[i].Path, el[i].Line, want, i+1)
		}
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("listen: [\"udp://127.0.0.1:5060\"]\nshards: -2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if want := path + ":2: shards: -2: must not be negative"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
}

// expandA marks and parses in, expands the tree and returns the value of
// its key a.
func expandA(t *testing.T, in string, env map[string]string) (string, ErrorList) {
	t.Helper()
	x := &expander{env: envOf(env)}
	text := x.mark([]byte(in))
	if len(x.errs) > 0 {
		return "", x.errs
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	x.expand(&doc, "")
	if len(x.errs) > 0 {
		return "", x.errs
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "a" {
			return m.Content[i+1].Value, nil
		}
	}
	t.Fatalf("no key a in %q", in)
	return "", nil
}

func TestExpand(t *testing.T) {
	env := map[string]string{"HOST": "10.0.0.1", "EMPTY": "", "PORT": "5080"}
	tests := []struct {
		name    string
		in      string
		want    string // the value of a
		wantErr string
	}{
		{"plain", "a: ${HOST}", "10.0.0.1", ""},
		{"two on a line", "a: ${HOST}:${PORT}", "10.0.0.1:5080", ""},
		{"default unused", "a: ${HOST:-1.2.3.4}", "10.0.0.1", ""},
		{"default for unset", "a: ${NOPE:-1.2.3.4}", "1.2.3.4", ""},
		{"default for empty", "a: ${EMPTY:-x}", "x", ""},
		{"empty default", "a: \"${NOPE:-}\"", "", ""},
		{"set but empty", "a: \"${EMPTY}\"", "", ""},
		{"default with colon", "a: ${NOPE:-http://h:8080/route}", "http://h:8080/route", ""},
		{"escape", "a: pa$$word $$${HOST}", "pa$word $10.0.0.1", ""},
		{"lone dollar kept", "a: $5 and $", "$5 and $", ""},
		{"comment line untouched", "  # ${NOPE}\na: 1", "1", ""},
		{"trailing comment needs no value", "a: 1 # ${NOPE}", "1", ""},
		{"in a flow mapping", "{a: x${HOST}y}", "x10.0.0.1y", ""},
		{"stem in the text", "b: Xsipedgeenv0_\na: ${HOST}", "10.0.0.1", ""},
		{"unset", "a: 1\nb: 2\nc: \"Bearer ${TOKEN}\"\n", "", `line 3: c: ${TOKEN}: environment variable TOKEN is not set`},
		{"unset on a later line of a scalar", "a: |\n  x\n  ${TOKEN}\n", "", `line 3: a: ${TOKEN}: environment variable TOKEN is not set`},
		{"unterminated", "a: ${HOST", "", `line 1: "${HOST": unterminated ${`},
		{"bad name", "a: ${1X}", "", `line 1: ${1X}: invalid variable name "1X"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := expandA(t, tt.in, env)
			if tt.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs.Error(), tt.wantErr) {
					t.Fatalf("errors %v, want %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExpandInParse(t *testing.T) {
	text := `listen: ["udp://${SIP_HOST:-127.0.0.1}:${SIP_PORT}"]
admin: { listen: "${ADMIN:-127.0.0.1:9191}", token: "a$$b" }
`
	c := mustParse(t, text, map[string]string{"SIP_PORT": "5090"})
	if got := c.Listen[0].String(); got != "udp://127.0.0.1:5090" {
		t.Errorf("listen = %s", got)
	}
	if c.Admin.Listen.String() != "127.0.0.1:9191" || c.Admin.Token != "a$b" {
		t.Errorf("admin = %+v", c.Admin)
	}
	_, err := Parse([]byte(text), nil)
	if err == nil || err.Error() != "line 1: listen[0]: ${SIP_PORT}: environment variable SIP_PORT is not set (use ${SIP_PORT:-default} for a default)" {
		t.Fatalf("err = %v", err)
	}
}

// TestExpandTypesPlainScalars checks that an unquoted ${VAR} is typed by
// its value, as if the value were written there: a number is a number and
// an empty value leaves the key unset (its default), while a quoted one
// stays a string.
func TestExpandTypesPlainScalars(t *testing.T) {
	c := mustParse(t, "shards: ${N}\nadmin: { listen: ${NONE:-} }\n", map[string]string{"N": "4"})
	if c.Shards != 4 || c.Admin.Listen.String() != "127.0.0.1:9090" {
		t.Errorf("shards = %d, admin.listen = %q: want 4 and the default", c.Shards, c.Admin.Listen)
	}
	c = mustParse(t, "admin: { listen: \"${NONE:-}\" }\n", nil)
	if c.Admin.Listen.String() != "" {
		t.Errorf("admin.listen = %q, want empty (no admin API)", c.Admin.Listen)
	}
}

// TestExpandValueIsOpaque checks that a variable's value only ever becomes
// the text of the scalar it is written in: YAML syntax in a secret (" #",
// ": ", a newline, quotes) neither cuts it short nor adds keys, wherever
// the ${VAR} stands.
func TestExpandValueIsOpaque(t *testing.T) {
	const tricky = "a #b: c\nshards: 7\n  bogus: 'x\" }"
	tests := []struct{ name, text, want string }{
		{"block", "admin:\n  token: ${T}\n", tricky},
		{"block with text around", "admin:\n  token: pre ${T} post\n", "pre " + tricky + " post"},
		{"flow", "admin: { token: ${T} }\n", tricky},
		{"flow list neighbour", "listen: [udp://${H}:5060]\nadmin: { token: ${T} }\n", tricky},
		{"double quoted", "admin: { token: \"${T}\" }\n", tricky},
		{"single quoted", "admin: { token: '${T}' }\n", tricky},
		{"literal block", "admin:\n  token: |-\n    x\n    ${T}\n", "x\n" + tricky},
		{"comment not cut", "admin:\n  token: ${COMMENT}\n", "a #b"},
		{"key not added", "admin:\n  token: ${INJECT}\n", "x\nshards: 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.text, map[string]string{"T": tricky, "H": "127.0.0.1", "COMMENT": "a #b", "INJECT": "x\nshards: 7"})
			if c.Admin.Token != tt.want {
				t.Errorf("admin.token = %q, want %q", c.Admin.Token, tt.want)
			}
			if c.Shards != 0 {
				t.Errorf("shards = %d: the value added a key", c.Shards)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, minimalConfig, nil)
	g := c.Gateway.Groups[0]
	tests := []struct {
		name      string
		got, want any
	}{
		{"shards", c.Shards, 0},
		{"log.level", c.Log.Level, "info"},
		{"log.file", c.Log.File, ""},
		{"sip.t1_ms", c.SIP.T1, 500 * time.Millisecond},
		{"sip.t2_ms", c.SIP.T2, 4 * time.Second},
		{"sip.t4_ms", c.SIP.T4, 5 * time.Second},
		{"sip.max_txn_memory_mb", c.SIP.MaxTxnMemoryMB, 64},
		{"sip socket buffers", [2]int{c.SIP.SocketReceiveBufferKB, c.SIP.SocketSendBufferKB}, [2]int{4096, 1024}},
		{"sip.batch_interval_us", c.SIP.BatchInterval, time.Millisecond},
		{"sip.batch_interval_max_us", c.SIP.BatchIntervalMax, 4 * time.Millisecond},
		{"sip limits", [5]int{c.SIP.MaxMessageSize, c.SIP.MaxHeaders, c.SIP.MaxHeaderLine, c.SIP.MaxVias, c.SIP.MaxURILength}, [5]int{16384, 128, 4096, 64, 512}},
		{"sip.tcp", c.SIP.TCP, SIPTCP{10000, 100, 5 * time.Second, 10 * time.Second, 300 * time.Second}},
		{"b2bua.max_concurrent_calls", c.B2BUA.MaxConcurrentCalls, 10000},
		{"b2bua.max_call_duration_secs", c.B2BUA.MaxCallDuration, 14400 * time.Second},
		{"b2bua.drain_timeout_secs", c.B2BUA.DrainTimeout, 30 * time.Second},
		{"b2bua.drain_linger_secs", c.B2BUA.DrainLinger, 4 * time.Second},
		{"b2bua.unknown_source", c.B2BUA.UnknownSource, "drop"},
		{"b2bua.refer_response", c.B2BUA.ReferResponse, 603},
		{"b2bua.header_policy.allow", c.B2BUA.HeaderPolicy.Allow, []string{"Allow", "Supported", "Session-Expires", "Min-SE", "User-Agent", "Reason"}},
		{"b2bua.assert_identity", c.B2BUA.AssertIdentity, true},
		{"b2bua.ring_timeout_secs", c.B2BUA.RingTimeout, 30 * time.Second},
		{"b2bua.session_timer", c.B2BUA.SessionTimer, SessionTimer{Mode: "relay", Interval: 1800 * time.Second, MinSE: 90}},
		{"group algorithm", g.Algorithm, "weighted"},
		{"group transport", g.Transport, transport.UDP},
		{"group reroute_causes inherit", g.RerouteCauses, []int(nil)},
		{"group follow_redirects", g.FollowRedirects, false},
		{"probe", g.Probe, health.ProbeConfig{Enabled: false, Interval: 15 * time.Second, Timeout: 2 * time.Second, FailureThreshold: 3, SuccessThreshold: 2, Jitter: 500 * time.Millisecond}},
		{"passive", g.Passive, health.PassiveConfig{FailureThreshold: 3, FailurePercent: 50, MinCalls: 20, HalfOpenCalls: 3, DownTime: 30 * time.Second, MaxRetryAfter: 300 * time.Second}},
		{"group panic_threshold_percent", *g.PanicThreshold, 50},
		{"cps", g.CPS, (*health.CPSConfig)(nil)}, // unpaced
		{"destination weight", g.Destinations[0].Weight, 1},
		{"lcr.timeout_ms", c.LCR.Timeout, 2 * time.Second},
		{"lcr.reroute_causes", c.LCR.RerouteCauses, []int{408, 500, 502, 503, 504}},
		{"ratelimit", c.RateLimit, RateLimit{Deadline: 20 * time.Millisecond, FailureMode: "local", Nodes: 1,
			BatchMinRate: 50, Flood: Flood{MessagesPerSec: 200, Ban: time.Minute}}},
		{"cdr", c.CDR, CDR{File: "cdr.jsonl", MaxSizeMB: 100, MaxBackups: 10, Queue: 65536}},
		{"fleet", c.Fleet, fleet.Config{LeaseSecs: 10}}, // no redis: one node, all in process
		{"lcr.send_quality", c.LCR.SendQuality, false},
		{"quality", c.Quality, quality.Config{Mode: "off", Prefixes: []string{""}, SamplingIntervalSecs: 5,
			HistorySpanSecs: 1800, Confidence: 0.95}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Fatalf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}

	t.Run("absent listen and admin", func(t *testing.T) {
		c := mustParse(t, "shards: 2", nil)
		if len(c.Listen) != 2 || c.Listen[0].String() != "udp://127.0.0.1:5060" || c.Listen[1].String() != "tcp://127.0.0.1:5060" {
			t.Errorf("listen = %v", c.Listen)
		}
		if c.Admin.Listen.String() != "127.0.0.1:9090" {
			t.Errorf("admin.listen = %v", c.Admin.Listen)
		}
	})
	t.Run("explicit zero keeps its meaning", func(t *testing.T) {
		c := mustParse(t, `b2bua: { ring_timeout_secs: 0, assert_identity: false, max_call_duration_secs: 0, header_policy: { allow: [] } }
admin: { listen: "" }
cdr: { max_backups: 0 }
cache: [{ name: c, url: "redis://h:6379", local_ttl_secs: 0 }]
`+group+"      probe: { jitter_ms: 0 }\n      cps: { rate: 10, max_wait_ms: 0 }\n", nil)
		if c.B2BUA.RingTimeout != 0 || c.B2BUA.AssertIdentity || c.B2BUA.MaxCallDuration != 0 || c.B2BUA.HeaderPolicy.Allow != nil {
			t.Errorf("b2bua = %+v", c.B2BUA)
		}
		if !c.Admin.Listen.IsZero() || c.CDR.MaxBackups != 0 || c.Cache[0].LocalTTL != 0 {
			t.Errorf("admin %+v cdr %+v cache %+v", c.Admin, c.CDR, c.Cache)
		}
		if g := c.Gateway.Groups[0]; g.Probe.Jitter != 0 || g.CPS.MaxWait() != 0 {
			t.Errorf("group = %+v", g)
		}
	})
	t.Run("zero that means nothing takes the default", func(t *testing.T) {
		c := mustParse(t, "sip: { t1_ms: 0 }\nlcr: { timeout_ms: 0, reroute_causes: [] }\ntrunks: [{ name: t, sources: [\"::1\"] }]\n"+group+"        - { uri: \"sip:b\", address: \"b:5060\", weight: 0 }\n      probe: { failure_threshold: 0 }\n      cps: { rate: 10, burst: 0 }\n", nil)
		g := c.Gateway.Groups[0]
		if c.SIP.T1 != 500*time.Millisecond || c.LCR.Timeout != 2*time.Second || len(c.LCR.RerouteCauses) != 5 ||
			g.Destinations[1].Weight != 1 || g.Probe.FailureThreshold != 3 || g.CPS.Burst != 0 { // burst 0 is the limiter's 1 (ratelimit.Limit.Burst)
			t.Errorf("sip %+v lcr %+v group %+v", c.SIP, c.LCR, g)
		}
		if c.Trunks[0].TrunkGroup != "t" {
			t.Errorf("trunk_group = %q, want the trunk's name", c.Trunks[0].TrunkGroup)
		}
	})
	t.Run("trunk ring_timeout_secs", func(t *testing.T) {
		f := func(b2bua, trunk string, want time.Duration) {
			t.Helper()
			c := mustParse(t, "b2bua: {"+b2bua+"}\ntrunks: [{ name: t, sources: [\"::1\"]"+trunk+" }]\n", nil)
			if got := c.Trunks[0].RingTimeout; got != want {
				t.Errorf("b2bua {%s}, trunk {%s}: ring_timeout_secs %v, want %v", b2bua, trunk, got, want)
			}
			// check-config prints the trunk's own, which reads back the same.
			_, printed, _ := strings.Cut(c.String(), "\ntrunks:")
			if !strings.Contains(printed, fmt.Sprintf("ring_timeout_secs: %d\n", want/time.Second)) {
				t.Errorf("check-config does not print the trunk's %v:\n%s", want, c)
			}
		}
		f("", "", 30*time.Second)                                               // absent: b2bua's default
		f(" ring_timeout_secs: 45 ", "", 45*time.Second)                        // absent: b2bua's
		f(" ring_timeout_secs: 45 ", ", ring_timeout_secs: 20", 20*time.Second) // its own
		f(" ring_timeout_secs: 45 ", ", ring_timeout_secs: 0", 0)               // its own: none
		f(" ring_timeout_secs: 0 ", "", 0)                                      // absent: b2bua's none
	})
	t.Run("admin API trunk ring_timeout_secs", func(t *testing.T) {
		c := mustParse(t, "b2bua: { ring_timeout_secs: 45 }", nil)
		tr := Trunk{Name: "t", Sources: []b2bua.Source{{Prefix: netip.MustParsePrefix("::1/128")}}, RingTimeout: InheritRing}
		if err := c.ValidateTrunk(&tr); err != nil || tr.RingTimeout != 45*time.Second {
			t.Errorf("absent: %v, ring %v, want b2bua's 45s", err, tr.RingTimeout)
		}
		tr.RingTimeout = -2 * time.Second
		if err := c.ValidateTrunk(&tr); err == nil || err.Error() != "ring_timeout_secs: -2: must not be negative" {
			t.Errorf("negative: %v", err)
		}
	})
	t.Run("merge keys", func(t *testing.T) {
		c := mustParse(t, `gateway:
  groups:
    - name: a
      probe: &probe { enabled: true, interval_secs: 5 }
      destinations: [{ uri: "sip:a", address: "a:5060" }]
    - name: b
      probe: { <<: *probe, interval_secs: 7 }
      destinations: [{ uri: "sip:b", address: "b:5060" }]
`, nil)
		if p := c.Gateway.Groups[1].Probe; !p.Enabled || p.Interval != 7*time.Second {
			t.Errorf("probe = %+v", p)
		}
	})
	t.Run("static route with next_hop may name an unknown group", func(t *testing.T) {
		c := mustParse(t, "lcr:\n  static_routes:\n    - routes: [{ carrier_id: z, gateway_group: carrier-z, next_hop: \"sip:10.0.0.9:5060\" }, { carrier_id: y, next_hop: \"192.0.2.9:5060\" }]", nil)
		if got := c.LCR.StaticRoutes[0].Routes[0].GatewayGroup; got != "carrier-z" {
			t.Errorf("gateway_group = %q", got)
		}
	})
}

// full sets every key to something other than its default.
const full = `listen: ["udp://[::1]:5070", "tcp://10.1.2.3:5071"]
shards: 4
admin: { listen: "[::1]:9191", token: "t0ken" }
log: { level: debug, file: /var/log/sipedge.log }
sip:
  t1_ms: 250
  t2_ms: 2000
  t4_ms: 2500
  max_message_size: 8192
  max_headers: 64
  max_header_line: 2048
  max_vias: 32
  max_uri_length: 256
  max_txn_memory_mb: 16
  tcp: { max_conns: 500, max_conns_per_ip: 10, first_data_timeout_ms: 1000, message_timeout_ms: 2000, idle_timeout_ms: 60000 }
b2bua:
  max_concurrent_calls: 50
  max_call_duration_secs: 3600
  drain_timeout_secs: 0
  drain_linger_secs: 0
  unknown_source: reject
  refer_response: 403
  header_policy: { allow: ["Allow", "X-Custom"] }
  default_number_policy: national
  assert_identity: false
  ring_timeout_secs: 45
  session_timer: { mode: uphold, interval_secs: 600, min_se: 120 }
number_policies:
  - { name: e164, format: e164, country_code: "1", national_prefix: "" }
  - { name: national, format: national, country_code: "44", national_prefix: "0" }
trunks:
  - name: local
    trunk_group: cust-trunks
    sources: ["127.0.0.1/32", "10.0.0.0/8:5060", "[2001:db8::/32]:5060", "::1"]
    limits: { cps: 2.5, burst: 5, max_concurrent_calls: 100 }
    number_policy: national
    force_rport: true
    nat: true
    attributes: { customer: acme, tier: "Gold 2", empty: "" }
gateway:
  groups:
    - name: carrier-a
      algorithm: hash
      transport: tcp
      reroute_causes: [404, 408, 500, 503]
      probe: { enabled: true, interval_secs: 5, timeout_ms: 700, failure_threshold: 4, success_threshold: 1, healthy_codes: [200, 404], jitter_ms: 0 }
      passive: { outcomes: [no_response, status_503], failure_threshold: 2, failure_percent: 70, min_calls: 40, half_open_calls: 1, down_secs: 10, max_retry_after_secs: 60 }
      panic_threshold_percent: 0
      cps: { rate: 10.5, burst: 3, max_wait_ms: 250, key: acct-1 }
      cps_reject: [ { code: 429 }, { code: 503, reason: "CPS" } ]
      follow_redirects: true
      destinations:
        - { uri: "sip:127.0.0.1:5070", address: "127.0.0.1:5070", weight: 2, priority: 0 }
        - { uri: "sips:gw2.carrier-a.example", address: "gw2.carrier-a.example:5061", weight: 1, priority: 1 }
    - name: carrier-b
      algorithm: round_robin
      destinations:
        - { uri: "sip:[2001:db8::1]:5060", address: "[2001:db8::1]:5060" }
lcr:
  api_url: "https://lcr.example/route"
  timeout_ms: 1500
  auth_header: "Bearer x$$y"
  cache: lcr
  cache_ttl_secs: 300
  fallback_gateway_group: carrier-b
  reroute_causes: [408, 503]
  attributes: [region, tier]
  send_quality: true
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
    - prefix: "+44"
      routes:
        - carrier_id: carrier-b
          gateway_group: carrier-b
          rate: 0.0125
          currency: GBP
          timeout_secs: 6
          reroute_after_progress: true
          tech_prefix: "#31#"
          number_policy: e164
          caller_id: "+13105550100"
          caller_id_presentation: restricted
          next_hop: "sip:10.0.0.1:5060"
          ruri: "sip:+442071234567@carrier-b.example"
          headers: { X-Account: "42", X-Route-Tag: "true" }
          cdr_fields: { plan: gold, "odd key": "yes" }
          reroute_causes: [480, 503]
cache:
  - { name: lcr, url: "redis://127.0.0.1:6379/2", local_ttl_secs: 30 }
ratelimit: { redis: "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", deadline_ms: 15, failure_mode: closed, nodes: 3, batch: 8, batch_min_rate: 100, flood: { messages_per_sec: 0 } }
cdr: { file: "/var/lib/sipedge/cdr.jsonl", max_size_mb: 10, max_backups: 0, queue: 1024 }
fleet: { redis: "redis://127.0.0.1:6380", node_id: edge-1.dc2, lease_secs: 6, call_journal: true }
quality:
  mode: sort
  prefixes: ["", "+44", "447"]
  sampling_interval_secs: 10
  history_span_secs: 600
  confidence: 0.9
  bad_dst_threshold: -1
  webhook_url: "https://hooks.example/quality?token=s3cret"
  auto_disable: true
  profiles:
    - name: mobile
      prefixes: ["447"]
      warning_penalty: 2
      critical_penalty: 20
      asr: { warning: 0.3, critical: 0.15, weight: 2 }
      ccr: { warning: -1 }
      pdd_ms: { warning: 4000, critical: -1 }
      ast_ms: { warning: 20000, critical: 40000, weight: 0.5 }
      acd_secs: { warning: 20, critical: 8 }
`

func TestPrintRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"example", Example},
		{"minimal", minimalConfig},
		{"every key set", full},
		{"explicit zeros", "admin: { listen: \"\" }\nb2bua: { ring_timeout_secs: 0, header_policy: { allow: [] } }\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml, nil)
			printed := c.String()
			again, err := Parse([]byte(printed), nil)
			if err != nil {
				t.Fatalf("printed config does not parse: %v\n%s", err, printed)
			}
			if !reflect.DeepEqual(c, again) {
				t.Fatalf("round trip differs:\nfirst  %+v\nsecond %+v\n%s", c, again, printed)
			}
		})
	}

	t.Run("every key set is decoded", func(t *testing.T) {
		c := mustParse(t, full, nil)
		r := c.LCR.StaticRoutes[1].Routes[0]
		want := Route{
			CarrierID: "carrier-b", GatewayGroup: "carrier-b", Rate: 0.0125, Currency: "GBP",
			Timeout: 6 * time.Second, RerouteAfterProgress: true, TechPrefix: "#31#", NumberPolicy: "e164",
			CallerID: "+13105550100", CallerIDPresentation: "restricted", NextHop: "sip:10.0.0.1:5060",
			RURI: "sip:+442071234567@carrier-b.example", Headers: map[string]string{"X-Account": "42", "X-Route-Tag": "true"},
			CDRFields: map[string]string{"plan": "gold", "odd key": "yes"}, RerouteCauses: []int{480, 503},
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("route = %+v\nwant    %+v", r, want)
		}
		if c.LCR.AuthHeader != "Bearer x$y" {
			t.Errorf("auth_header = %q", c.LCR.AuthHeader)
		}
		wantSources := []b2bua.Source{
			{Prefix: netip.MustParsePrefix("127.0.0.1/32")},
			{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 5060},
			{Prefix: netip.MustParsePrefix("2001:db8::/32"), Port: 5060},
			{Prefix: netip.MustParsePrefix("::1/128")},
		}
		if !reflect.DeepEqual(c.Trunks[0].Sources, wantSources) {
			t.Errorf("sources = %v", c.Trunks[0].Sources)
		}
		if !c.Trunks[0].ForceRPort {
			t.Error("trunks[0].force_rport not decoded")
		}
		if want := map[string]string{"customer": "acme", "tier": "Gold 2", "empty": ""}; !reflect.DeepEqual(c.Trunks[0].Attributes, want) {
			t.Errorf("trunks[0].attributes = %v, want %v", c.Trunks[0].Attributes, want)
		}
		if c.Trunks[0].NumberPolicy != "national" {
			t.Errorf("trunks[0].number_policy = %q", c.Trunks[0].NumberPolicy)
		}
		if c.Gateway.Groups[0].Probe.Timeout != 700*time.Millisecond || c.SIP.TCP.IdleTimeout != time.Minute {
			t.Errorf("durations: probe %v idle %v", c.Gateway.Groups[0].Probe.Timeout, c.SIP.TCP.IdleTimeout)
		}
		if p := c.Gateway.Groups[0].Passive; p.FailurePercent != 70 || p.MinCalls != 40 || *c.Gateway.Groups[0].PanicThreshold != 0 {
			t.Errorf("passive = %+v, panic_threshold_percent %d", p, *c.Gateway.Groups[0].PanicThreshold)
		}
		if c.Gateway.Groups[0].Passive.MaxRetryAfter != time.Minute {
			t.Errorf("passive.max_retry_after_secs = %v", c.Gateway.Groups[0].Passive.MaxRetryAfter)
		}
		if want := (fleet.Config{Redis: "redis://127.0.0.1:6380", NodeID: "edge-1.dc2", LeaseSecs: 6, CallJournal: true}); c.Fleet != want {
			t.Errorf("fleet = %+v, want %+v", c.Fleet, want)
		}
		q := c.Quality
		if q.Mode != "sort" || !reflect.DeepEqual(q.Prefixes, []string{"", "+44", "447"}) || q.SamplingIntervalSecs != 10 ||
			q.HistorySpanSecs != 600 || q.Confidence != 0.9 || q.BadDstThreshold != quality.Off || !q.AutoDisable || !c.LCR.SendQuality {
			t.Errorf("quality = %+v, lcr.send_quality %v", q, c.LCR.SendQuality)
		}
		wantProfile := quality.Profile{Name: "mobile", Prefixes: []string{"447"}, WarningPenalty: 2, CriticalPenalty: 20,
			ASR: quality.Limits{Warning: 0.3, Critical: 0.15, Weight: 2}, CCR: quality.Limits{Warning: quality.Off, Critical: 0.4, Weight: 1},
			PDD: quality.Limits{Warning: 4000, Critical: quality.Off, Weight: 1}, AST: quality.Limits{Warning: 20000, Critical: 40000, Weight: 0.5},
			ACD: quality.Limits{Warning: 20, Critical: 8, Weight: 1}}
		if len(q.Profiles) != 1 || !reflect.DeepEqual(q.Profiles[0], wantProfile) {
			t.Errorf("quality.profiles = %+v\nwant %+v", q.Profiles, wantProfile)
		}
		if r := c.Redacted().String(); strings.Contains(r, "s3cret") {
			t.Errorf("the webhook's secret shown:\n%s", r)
		}
		if !strings.Contains(c.String(), `auth_header: Bearer x$$y`) {
			t.Errorf("Print does not escape $:\n%s", c.String())
		}
	})
}

// advertise names the address sipedge writes into its Via and Contact: with
// it, a socket may listen on every address.
func TestAdvertise(t *testing.T) {
	cfg, err := Parse([]byte("listen: [\"udp://0.0.0.0:5062\", \"tcp://[::]:5063\"]\nadvertise: 203.0.113.7\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		advertise string
		port      uint16
		want      string
	}{
		{"203.0.113.7", 5062, "203.0.113.7:5062"},
		{"203.0.113.7:5080", 5062, "203.0.113.7:5080"},
		{"2001:db8::1", 5063, "[2001:db8::1]:5063"},
		{"[2001:db8::1]", 5063, "[2001:db8::1]:5063"},
		{"[2001:db8::1]:5090", 5063, "[2001:db8::1]:5090"},
	} {
		cfg.Advertise = tc.advertise
		if got, err := cfg.AdvertiseAddr(tc.port); err != nil || got.String() != tc.want {
			t.Errorf("%q at port %d: %v %v, want %s", tc.advertise, tc.port, got, err, tc.want)
		}
	}
}
