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
	return fleetNodeWith(t, redis, id, more, e2eOpts{})
}

// fleetNodeWith is fleetNode with more of the rig's options.
func fleetNodeWith(t *testing.T, redis *redistest.Server, id, more string, o e2eOpts) *e2e {
	t.Helper()
	o.fleet = fmt.Sprintf("redis: %q, node_id: %s%s", redis.URL(), id, more)
	return newE2E(t, o)
}

// tryCall places a call through e: the call, answered and up, when the
// carrier was dialled; nil when sipedge refused it 503 (acknowledged).
func (e *e2e) tryCall() *call {
	e.t.Helper()
	c := &call{e: e, u: newUAC(e.caller, dialed)}
	e.caller.send(c.u.invite())
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	select {
	case s := <-e.carrier.in:
		if !strings.HasPrefix(s, "INVITE ") {
			e.t.Fatalf("carrier: got %q, want the INVITE", firstLine(s))
		}
		c.binv = e.carrier.check(s)
		c.answer()
		return c
	case s := <-e.caller.in:
		if !strings.HasPrefix(s, "SIP/2.0 503 ") {
			e.t.Fatalf("caller: got %q, want a 503", firstLine(s))
		}
		e.caller.send(c.u.ackFailure(e.caller.check(s)))
		return nil
	case <-time.After(waitMsg):
		e.t.Fatal("neither the carrier dialled nor the caller refused")
	}
	return nil
}

// callUntilUp places calls through e until one is answered, within
// waitMsg: a node's first call at a scarce limit may wait for a grant.
func (e *e2e) callUntilUp() *call {
	e.t.Helper()
	deadline := time.Now().Add(waitMsg)
	for {
		if c := e.tryCall(); c != nil {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatal("no call answered: the channel never came")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refusedFor places a call through e every 100 ms for d: each must be
// refused.
func (e *e2e) refusedFor(d time.Duration) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if c := e.tryCall(); c != nil {
			e.t.Fatal("a call got a channel another node holds")
		}
	}
}

// A carrier's max_concurrent_calls holds across the fleet, and a node
// takes the channel another left idle: with one channel, the call up on
// edge-a keeps edge-b's calls off the carrier (skipped, calls_limited),
// for as many grant rounds as it lasts; once it ends, edge-b's call gets
// the channel, and edge-a's are refused in turn.
func TestE2EFleetCarrierChannels(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	o := e2eOpts{group: "max_concurrent_calls: 1"}
	a := fleetNodeWith(t, redis, "edge-a", "", o)
	b := fleetNodeWith(t, redis, "edge-b", "", o)
	up := a.callUntilUp()
	b.refusedFor(time.Second)
	up.byeFromCaller(11)
	up = b.callUntilUp()
	a.refusedFor(300 * time.Millisecond)
	up.byeFromCaller(11)
	if n := a.metric(`sipedge_fleet_channel_refused_total{key="group:carrier-a"}`); n == 0 {
		t.Error("sipedge_fleet_channel_refused_total counted no refusal on edge-a")
	}
}

// A trunk's max_concurrent_calls holds across the fleet the same way: its
// calls beyond it get the trunk's 503, whichever node they reach.
func TestE2EFleetTrunkChannels(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	o := e2eOpts{trunk: "limits: { max_concurrent_calls: 1 }"}
	a := fleetNodeWith(t, redis, "edge-a", "", o)
	b := fleetNodeWith(t, redis, "edge-b", "", o)
	up := a.callUntilUp()
	b.refusedFor(time.Second)
	if n := b.metric(`sipedge_trunk_refused_total{trunk="local",reason="concurrent"}`); n == 0 {
		t.Error("edge-b's refusals are not the trunk's")
	}
	up.byeFromCaller(11)
	up = b.callUntilUp()
	a.refusedFor(300 * time.Millisecond)
	up.byeFromCaller(11)
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
