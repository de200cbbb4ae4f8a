package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// lcrRedisDeadline, when not 0, replaces lcr's deadline for each call to
// the Redis cache tier (lcr.DefaultRedisDeadline). No configuration sets
// it: it is for tests whose Redis calls must succeed on a loaded machine.
var lcrRedisDeadline time.Duration

// newResolver builds the routing decision source: the LCR API with its
// cache tiers when lcr.api_url is set, else the static rate table (longest
// prefix, routes ordered by rate).
func newResolver(cfg *config.Config, set *metrics.Set, log *slog.Logger) (*lcr.Resolver, *lcr.StaticTable, error) {
	table, err := staticTable(cfg.LCR.StaticRoutes)
	if err != nil {
		return nil, nil, fmt.Errorf("lcr.static_routes: %w", err)
	}
	opts := lcr.Options{APIURL: cfg.LCR.APIURL, Timeout: cfg.LCR.Timeout, AuthHeader: cfg.LCR.AuthHeader,
		CacheTTL: cfg.LCR.CacheTTL, KeyAttributes: cfg.LCR.Attributes,
		FallbackGatewayGroup: cfg.LCR.FallbackGatewayGroup, Static: table, Metrics: set, Log: log,
		LocalTTL: 60 * time.Second, RedisDeadline: lcrRedisDeadline}
	cache := -1 // the cache entry lcr.cache names
	for i, c := range cfg.Cache {
		if c.Name == cfg.LCR.Cache && c.Name != "" {
			cache = i
			opts.RedisURL = c.URL
			opts.LocalTTL = c.LocalTTL
			if c.LocalTTL == 0 {
				opts.LocalTTL = lcr.NoLocalTier
			}
		}
	}
	res, err := lcr.New(opts)
	if errors.Is(err, lcr.ErrRedisURL) && cache >= 0 {
		err = fmt.Errorf("cache[%d].url: %w", cache, err)
	}
	return res, table, err
}

// staticTable builds the static rate table of the configured routes.
func staticTable(routes []config.StaticRoute) (*lcr.StaticTable, error) {
	var entries []lcr.StaticEntry
	for _, sr := range routes {
		e := lcr.StaticEntry{Prefix: sr.Prefix}
		for _, r := range sr.Routes {
			e.Routes = append(e.Routes, routeOf(r))
		}
		entries = append(entries, e)
	}
	return lcr.NewStaticTable(entries)
}

// routeOf maps a configured route onto the decision's shape.
func routeOf(r config.Route) route.Route {
	rt := route.Route{CarrierID: r.CarrierID, GatewayGroup: r.GatewayGroup, NextHop: r.NextHop, RURI: r.RURI,
		TechPrefix: r.TechPrefix, NumberPolicy: r.NumberPolicy, CallerID: r.CallerID,
		CallerIDPresentation: r.CallerIDPresentation, Rate: r.Rate, Currency: r.Currency,
		TimeoutSecs: int(r.Timeout / time.Second), RerouteAfterProgress: r.RerouteAfterProgress,
		Headers: r.Headers, CDRFields: r.CDRFields}
	if len(r.RerouteCauses) > 0 {
		rt.RerouteCauses = r.RerouteCauses
	}
	return rt
}

// decisionOf applies the seed's default policy to a decision: no decision
// (API down, no fallback) is 503 Route Unavailable, an API reject its code,
// no routes 404 No Route. No decision is marked as such, for a policy's
// OnInvite to tell it from an API reject with 503.
func decisionOf(d lcr.Decision) b2bua.Decision {
	switch {
	case d.NoDecision:
		return b2bua.Decision{Code: 503, Reason: "Route Unavailable", NoDecision: true}
	case d.Reject != nil:
		return b2bua.Decision{Code: d.Reject.Code, Reason: d.Reject.Reason}
	case len(d.Routes) == 0:
		return b2bua.Decision{Code: 404, Reason: "No Route"}
	}
	return b2bua.Decision{Routes: d.Routes, Source: d.Source.String()}
}

// healthGroups maps the YAML's gateway groups onto the health registry's.
func healthGroups(cfg *config.Config) []health.GroupConfig {
	var out []health.GroupConfig
	for _, g := range cfg.Gateway.Groups {
		hg := health.GroupConfig{Name: g.Name, Algorithm: g.Algorithm, Transport: g.Transport,
			RerouteCauses: g.RerouteCauses,
			Probe: health.ProbeConfig{Enabled: g.Probe.Enabled, Interval: g.Probe.Interval, Timeout: g.Probe.Timeout,
				FailureThreshold: g.Probe.FailureThreshold, SuccessThreshold: g.Probe.SuccessThreshold,
				HealthyCodes: g.Probe.HealthyCodes, Jitter: g.Probe.Jitter},
			Passive: health.PassiveConfig{Disabled: g.Passive.Disabled, Outcomes: g.Passive.Outcomes,
				FailureThreshold: g.Passive.FailureThreshold, FailurePercent: g.Passive.FailurePercent,
				MinCalls: g.Passive.MinCalls, HalfOpenCalls: g.Passive.HalfOpenCalls,
				DownTime: g.Passive.DownTime, MaxRetryAfter: g.Passive.MaxRetryAfter},
			PanicThreshold: &g.PanicThreshold, MaxConcurrentCalls: g.MaxConcurrentCalls}
		if g.CPS.Rate > 0 {
			w := g.CPS.MaxWait.Milliseconds()
			hg.CPS = &health.CPSConfig{Rate: g.CPS.Rate, Burst: g.CPS.Burst, MaxWaitMs: &w, Key: g.CPS.Key}
		}
		for _, r := range g.CPSReject {
			hg.CPSReject = append(hg.CPSReject, health.CPSReject{Code: r.Code, Reason: r.Reason})
		}
		if a := g.Auth; a != (config.Auth{}) {
			hg.Auth = &health.AuthConfig{Username: a.Username, Password: a.Password, Realm: a.Realm}
		}
		for _, d := range g.Destinations {
			hg.Destinations = append(hg.Destinations, health.DestConfig{URI: d.URI, Address: d.Address.String(),
				Weight: d.Weight, Priority: d.Priority})
		}
		out = append(out, hg)
	}
	return out
}

// resolve is the engines' Env.Resolve: a healthy member of the route's
// gateway group (health.Pick, with this shard's Selector), else the route's
// next_hop (or its ruri's host) when the group is unknown (the seed: "warns
// and falls back to the route's next_hop ... else skips that carrier").
func (a *shardApp) resolve(r *route.Route, key uint64) (b2bua.Target, string) {
	m, res := a.s.health.Pick(r.GatewayGroup, key, &a.sel)
	switch res {
	case health.OK:
		tr := txn.TransportUDP
		if m.Transport == health.TransportTCP {
			tr = txn.TransportTCP
		}
		return b2bua.Target{CarrierID: r.CarrierID, Group: m.Group, URI: m.URI, Peer: txn.Peer{Addr: m.Addr, Transport: tr},
			Rate: r.Rate, Currency: r.Currency, Gateway: m}, ""
	case health.UnknownGroup:
		if r.GatewayGroup != "" {
			a.warnUnknownGroup(r)
		}
		if r.NextHop != "" || r.RURI != "" {
			t, reason := nextHop(r)
			if reason == "" {
				a.s.hops.add(t.Peer.Addr.Addr(), a.s.log)
			}
			return t, reason
		}
		return b2bua.Target{}, route.ReasonUnknownGroup
	case health.Unresolvable:
		return b2bua.Target{}, route.ReasonUnresolvable
	}
	return b2bua.Target{}, route.ReasonGroupDown
}

// unknownGroupLogInterval paces the warning of routes naming an unknown
// gateway_group: an LCR API with a typo names it on every call.
const unknownGroupLogInterval = time.Minute

// warnUnknownGroup warns that r names a gateway_group sipedge does not
// know (the seed: "siphon warns"), at most once per interval on this
// shard; the next warning counts the ones left out.
func (a *shardApp) warnUnknownGroup(r *route.Route) {
	now := a.sh.Now()
	if a.unknownLogged && now-a.unknownLogAt < unknownGroupLogInterval {
		a.unknownSuppressed++
		return
	}
	a.s.log.Warn("route names an unknown gateway_group", "carrier", r.CarrierID, "gateway_group", r.GatewayGroup,
		"suppressed_since_last", a.unknownSuppressed)
	a.unknownLogged, a.unknownLogAt, a.unknownSuppressed = true, now, 0
}

// outcome is the engines' Env.Outcome: passive health signals.
func (a *shardApp) outcome(t *b2bua.Target, code int, retryAfter time.Duration) {
	if t.Gateway.Group == "" {
		return // a next hop, not a group member
	}
	o := health.OutcomeOther
	switch {
	case code == b2bua.OutcomeNoResponse:
		o = health.OutcomeNoResponse
	case code == b2bua.OutcomeTransport:
		o = health.OutcomeTransportError
	case code == b2bua.OutcomeAbandoned:
		o = health.OutcomeAbandoned
	case code >= 200 && code < 300:
		o = health.OutcomeAnswered
	case code == 503:
		o = health.OutcomeStatus503
		if retryAfter > 0 {
			a.s.health.Cooldown(t.Gateway, retryAfter)
		}
	}
	a.s.health.ReportCall(t.Gateway, o)
}

// prober sends the registry's OPTIONS probes through the shards: each
// member's probes go to the shard its address hashes to.
type prober struct{ s *Server }

func (p prober) Probe(m health.Member, timeout time.Duration, done func(health.ProbeResult)) {
	a := p.s.apps[int(xxhash.Sum64String(m.Addr.String())%uint64(len(p.s.apps)))]
	tr := txn.TransportUDP
	if m.Transport == health.TransportTCP {
		tr = txn.TransportTCP
	}
	peer := txn.Peer{Addr: m.Addr, Transport: tr}
	a.sh.Post(func() {
		a.eng.Probe(peer, m.URI, timeout, a.sh.Now(), func(code int, retry, rtt time.Duration, err error) {
			done(health.ProbeResult{Code: code, RetryAfter: retry, RTT: rtt, Err: err})
		})
	})
}

// nextHop is where a route without a usable gateway group goes: its
// next_hop, else the host of its ruri (the seed: "pin an explicit
// next_hop, or override the whole Request-URI with ruri"). The host must
// be an IP literal: there is no DNS on a shard, and a name is skipped as
// unresolvable. ";transport=tcp" selects TCP.
func nextHop(r *route.Route) (b2bua.Target, string) {
	dest := r.NextHop
	if dest == "" {
		dest = r.RURI
	}
	peer, ok := hopOf(dest)
	if !ok {
		return b2bua.Target{}, route.ReasonUnresolvable
	}
	uri := "sip:" + peer.Addr.String()
	if peer.Transport == txn.TransportTCP {
		uri += ";transport=tcp"
	}
	return b2bua.Target{CarrierID: r.CarrierID, Group: dest, URI: uri, Peer: peer, Rate: r.Rate, Currency: r.Currency}, ""
}

// hopOf reads "sip:[user@]host[:port][;params]" or "host[:port]" with an
// IP literal host (5060 when no port, never 0) and the transport parameter. A sips:
// URI is refused: sipedge has no TLS transport to honour it with.
func hopOf(s string) (txn.Peer, bool) {
	if len(s) >= 5 && strings.EqualFold(s[:5], "sips:") {
		return txn.Peer{}, false
	}
	if len(s) >= 4 && strings.EqualFold(s[:4], "sip:") {
		s = s[4:]
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	tr := txn.TransportUDP
	if i := strings.IndexAny(s, ";?"); i >= 0 {
		for _, p := range strings.Split(s[i+1:], ";") {
			if strings.EqualFold(p, "transport=tcp") {
				tr = txn.TransportTCP
			}
		}
		s = s[:i]
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
		if err != nil {
			return txn.Peer{}, false
		}
		ap = netip.AddrPortFrom(a, 5060)
	}
	if ap.Port() == 0 {
		return txn.Peer{}, false // nothing listens there: skipped, not dialled
	}
	return txn.Peer{Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Transport: tr}, true
}
