package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/route"
)

// staticTable is the embedded routing table: the longest prefix of the
// dialled number wins, an empty prefix matches all; its routes keep the
// config's order. It is read-only once built, so every shard reads it
// without locks.
type staticTable struct {
	prefixes []staticPrefix // longest first
}

type staticPrefix struct {
	prefix []byte
	routes []route.Route
}

func newStaticTable(cfg *config.Config) *staticTable {
	t := &staticTable{}
	for _, sr := range cfg.LCR.StaticRoutes {
		p := staticPrefix{prefix: []byte(sr.Prefix)}
		for _, r := range sr.Routes {
			p.routes = append(p.routes, routeOf(r))
		}
		t.prefixes = append(t.prefixes, p)
	}
	sort.SliceStable(t.prefixes, func(i, j int) bool { return len(t.prefixes[i].prefix) > len(t.prefixes[j].prefix) })
	return t
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

// route answers a B2BUA's routing request from the table.
func (t *staticTable) route(r *b2bua.RouteRequest) b2bua.Decision {
	for i := range t.prefixes {
		p := &t.prefixes[i]
		if bytes.HasPrefix(r.Dialed, p.prefix) {
			return b2bua.Decision{Routes: p.routes, Source: "static"}
		}
	}
	return b2bua.Decision{Code: 404, Reason: "No Route"}
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
