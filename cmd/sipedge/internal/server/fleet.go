package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sipedge/sipedge/dialog/journal"
	"github.com/sipedge/sipedge/fleet"
)

// newFleet makes this node's membership of the fleet (fleet:), or the node
// alone, in process, without fleet.redis. A live node holding this node's
// id refuses the start. Redis down is not an error: the node starts in
// the failure mode (fleet/doc.go) and joins once Redis answers.
func (s *Server) newFleet() (*fleet.Fleet, error) {
	cfg := s.cfg
	var f *fleet.Fleet
	var err error
	o := fleet.Options{Config: cfg.Fleet,
		SIPAddr:         advertised(cfg, cfg.Listen[0]).String(),
		Calls:           func() int64 { return int64(s.LiveCalls()) },
		Nodes:           cfg.RateLimit.Nodes,
		OnDropDecisions: s.lcr.DropLocal,
		Metrics:         s.fleetSet, Logger: s.log}
	if cfg.Fleet.CallJournal {
		o.OnLost = journal.Lost(s.cdr, s.log) // dead nodes' calls, into this node's CDR file
	}
	if o.Redis == "" && o.NodeID == "" {
		// Alone, a host name that is no node id does not stop the start.
		if o.NodeID, err = fleet.HostNodeID(); err != nil {
			o.NodeID = "local"
		}
	}
	f, err = fleet.New(o)
	switch {
	case errors.Is(err, fleet.ErrNodeIDTaken):
		return nil, fmt.Errorf("fleet.node_id: %w", err)
	case errors.Is(err, fleet.ErrRedisURL):
		return nil, fmt.Errorf("fleet.redis: %w", err)
	case err != nil:
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if cfg.Fleet.CallJournal {
		s.journal = journal.New(journal.Options{Fleet: f.Journal(), Metrics: s.fleetSet, Log: s.log})
	}
	if cfg.Fleet.Redis != "" {
		s.log.Info("fleet joined", "node_id", f.NodeID(), "redis_up", f.Up(), "lease_secs", cfg.Fleet.LeaseSecs,
			"call_journal", cfg.Fleet.CallJournal)
	}
	return f, nil
}

// fleetDeadline bounds an admin request's wait on the fleet's Redis.
const fleetDeadline = 2 * time.Second

// fleetJSON is what GET /v1/fleet answers.
type fleetJSON struct {
	NodeID string       `json:"node_id"` // this node's
	Nodes  []fleet.Node `json:"nodes"`
}

// getFleet is GET /v1/fleet: the live nodes, by id, with their SIP
// address, start, last heartbeat and the calls each holds; 503 when the
// fleet's Redis does not answer. Without fleet.redis, this node alone.
func (s *Server) getFleet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), fleetDeadline)
	defer cancel()
	nodes, err := s.fleet.Nodes(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, fleetJSON{NodeID: s.fleet.NodeID(), Nodes: nodes})
}
