package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/quality"
)

// kindQualityDisable is the shared documents' kind of a quality disable.
const kindQualityDisable = "quality_disable"

// fleetDisables keeps quality routing's disables in the fleet's shared
// state (with fleet.redis): each disable one document, named by
// quality.Target.Name, the quality.Disable as JSON. A disable or enable
// made on any node, by the admin API or by auto_disable, is in force on
// every node within a second (applyShared hands it to the quality
// Monitor's Stored), and a node that starts reads them with the rest of
// the shared state. Redis down: the change is in force on its node,
// retried by the Monitor until Redis answers (quality/persist.go).
type fleetDisables struct{ f *fleet.Fleet }

// Load implements quality.Store: the disables this node has applied.
func (s fleetDisables) Load(context.Context) ([]quality.Disable, error) {
	var out []quality.Disable
	for _, ch := range s.f.List(kindQualityDisable) {
		if d, err := decodeDisable(ch); err == nil {
			out = append(out, *d)
		}
	}
	return out, nil
}

// Put implements quality.Store.
func (s fleetDisables) Put(ctx context.Context, d quality.Disable) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.f.Put(ctx, kindQualityDisable, quality.Target{Carrier: d.Carrier, Prefix: d.Prefix}.Name(), doc)
	if errors.Is(err, fleet.ErrApply) {
		return nil // stored; the apply's error is logged and counted by the fleet
	}
	return err
}

// Delete implements quality.Store.
func (s fleetDisables) Delete(ctx context.Context, t quality.Target) error {
	_, _, err := s.f.Delete(ctx, kindQualityDisable, t.Name())
	if errors.Is(err, fleet.ErrApply) {
		return nil
	}
	return err
}

// applyQualityDisable applies a shared disable's change to this node's
// quality Monitor. A prefix this node does not configure is an error
// (logged and counted by the fleet), the disable left stored for the
// nodes that do.
func (s *Server) applyQualityDisable(ch fleet.Change) error {
	t, ok := quality.ParseTarget(ch.Name)
	if !ok {
		return fmt.Errorf("quality disable %q: not a disable's name", ch.Name)
	}
	var d *quality.Disable
	if ch.Doc != nil {
		var err error
		if d, err = decodeDisable(ch); err != nil {
			return err
		}
	}
	return s.carriers.Quality().Stored(t, d)
}

func decodeDisable(ch fleet.Change) (*quality.Disable, error) {
	var d quality.Disable
	if err := json.Unmarshal(ch.Doc, &d); err != nil {
		return nil, fmt.Errorf("quality disable %q: %w", ch.Name, err)
	}
	if (quality.Target{Carrier: d.Carrier, Prefix: d.Prefix}).Name() != ch.Name {
		return nil, fmt.Errorf("quality disable %q: the document is %q's", ch.Name, d.Carrier)
	}
	return &d, nil
}
