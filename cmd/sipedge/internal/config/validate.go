package config

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route/lcr"
	"github.com/sipedge/sipedge/shard"
	"github.com/sipedge/sipedge/transport"
)

// Defaults come in two steps. preset puts in place, before decoding, the
// defaults of keys whose zero means something of its own (ring_timeout_secs:
// 0 is "no ring bound", max_backups: 0 is "keep all"), so that an absent key
// and an explicit 0 differ. fill replaces, after decoding, the zeros that
// mean nothing (weight: 0, an empty level) by their defaults.

func (c *Config) Preset() {
	c.Listen = []transport.Listen{
		mustListen("udp://127.0.0.1:5060"),
		mustListen("tcp://127.0.0.1:5060"),
	}
	c.Admin.Listen = HostPort{Host: "127.0.0.1", Port: 9090}
	c.B2BUA.MaxCallDuration = 4 * time.Hour
	c.B2BUA.DrainTimeout = 30 * time.Second
	c.B2BUA.DrainLinger = 4 * time.Second
	c.B2BUA.AssertIdentity = true
	c.B2BUA.RingTimeout = 30 * time.Second
	c.B2BUA.HeaderPolicy.Allow = slices.Clone(DefaultAllow)
	c.CDR.MaxBackups = 10
	c.RateLimit.Flood = Flood{MessagesPerSec: 200, Ban: time.Minute}
	c.SIP.BatchInterval = time.Millisecond
	c.SIP.BatchIntervalMax = 4 * time.Millisecond
}

func (c *Cache) Preset() { c.LocalTTL = 60 * time.Second }

// InheritRing, as a trunk's RingTimeout, is ring_timeout_secs absent:
// filling in the defaults (Load, ValidateTrunk) makes it
// b2bua.ring_timeout_secs. An explicit 0 is "no ring bound".
const InheritRing time.Duration = -1

func (t *Trunk) Preset() { t.RingTimeout = InheritRing }

func mustListen(s string) transport.Listen {
	var l transport.Listen
	if err := l.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return l
}

func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

func (c *Config) fill() {
	orDefault(&c.Log.Level, "info")
	s := &c.SIP
	orDefault(&s.T1, 500*time.Millisecond)
	orDefault(&s.T2, 4*time.Second)
	orDefault(&s.T4, 5*time.Second)
	orDefault(&s.MaxMessageSize, 16384)
	orDefault(&s.MaxHeaders, 128)
	orDefault(&s.MaxHeaderLine, 4096)
	orDefault(&s.MaxVias, 64)
	orDefault(&s.MaxURILength, 512)
	orDefault(&s.MaxTxnMemoryMB, 64) // txn.DefaultMaxStoredBytes
	orDefault(&s.TCP.MaxConns, 10000)
	orDefault(&s.TCP.MaxConnsPerIP, 100)
	orDefault(&s.TCP.FirstDataTimeout, 5*time.Second)
	orDefault(&s.TCP.MessageTimeout, 10*time.Second)
	orDefault(&s.TCP.IdleTimeout, 300*time.Second)
	orDefault(&s.SocketReceiveBufferKB, 4096)
	orDefault(&s.SocketSendBufferKB, 1024)
	b := &c.B2BUA
	orDefault(&b.MaxConcurrentCalls, 10000)
	orDefault(&b.UnknownSource, UnknownSourceDrop)
	orDefault(&b.ReferResponse, 603)
	orDefault(&b.SessionTimer.Mode, SessionTimerRelay)
	orDefault(&b.SessionTimer.Interval, 1800*time.Second)
	orDefault(&b.SessionTimer.MinSE, 90)
	for i := range c.NumberPolicies {
		orDefault(&c.NumberPolicies[i].Format, FormatE164)
	}
	for i := range c.Trunks {
		c.fillTrunk(&c.Trunks[i])
	}
	for i := range c.Gateway.Groups {
		c.Gateway.Groups[i].SetDefaults()
	}
	l := &c.LCR
	orDefault(&l.Timeout, 2*time.Second)
	if len(l.RerouteCauses) == 0 {
		l.RerouteCauses = slices.Clone(DefaultRerouteCauses)
	}
	r := &c.RateLimit
	orDefault(&r.Deadline, 20*time.Millisecond)
	orDefault(&r.FailureMode, ratelimit.FailLocal)
	orDefault(&r.Nodes, 1)
	orDefault(&r.BatchMinRate, 50)
	orDefault(&c.CDR.File, "cdr.jsonl")
	orDefault(&c.CDR.MaxSizeMB, 100)
	orDefault(&c.CDR.Queue, 65536)
	orDefault(&c.Fleet.LeaseSecs, fleet.DefaultLeaseSecs) // node_id "" stays: the host name, read at start
	c.Quality.SetDefaults()
}

// maxSessionInterval bounds b2bua.session_timer.interval_secs: a day,
// beyond which a session timer bounds nothing.
const maxSessionInterval = 24 * time.Hour

// maxMessageSize bounds sip.max_message_size.
const maxMessageSize = 65535

// maxBatchInterval bounds sip.batch_interval_us and batch_interval_max_us:
// a message waits up to an interval in its socket, and T1 is 500 ms.
const maxBatchInterval = 100 * time.Millisecond

// maxSocketBufferKB bounds sip.socket_*_buffer_kb: 1 GiB, past any kernel's
// rmem_max worth setting, and within the int the kernel takes.
const maxSocketBufferKB = 1 << 20

// maxTxnMemoryMB bounds sip.max_txn_memory_mb: 64 GiB a shard, far beyond
// any host, and twice it in bytes still fits an int.
const maxTxnMemoryMB = 65536

type validator struct {
	lines map[string]int
	errs  ErrorList
}

// errorf records a problem at path, with the line of path or of its
// nearest ancestor in the file.
func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, &Error{Line: v.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) line(path string) int {
	for path != "" {
		if l, ok := v.lines[path]; ok && l > 0 {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func (v *validator) oneOf(path, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		v.errorf(path, "%q: want one of %s", val, strings.Join(quoteAll(allowed), ", "))
	}
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return q
}

func (v *validator) causes(path string, codes []int) {
	for i, c := range codes {
		if c < 300 || c > 699 {
			v.errorf(fmt.Sprintf("%s[%d]", path, i), "%d: want a SIP failure code, 300 to 699", c)
		}
	}
}

func (v *validator) positive(path string, n int) {
	if n <= 0 {
		v.errorf(path, "%d: must be at least 1", n)
	}
}

// name checks a required, unique name; seen collects the names so far.
func (v *validator) name(path, name string, seen map[string]string) {
	if name == "" {
		v.errorf(path, "required")
		return
	}
	if first, dup := seen[name]; dup {
		v.errorf(path, "%q: duplicate name (also %s)", name, first)
		return
	}
	seen[name] = path
}

// limit checks a CPS limit against the limiter's bounds (ratelimit.Limit),
// which the server would otherwise meet only as it registers the limit.
func (v *validator) limit(path string, lim ratelimit.Limit) {
	if err := lim.Validate(); err != nil {
		v.errorf(path, "%s", strings.TrimPrefix(err.Error(), ratelimit.ErrInvalid.Error()+": "))
	}
}

func (c *Config) validate(v *validator) {
	if len(c.Listen) == 0 {
		v.errorf("listen", "at least one address required")
	}
	if len(c.Listen) > shard.MaxListeners {
		v.errorf("listen", "%d addresses: at most %d", len(c.Listen), shard.MaxListeners)
	}
	// A TCP connection's id holds its shard in 8 bits (shard.MaxShards).
	if c.Shards > shard.MaxShards {
		v.errorf("shards", "%d: at most %d", c.Shards, shard.MaxShards)
	}
	if c.Admin.MetricsAuth && c.Admin.Token == "" {
		v.errorf("admin.metrics_auth", "true without admin.token: there is no token to require")
	}
	seenListen := map[transport.Listen]int{}
	for i, l := range c.Listen {
		if j, dup := seenListen[l]; dup {
			v.errorf(fmt.Sprintf("listen[%d]", i), "%q: duplicate of listen[%d]", l.String(), j)
		}
		seenListen[l] = i
		if l.Addr.Addr().IsUnspecified() && c.Advertise == "" {
			// The advertised address is the sent-by of sipedge's Vias and
			// the host of its Contacts (RFC 3261 8.1.1.8, 18.2.1): peers
			// send responses and in-dialog requests (BYE) there.
			v.errorf(fmt.Sprintf("listen[%d]", i), "%q: an unspecified address needs advertise: the address peers send to, which sipedge writes into its Via and Contact", l.String())
		}
	}
	if c.Advertise != "" {
		if ap, err := c.AdvertiseAddr(0); err != nil {
			v.errorf("advertise", "%q: %v", c.Advertise, err)
		} else if !slices.ContainsFunc(c.Listen, func(l transport.Listen) bool {
			// [::] takes IPv4 too (a dual-stack socket); 0.0.0.0 no IPv6.
			a := l.Addr.Addr()
			return a.Is4() == ap.Addr().Is4() || a.Is6() && a.IsUnspecified()
		}) {
			v.errorf("advertise", "%q: no listen address of its family: peers would send to an address sipedge does not listen on", c.Advertise)
		}
	}
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")

	s := c.SIP
	if s.T2 < s.T1 {
		v.errorf("sip.t2_ms", "%d: must not be below t1_ms (%d)", s.T2.Milliseconds(), s.T1.Milliseconds())
	}
	// Every event loop holds a read buffer of this size; 65535 is what a
	// datagram can carry and Kamailio's largest buffer.
	if s.MaxMessageSize > maxMessageSize {
		v.errorf("sip.max_message_size", "%d: at most %d", s.MaxMessageSize, maxMessageSize)
	}
	if s.T1 > time.Hour {
		v.errorf("sip.t1_ms", "%d: must not exceed one hour", s.T1.Milliseconds())
	}
	if s.MaxTxnMemoryMB > maxTxnMemoryMB {
		v.errorf("sip.max_txn_memory_mb", "%d: at most %d", s.MaxTxnMemoryMB, maxTxnMemoryMB)
	}
	if s.BatchInterval > maxBatchInterval {
		v.errorf("sip.batch_interval_us", "%d: at most %d", s.BatchInterval.Microseconds(), maxBatchInterval.Microseconds())
	}
	if s.BatchIntervalMax > maxBatchInterval {
		v.errorf("sip.batch_interval_max_us", "%d: at most %d", s.BatchIntervalMax.Microseconds(), maxBatchInterval.Microseconds())
	}
	for _, b := range []struct {
		field string
		kb    int
	}{{"sip.socket_receive_buffer_kb", s.SocketReceiveBufferKB}, {"sip.socket_send_buffer_kb", s.SocketSendBufferKB}} {
		if b.kb > maxSocketBufferKB {
			v.errorf(b.field, "%d: at most %d", b.kb, maxSocketBufferKB)
		}
	}

	b := c.B2BUA
	v.oneOf("b2bua.unknown_source", b.UnknownSource, UnknownSourceDrop, UnknownSourceReject)
	if b.ReferResponse < 400 || b.ReferResponse > 699 {
		v.errorf("b2bua.refer_response", "%d: want a SIP failure code, 400 to 699", b.ReferResponse)
	}
	for i, h := range b.HeaderPolicy.Allow {
		if !isToken(h) {
			v.errorf(fmt.Sprintf("b2bua.header_policy.allow[%d]", i), "%q: not a header name", h)
		}
	}
	v.oneOf("b2bua.session_timer.mode", b.SessionTimer.Mode, SessionTimerRelay, SessionTimerUphold)
	if st := b.SessionTimer; st.MinSE < 90 || st.MinSE > int(maxSessionInterval/time.Second) {
		v.errorf("b2bua.session_timer.min_se", "%d: want 90 (RFC 4028 4) to %d", st.MinSE, int64(maxSessionInterval/time.Second))
	} else if st.Interval < time.Duration(st.MinSE)*time.Second || st.Interval > maxSessionInterval {
		v.errorf("b2bua.session_timer.interval_secs", "%d: want min_se (%d) to %d", int64(st.Interval/time.Second), st.MinSE, int64(maxSessionInterval/time.Second))
	}
	if b.DefaultNumberPolicy != "" && c.NumberPolicy(b.DefaultNumberPolicy) == nil {
		v.errorf("b2bua.default_number_policy", "unknown number policy %q", b.DefaultNumberPolicy)
	}

	seen := map[string]string{}
	for i, np := range c.NumberPolicies {
		p := fmt.Sprintf("number_policies[%d]", i)
		v.name(p+".name", np.Name, seen)
		v.oneOf(p+".format", np.Format, FormatE164, FormatNational)
		if !isDigits(np.CountryCode) || len(np.CountryCode) > 3 {
			v.errorf(p+".country_code", "%q: want 1 to 3 digits", np.CountryCode)
		}
		if np.NationalPrefix != "" && !isDigits(np.NationalPrefix) {
			v.errorf(p+".national_prefix", "%q: want digits", np.NationalPrefix)
		}
	}

	seen = map[string]string{}
	for i, t := range c.Trunks {
		c.checkTrunk(v, fmt.Sprintf("trunks[%d]", i), t, seen)
	}

	seen = map[string]string{}
	for i, g := range c.Gateway.Groups {
		p := fmt.Sprintf("gateway.groups[%d]", i)
		if first, dup := seen[g.Name]; dup && g.Name != "" { // health says when it is missing
			v.errorf(p+".name", "%q: duplicate name (also %s)", g.Name, first)
		} else {
			seen[g.Name] = p + ".name"
		}
		g.CheckFields(func(field, problem string) { v.errorf(p+"."+field, "%s", problem) })
		if c := g.CPS; c != nil && c.Rate > 0 {
			v.limit(p+".cps", ratelimit.Limit{Rate: c.Rate, Burst: c.Burst, MaxWait: c.MaxWait()}) // as the carrier plane registers it
		}
	}

	l := c.LCR
	if l.APIURL != "" {
		if u, err := url.Parse(l.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf("lcr.api_url", "%q: want an http:// or https:// URL", redactedURL(l.APIURL))
		}
	}
	if l.Cache != "" && !slices.ContainsFunc(c.Cache, func(e Cache) bool { return e.Name == l.Cache }) {
		v.errorf("lcr.cache", "unknown cache %q", l.Cache)
	}
	if l.FallbackGatewayGroup != "" && c.Group(l.FallbackGatewayGroup) == nil {
		v.errorf("lcr.fallback_gateway_group", "unknown group %q", l.FallbackGatewayGroup)
	}
	v.causes("lcr.reroute_causes", l.RerouteCauses)
	if n := len(l.Attributes); n > lcr.MaxAttributes {
		v.errorf("lcr.attributes", "%d names: at most %d", n, lcr.MaxAttributes)
	}
	for i, a := range l.Attributes {
		if !lcr.ValidAttributeName(a) {
			v.errorf(fmt.Sprintf("lcr.attributes[%d]", i), "%q: want 1 to %d letters, digits, '_', '-' or '.'", a, lcr.MaxAttributeName)
		}
	}
	c.checkStaticRoutes(v, "lcr.static_routes", l.StaticRoutes, func(g string) bool { return c.Group(g) != nil })
	if l.SendQuality && l.APIURL == "" {
		v.errorf("lcr.send_quality", "true without lcr.api_url: the static table asks no API")
	}
	c.Quality.Check(func(field, problem string) { v.errorf("quality."+field, "%s", problem) })

	seen = map[string]string{}
	for i, e := range c.Cache {
		p := fmt.Sprintf("cache[%d]", i)
		v.name(p+".name", e.Name, seen)
		v.redisURL(p+".url", e.URL)
	}

	r := c.RateLimit
	if r.Redis != "" {
		v.redisURL("ratelimit.redis", r.Redis)
	}
	v.oneOf("ratelimit.failure_mode", string(r.FailureMode), string(ratelimit.FailLocal), string(ratelimit.FailOpen), string(ratelimit.FailClosed))
	v.positive("ratelimit.nodes", r.Nodes)
	if r.Batch == 1 || r.Batch > 16 {
		v.errorf("ratelimit.batch", "%d: want 0 (off) or 2 to 16", r.Batch)
	}
	if r.BatchMinRate < 0 {
		v.errorf("ratelimit.batch_min_rate", "%v: must not be negative", r.BatchMinRate)
	}
	if r.Flood.MessagesPerSec > 0 && r.Flood.Ban <= 0 {
		v.errorf("ratelimit.flood.ban_secs", "%v: want a positive ban while flood protection is on", r.Flood.Ban)
	}

	if c.Fleet.Redis != "" {
		v.redisURL("fleet.redis", c.Fleet.Redis) // the URL rules of every Redis, Cluster included
	}
	c.Fleet.Check(func(field, problem string) {
		if field != "redis" { // redisURL said it, never showing a password
			v.errorf("fleet."+field, "%s", problem)
		}
	})
}

// checkTrunk checks the trunk t at path p ("trunks[2]"; "" for a trunk on
// its own): the rules of the YAML's trunks, which the admin API's trunks
// follow too (ValidateTrunk). seen collects the names so far.
func (c *Config) checkTrunk(v *validator, p string, t Trunk, seen map[string]string) {
	v.name(joinPath(p, "name"), t.Name, seen)
	if len(t.Sources) == 0 {
		v.errorf(joinPath(p, "sources"), "at least one source required")
	}
	if t.NumberPolicy != "" && c.NumberPolicy(t.NumberPolicy) == nil {
		v.errorf(joinPath(p, "number_policy"), "unknown number policy %q", t.NumberPolicy)
	}
	// The YAML decoder refuses negative and out-of-range numbers; JSON's
	// does not.
	if l := t.Limits; l.CPS < 0 || l.Burst < 0 || l.MaxConcurrentCalls < 0 || l.MaxConcurrentCalls > math.MaxInt32 {
		v.errorf(joinPath(p, "limits"), "cps %v, burst %d, max_concurrent_calls %d: none may be negative, nor max_concurrent_calls above %d",
			l.CPS, l.Burst, l.MaxConcurrentCalls, math.MaxInt32)
	}
	if l := t.Limits; l.CPS > 0 {
		v.limit(joinPath(p, "limits"), t.IngressLimit())
	}
	if t.RingTimeout < 0 { // the YAML decoder refuses it; JSON's does not
		v.errorf(joinPath(p, "ring_timeout_secs"), "%d: must not be negative", t.RingTimeout/time.Second)
	}
	if n := len(t.Attributes); n > lcr.MaxAttributes {
		v.errorf(joinPath(p, "attributes"), "%d attributes: at most %d", n, lcr.MaxAttributes)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Attributes)) {
		ap := mapKeyPath(joinPath(p, "attributes"), name)
		if !lcr.ValidAttributeName(name) {
			v.errorf(ap, "%q: want 1 to %d letters, digits, '_', '-' or '.'", name, lcr.MaxAttributeName)
		} else if val := t.Attributes[name]; !lcr.ValidAttributeValue(val) {
			v.errorf(ap, "%q: want up to %d printable characters but ',' and ':' (the cache key's separators)", val, lcr.MaxAttributeValue)
		}
	}
}

// ValidateTrunk checks a trunk added at run time (the admin API) by the
// rules of the YAML's trunks, against c's number policies, after filling
// in its defaults as Load does (trunk_group: the name; ring_timeout_secs,
// when InheritRing, b2bua.ring_timeout_secs). The errors (an
// ErrorList) name the trunk's own fields ("sources", "limits"), without
// lines. Whether the name is taken is the caller's to decide.
func (c *Config) ValidateTrunk(t *Trunk) error {
	c.fillTrunk(t)
	v := &validator{}
	if t.Name == "." || t.Name == ".." || strings.ContainsAny(t.Name, "/?#%") {
		// It names the trunk in the admin API's paths: /v1/trunks/{name}.
		v.errorf("name", "%q: not a path segment (no '/', '?', '#' or '%%', not . or ..)", t.Name)
	}
	c.checkTrunk(v, "", *t, map[string]string{})
	if len(v.errs) > 0 {
		return v.errs
	}
	return nil
}

// IngressLimit is the limiter's limit for the trunk's limits.cps, as the
// server registers it.
func (t *Trunk) IngressLimit() ratelimit.Limit {
	return ratelimit.Limit{Rate: t.Limits.CPS, Burst: t.Limits.Burst, Margin: 1}
}

// fillTrunk fills in a trunk's defaults: trunk_group its name,
// ring_timeout_secs (absent) b2bua.ring_timeout_secs.
func (c *Config) fillTrunk(t *Trunk) {
	orDefault(&t.TrunkGroup, t.Name)
	if t.RingTimeout == InheritRing {
		t.RingTimeout = c.B2BUA.RingTimeout
	}
}

// checkStaticRoutes checks the static rate table at path p
// ("lcr.static_routes"): the rules of the YAML's table, which the admin
// API's tables follow too (ValidateStaticRoutes). known reports whether a
// gateway group exists.
// maxPrefixDigits bounds a static route's prefix.
const maxPrefixDigits = 32

func (c *Config) checkStaticRoutes(v *validator, p string, table []StaticRoute, known func(group string) bool) {
	prefixes := map[string]string{}
	for i, sr := range table {
		sp := fmt.Sprintf("%s[%d]", p, i)
		// As lcr.NewStaticTable reads it: "+44" and "44" are one prefix.
		digits := strings.TrimPrefix(sr.Prefix, "+")
		switch {
		case digits != "" && !isDigits(digits):
			v.errorf(sp+".prefix", "%q: want digits with an optional leading +", sr.Prefix)
		case len(digits) > maxPrefixDigits:
			// Each digit is a node of the table's trie.
			v.errorf(sp+".prefix", "%d digits: at most %d (E.164 numbers have 15)", len(digits), maxPrefixDigits)
		}
		if first, dup := prefixes[digits]; dup {
			v.errorf(sp+".prefix", "%q: duplicate prefix (also %s)", sr.Prefix, first)
		}
		prefixes[digits] = sp + ".prefix"
		for j, r := range sr.Routes {
			c.validateRoute(v, fmt.Sprintf("%s.routes[%d]", sp, j), r, known)
		}
	}
}

// ValidateStaticRoutes checks a static rate table given at run time (the
// admin API) by the rules of the YAML's, against c's number policies;
// known reports whether a gateway group exists now (the YAML's and those
// added at run time). The errors (an ErrorList) name the fields from
// "static_routes" ("static_routes[2].routes[0].gateway_group"), without
// lines.
func (c *Config) ValidateStaticRoutes(table []StaticRoute, known func(group string) bool) error {
	v := &validator{}
	c.checkStaticRoutes(v, "static_routes", table, known)
	if len(v.errs) > 0 {
		return v.errs
	}
	return nil
}

func (c *Config) validateRoute(v *validator, p string, r Route, known func(group string) bool) {
	switch {
	case r.CarrierID == "":
		v.errorf(p+".carrier_id", "required")
	case !lcr.ValidCarrierID(r.CarrierID):
		v.errorf(p+".carrier_id", "%q: want up to %d printable characters", r.CarrierID, lcr.MaxCarrierID)
	}
	switch {
	case r.GatewayGroup == "" && r.NextHop == "" && r.RURI == "":
		v.errorf(p, "want gateway_group, next_hop or ruri")
	case r.GatewayGroup != "" && r.NextHop == "" && !known(r.GatewayGroup):
		v.errorf(p+".gateway_group", "unknown group %q", r.GatewayGroup)
	}
	if r.Currency != "" && !isCurrency(r.Currency) {
		v.errorf(p+".currency", "%q: want a three-letter ISO 4217 code", r.Currency)
	}
	if !lcr.ValidTechPrefix(r.TechPrefix) {
		v.errorf(p+".tech_prefix", "%q: not allowed in a user part", r.TechPrefix)
	}
	if r.NumberPolicy != "" && c.NumberPolicy(r.NumberPolicy) == nil {
		v.errorf(p+".number_policy", "unknown number policy %q", r.NumberPolicy)
	}
	if r.CallerID != "" && !isDigits(strings.TrimPrefix(r.CallerID, "+")) {
		v.errorf(p+".caller_id", "%q: want a number, digits with an optional leading +", r.CallerID)
	}
	v.oneOf(p+".caller_id_presentation", r.CallerIDPresentation, "", PresentationAllowed, PresentationRestricted)
	if strings.HasPrefix(r.NextHop, "sips:") || r.GatewayGroup == "" && r.NextHop == "" && strings.HasPrefix(r.RURI, "sips:") {
		v.errorf(p, "a sips: destination needs TLS, which sipedge does not speak: name a gateway group or a sip: next hop")
	}
	var hp HostPort
	switch isIP, portErr := ipDest(r.NextHop); {
	case r.NextHop == "":
	case !isSIPURI(r.NextHop) && hp.UnmarshalText([]byte(r.NextHop)) != nil:
		v.errorf(p+".next_hop", "%q: want a sip: URI or host:port", r.NextHop)
	case !isIP:
		v.errorf(p+".next_hop", "%q: want an IP address: sipedge does no DNS on a call's path (name a gateway group instead: its names are resolved in the background)", r.NextHop)
	case portErr != "":
		v.errorf(p+".next_hop", "%q: %s", r.NextHop, portErr)
	}
	switch isIP, portErr := ipDest(r.RURI); {
	case r.RURI == "":
	case !isSIPURI(r.RURI):
		v.errorf(p+".ruri", "%q: want a sip: or sips: URI", r.RURI)
	case r.GatewayGroup != "" || r.NextHop != "":
		// Not where the call goes.
	case !isIP:
		v.errorf(p+".ruri", "%q: with no gateway_group or next_hop the call goes to its host, which must be an IP address (sipedge does no DNS on a call's path)", r.RURI)
	case portErr != "":
		v.errorf(p+".ruri", "%q: %s", r.RURI, portErr)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		val := r.Headers[name]
		hp := mapKeyPath(p+".headers", name)
		switch refused := b2bua.RouteHeaderRefused(name, val); {
		case !isToken(name):
			v.errorf(hp, "%q: not a header name", name)
		case strings.ContainsAny(val, "\r\n"):
			v.errorf(hp, "value must be one line")
		case refused != "":
			// Each call would refuse it with a warning: say so once, at start.
			v.errorf(hp, "%s", strings.TrimPrefix(refused, "route header refused: "))
		}
	}
	for name := range r.CDRFields {
		if name == "" {
			v.errorf(p+".cdr_fields", "empty field name")
		}
	}
	v.causes(p+".reroute_causes", r.RerouteCauses)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 3261 token (a header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-.!%*_+`'~", c) >= 0) {
			return false
		}
	}
	return true
}

// ipDest reads the host and port of "sip:[user@]host[:port][;...]" or
// "host[:port]", as the server's hopOf does: isIP reports whether the host
// is an IP address, portErr what is wrong with the port ("" when it is
// absent, for 5060, or fine).
func ipDest(s string) (isIP bool, portErr string) {
	if rest, ok := strings.CutPrefix(s, "sip:"); ok {
		s = rest
	} else if rest, ok := strings.CutPrefix(s, "sips:"); ok {
		s = rest
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexAny(s, ";?"); i >= 0 {
		s = s[:i]
	}
	host, port, hasPort := s, "", false
	if inner, ok := strings.CutPrefix(s, "["); ok {
		var rest string
		host, rest, _ = strings.Cut(inner, "]")
		port, hasPort = strings.CutPrefix(rest, ":")
	} else if strings.Count(s, ":") == 1 {
		host, port, hasPort = strings.Cut(s, ":")
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return false, ""
	}
	if hasPort {
		switch p, err := transport.ParsePort(port); {
		case err != nil:
			return true, err.Error()
		case p == 0:
			return true, "port must not be 0"
		}
	}
	return true, ""
}

func isSIPURI(s string) bool { return lcr.SIPURI(s) }

// redisURL checks a Redis URL: redis:// or rediss://, a host, and at most
// one database number (/N or ?db=N), which must be 0 with more seed nodes
// (?addr=host:port), the form of a Redis Cluster: a Cluster has only
// database 0. (A Cluster reached through one node is told apart at start.)
func (v *validator) redisURL(path, s string) {
	shown := redactedURL(s) // a config error is logged: never its password
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		v.errorf(path, "%q: want a redis:// URL", shown)
		return
	}
	q := u.Query()
	db := 0
	if u.Path != "" {
		if db, err = strconv.Atoi(strings.TrimPrefix(u.Path, "/")); err != nil || db < 0 {
			v.errorf(path, "%q: the path must be a database number (/0) or nothing", shown)
			return
		}
	}
	if q.Has("db") {
		if db, err = strconv.Atoi(q.Get("db")); err != nil || db < 0 {
			v.errorf(path, "%q: db=%s is not a database number", shown, q.Get("db"))
			return
		}
	}
	if db != 0 && q.Has("addr") && !q.Has("master_set") {
		v.errorf(path, "%q: database %d with more seed nodes (addr=): a Redis Cluster has only database 0", shown, db)
	}
}

// redactedURL is s with its password, if any, masked: url.URL.Redacted,
// or by hand when s does not parse. A config error is logged, so every URL
// it shows goes through here.
func redactedURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if at, i := strings.LastIndex(s, "@"), strings.Index(s, "://"); i >= 0 && i < at {
		return s[:i+3] + "xxxxx" + s[at:]
	}
	return s
}
