package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/quality/redisstore"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// lcrRedisDeadline, when not 0, replaces lcr's deadline for each call to
// the Redis cache tier (lcr.DefaultRedisDeadline). No configuration sets
// it: it is for tests whose Redis calls must succeed on a loaded machine.
var lcrRedisDeadline time.Duration

// newResolver builds the routing decision source: the LCR API with its
// cache tiers when lcr.api_url is set, else the static rate table (longest
// prefix, routes ordered by rate). With lcr.send_quality the API's
// requests carry scores, the quality scores of their number's prefix.
func newResolver(cfg *config.Config, set *metrics.Set, log *slog.Logger, scores func(string) *lcr.Quality) (*lcr.Resolver, *lcr.StaticTable, error) {
	table, err := staticTable(cfg.LCR.StaticRoutes)
	if err != nil {
		return nil, nil, fmt.Errorf("lcr.static_routes: %w", err)
	}
	opts := lcr.Options{APIURL: cfg.LCR.APIURL, Timeout: cfg.LCR.Timeout, AuthHeader: cfg.LCR.AuthHeader,
		CacheTTL: cfg.LCR.CacheTTL, KeyAttributes: cfg.LCR.Attributes,
		FallbackGatewayGroup: cfg.LCR.FallbackGatewayGroup, Static: table, Metrics: set, Log: log,
		LocalTTL: 60 * time.Second, RedisDeadline: lcrRedisDeadline}
	if cfg.LCR.SendQuality {
		opts.Quality = scores
	}
	c, cache := decisionCache(cfg)
	if cache >= 0 {
		opts.RedisURL = c.URL
		opts.LocalTTL = c.LocalTTL
		if c.LocalTTL == 0 {
			opts.LocalTTL = lcr.NoLocalTier
		}
	}
	res, err := lcr.New(opts)
	if errors.Is(err, lcr.ErrRedisURL) && cache >= 0 {
		err = fmt.Errorf("cache[%d].url: %w", cache, err)
	}
	return res, table, err
}

// decisionCache returns the cache: entry lcr.cache names, and its index;
// -1 when none.
func decisionCache(cfg *config.Config) (config.Cache, int) {
	for i, c := range cfg.Cache {
		if c.Name == cfg.LCR.Cache && c.Name != "" {
			return c, i
		}
	}
	return config.Cache{}, -1
}

// disableStore is where quality routing's disables persist: the decision
// cache's Redis, when lcr.cache names one; nil otherwise.
func disableStore(cfg *config.Config, log *slog.Logger) (*redisstore.Store, error) {
	c, i := decisionCache(cfg)
	if i < 0 {
		return nil, nil
	}
	s, err := redisstore.New(c.URL, log)
	if err != nil {
		return nil, fmt.Errorf("cache[%d].url: %w", i, err)
	}
	return s, nil
}

// qualityScores is what lcr.send_quality adds to an API request: the
// scores of the carriers under the number's quality prefix; nil when it
// has none. It runs on a lookup's goroutine.
func (s *Server) qualityScores(number string) *lcr.Quality {
	m := s.carriers.Quality()
	p := m.Prefix(number)
	if p == quality.NoPrefix {
		return nil
	}
	scores := m.Scores(nil, p)
	q := &lcr.Quality{Prefix: m.PrefixString(p), Carriers: make([]lcr.CarrierQuality, 0, len(scores))}
	for _, c := range scores {
		q.Carriers = append(q.Carriers, lcr.CarrierQuality{CarrierID: c.Carrier, Score: c.Score, Demoted: c.Demoted, Disabled: c.Disabled})
	}
	return q
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
