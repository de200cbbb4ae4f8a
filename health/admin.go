package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxBody bounds a POSTed group.
const maxBody = 1 << 20

// Handler returns the admin API for gateway groups, JSON in the YAML's
// shape:
//
//	GET    /v1/gateway/groups         every group: its configuration and "fixed"
//	POST   /v1/gateway/groups         add or replace a runtime group: 201 added, 200 replaced,
//	                                  400 bad input, 409 a YAML group
//	GET    /v1/gateway/groups/{name}  configuration and live member state; 404 unknown
//	DELETE /v1/gateway/groups/{name}  204 removed, 404 unknown, 409 a YAML group
//
// Errors are {"error": "..."}. A group's auth password is write-only: never
// returned. A POSTed group's absent probe.jitter_ms is
// 500 ms, as in the YAML; unknown keys are errors. Its cps, cps_reject and
// max_concurrent_calls are stored for Options.OnAdd, which applies them (the server paces the
// group's dials as a YAML group's) or refuses the group (400). The YAML's groups
// change with SyncFixed (a reload), which keeps the runtime groups it does not name.
// Authentication and the listening socket are the caller's.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/gateway/groups", r.listGroups)
	mux.HandleFunc("POST /v1/gateway/groups", r.postGroup)
	mux.HandleFunc("GET /v1/gateway/groups/{name}", r.getGroup)
	mux.HandleFunc("DELETE /v1/gateway/groups/{name}", r.deleteGroup)
	return mux
}

type groupListEntry struct {
	GroupConfig
	Fixed bool `json:"fixed"`
}

func (r *Registry) listGroups(w http.ResponseWriter, _ *http.Request) {
	s := r.snap.Load()
	out := make([]groupListEntry, len(s.order))
	for i, g := range s.order {
		out[i] = groupListEntry{GroupConfig: g.cfg, Fixed: g.fixed}
	}
	writeJSON(w, http.StatusOK, out)
}

// DecodeGroup reads a group as the admin API takes it: one JSON object in
// the YAML's shape, unknown keys refused, an absent probe.jitter_ms
// DefaultProbeJitter (as in the YAML). It does not check the group
// (GroupConfig.Check, AddGroup).
func DecodeGroup(r io.Reader) (GroupConfig, error) {
	var cfg GroupConfig
	cfg.Preset()
	d := json.NewDecoder(io.LimitReader(r, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		return GroupConfig{}, fmt.Errorf("cannot decode group: %w", err)
	}
	if d.More() {
		return GroupConfig{}, errors.New("cannot decode group: trailing data after the JSON object")
	}
	return cfg, nil
}

func (r *Registry) postGroup(w http.ResponseWriter, req *http.Request) {
	cfg, err := DecodeGroup(req.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	replaced, err := r.addGroup(cfg, addRuntime)
	switch {
	case errors.Is(err, ErrFixedGroup):
		writeError(w, http.StatusConflict, err)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
		return
	}
	gs, ok := r.Group(cfg.Name)
	if !ok { // removed concurrently
		writeError(w, http.StatusConflict, fmt.Errorf("group %q: %w (removed concurrently)", cfg.Name, ErrUnknownGroup))
		return
	}
	code := http.StatusCreated
	if replaced {
		code = http.StatusOK
	}
	writeJSON(w, code, gs)
}

func (r *Registry) getGroup(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	gs, ok := r.Group(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("group %q: %w", name, ErrUnknownGroup))
		return
	}
	writeJSON(w, http.StatusOK, gs)
}

func (r *Registry) deleteGroup(w http.ResponseWriter, req *http.Request) {
	err := r.RemoveGroup(req.PathValue("name"))
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrUnknownGroup):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrFixedGroup):
		writeError(w, http.StatusConflict, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
