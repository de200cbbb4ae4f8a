package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route/lcr"
)

// errNoConfigFile refuses a reload of a server started without -config.
var errNoConfigFile = errors.New("started on the embedded example: no file to reload")

// errNumberPolicies refuses a reload whose number_policies changed: the
// shards' engines took them at start, and the trunks and routes depend on
// them.
var errNumberPolicies = errors.New("number_policies changed: the shards hold them from start; restart sipedge to apply the file")

// SetConfigFile names the file the configuration was loaded from, which
// POST /v1/reload reads again; "" (the default) is the embedded example,
// which cannot be reloaded. Call it before Start.
func (s *Server) SetConfigFile(path string) { s.configFile = path }

// reloadResult is what POST /v1/reload answers: what changed, and the
// settings that changed in the file but need a restart.
type reloadResult struct {
	GatewayGroups   health.FixedChanges `json:"gateway_groups"`
	Trunks          health.FixedChanges `json:"trunks"`
	StaticRoutes    staticReload        `json:"static_routes"`
	RestartRequired []string            `json:"restart_required"`
}

// staticReload says whether a reload replaced the static table, and the
// prefixes of the table in force after it (0 in API mode).
type staticReload struct {
	Replaced bool `json:"replaced"`
	Prefixes int  `json:"prefixes"`
}

// postReload is POST /v1/reload: it reads the configuration file again and
// applies its gateway groups, trunks and (in static mode) static table.
//
//	200 {"gateway_groups": {"added": [...], "replaced": [...], "removed": [...]},
//	     "trunks": {...}, "static_routes": {"replaced": bool, "prefixes": N},
//	     "restart_required": ["log", "lcr.api_url", ...]}
//	400 the file does not load (the field and line, as at start); nothing changed
//	409 number_policies changed, the file removes the group the running
//	    lcr.fallback_gateway_group names, or started on the embedded
//	    example; nothing changed
//
// The file's groups and trunks become the fixed ones: new ones are added,
// changed ones replaced (a group's unchanged members keep their health),
// those no longer in the file removed, unchanged ones untouched; a runtime
// group or trunk the file now names is replaced by the file's; other
// runtime ones are kept. In static mode the file's table replaces the one
// in force, a PUT one too. Any other setting that differs is listed in
// restart_required and not applied. Calls in progress keep their trunk and
// routes. Reloads and the admin API's changes run one at a time.
func (s *Server) postReload(w http.ResponseWriter, _ *http.Request) {
	res, code, err := s.reload()
	if err != nil {
		s.reloadsRefused.Inc()
		s.log.Warn("configuration reload refused", "file", s.configFile, "err", err)
		writeError(w, code, err)
		return
	}
	s.reloadsOK.Inc()
	writeJSON(w, http.StatusOK, res)
}

// reload re-reads the configuration file and applies what it can; on an
// error it returns the HTTP status, and nothing changed unless the status
// is 500.
func (s *Server) reload() (reloadResult, int, error) {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if s.configFile == "" {
		return reloadResult{}, http.StatusConflict, errNoConfigFile
	}
	cfg, err := config.Load(s.configFile)
	if err != nil {
		return reloadResult{}, http.StatusBadRequest, err
	}
	if !slices.Equal(cfg.NumberPolicies, s.cfg.NumberPolicies) { // none and [] alike
		return reloadResult{}, http.StatusConflict, errNumberPolicies
	}

	// Check all that can be refused before changing anything.
	groups := cfg.Gateway.Groups
	for _, g := range groups {
		if err := s.carriers.CheckGroup(g); err != nil {
			return reloadResult{}, http.StatusBadRequest, fmt.Errorf("gateway.groups[%s].%w", g.Name, err)
		}
	}
	plan, err := s.carriers.PlanFixed(groups)
	if err != nil {
		return reloadResult{}, http.StatusBadRequest, fmt.Errorf("gateway.groups: %w", err)
	}
	// The running fallback group applies until a restart (config.Load
	// checked only the file's): removing it would leave the calls the API
	// cannot route with a group that is not there.
	if fb := s.cfg.LCR.FallbackGatewayGroup; fb != "" && s.cfg.LCR.APIURL != "" && slices.Contains(plan.Removed, fb) {
		return reloadResult{}, http.StatusConflict, fmt.Errorf("gateway.groups: %q is removed but is lcr.fallback_gateway_group until a restart; restart sipedge to apply the file", fb)
	}
	static := s.staticRoutes.table != nil // API mode: the table is not used
	var table *lcr.StaticTable
	if static {
		if table, err = staticTable(cfg.LCR.StaticRoutes); err != nil {
			return reloadResult{}, http.StatusBadRequest, fmt.Errorf("lcr.static_routes: %w", err)
		}
	}
	// A file whose table changed takes the shared table's place, for the
	// fleet (shared.go): deleted first, so that a Redis down refuses the
	// reload before anything changed.
	if static && s.staticRoutes.fileChanged(cfg.LCR.StaticRoutes) && s.hasSharedStatic() {
		ctx, cancel := context.WithTimeout(context.Background(), fleetDeadline)
		_, _, err := s.fleet.Delete(ctx, kindStatic, staticDoc)
		cancel()
		if err != nil {
			return reloadResult{}, http.StatusServiceUnavailable, fmt.Errorf("lcr.static_routes: the file changed the table, but the fleet's shared table cannot be deleted: %w", err)
		}
		s.log.Info("reload: the file changed the static table: the fleet's shared table is deleted")
	}

	// The file's layer changes under layerMu, with no shared change
	// applied meanwhile (shared.go).
	s.layerMu.Lock()
	defer s.layerMu.Unlock()
	// Groups first and the groups that left last, so that a new call never
	// finds a trunk or route naming a group not there yet.
	res := reloadResult{RestartRequired: restartRequired(s.cfg, cfg)}
	var trunkErr error
	res.GatewayGroups, err = s.carriers.SyncFixed(groups, func() {
		if res.Trunks, trunkErr = s.trunks.syncFixed(cfg.Trunks); trunkErr != nil {
			return
		}
		if static {
			res.StaticRoutes.Replaced = s.staticRoutes.reload(cfg.LCR.StaticRoutes, table)
			res.StaticRoutes.Prefixes = s.static.Load().Len()
		}
	})
	if err := errors.Join(err, trunkErr); err != nil { // not expected: checked above
		return reloadResult{}, http.StatusInternalServerError, fmt.Errorf("reload stopped part way: %w", err)
	}
	s.unshadow(res.GatewayGroups.Removed, res.Trunks.Removed)

	// The registry logs the groups' changes.
	for _, name := range res.Trunks.Added {
		s.log.Info("trunk added", "trunk", name, "by", "reload")
	}
	for _, name := range res.Trunks.Replaced {
		s.log.Info("trunk replaced", "trunk", name, "by", "reload")
	}
	for _, name := range res.Trunks.Removed {
		s.log.Info("trunk removed", "trunk", name, "by", "reload")
	}
	if res.StaticRoutes.Replaced {
		s.log.Info("static routes replaced", "prefixes", res.StaticRoutes.Prefixes, "by", "reload")
	}
	if len(res.RestartRequired) > 0 {
		s.log.Warn("configuration reload: these settings changed in the file but apply only at start; restart sipedge to apply them",
			"settings", strings.Join(res.RestartRequired, ","))
	}
	g, t := res.GatewayGroups, res.Trunks
	s.log.Info("configuration reloaded", "file", s.configFile,
		"groups_added", len(g.Added), "groups_replaced", len(g.Replaced), "groups_removed", len(g.Removed),
		"trunks_added", len(t.Added), "trunks_replaced", len(t.Replaced), "trunks_removed", len(t.Removed),
		"static_routes_replaced", res.StaticRoutes.Replaced, "restart_required", len(res.RestartRequired))
	return res, http.StatusOK, nil
}

// restartRequired lists the settings that differ between the running
// configuration and the file and apply only at start: each top-level key
// but those a reload applies (trunks, gateway.groups, lcr.static_routes,
// b2bua.ring_timeout_secs) and number_policies (a reload that changes them
// is refused), and each other key of b2bua, gateway and lcr by its own
// path. Never nil.
func restartRequired(running, file *config.Config) []string {
	out := []string{}
	diff := func(prefix string, a, b any, reloadable ...string) {
		va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
		for i := range va.NumField() {
			key, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("yaml"), ",")
			if !slices.Contains(reloadable, key) && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
				out = append(out, prefix+key)
			}
		}
	}
	diff("", *running, *file, "number_policies", "trunks", "gateway", "lcr", "b2bua")
	// b2bua.ring_timeout_secs is the trunks' that set none: each carries
	// it (config fills it in), and a reload applies it with them.
	diff("b2bua.", running.B2BUA, file.B2BUA, "ring_timeout_secs")
	diff("gateway.", running.Gateway, file.Gateway, "groups")
	diff("lcr.", running.LCR, file.LCR, "static_routes")
	return out
}

// serialized runs next's changes (every method but GET and HEAD) one at a
// time under mu, which a reload holds throughout: a reload and an admin
// API change never interleave.
func serialized(mu *sync.Mutex, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			mu.Lock()
			defer mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}
