package server

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/txn"
)

// staticTable is the embedded routing table: the longest prefix of the
// dialled number wins, an empty prefix matches all. It is read-only once
// built, so every shard reads it without locks.
type staticTable struct {
	prefixes []staticPrefix // longest first
}

type staticPrefix struct {
	prefix  string
	targets []b2bua.Target
}

// newStaticTable resolves each route's gateway group to its first
// destination. DNS names are resolved once here, at start (the health
// issue re-resolves them).
func newStaticTable(cfg *config.Config) (*staticTable, error) {
	t := &staticTable{}
	for i, sr := range cfg.LCR.StaticRoutes {
		p := staticPrefix{prefix: sr.Prefix}
		for j, r := range sr.Routes {
			tg, err := targetOf(cfg, r)
			if err != nil {
				return nil, fmt.Errorf("lcr.static_routes[%d].routes[%d]: %w", i, j, err)
			}
			p.targets = append(p.targets, tg)
		}
		t.prefixes = append(t.prefixes, p)
	}
	sort.SliceStable(t.prefixes, func(i, j int) bool { return len(t.prefixes[i].prefix) > len(t.prefixes[j].prefix) })
	return t, nil
}

// targetOf resolves a route to the place its INVITE goes.
func targetOf(cfg *config.Config, r config.Route) (b2bua.Target, error) {
	g := cfg.Group(r.GatewayGroup)
	if g == nil || len(g.Destinations) == 0 {
		return b2bua.Target{}, fmt.Errorf("gateway group %q has no destination", r.GatewayGroup)
	}
	d := g.Destinations[0]
	ap, err := resolve(d.Address)
	if err != nil {
		return b2bua.Target{}, err
	}
	tr := txn.TransportUDP
	if g.Transport == "tcp" {
		tr = txn.TransportTCP
	}
	return b2bua.Target{CarrierID: r.CarrierID, Group: g.Name, URI: d.URI, Peer: txn.Peer{Addr: ap, Transport: tr},
		Rate: r.Rate, Currency: r.Currency}, nil
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

// route answers a B2BUA's routing request from the table.
func (t *staticTable) route(r *b2bua.RouteRequest) b2bua.Decision {
	for i := range t.prefixes {
		p := &t.prefixes[i]
		if strings.HasPrefix(string(r.Dialed), p.prefix) {
			return b2bua.Decision{Targets: p.targets}
		}
	}
	return b2bua.Decision{Code: 404, Reason: "No Route"}
}
