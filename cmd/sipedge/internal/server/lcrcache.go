package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// The routing decision cache's admin API, for a rate change that cannot
// wait for the TTL:
//
//	DELETE /v1/lcr/cache[?key=K]  drop the decision cached under K, or all:
//	                              from Redis (route/lcr Drop), then from every
//	                              node's in-process tier (fleet.DropDecisions);
//	                              200 {"key": K, "redis_deleted": N}, 503 when
//	                              either Redis failed (what could be dropped was)
//	GET    /v1/lcr/cache?key=K    what each tier holds under K; 503 when Redis
//	                              does not answer
//
// K is the cache key, "trunk_group:dialed_number" and, with lcr.attributes,
// ":name=value,..." in the names' sorted order (lcr.Resolver.AppendKey).

// lcrDropDeadline bounds a DELETE: dropping all decisions SCANs every
// master.
const lcrDropDeadline = 30 * time.Second

// cacheKey reads ?key=: present reports whether the request names one.
func cacheKey(r *http.Request) (key string, present bool, err error) {
	q := r.URL.Query()
	if !q.Has("key") {
		return "", false, nil
	}
	if key = q.Get("key"); key == "" {
		return "", true, errors.New("key: empty (leave it out to drop every decision)")
	}
	return key, true, nil
}

func (s *Server) deleteLCRCache(w http.ResponseWriter, r *http.Request) {
	key, _, err := cacheKey(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), lcrDropDeadline)
	defer cancel()
	n, dropErr := s.lcr.Drop(ctx, key)
	if errors.Is(dropErr, lcr.ErrNoRedis) && s.cfg.LCR.Cache == "" {
		dropErr = nil // no Redis tier: nothing there to drop
	}
	// Every node's in-process tier, this one's again: its Redis tier may
	// have refilled it meanwhile.
	fctx, fcancel := context.WithTimeout(r.Context(), fleetDeadline)
	defer fcancel()
	tellErr := s.fleet.DropDecisions(fctx, key)
	if err := errors.Join(dropErr, tellErr); err != nil {
		s.log.Warn("decision cache drop incomplete", "key", key, "redis_deleted", n, "error", err)
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("decisions dropped in part (%d from Redis): %w", n, err))
		return
	}
	s.log.Info("decision cache dropped", "key", key, "redis_deleted", n)
	writeJSON(w, http.StatusOK, struct {
		Key          string `json:"key"`
		RedisDeleted int    `json:"redis_deleted"`
	}{key, n})
}

// cachedDecisionJSON is an in-process tier's decision as GET shows it.
type cachedDecisionJSON struct {
	Routes []route.Route `json:"routes"`
	Reject *lcr.Reject   `json:"reject,omitempty"`
	Source string        `json:"source"`
	TTLMs  int64         `json:"ttl_ms"`
}

func (s *Server) getLCRCache(w http.ResponseWriter, r *http.Request) {
	key, present, err := cacheKey(r)
	if err == nil && !present {
		err = errors.New("key: required")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fleetDeadline)
	defer cancel()
	c, err := s.lcr.Cached(ctx, key)
	if err != nil && (s.cfg.LCR.Cache != "" || !errors.Is(err, lcr.ErrNoRedis)) {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	out := struct {
		Key        string              `json:"key"`
		Local      *cachedDecisionJSON `json:"local"`
		Redis      json.RawMessage     `json:"redis"`
		RedisTTLMs int64               `json:"redis_ttl_ms"`
	}{Key: key, Redis: json.RawMessage("null")}
	if d := c.Local; d != nil {
		out.Local = &cachedDecisionJSON{Routes: d.Routes, Reject: d.Reject, Source: d.Source.String(), TTLMs: d.TTL.Milliseconds()}
	}
	if c.Redis != nil && json.Valid(c.Redis) {
		out.Redis, out.RedisTTLMs = c.Redis, c.RedisTTL.Milliseconds()
	}
	writeJSON(w, http.StatusOK, out)
}
