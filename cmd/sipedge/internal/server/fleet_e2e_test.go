package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// fleetNode starts a server of the fleet on redis under id, with the
// e2e rig's carrier and caller; more is more of the fleet section.
func fleetNode(t *testing.T, redis *redistest.Server, id, more string) *e2e {
	t.Helper()
	return newE2E(t, e2eOpts{fleet: fmt.Sprintf("redis: %q, node_id: %s%s", redis.URL(), id, more)})
}

// fleetNodes reads GET /v1/fleet.
func (e *e2e) fleetNodes() (int, fleetJSON) {
	e.t.Helper()
	code, body := e.httpGet("/v1/fleet")
	var fj fleetJSON
	if code == 200 {
		if err := json.Unmarshal([]byte(body), &fj); err != nil {
			e.t.Fatalf("GET /v1/fleet: %v\n%s", err, body)
		}
	}
	return code, fj
}

// Two nodes of one fleet see each other in GET /v1/fleet, each with its
// SIP address and calls; a third with a live node's id is refused at start
// with the field and the holder; with Redis gone the list is a 503.
func TestE2EFleetMembership(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	a := fleetNode(t, redis, "edge-a", "")
	b := fleetNode(t, redis, "edge-b", "")

	code, fj := a.fleetNodes()
	if code != 200 || fj.NodeID != "edge-a" || len(fj.Nodes) != 2 {
		t.Fatalf("GET /v1/fleet on edge-a: %d %+v", code, fj)
	}
	for i, want := range []*e2e{a, b} {
		n := fj.Nodes[i]
		if n.SIPAddr != want.sip.String() || n.Self != (i == 0) || n.LastHeartbeat.IsZero() {
			t.Errorf("node %d: %+v, want SIP %s", i, n, want.sip)
		}
	}
	c := a.answered()
	a.waitMetric(`sipedge_fleet_node_calls{node="edge-a"}`, 1)
	c.byeFromCaller(11)
	a.waitMetric(`sipedge_fleet_node_calls{node="edge-a"}`, 0)

	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: [\"udp://127.0.0.1:%d\"]\nadmin: { listen: \"\" }\ncdr: { file: %q }\nfleet: { redis: %q, node_id: edge-b }\n",
		e2eFreePort(t), t.TempDir()+"/cdr.jsonl", redis.URL())), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil ||
		!strings.Contains(err.Error(), "fleet.node_id:") || !strings.Contains(err.Error(), b.sip.String()) {
		t.Fatalf("a second edge-b: %v, want the field and the live holder's address", err)
	}

	redis.Stop()
	deadline := time.Now().Add(waitMsg)
	for {
		if code, _ := a.fleetNodes(); code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("GET /v1/fleet does not answer 503 with Redis stopped")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
