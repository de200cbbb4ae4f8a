package b2bua

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
)

// Trunk is a configured source of calls: a customer's PBX or SBC.
type Trunk struct {
	Name  string
	Group string // trunk_group: what routing keys on
	// Attributes are the trunk's attributes (trunks[].attributes): the
	// routing request's, and by name part of its cache key. Read-only.
	Attributes map[string]string
	Sources    []Source
	// MaxCalls bounds the trunk's concurrent calls on the node, counted in
	// Stats.Calls; 0: unlimited. Channels, when set, bounds them instead.
	MaxCalls int
	// Channels, when set, bounds the trunk's concurrent calls in place of
	// MaxCalls: a fleet's Channel, whose limit holds across the nodes
	// sharing it (the owner sets it, and shares it between the trunk's
	// versions as Stats). Stats.Calls still counts the node's calls.
	Channels *fleet.Channel
	// Ingress, when set, bounds the trunk's new calls per second: one over
	// it is refused 503 with Retry-After before any routing work.
	Ingress *TrunkIngress
	// Stats are the trunk's counters. The owner shares one TrunkStats
	// between the trunk's versions and every shard's engine, for MaxCalls
	// to hold on the node and across a replacement (NewTrunkStats); nil:
	// the TrunkSet gives the trunk its own.
	Stats *TrunkStats
	// ForceRPort answers the trunk at the source port of its requests even
	// when their Via asks for none (a PBX behind NAT without rport, as
	// Kamailio's force_rport): responses, 2xx retransmissions and requests
	// in the dialog. Otherwise RFC 3261 18.2.2 decides (txn.ReplyTo).
	ForceRPort bool
	// NAT sends the requests sipedge originates in the trunk's dialogs
	// (BYE, relayed re-INVITE, UPDATE, INFO...) to the source address and
	// port of the call's INVITE (over its connection, on a stream)
	// whatever its Contact and Record-Route say: a PBX behind NAT that
	// writes its private address there. Otherwise the caller's route set
	// and remote target decide (RFC 3261 12.2.1.1; doc.go, Where messages
	// go).
	NAT bool
	// Normalize, when set, puts the trunk's numbers (dialled and calling)
	// in E.164 form with its country code and national prefix as the call
	// begins: what routing looks up and caches, what carriers' policies
	// start from, what the CDR records.
	Normalize *NumberPolicy
	// RingTimeout, when not 0, is the ring bound of the trunk's calls
	// (route.SequenceOptions.RingTimeout) over Config.Sequence's;
	// route.NoRingBound means none. A policy's OnInvite may set a call's
	// own (route.Decision.RingTimeout).
	RingTimeout time.Duration
}

// Number appends num, a number of the trunk's call, to dst: in E.164 when
// the trunk has a number policy (Normalize), else as it is.
func (t *Trunk) Number(dst, num []byte) []byte {
	if n := t.Normalize; n != nil {
		return n.Shape(dst, num)
	}
	return append(dst, num...)
}

// Sequence returns the failover options of a call from the trunk whose
// decision is d: opts (the engine's, Config.Sequence), with the trunk's
// ring bound, then the decision's.
func (t *Trunk) Sequence(opts route.SequenceOptions, d *route.Decision) route.SequenceOptions {
	if t.RingTimeout != 0 {
		opts.RingTimeout = t.RingTimeout
	}
	if d.RingTimeout != 0 {
		opts.RingTimeout = d.RingTimeout
	}
	return opts
}

// TrunkIngress is a trunk's calls-per-second limit (trunks[].limits.cps):
// an account of an in-process limiter, the node's own (no Redis on the
// way in). Limiter's clock is the shards' (Engine inputs' now).
type TrunkIngress struct {
	Limiter *ratelimit.Local
	Key     ratelimit.Key
}

// ingressRetry is the Retry-After of a call refused over its trunk's CPS.
const ingressRetry = time.Second

// admit reserves a slot of t's ingress limit for a call at now: false when
// the trunk is over it, counted.
func (t *Trunk) admit(now time.Duration) bool {
	if t.Ingress == nil {
		return true
	}
	if t.Ingress.Limiter.Reserve(t.Ingress.Key, now).Over {
		t.Stats.cpsRefused.Inc()
		return false
	}
	return true
}

// takeCall counts a new call of the trunk against its limit (Channels, else
// MaxCalls): false, counted in Stats.Refused, when it is over it. A call
// taken gives its place back once, with releaseCall.
func (t *Trunk) takeCall() bool {
	n := t.Stats.Calls.Add(1)
	if ch := t.Channels; ch != nil {
		if ch.Take() {
			return true
		}
	} else if t.MaxCalls <= 0 || n <= int64(t.MaxCalls) {
		return true
	}
	t.Stats.Calls.Add(-1)
	t.Stats.Refused.Add(1)
	return false
}

// releaseCall gives back what takeCall took.
func (t *Trunk) releaseCall() {
	t.Stats.Calls.Add(-1)
	if ch := t.Channels; ch != nil {
		ch.Release()
	}
}

// TrunkStats are a trunk's live calls and its metrics: what a customer
// sends and what sipedge refuses it. The engines update them from any
// shard, without a lock.
type TrunkStats struct {
	Calls   atomic.Int64  // live calls on the node, which Trunk.MaxCalls bounds
	Refused atomic.Uint64 // INVITEs refused over MaxCalls

	answered, cancelled, failed *metrics.Counter // calls ended, by result
	cpsRefused                  *metrics.Counter // INVITEs over the trunk's ingress CPS
}

// NewTrunkStats returns a trunk's counters, its metrics registered in set
// (a private set when nil) under its name: one per name, kept for the
// node's life, so that every version of a trunk, and a name removed and
// added again, counts in the same series.
func NewTrunkStats(set *metrics.Set, name string) *TrunkStats {
	if set == nil {
		set = metrics.NewSet()
	}
	st := new(TrunkStats)
	l := `{trunk="` + escapeLabel(name) + `"`
	set.GetOrCreateGauge("sipedge_trunk_calls"+l+"}", func() float64 { return float64(st.Calls.Load()) })
	st.answered = set.GetOrCreateCounter("sipedge_trunk_calls_total" + l + `,result="answered"}`)
	st.cancelled = set.GetOrCreateCounter("sipedge_trunk_calls_total" + l + `,result="cancelled"}`)
	st.failed = set.GetOrCreateCounter("sipedge_trunk_calls_total" + l + `,result="failed"}`)
	st.cpsRefused = set.GetOrCreateCounter("sipedge_trunk_refused_total" + l + `,reason="cps"}`)
	// The engines count in Refused; a gauge's callback is how the metrics
	// package reads a counter it does not hold.
	set.GetOrCreateGauge("sipedge_trunk_refused_total"+l+`,reason="concurrent"}`,
		func() float64 { return float64(st.Refused.Load()) })
	return st
}

// ended counts a finished call by its result: answered when a 2xx reached
// the caller, cancelled when the caller gave up before one, else failed
// (sipedge's refusal after admission, a carrier's, a drain).
func (st *TrunkStats) ended(answered bool, hangup cdr.HangupSide) {
	switch {
	case answered:
		st.answered.Inc()
	case hangup == cdr.HangupCaller:
		st.cancelled.Inc()
	default:
		st.failed.Inc()
	}
}

// escapeLabel escapes a Prometheus label value.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// TrunkSet is an immutable set of trunks, in the order they match.
type TrunkSet struct {
	trunks []Trunk
	// forceRPort: some trunk has ForceRPort, so replyTo looks the trunk up.
	forceRPort bool
}

// NewTrunkSet returns a set of copies of trunks. A trunk without Stats
// gets its own.
func NewTrunkSet(trunks []Trunk) *TrunkSet {
	s := &TrunkSet{trunks: slices.Clone(trunks)}
	for i := range s.trunks {
		t := &s.trunks[i]
		s.forceRPort = s.forceRPort || t.ForceRPort
		if t.Stats == nil {
			t.Stats = NewTrunkStats(nil, t.Name)
		}
	}
	return s
}

// Match returns the first trunk with a source ap is within, nil if none.
func (s *TrunkSet) Match(ap netip.AddrPort) *Trunk {
	for i := range s.trunks {
		t := &s.trunks[i]
		for _, src := range t.Sources {
			if src.Matches(ap) {
				return t
			}
		}
	}
	return nil
}

// Covers reports whether a is within some trunk's sources, whatever the
// port.
func (s *TrunkSet) Covers(a netip.Addr) bool {
	a = a.Unmap()
	for i := range s.trunks {
		for _, src := range s.trunks[i].Sources {
			if src.Prefix.Contains(a) {
				return true
			}
		}
	}
	return false
}

// Source is an address range, optionally limited to one port: a trunk's
// source, as the configuration and the admin API write it (UnmarshalText).
type Source struct {
	Prefix netip.Prefix // masked when parsed
	Port   uint16       // 0: any
}

// Matches reports whether ap is within the source.
func (s Source) Matches(ap netip.AddrPort) bool {
	return s.Prefix.Contains(ap.Addr().Unmap()) && (s.Port == 0 || s.Port == ap.Port())
}

// String returns "cidr" or "cidr:port" (IPv6 with a port in brackets).
func (s Source) String() string {
	if s.Port == 0 {
		return s.Prefix.String()
	}
	if s.Prefix.Addr().Is6() {
		return "[" + s.Prefix.String() + "]:" + strconv.Itoa(int(s.Port))
	}
	return s.Prefix.String() + ":" + strconv.Itoa(int(s.Port))
}

// MarshalText implements encoding.TextMarshaler.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Accepted forms:
// "10.0.0.0/8", "10.0.0.0/8:5060", "2001:db8::/32", "[2001:db8::/32]:5060",
// and a bare address ("127.0.0.1", "[::1]:5060") for a single host.
func (s *Source) UnmarshalText(b []byte) error {
	text := string(b)
	cidr, portText, hasPort := text, "", false
	if rest, ok := strings.CutPrefix(text, "["); ok {
		inner, after, ok := strings.Cut(rest, "]")
		if !ok {
			return fmt.Errorf("%q: missing ']'", text)
		}
		cidr = inner
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return fmt.Errorf("%q: want [cidr]:port", text)
			}
			portText, hasPort = p, true
		}
	} else if slash := strings.IndexByte(text, '/'); slash >= 0 {
		if c := strings.IndexByte(text[slash:], ':'); c >= 0 {
			cidr, portText, hasPort = text[:slash+c], text[slash+c+1:], true
		}
	} else if strings.Count(text, ":") == 1 { // IPv4 address with a port
		cidr, portText, hasPort = text[:strings.IndexByte(text, ':')], text[strings.IndexByte(text, ':')+1:], true
	}
	var port uint16
	if hasPort {
		p, err := strconv.ParseUint(portText, 10, 16)
		if portText == "" {
			return fmt.Errorf("%q: missing port", text)
		}
		if err != nil {
			return fmt.Errorf("%q: invalid port", text)
		}
		if p == 0 {
			return fmt.Errorf("%q: port must not be 0", text)
		}
		port = uint16(p)
	}
	var prefix netip.Prefix
	if strings.Contains(cidr, "/") {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return fmt.Errorf("%q: invalid CIDR", text)
		}
		prefix = p.Masked()
	} else {
		a, err := netip.ParseAddr(cidr)
		if err != nil || a.Zone() != "" {
			return fmt.Errorf("%q: invalid CIDR or address", text)
		}
		prefix = netip.PrefixFrom(a, a.BitLen())
	}
	if prefix.Addr().Is4In6() {
		return fmt.Errorf("%q: write an IPv4 prefix as IPv4", text)
	}
	*s = Source{Prefix: prefix, Port: port}
	return nil
}
