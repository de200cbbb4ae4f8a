package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
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
