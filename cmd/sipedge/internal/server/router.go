package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// newResolver builds the routing decision source: the LCR API with its
// cache tiers when lcr.api_url is set, else the static rate table (longest
// prefix, routes ordered by rate).
func newResolver(cfg *config.Config, set *metrics.Set, log *slog.Logger) (*lcr.Resolver, *lcr.StaticTable, error) {
	var entries []lcr.StaticEntry
	for _, sr := range cfg.LCR.StaticRoutes {
		e := lcr.StaticEntry{Prefix: sr.Prefix}
		for _, r := range sr.Routes {
			e.Routes = append(e.Routes, routeOf(r))
		}
		entries = append(entries, e)
	}
	table, err := lcr.NewStaticTable(entries)
	if err != nil {
		return nil, nil, fmt.Errorf("lcr.static_routes: %w", err)
	}
	opts := lcr.Options{APIURL: cfg.LCR.APIURL, Timeout: cfg.LCR.Timeout, AuthHeader: cfg.LCR.AuthHeader,
		CacheTTL: cfg.LCR.CacheTTL, KeyAttributes: cfg.LCR.Attributes,
		FallbackGatewayGroup: cfg.LCR.FallbackGatewayGroup, Static: table, Metrics: set, Log: log,
		LocalTTL: 60 * time.Second}
	for _, c := range cfg.Cache {
		if c.Name == cfg.LCR.Cache && c.Name != "" {
			opts.RedisURL = c.URL
			opts.LocalTTL = c.LocalTTL
			if c.LocalTTL == 0 {
				opts.LocalTTL = lcr.NoLocalTier
			}
		}
	}
	res, err := lcr.New(opts)
	return res, table, err
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
// no routes 404 No Route.
func decisionOf(d lcr.Decision) b2bua.Decision {
	switch {
	case d.NoDecision:
		return b2bua.Decision{Code: 503, Reason: "Route Unavailable"}
	case d.Reject != nil:
		return b2bua.Decision{Code: d.Reject.Code, Reason: d.Reject.Reason}
	case len(d.Routes) == 0:
		return b2bua.Decision{Code: 404, Reason: "No Route"}
	}
	return b2bua.Decision{Routes: d.Routes, Source: d.Source.String()}
}

// gateways resolves routes to destinations: until gateway health lands, the
// first destination of the group. Addresses given as DNS names are resolved
// once, at start.
type gateways struct {
	groups map[string]gatewayGroup
}

type gatewayGroup struct {
	target b2bua.Target
	err    string // why the group cannot be dialled
}

func newGateways(cfg *config.Config, log *slog.Logger) *gateways {
	g := &gateways{groups: make(map[string]gatewayGroup)}
	for _, grp := range cfg.Gateway.Groups {
		gg := gatewayGroup{}
		if len(grp.Destinations) == 0 {
			gg.err = route.ReasonGroupDown
		} else {
			d := grp.Destinations[0]
			ap, err := resolve(d.Address)
			if err != nil {
				log.Warn("gateway destination does not resolve", "group", grp.Name, "address", d.Address.String(), "err", err)
				gg.err = route.ReasonUnresolvable
			}
			tr := txn.TransportUDP
			if grp.Transport == "tcp" {
				tr = txn.TransportTCP
			}
			gg.target = b2bua.Target{Group: grp.Name, URI: d.URI, Peer: txn.Peer{Addr: ap, Transport: tr}}
		}
		g.groups[grp.Name] = gg
	}
	return g
}

// resolveRoute is the engines' Env.Resolve. A route that names an unknown
// gateway group falls back to its next_hop when it has one (the seed:
// "warns and falls back to the route's next_hop ... else skips").
func (g *gateways) resolveRoute(r *route.Route, _ uint64) (b2bua.Target, string) {
	gg, ok := g.groups[r.GatewayGroup]
	if !ok || r.GatewayGroup == "" {
		if r.NextHop != "" {
			return nextHop(r)
		}
		return b2bua.Target{}, route.ReasonUnknownGroup
	}
	if gg.err != "" {
		return b2bua.Target{}, gg.err
	}
	t := gg.target
	t.CarrierID, t.Rate, t.Currency = r.CarrierID, r.Rate, r.Currency
	return t, ""
}

func resolve(hp config.HostPort) (netip.AddrPort, error) {
	if ap, ok := hp.AddrPort(); ok {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	addrs, err := net.LookupHost(hp.Host)
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("cannot resolve %q: %v", hp.Host, err)
	}
	a, err := netip.ParseAddr(addrs[0])
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a.Unmap(), hp.Port), nil
}

// nextHop resolves a route's explicit next hop: "sip:host:port" or
// "host:port", an IP literal (names resolve off the shard, at config time).
func nextHop(r *route.Route) (b2bua.Target, string) {
	hp := strings.TrimPrefix(strings.TrimPrefix(r.NextHop, "sip:"), "sips:")
	if i := strings.IndexByte(hp, ';'); i >= 0 {
		hp = hp[:i]
	}
	ap, err := netip.ParseAddrPort(hp)
	if err != nil {
		a, err := netip.ParseAddr(hp)
		if err != nil {
			return b2bua.Target{}, route.ReasonUnresolvable
		}
		ap = netip.AddrPortFrom(a, 5060)
	}
	return b2bua.Target{CarrierID: r.CarrierID, Group: r.NextHop, URI: "sip:" + ap.String(),
		Peer: txn.Peer{Addr: ap, Transport: txn.TransportUDP}, Rate: r.Rate, Currency: r.Currency}, ""
}
