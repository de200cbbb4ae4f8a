// Package config loads, expands, validates and prints sipedge's YAML
// configuration. It is the one place the file format lives: cmd/sipedge
// reads the file and the environment through it and hands the libraries
// typed option structs built from a *Config.
//
// ${VAR}, ${VAR:-default} and $$ (a literal $) are expanded inside the
// scalars of the parsed YAML, so a variable's value is only ever text: a
// secret with " #", ": ", a newline or a quote in it arrives intact and
// cannot add keys (expand.go). An unquoted ${VAR} is typed by its value
// (a number, or unset when empty). The tree is decoded node by node so
// that every error names the exact path of the field
// (gateway.groups[1].destinations[0].address) and its line. Unknown
// keys are errors. Defaults are filled in, then every rule is checked; all
// problems are reported at once as an ErrorList.
//
// YAML keys are snake_case. A key ending in _ms or _secs is a whole,
// non-negative number of milliseconds or seconds in the file and a
// time.Duration here. No number in the file may be negative.
package config

import (
	_ "embed"
	"time"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/transport"
)

// Example is the shipped example configuration (example.yaml): it needs
// nothing else and starts sipedge on 127.0.0.1:5060 UDP and TCP with the
// admin API on 127.0.0.1:9090, one trunk for 127.0.0.1 and a static route to
// carrier-a at 127.0.0.1:5070.
//
//go:embed example.yaml
var Example string

// Config is sipedge's whole configuration, as loaded and with its defaults.
type Config struct {
	// Listen holds the SIP sockets, "udp://host:port" or "tcp://host:port"
	// (host an IP address, IPv6 in brackets; the first of each transport is
	// what sipedge writes into its Via and Contact, unless Advertise is
	// set). Default udp and tcp on 127.0.0.1:5060.
	Listen []transport.Listen `yaml:"listen"`
	// Advertise is the address peers reach sipedge at, "IP" or "IP:port",
	// when it is not the listen address: behind 1:1 NAT, or listening on
	// 0.0.0.0 or [::], which needs it. sipedge writes it into its Via,
	// Contact and From (RFC 3261 8.1.1.8, 18.2.1); without a port, each
	// transport's listen port.
	Advertise string `yaml:"advertise"`
	// Shards is the number of event loops; 0 means one per CPU but one, at
	// least one (shard.DefaultShards). At most 256 (shard.MaxShards).
	Shards int `yaml:"shards"`

	Admin          Admin          `yaml:"admin"`
	Log            Log            `yaml:"log"`
	SIP            SIP            `yaml:"sip"`
	B2BUA          B2BUA          `yaml:"b2bua"`
	NumberPolicies []NumberPolicy `yaml:"number_policies"`
	Trunks         []Trunk        `yaml:"trunks"`
	Gateway        Gateway        `yaml:"gateway"`
	LCR            LCR            `yaml:"lcr"`
	Cache          []Cache        `yaml:"cache"`
	RateLimit      RateLimit      `yaml:"ratelimit"`
	CDR            CDR            `yaml:"cdr"`
	// Fleet makes this node one of several sharing one Redis: channel
	// limits held across the fleet, shared runtime state, the call journal
	// (fleet.Config; fleet/doc.go). Absent: one node, all in process.
	Fleet fleet.Config `yaml:"fleet"`
	// Quality is quality routing: live statistics per prefix and carrier,
	// their scores, and their use (mode off, the default: statistics and
	// scores only). The keys are quality.Config's.
	Quality quality.Config `yaml:"quality"`
}

// Admin is the admin HTTP API (metrics, health, runtime gateway changes).
type Admin struct {
	// Listen is host:port (default 127.0.0.1:9090; port 0 picks a free one).
	// An explicit "" turns the admin API off.
	Listen HostPort `yaml:"listen"`
	// Token, when set, is the bearer token every admin request must carry,
	// but the probes (/healthz, /readyz) and, unless MetricsAuth, /metrics.
	Token string `yaml:"token"`
	// MetricsAuth makes /metrics require the token too (default false:
	// scrapers need no secret). It needs Token.
	MetricsAuth bool `yaml:"metrics_auth"`
}

// Log configures logging.
type Log struct {
	Level string `yaml:"level"` // debug, info (default), warn or error
	File  string `yaml:"file"`  // "" = stderr
}

// SIP holds transaction timers and parser limits.
type SIP struct {
	T1             time.Duration `yaml:"t1_ms"`            // default 500 ms
	T2             time.Duration `yaml:"t2_ms"`            // default 4 s; not below T1
	T4             time.Duration `yaml:"t4_ms"`            // default 5 s
	MaxMessageSize int           `yaml:"max_message_size"` // default 16384, at most 65535
	MaxHeaders     int           `yaml:"max_headers"`
	MaxHeaderLine  int           `yaml:"max_header_line"`
	MaxVias        int           `yaml:"max_vias"`
	MaxURILength   int           `yaml:"max_uri_length"`
	// MaxTxnMemoryMB is each shard's budget, in MiB, for the messages its
	// transactions keep to answer retransmissions (txn.Config.MaxStoredBytes):
	// over it, non-INVITE server transactions skip Timer J, and at twice it
	// new requests are refused 503. Default 64, at most 65536.
	MaxTxnMemoryMB int    `yaml:"max_txn_memory_mb"`
	TCP            SIPTCP `yaml:"tcp"`
	// SocketReceiveBufferKB and SocketSendBufferKB size the kernel's
	// buffers of the listening sockets (SO_RCVBUF, SO_SNDBUF; accepted TCP
	// connections inherit them), in KiB: datagrams that arrive while a
	// shard is busy wait there, and past it the kernel drops them. Default
	// 4096 and 1024, at most 1048576; the kernel caps them at the sysctls
	// net.core.rmem_max and wmem_max (a warning says so at start).
	SocketReceiveBufferKB int `yaml:"socket_receive_buffer_kb"`
	SocketSendBufferKB    int `yaml:"socket_send_buffer_kb"`
	// BatchInterval: while datagrams come faster than one every two
	// intervals, a shard takes them every interval instead of being woken
	// for each (shard.Config.BatchInterval). Default 1000 us; 0 wakes for
	// each; at most 100 ms.
	BatchInterval time.Duration `yaml:"batch_interval_us"`
	// BatchIntervalMax: the longest the interval grows to while intervals
	// bring few messages (shard.Config.BatchIntervalMax), the most a
	// message waits in its socket under load. Default 4000 us; at or below
	// batch_interval_us the interval is fixed; at most 100 ms.
	BatchIntervalMax time.Duration `yaml:"batch_interval_max_us"`
}

// SIPTCP bounds stream connections. Zero fields take the defaults.
type SIPTCP struct {
	MaxConns         int           `yaml:"max_conns"`             // default 10000
	MaxConnsPerIP    int           `yaml:"max_conns_per_ip"`      // default 100
	FirstDataTimeout time.Duration `yaml:"first_data_timeout_ms"` // default 5 s
	MessageTimeout   time.Duration `yaml:"message_timeout_ms"`    // default 10 s
	IdleTimeout      time.Duration `yaml:"idle_timeout_ms"`       // default 300 s
}

// Unknown-source and caller-ID presentation values.
const (
	UnknownSourceDrop   = "drop"   // silently drop an INVITE from an unknown source
	UnknownSourceReject = "reject" // answer it 403

	PresentationAllowed    = "allowed"
	PresentationRestricted = "restricted"
)

// B2BUA configures the call core.
type B2BUA struct {
	MaxConcurrentCalls int           `yaml:"max_concurrent_calls"`   // default 10000 (0 = default)
	MaxCallDuration    time.Duration `yaml:"max_call_duration_secs"` // default 4 h; 0 = no limit
	DrainTimeout       time.Duration `yaml:"drain_timeout_secs"`     // default 30 s; 0 = don't wait
	DrainLinger        time.Duration `yaml:"drain_linger_secs"`      // default 4 s; 0 = stop at once: the wait for the BYEs and CANCELs ending the calls
	UnknownSource      string        `yaml:"unknown_source"`         // drop (default) or reject
	ReferResponse      int           `yaml:"refer_response"`         // default 603
	HeaderPolicy       HeaderPolicy  `yaml:"header_policy"`
	// DefaultNumberPolicy names the number_policies entry used when a route
	// names none ("" = none).
	DefaultNumberPolicy string `yaml:"default_number_policy"`
	// AssertIdentity makes sipedge insert its own P-Asserted-Identity
	// (default true).
	AssertIdentity bool `yaml:"assert_identity"`
	// RingTimeout is the sequence's ring bound (default 30 s; 0 = none).
	RingTimeout time.Duration `yaml:"ring_timeout_secs"`
	// SessionTimer configures session timers (RFC 4028).
	SessionTimer SessionTimer `yaml:"session_timer"`
}

// Session timer modes.
const (
	SessionTimerRelay  = "relay"  // the peers' session timers pass through (default)
	SessionTimerUphold = "uphold" // sipedge keeps one on each leg, refreshing for a peer that does not
)

// SessionTimer configures session timers (RFC 4028): b2bua.session_timer.
type SessionTimer struct {
	Mode     string        `yaml:"mode"`          // relay (default) or uphold
	Interval time.Duration `yaml:"interval_secs"` // uphold: the interval sipedge asks for and grants at most (default 1800)
	MinSE    int           `yaml:"min_se"`        // seconds: shorter intervals get 422 (default and at least 90)
}

// HeaderPolicy decides what is copied from the A-leg to the B-leg.
type HeaderPolicy struct {
	// Allow lists the header names copied A to B. Absent: DefaultAllow.
	// An explicit [] copies none.
	Allow []string `yaml:"allow"`
}

// DefaultAllow is the default b2bua.header_policy.allow. Reason (RFC 3326)
// carries a carrier's Q.850 cause on failures and BYEs, and the caller's
// "call completed elsewhere" on CANCEL: what either side needs to know why
// a call ended. Identity headers (P-Asserted-Identity, P-Preferred-Identity, Privacy,
// Remote-Party-ID) are never copied, listed or not: sipedge writes the
// B-leg's identity itself.
var DefaultAllow = []string{"Allow", "Supported", "Session-Expires", "Min-SE", "User-Agent", "Reason"}

// Number policy formats.
const (
	FormatE164     = "e164"
	FormatNational = "national"
)

// NumberPolicy is a named number-shaping preset.
type NumberPolicy struct {
	Name           string `yaml:"name"`
	Format         string `yaml:"format"`          // e164 (default) or national
	CountryCode    string `yaml:"country_code"`    // 1 to 3 digits
	NationalPrefix string `yaml:"national_prefix"` // digits, may be ""
}

// Trunk is a customer trunk: the sources it sends from and its limits.
// Its JSON, the admin API's, has the YAML's shape.
type Trunk struct {
	Name string `yaml:"name" json:"name"`
	// TrunkGroup is what routing keys on (default: the trunk's name).
	TrunkGroup string `yaml:"trunk_group" json:"trunk_group"`
	// Sources are CIDRs with an optional port: "10.0.0.0/8", "10.0.0.0/8:5060",
	// "[2001:db8::/32]:5060"; a bare address is a single host.
	Sources []b2bua.Source `yaml:"sources" json:"sources"`
	Limits  TrunkLimits    `yaml:"limits" json:"limits"`
	// ForceRPort answers the trunk at the source port of its requests even
	// without rport in their Via (a PBX behind NAT), as Kamailio's
	// force_rport; false: RFC 3261 18.2.2, the Via's sent-by port.
	ForceRPort bool `yaml:"force_rport" json:"force_rport"`
	// NAT sends the requests sipedge originates in the trunk's dialogs to
	// the source address and port of the call's INVITE, whatever its
	// Contact and Record-Route say (a PBX behind NAT that writes its
	// private address there); false: RFC 3261 12.2.1.1, the route set and
	// the Contact.
	NAT bool `yaml:"nat" json:"nat"`
	// NumberPolicy names the number_policies entry whose country code and
	// national prefix put this trunk's numbers (dialled and calling) in
	// E.164 as a call begins: what routing looks up and caches, what the
	// carriers' policies start from, what the CDR records; "" = as sent.
	NumberPolicy string `yaml:"number_policy" json:"number_policy"`
	// Attributes are the trunk's static attributes (customer: acme), sent
	// to the LCR API as the request's attributes for its calls; those named
	// in lcr.attributes are part of the decision's cache key.
	Attributes map[string]string `yaml:"attributes" json:"attributes,omitempty"`
	// RingTimeout is the ring bound of the trunk's calls (0 = none);
	// absent, b2bua.ring_timeout_secs. The admin API's JSON has it in
	// whole seconds (its handler's own field).
	RingTimeout time.Duration `yaml:"ring_timeout_secs" json:"-"`
}

// TrunkLimits are a trunk's ingress limits; 0 = unlimited.
type TrunkLimits struct {
	CPS                float64 `yaml:"cps" json:"cps"`
	Burst              int     `yaml:"burst" json:"burst"`
	MaxConcurrentCalls int     `yaml:"max_concurrent_calls" json:"max_concurrent_calls"`
}

// Gateway holds the carrier pools.
type Gateway struct {
	// Groups are the gateway groups, each one carrier's pool of
	// destinations: the health registry's own type, which owns their
	// defaults and rules (health.GroupConfig), as the admin API's groups.
	Groups []health.GroupConfig `yaml:"groups"`
}

// LCR configures least-cost routing.
type LCR struct {
	APIURL     string        `yaml:"api_url"` // "" = the static table
	Timeout    time.Duration `yaml:"timeout_ms"`
	AuthHeader string        `yaml:"auth_header"`
	Cache      string        `yaml:"cache"` // a name from cache:, "" = none
	CacheTTL   time.Duration `yaml:"cache_ttl_secs"`
	// FallbackGatewayGroup is used when the API fails ("" = none).
	FallbackGatewayGroup string `yaml:"fallback_gateway_group"`
	// RerouteCauses are the codes that fail over (empty = DefaultRerouteCauses).
	RerouteCauses []int `yaml:"reroute_causes"`
	// Attributes are the names of the trunk attributes (trunks[].attributes)
	// that are part of the cache key; a trunk without one keys it empty.
	Attributes   []string      `yaml:"attributes"`
	StaticRoutes []StaticRoute `yaml:"static_routes"`
	// SendQuality adds the quality scores of the call's prefix to each API
	// request (docs/lcr-api.md, "Quality scores").
	SendQuality bool `yaml:"send_quality"`
}

// DefaultRerouteCauses is the default lcr.reroute_causes.
var DefaultRerouteCauses = []int{408, 500, 502, 503, 504}

// StaticRoute is one prefix of the static table: the longest prefix of the
// dialled number wins, "" matches all.
type StaticRoute struct {
	Prefix string  `yaml:"prefix"`
	Routes []Route `yaml:"routes"` // in order of preference
}

// Route is one carrier of a decision, in the same shape as the LCR API's.
type Route struct {
	CarrierID            string            `yaml:"carrier_id"`
	GatewayGroup         string            `yaml:"gateway_group"`
	Rate                 float64           `yaml:"rate"`
	Currency             string            `yaml:"currency"`
	Timeout              time.Duration     `yaml:"timeout_secs"` // 0 = the sequence's bound
	RerouteAfterProgress bool              `yaml:"reroute_after_progress"`
	TechPrefix           string            `yaml:"tech_prefix"`
	NumberPolicy         string            `yaml:"number_policy"`
	CallerID             string            `yaml:"caller_id"`
	CallerIDPresentation string            `yaml:"caller_id_presentation"` // "", allowed or restricted
	NextHop              string            `yaml:"next_hop"`
	RURI                 string            `yaml:"ruri"`
	Headers              map[string]string `yaml:"headers"`
	CDRFields            map[string]string `yaml:"cdr_fields"`
	RerouteCauses        []int             `yaml:"reroute_causes"` // empty = the group's, else lcr's
}

// Cache is a named decision cache backed by Redis.
type Cache struct {
	Name     string        `yaml:"name"`
	URL      string        `yaml:"url"`            // redis:// or rediss://
	LocalTTL time.Duration `yaml:"local_ttl_secs"` // in-process tier; default 60 s, 0 = none
}

// RateLimit configures the CPS limiter.
type RateLimit struct {
	Redis       string                `yaml:"redis"`        // "" = in-process only
	Deadline    time.Duration         `yaml:"deadline_ms"`  // default 20 ms
	FailureMode ratelimit.FailureMode `yaml:"failure_mode"` // local (default), open or closed
	Nodes       int                   `yaml:"nodes"`        // default 1
	// Batch, 2 to 16, lets a node reserve blocks of up to Batch slots per
	// Redis round trip for keys at BatchMinRate or more (the accuracy
	// trade-off is in ratelimit's package doc); 0 = one slot per decision.
	Batch        int     `yaml:"batch"`
	BatchMinRate float64 `yaml:"batch_min_rate"` // default 50 calls/s
	Flood        Flood   `yaml:"flood"`
}

// Flood is the in-process flood protection for sources that are neither
// trunks nor carriers (those are never banned: UDP sources are spoofable).
// Over MessagesPerSec messages in a second on one event loop, a source is
// banned for Ban: its messages are dropped silently, before parsing.
type Flood struct {
	MessagesPerSec int           `yaml:"messages_per_sec"` // default 200; 0 = off
	Ban            time.Duration `yaml:"ban_secs"`         // default 60 s
}

// CDR configures the call detail record file.
type CDR struct {
	File       string `yaml:"file"`        // default cdr.jsonl
	MaxSizeMB  int    `yaml:"max_size_mb"` // rotate above; default 100
	MaxBackups int    `yaml:"max_backups"` // default 10; 0 = keep all
	Queue      int    `yaml:"queue"`       // writer queue; default 65536
}

// Group returns the gateway group called name, or nil.
func (c *Config) Group(name string) *health.GroupConfig {
	for i := range c.Gateway.Groups {
		if c.Gateway.Groups[i].Name == name {
			return &c.Gateway.Groups[i]
		}
	}
	return nil
}

// NumberPolicy returns the number policy called name, or nil.
func (c *Config) NumberPolicy(name string) *NumberPolicy {
	for i := range c.NumberPolicies {
		if c.NumberPolicies[i].Name == name {
			return &c.NumberPolicies[i]
		}
	}
	return nil
}
