package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/route/lcr"
)

// errAPIMode refuses a static table where routing asks the LCR API.
var errAPIMode = errors.New("lcr.api_url is set: calls are routed by the LCR API, not the static table")

// staticRoutes is the static rate table in two layers: the file's (the
// YAML's, then a reload's) and the fleet's shared one (kind
// "static_routes", name "table": a PUT table, on every node), which, when
// there is one, is the table in force. Each change publishes a new
// lcr.StaticTable to table, which the shards read once per new call; a
// published table is never modified, so calls in progress keep the
// routes they were decided with.
type staticRoutes struct {
	cfg   *config.Config // its number policies
	log   *slog.Logger
	known func(group string) bool // whether a gateway group exists now
	// table is what the shards route by; nil in API mode.
	table *atomic.Pointer[lcr.StaticTable]
	fleet *fleet.Fleet // the shared state a PUT writes to; set before the handler serves

	mu          sync.Mutex // guards the layers
	file        []config.StaticRoute
	fileTable   *lcr.StaticTable
	shared      []config.StaticRoute // nil: no shared table (a shared empty table is [])
	sharedTable *lcr.StaticTable
}

// Names of the shared static table's document.
const (
	kindStatic = "static_routes"
	staticDoc  = "table"
)

// inForce returns the table in force as configured: the shared one, else
// the file's (always the file's in API mode, where none is used). Call
// with mu held.
func (st *staticRoutes) inForce() []config.StaticRoute {
	if st.shared != nil && st.table != nil {
		return st.shared
	}
	return st.file
}

// publish hands the shards the table in force. Call with mu held.
func (st *staticRoutes) publish() {
	if st.table == nil {
		return // API mode: the table is not used
	}
	if st.shared != nil {
		st.table.Store(st.sharedTable)
	} else {
		st.table.Store(st.fileTable)
	}
}

// fileChanged reports whether routes, a reloaded file's table, differs
// from the file's layer.
func (st *staticRoutes) fileChanged(routes []config.StaticRoute) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !reflect.DeepEqual(st.file, routes)
}

// reload makes routes, a reloaded file's table, and table, built from it,
// the file's layer, and reports whether the table in force changed (not
// while a shared table is in force: a reload whose file changed the table
// deleted the shared one first). routes were checked by config.Load
// against the file's groups, which the reload adds before it gets here.
func (st *staticRoutes) reload(routes []config.StaticRoute, table *lcr.StaticTable) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if reflect.DeepEqual(st.file, routes) {
		return false
	}
	st.file, st.fileTable = routes, table
	if st.shared != nil {
		return false
	}
	st.publish()
	return true
}

// apply applies a change of the shared table on this node: a table PUT
// on some node (checked again here, against this node's groups and number
// policies), or its removal, which puts the file's table back in force.
func (st *staticRoutes) apply(doc []byte) error {
	if doc == nil {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.shared != nil {
			st.shared, st.sharedTable = nil, nil
			st.publish()
			st.log.Info("static routes: the shared table removed, the file's in force", "prefixes", len(st.file))
		}
		return nil
	}
	var body []staticRouteJSON
	if err := decodeJSON(bytes.NewReader(doc), maxStaticBody, &body, "static routes"); err != nil {
		return err
	}
	routes, table, err := st.check(body)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.shared, st.sharedTable = routes, table
	st.publish()
	st.log.Info("static routes replaced", "prefixes", table.Len())
	return nil
}

// check reads a table as the admin API takes it, by the YAML's rules, and
// builds it. A null table is refused: most likely a controller's bug, for
// which every call would get 404 ([] says none on purpose).
func (st *staticRoutes) check(body []staticRouteJSON) ([]config.StaticRoute, *lcr.StaticTable, error) {
	if body == nil {
		return nil, nil, errors.New("static routes: null: want a list ([] for none)")
	}
	routes, err := staticConfig(body)
	if err == nil {
		err = st.cfg.ValidateStaticRoutes(routes, st.known)
	}
	if err != nil {
		return nil, nil, err
	}
	table, err := staticTable(routes)
	if err != nil { // not expected: the configuration's rules cover the table's
		return nil, nil, fmt.Errorf("static_routes: %w", err)
	}
	return routes, table, nil
}

// staticRouteJSON is a prefix of the table as the admin API shows it: the
// YAML's keys; the optional ones are left out when empty.
type staticRouteJSON struct {
	Prefix string      `json:"prefix"`
	Routes []routeJSON `json:"routes"`
}

type routeJSON struct {
	CarrierID            string            `json:"carrier_id"`
	GatewayGroup         string            `json:"gateway_group,omitempty"`
	Rate                 float64           `json:"rate"`
	Currency             string            `json:"currency,omitempty"`
	TimeoutSecs          int64             `json:"timeout_secs,omitempty"`
	RerouteAfterProgress bool              `json:"reroute_after_progress,omitempty"`
	TechPrefix           string            `json:"tech_prefix,omitempty"`
	NumberPolicy         string            `json:"number_policy,omitempty"`
	CallerID             string            `json:"caller_id,omitempty"`
	CallerIDPresentation string            `json:"caller_id_presentation,omitempty"`
	NextHop              string            `json:"next_hop,omitempty"`
	RURI                 string            `json:"ruri,omitempty"`
	Headers              map[string]string `json:"headers,omitempty"`
	CDRFields            map[string]string `json:"cdr_fields,omitempty"`
	RerouteCauses        []int             `json:"reroute_causes,omitempty"`
}

// maxTimeoutSecs bounds timeout_secs as the YAML's decoder does: 100 years.
const maxTimeoutSecs = 100 * 365 * 24 * 3600

func staticJSON(table []config.StaticRoute) []staticRouteJSON {
	out := make([]staticRouteJSON, len(table))
	for i, sr := range table {
		out[i] = staticRouteJSON{Prefix: sr.Prefix, Routes: make([]routeJSON, len(sr.Routes))}
		for j, r := range sr.Routes {
			out[i].Routes[j] = routeJSON{CarrierID: r.CarrierID, GatewayGroup: r.GatewayGroup, Rate: r.Rate,
				Currency: r.Currency, TimeoutSecs: int64(r.Timeout / time.Second),
				RerouteAfterProgress: r.RerouteAfterProgress, TechPrefix: r.TechPrefix, NumberPolicy: r.NumberPolicy,
				CallerID: r.CallerID, CallerIDPresentation: r.CallerIDPresentation, NextHop: r.NextHop, RURI: r.RURI,
				Headers: r.Headers, CDRFields: r.CDRFields, RerouteCauses: r.RerouteCauses}
		}
	}
	return out
}

// staticConfig maps a PUT table onto the configuration's shape, refusing
// the values the YAML's decoder refuses (a negative rate or timeout).
func staticConfig(in []staticRouteJSON) ([]config.StaticRoute, error) {
	out := make([]config.StaticRoute, len(in))
	for i, sr := range in {
		out[i] = config.StaticRoute{Prefix: sr.Prefix, Routes: make([]config.Route, len(sr.Routes))}
		for j, r := range sr.Routes {
			p := fmt.Sprintf("static_routes[%d].routes[%d]", i, j)
			if r.Rate < 0 {
				return nil, fmt.Errorf("%s.rate: %v: must not be negative", p, r.Rate)
			}
			if r.TimeoutSecs < 0 || r.TimeoutSecs > maxTimeoutSecs {
				return nil, fmt.Errorf("%s.timeout_secs: %d: want 0 to %d", p, r.TimeoutSecs, maxTimeoutSecs)
			}
			out[i].Routes[j] = config.Route{CarrierID: r.CarrierID, GatewayGroup: r.GatewayGroup, Rate: r.Rate,
				Currency: r.Currency, Timeout: time.Duration(r.TimeoutSecs) * time.Second,
				RerouteAfterProgress: r.RerouteAfterProgress, TechPrefix: r.TechPrefix, NumberPolicy: r.NumberPolicy,
				CallerID: r.CallerID, CallerIDPresentation: r.CallerIDPresentation, NextHop: r.NextHop, RURI: r.RURI,
				Headers: r.Headers, CDRFields: r.CDRFields, RerouteCauses: r.RerouteCauses}
		}
	}
	return out, nil
}

// handler returns the admin API for the static rate table, JSON in the
// YAML's shape (lcr.static_routes):
//
//	GET /v1/lcr/static_routes  the table in force
//	PUT /v1/lcr/static_routes  replace the whole table: 200 with the new table,
//	                           400 bad input (the field and why), 409 in API mode
//
// Errors are {"error": "..."}; unknown keys are errors. A PUT table follows
// the YAML's rules: a route's gateway_group must name a group known now
// (the YAML's or one added at run time), its number_policy a configured
// policy. In API mode (lcr.api_url set) the table is not used: GET shows
// the YAML's, PUT is refused. A PUT table is the fleet's shared table
// (503 while the fleet's Redis is down): every node routes by it, a
// restarted one too, until another PUT, or a reload (POST /v1/reload) whose
// file changed the table, which deletes it for the fleet. The replacement
// is atomic and changes new calls only: calls in progress keep their
// routes. Authentication and the listening socket are the caller's.
func (st *staticRoutes) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lcr/static_routes", st.getRoutes)
	mux.HandleFunc("PUT /v1/lcr/static_routes", st.putRoutes)
	return mux
}

func (st *staticRoutes) getRoutes(w http.ResponseWriter, _ *http.Request) {
	st.mu.Lock()
	routes := st.inForce()
	st.mu.Unlock()
	writeJSON(w, http.StatusOK, staticJSON(routes)) // a table is never modified: no need to hold mu
}

// maxStaticBody bounds a PUT table: a carrier's full rate deck.
const maxStaticBody = 64 << 20

func (st *staticRoutes) putRoutes(w http.ResponseWriter, req *http.Request) {
	if st.table == nil {
		writeError(w, http.StatusConflict, errAPIMode)
		return
	}
	var body []staticRouteJSON
	if err := decodeJSON(req.Body, maxStaticBody, &body, "static routes"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	routes, _, err := st.check(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	out := staticJSON(routes)
	doc, err := json.Marshal(out)
	if err != nil { // not expected: it decoded
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), fleetDeadline)
	defer cancel()
	if _, err := st.fleet.Put(ctx, kindStatic, staticDoc, doc); err != nil {
		writeSharedError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
