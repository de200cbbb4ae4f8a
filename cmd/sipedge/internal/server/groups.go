package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
)

// groups are the gateway groups the admin API adds, replaces and removes:
// documents of the fleet's shared state (kind "group", the group's JSON
// as POSTed, its auth password included), applied on every node by
// apply, the writer's included. The YAML's groups are the carrier plane's
// fixed ones (a reload changes them), and win on this node over a shared
// group of their name.
type groups struct {
	carriers *carrier.Plane
	fleet    *fleet.Fleet
	log      *slog.Logger
}

// kindGroup is the shared documents' kind of a gateway group.
const kindGroup = "group"

// handler is /v1/gateway/...: the health registry's (health.Registry.Handler)
// for reads; its changes go through the shared state, by the same rules:
//
//	POST   /v1/gateway/groups         201 added, 200 replaced, 400 bad input,
//	                                  409 a YAML group of this node, 503 the fleet's Redis down
//	DELETE /v1/gateway/groups/{name}  204 removed, 404 unknown, 409 a YAML group, 503
func (g *groups) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/gateway/", g.carriers.Handler())
	mux.HandleFunc("POST /v1/gateway/groups", g.post)
	mux.HandleFunc("DELETE /v1/gateway/groups/{name}", g.delete)
	return mux
}

func (g *groups) post(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxAdminBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("cannot read group: %w", err))
		return
	}
	gc, err := health.DecodeGroup(bytes.NewReader(body))
	if err == nil {
		err = gc.Check()
	}
	if err == nil {
		err = g.carriers.CheckGroup(gc) // its CPS limit, as the plane would refuse it
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if gs, ok := g.carriers.Group(gc.Name); ok && gs.Fixed {
		writeError(w, http.StatusConflict, fmt.Errorf("cannot replace group %q: %w", gc.Name, health.ErrFixedGroup))
		return
	}
	var doc bytes.Buffer
	if err := json.Compact(&doc, body); err != nil { // not expected: it decoded
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), fleetDeadline)
	defer cancel()
	ch, err := g.fleet.Put(ctx, kindGroup, gc.Name, doc.Bytes())
	if err != nil {
		writeSharedError(w, err)
		return
	}
	gs, ok := g.carriers.Group(gc.Name)
	if !ok { // removed meanwhile, by another node
		writeError(w, http.StatusConflict, fmt.Errorf("group %q: %w (removed concurrently)", gc.Name, health.ErrUnknownGroup))
		return
	}
	code := http.StatusCreated
	if ch.Previous != 0 {
		code = http.StatusOK
	}
	writeJSON(w, code, gs)
}

func (g *groups) delete(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	gs, known := g.carriers.Group(name)
	if known && gs.Fixed {
		writeError(w, http.StatusConflict, fmt.Errorf("cannot remove group %q: %w", name, health.ErrFixedGroup))
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), fleetDeadline)
	defer cancel()
	_, existed, err := g.fleet.Delete(ctx, kindGroup, name)
	switch {
	case err != nil:
		writeSharedError(w, err)
	case !existed && !known:
		writeError(w, http.StatusNotFound, fmt.Errorf("group %q: %w", name, health.ErrUnknownGroup))
	default:
		if !existed {
			// A runtime group without its document (Redis lost it, and it
			// was not written back yet): this node's only.
			g.carriers.RemoveGroup(name)
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// apply applies a shared group's change on this node; a YAML group of
// its name shadows it (logged), and is never touched.
func (g *groups) apply(name string, doc []byte) error {
	if doc == nil {
		err := g.carriers.RemoveGroup(name)
		if errors.Is(err, health.ErrFixedGroup) || errors.Is(err, health.ErrUnknownGroup) {
			return nil // the file's group stays; or it was never applied here
		}
		return err
	}
	gc, err := health.DecodeGroup(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	if gc.Name != name {
		return fmt.Errorf("the document of group %q names %q", name, gc.Name)
	}
	if err := g.carriers.AddGroup(gc); errors.Is(err, health.ErrFixedGroup) {
		g.log.Info("shared gateway group shadowed by this node's configuration file", "group", name)
		return nil
	} else if err != nil {
		return err
	}
	return nil
}

// writeSharedError answers a failed write to the shared state: 503 when
// the fleet's Redis did not take it (nothing changed anywhere), 400 for
// a name it cannot store, 500 when this node could not apply what was
// stored.
func writeSharedError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fleet.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, err)
	case errors.Is(err, fleet.ErrInvalid):
		writeError(w, http.StatusBadRequest, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}
