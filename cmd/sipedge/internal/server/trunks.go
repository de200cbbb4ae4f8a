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
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/ratelimit"
)

// Errors of trunk changes through the admin API.
var (
	errFixedTrunk   = errors.New("trunk is in the configuration file (fixed)")
	errUnknownTrunk = errors.New("unknown trunk")
)

// trunks are the node's customer trunks: the YAML's, fixed, then the
// runtime ones in the order added. The admin API writes runtime trunks
// into the fleet's shared state (kind "trunk", the trunk's JSON), which
// applies them on every node (apply), and a node that starts reads them;
// on a name the YAML has, the YAML's trunk wins on this node.
type trunks struct {
	cfg     *config.Config // its number policies
	log     *slog.Logger
	ingress *ratelimit.Local                    // where a trunk's limits.cps is registered
	stats   func(name string) *b2bua.TrunkStats // a trunk name's live calls and metrics, which every version of the trunk shares
	// channels, with fleet.redis, returns a trunk name's fleet Channel at
	// a limit (0: none): max_concurrent_calls held across the fleet,
	// shared by every version of the trunk. nil: each node counts its own.
	channels func(name string, limit int) *fleet.Channel
	fleet    *fleet.Fleet // the shared state the admin API writes to; set before the handler serves

	// set is what the engines match requests against: replaced whole, under
	// mu, on every change.
	set atomic.Pointer[b2bua.TrunkSet]

	mu   sync.Mutex
	list []trunkEntry // guarded by mu
}

// trunkEntry is one trunk as configured and as the engines see it.
type trunkEntry struct {
	cfg   config.Trunk
	fixed bool
	bt    b2bua.Trunk
}

// newTrunks builds the YAML's trunks (validated by config).
func newTrunks(cfg *config.Config, ingress *ratelimit.Local, stats func(string) *b2bua.TrunkStats,
	channels func(string, int) *fleet.Channel, log *slog.Logger) (*trunks, error) {
	t := &trunks{cfg: cfg, log: log, ingress: ingress, stats: stats, channels: channels}
	for _, ct := range cfg.Trunks {
		e, err := t.entry(ct, true)
		if err != nil {
			return nil, fmt.Errorf("trunks[%s].limits: %w", ct.Name, err)
		}
		t.list = append(t.list, e)
	}
	t.publish()
	return t, nil
}

// entry builds a trunk's engine form and registers its ingress CPS key. It
// is called under mu, or before sharing.
func (t *trunks) entry(ct config.Trunk, fixed bool) (trunkEntry, error) {
	bt := b2bua.Trunk{Name: ct.Name, Group: ct.TrunkGroup, Attributes: ct.Attributes, ForceRPort: ct.ForceRPort, NAT: ct.NAT,
		MaxCalls: ct.Limits.MaxConcurrentCalls, RingTimeout: ringBound(ct.RingTimeout)}
	if ct.Limits.CPS > 0 {
		// A trunk replaced draws from its key at the new limit.
		k, err := t.ingress.Register("trunk:"+ct.Name, ct.IngressLimit())
		if err != nil {
			return trunkEntry{}, err
		}
		bt.Ingress = &b2bua.TrunkIngress{Limiter: t.ingress, Key: k}
	}
	bt.Stats = t.stats(ct.Name) // once the trunk cannot be refused: its series are kept
	if t.channels != nil {
		bt.Channels = t.channels(ct.Name, ct.Limits.MaxConcurrentCalls) // the new limit, for every version
	}
	bt.Sources = slices.Clone(ct.Sources)
	if np := t.cfg.NumberPolicy(ct.NumberPolicy); np != nil {
		// Routing keys on E.164, whatever form the policy shapes into.
		bt.Normalize = &b2bua.NumberPolicy{CountryCode: np.CountryCode, NationalPrefix: np.NationalPrefix}
	}
	return trunkEntry{cfg: ct, fixed: fixed, bt: bt}, nil
}

// publish hands the engines a new set of the trunks in list.
func (t *trunks) publish() {
	bts := make([]b2bua.Trunk, len(t.list))
	for i := range t.list {
		bts[i] = t.list[i].bt
	}
	t.set.Store(b2bua.NewTrunkSet(bts))
}

// covers reports whether a is within some trunk's sources: the flood guard
// never bans a trunk.
func (t *trunks) covers(a netip.Addr) bool { return t.set.Load().Covers(a) }

// put adds a runtime trunk, or replaces the runtime trunk of its name in
// its place: its calls in progress keep the version they began with, and
// its live calls stay counted. ct must be valid (config.ValidateTrunk).
func (t *trunks) put(ct config.Trunk) (replaced bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.list, func(e trunkEntry) bool { return e.cfg.Name == ct.Name })
	if i >= 0 && t.list[i].fixed {
		return false, fmt.Errorf("cannot replace trunk %q: %w", ct.Name, errFixedTrunk)
	}
	if i >= 0 && reflect.DeepEqual(t.list[i].cfg, ct) {
		// The same again (a controller re-syncing): no new version, whose
		// per-trunk entry would be kept for the node's life.
		return true, nil
	}
	e, err := t.entry(ct, false)
	if err != nil {
		return false, fmt.Errorf("limits: %w", err)
	}
	if i >= 0 {
		t.list[i] = e
	} else {
		t.list = append(t.list, e)
	}
	t.publish()
	return i >= 0, nil
}

// remove removes a runtime trunk; its calls in progress go on.
func (t *trunks) remove(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.list, func(e trunkEntry) bool { return e.cfg.Name == name })
	switch {
	case i < 0:
		return fmt.Errorf("trunk %q: %w", name, errUnknownTrunk)
	case t.list[i].fixed:
		return fmt.Errorf("cannot remove trunk %q: %w", name, errFixedTrunk)
	}
	t.list = slices.Delete(t.list, i, i+1)
	t.publish()
	t.unlimit(name)
	return nil
}

// syncFixed makes cts, a reloaded file's trunks (checked by config.Load),
// the fixed trunks, as health.Registry.SyncFixed does the groups: a fixed
// trunk unchanged keeps its version (its index, and so the state its calls
// find); a changed one, and a runtime one of a name in cts, get a new
// version, fixed; fixed trunks not in cts are removed; runtime trunks of
// other names stay, after the fixed ones. Calls in progress keep the
// version they began with.
func (t *trunks) syncFixed(cts []config.Trunk) (health.FixedChanges, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := health.FixedChanges{Added: []string{}, Replaced: []string{}, Removed: []string{}}
	names := make(map[string]bool, len(cts))
	var list []trunkEntry
	for _, ct := range cts {
		names[ct.Name] = true
		i := slices.IndexFunc(t.list, func(e trunkEntry) bool { return e.cfg.Name == ct.Name })
		switch {
		case i >= 0 && t.list[i].fixed && reflect.DeepEqual(t.list[i].cfg, ct):
			list = append(list, t.list[i])
			continue
		case i >= 0:
			ch.Replaced = append(ch.Replaced, ct.Name)
		default:
			ch.Added = append(ch.Added, ct.Name)
		}
		e, err := t.entry(ct, true)
		if err != nil { // not expected: config.Load checks the limits
			return ch, fmt.Errorf("trunks[%s].limits: %w", ct.Name, err)
		}
		list = append(list, e)
	}
	for _, e := range t.list {
		switch {
		case names[e.cfg.Name]:
		case e.fixed:
			ch.Removed = append(ch.Removed, e.cfg.Name)
		default:
			list = append(list, e)
		}
	}
	t.list = list
	t.publish()
	for _, name := range ch.Removed {
		t.unlimit(name)
	}
	return ch, nil
}

// unlimit lifts a removed trunk's fleet-wide limit: its Channel gives its
// grant back, and its calls in progress their channels as they end.
func (t *trunks) unlimit(name string) {
	if t.channels != nil {
		t.channels(name, 0)
	}
}

// trunkJSON is a trunk as the admin API shows it.
type trunkJSON struct {
	config.Trunk
	RingTimeoutSecs int64 `json:"ring_timeout_secs"`
	Fixed           bool  `json:"fixed"`
}

func newTrunkJSON(ct config.Trunk, fixed bool) trunkJSON {
	return trunkJSON{Trunk: ct, RingTimeoutSecs: int64(ct.RingTimeout / time.Second), Fixed: fixed}
}

// lookup returns the trunk of that name as the engines see it, the first
// one when name is "".
func (t *trunks) lookup(name string) (b2bua.Trunk, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.list {
		if name == "" || e.cfg.Name == name {
			return e.bt, true
		}
	}
	return b2bua.Trunk{}, false
}

// get returns the trunk of that name.
func (t *trunks) get(name string) (trunkJSON, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.list {
		if e.cfg.Name == name {
			return newTrunkJSON(e.cfg, e.fixed), true
		}
	}
	return trunkJSON{}, false
}

// handler returns the admin API for trunks, JSON in the YAML's shape:
//
//	GET    /v1/trunks         every trunk: the YAML's ("fixed": true), then the runtime ones as added
//	POST   /v1/trunks         add or replace a runtime trunk: 201 added, 200 replaced,
//	                          400 bad input (the field and why), 409 a YAML trunk,
//	                          503 the fleet's Redis down
//	GET    /v1/trunks/{name}  the trunk; 404 unknown
//	DELETE /v1/trunks/{name}  204 removed, 404 unknown, 409 a YAML trunk, 503
//
// Errors are {"error": "..."}; unknown keys are errors. A POSTed trunk
// follows the YAML's rules (its number_policy must name a configured
// policy). Calls in progress keep the trunk they began with: replacing or
// removing it changes new calls only. Runtime trunks are the fleet's
// shared state: every node applies them, and a restart reads them back; a
// reload (POST /v1/reload) keeps them unless the file names them, which
// makes the file's trunk the fixed one on that node. Authentication and
// the listening socket are the caller's.
func (t *trunks) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/trunks", t.listTrunks)
	mux.HandleFunc("POST /v1/trunks", t.postTrunk)
	mux.HandleFunc("GET /v1/trunks/{name}", t.getTrunk)
	mux.HandleFunc("DELETE /v1/trunks/{name}", t.deleteTrunk)
	return mux
}

func (t *trunks) listTrunks(w http.ResponseWriter, _ *http.Request) {
	t.mu.Lock()
	out := make([]trunkJSON, len(t.list))
	for i, e := range t.list {
		out[i] = newTrunkJSON(e.cfg, e.fixed)
	}
	t.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// maxTrunkBody bounds a POSTed trunk.
const maxTrunkBody = 1 << 20

func (t *trunks) postTrunk(w http.ResponseWriter, req *http.Request) {
	var body struct {
		config.Trunk
		// Sources shadows the trunk's, parsed here so that an error names
		// the source (JSON's own errors of a text value name no field).
		Sources []string `json:"sources"`
		// Absent: b2bua.ring_timeout_secs.
		RingTimeoutSecs *int64 `json:"ring_timeout_secs"`
		// Fixed is what GET shows; a trunk posted back carries it.
		Fixed bool `json:"fixed"`
	}
	if err := decodeJSON(req.Body, maxTrunkBody, &body, "trunk"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ct := body.Trunk
	posted := trunkDoc{RingTimeoutSecs: body.RingTimeoutSecs}
	if err := posted.setRing(&ct); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ct.Sources = make([]b2bua.Source, len(body.Sources))
	for i, s := range body.Sources {
		if err := ct.Sources[i].UnmarshalText([]byte(s)); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("sources[%d]: %w", i, err))
			return
		}
	}
	if err := t.cfg.ValidateTrunk(&ct); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if tj, ok := t.get(ct.Name); ok && tj.Fixed {
		writeError(w, http.StatusConflict, fmt.Errorf("cannot replace trunk %q: %w", ct.Name, errFixedTrunk))
		return
	}
	posted.Trunk = ct
	doc, err := json.Marshal(posted)
	if err != nil { // not expected: it decoded
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), fleetDeadline)
	defer cancel()
	ch, err := t.fleet.Put(ctx, kindTrunk, ct.Name, doc)
	if err != nil {
		writeSharedError(w, err)
		return
	}
	code := http.StatusCreated
	if ch.Previous != 0 {
		code = http.StatusOK
	}
	writeJSON(w, code, newTrunkJSON(ct, false))
}

// kindTrunk is the shared documents' kind of a trunk.
const kindTrunk = "trunk"

// trunkDoc is a runtime trunk as the fleet's shared state keeps it: the
// trunk, and its ring bound as posted (absent: each node's
// b2bua.ring_timeout_secs, filled in as it applies the trunk).
type trunkDoc struct {
	config.Trunk
	RingTimeoutSecs *int64 `json:"ring_timeout_secs,omitempty"`
}

// setRing sets ct's ring bound from d's: config.InheritRing when absent.
func (d *trunkDoc) setRing(ct *config.Trunk) error {
	ct.RingTimeout = config.InheritRing
	if n := d.RingTimeoutSecs; n != nil {
		if *n < 0 || *n > maxTimeoutSecs {
			return fmt.Errorf("ring_timeout_secs: %d: want 0 (no ring bound) to %d", *n, maxTimeoutSecs)
		}
		ct.RingTimeout = time.Duration(*n) * time.Second
	}
	return nil
}

// apply applies a shared trunk's change on this node, as the admin API
// made it on one; a YAML trunk of its name shadows it (logged), and is
// never touched.
func (t *trunks) apply(name string, doc []byte) error {
	if doc == nil {
		err := t.remove(name)
		switch {
		case errors.Is(err, errFixedTrunk) || errors.Is(err, errUnknownTrunk):
			return nil // the file's trunk stays; or it was never applied here
		case err == nil:
			t.log.Info("trunk removed", "trunk", name)
		}
		return err
	}
	var td trunkDoc
	if err := decodeJSON(bytes.NewReader(doc), maxTrunkBody, &td, "trunk"); err != nil {
		return err
	}
	ct := td.Trunk
	if err := td.setRing(&ct); err != nil {
		return err
	}
	if ct.Name != name {
		return fmt.Errorf("the document of trunk %q names %q", name, ct.Name)
	}
	if err := t.cfg.ValidateTrunk(&ct); err != nil { // this node's number policies
		return err
	}
	replaced, err := t.put(ct)
	switch {
	case errors.Is(err, errFixedTrunk):
		t.log.Info("shared trunk shadowed by this node's configuration file", "trunk", name)
		return nil
	case err != nil:
		return err
	case replaced:
		t.log.Info("trunk replaced", "trunk", name)
	default:
		t.log.Info("trunk added", "trunk", name)
	}
	return nil
}

func (t *trunks) getTrunk(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	tj, ok := t.get(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("trunk %q: %w", name, errUnknownTrunk))
		return
	}
	writeJSON(w, http.StatusOK, tj)
}

func (t *trunks) deleteTrunk(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	tj, known := t.get(name)
	if known && tj.Fixed {
		writeError(w, http.StatusConflict, fmt.Errorf("cannot remove trunk %q: %w", name, errFixedTrunk))
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), fleetDeadline)
	defer cancel()
	_, existed, err := t.fleet.Delete(ctx, kindTrunk, name)
	switch {
	case err != nil:
		writeSharedError(w, err)
	case !existed && !known:
		writeError(w, http.StatusNotFound, fmt.Errorf("trunk %q: %w", name, errUnknownTrunk))
	default:
		if !existed {
			// A runtime trunk without its document (Redis lost it, and it
			// was not written back yet): this node's only.
			t.remove(name)
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// decodeJSON decodes a request body holding one JSON value into v, what
// it is for errors: unknown keys and trailing data are errors, and the body
// is read up to limit bytes.
func decodeJSON(body io.Reader, limit int64, v any, what string) error {
	d := json.NewDecoder(io.LimitReader(body, limit))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("cannot decode %s: %w", what, err)
	}
	if d.More() {
		return fmt.Errorf("cannot decode %s: trailing data after the JSON value", what)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// trunkStats returns name's counters, made on first use. The live calls
// counter is shared by every shard's engine, so that max_concurrent_calls
// holds for the node (a per-shard share refused calls early on one shard,
// and rounded up past the limit across them), and by every version of the
// trunk: its calls in progress still count against a replacement's limit.
func (s *Server) trunkStats(name string) *b2bua.TrunkStats {
	s.trunkMu.Lock()
	defer s.trunkMu.Unlock()
	if s.trunkStat == nil {
		s.trunkStat = make(map[string]*b2bua.TrunkStats)
	}
	st := s.trunkStat[name]
	if st == nil {
		st = b2bua.NewTrunkStats(s.engineSet, name)
		s.trunkStat[name] = st
	}
	return st
}
