package fleet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// TestRegisterRefusesLiveDuplicate: a second live node with the same id is
// refused at start, saying who holds it; once the first left, the id is
// free.
func TestRegisterRefusesLiveDuplicate(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "edge-1")
	_, err := newNode(t, r.URL(), "edge-1")
	if !errors.Is(err, ErrNodeIDTaken) || !strings.Contains(err.Error(), `node id "edge-1" is held by a live node (sip "udp://10.0.0.1:5060"`) {
		t.Fatalf("second edge-1: %v, want ErrNodeIDTaken naming the holder", err)
	}
	a.Close()
	startNode(t, r.URL(), "edge-1")
}

// TestRestartAfterLeaseExpiry: a node that died (kill -9) holds its id
// until its lease ends; a new process with the id starts after that.
func TestRestartAfterLeaseExpiry(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "edge-1")
	a.abandon()
	if _, err := newNode(t, r.URL(), "edge-1"); !errors.Is(err, ErrNodeIDTaken) {
		t.Fatalf("restart within the lease: %v, want ErrNodeIDTaken", err)
	}
	took := eventually(t, 3*time.Second, "restart after the lease", func() bool {
		_, err := newNode(t, r.URL(), "edge-1")
		return err == nil
	})
	t.Logf("restarted %v after the kill (lease 1 s)", took)
}

// TestNodesList: every node sees the live nodes with their SIP address,
// heartbeat and calls, and has a calls gauge for each; a dead node drops
// out within its lease (and a heartbeat).
func TestNodesList(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a")
	b := startNode(t, r.URL(), "b", func(o *Options) { o.SIPAddr = "udp://10.0.0.2:5060" })
	c := startNode(t, r.URL(), "c")
	a.calls.Store(3)
	b.calls.Store(7)
	c.calls.Store(1)
	eventually(t, 2*time.Second, "calls in the list", func() bool {
		nodes, err := a.Nodes(context.Background())
		return err == nil && len(nodes) == 3 && nodes[1].Calls == 7 && nodes[0].Calls == 3
	})
	nodes, _ := a.Nodes(context.Background())
	for i, want := range []string{"a", "b", "c"} {
		n := nodes[i]
		if n.ID != want || n.Self != (want == "a") || time.Since(n.LastHeartbeat) > 2*time.Second || time.Since(n.Started) > time.Minute {
			t.Fatalf("node %d: %+v", i, n)
		}
	}
	if nodes[1].SIPAddr != "udp://10.0.0.2:5060" {
		t.Fatalf("b's address %q", nodes[1].SIPAddr)
	}
	eventually(t, 2*time.Second, "gauges", func() bool {
		m := metricsText(c.Fleet)
		return hasMetric(m, `sipedge_fleet_node_calls{node="a"} 3`) && hasMetric(m, `sipedge_fleet_node_calls{node="b"} 7`) &&
			hasMetric(m, `sipedge_fleet_node_calls{node="c"} 1`) && hasMetric(m, "sipedge_fleet_nodes 3")
	})

	b.abandon()
	took := eventually(t, 3*time.Second, "b gone", func() bool {
		nodes, err := a.Nodes(context.Background())
		return err == nil && len(nodes) == 2 && nodes[1].ID == "c"
	})
	t.Logf("b out of the list %v after it died (lease 1 s)", took)
	eventually(t, 2*time.Second, "b's gauge gone", func() bool {
		m := metricsText(c.Fleet)
		return !strings.Contains(m, `node="b"`) && hasMetric(m, "sipedge_fleet_nodes 2")
	})

	// Without Redis the fleet is this node.
	solo, err := New(Options{Config: Config{NodeID: "solo"}, SIPAddr: "udp://1.2.3.4:5060", Calls: func() int64 { return 4 }})
	must(t, err)
	defer solo.Close()
	nodes, err = solo.Nodes(context.Background())
	if err != nil || len(nodes) != 1 || nodes[0].ID != "solo" || !nodes[0].Self || nodes[0].Calls != 4 || !hasMetric(metricsText(solo), `sipedge_fleet_node_calls{node="solo"} 4`) {
		t.Fatalf("alone: %+v %v", nodes, err)
	}
}

// TestFencedNodeStartsOver: a node whose lease ran out while it ran (a
// pause, a partition) is reaped by the fleet; its next heartbeat learns it
// and it goes on as a new incarnation, logged and counted.
func TestFencedNodeStartsOver(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a", func(o *Options) { o.lease = time.Hour }) // a's own heartbeats are far apart
	b := startNode(t, r.URL(), "b")
	old := a.self.Load()
	r.MustDo("ZADD {sipedge:fleet}:leases 1 a") // a's lease ends, as if it had been silent
	eventually(t, 2*time.Second, "a reaped", func() bool { return r.MustDo("EXISTS {sipedge:fleet}:node:a") == ":0" })
	a.members.wake()
	eventually(t, 2*time.Second, "a fenced", func() bool { return a.self.Load() != old })
	if !a.log.Contains("declared dead") || !hasMetric(metricsText(a.Fleet), "sipedge_fleet_fenced_total 1") {
		t.Fatalf("fencing not logged or counted:\n%s", a.log.String())
	}
	nodes, err := b.Nodes(context.Background())
	if err != nil || len(nodes) != 2 || nodes[0].ID != "a" {
		t.Fatalf("after fencing: %+v %v", nodes, err)
	}
}

// TestStartWithRedisDown: a node starts with Redis down: it serves at the
// local share at once, logged and counted, and joins the fleet when Redis
// comes up.
func TestStartWithRedisDown(t *testing.T) {
	testtier.RequiresSockets(t)
	port := redistest.FreePort(t)
	url := "redis://127.0.0.1:" + strconv.Itoa(port)
	a := startNode(t, url, "a", withJournal, func(o *Options) { o.Nodes = 2 })
	c := a.Channel("carrier", 10)
	eventually(t, time.Second, "local share", func() bool { return c.Grant() == 5 })
	if !a.Journal().Answered(1, testCall(1)) { // kept until Redis answers
		t.Fatal("not journalled")
	}
	if !a.log.Contains("redis unavailable") || !hasMetric(metricsText(a.Fleet), "sipedge_fleet_redis_up 0") {
		t.Fatalf("not logged or counted:\n%s", a.log)
	}
	r := redistest.StartOn(t, port)
	eventually(t, 5*time.Second, "registered", func() bool {
		nodes, err := a.Nodes(context.Background())
		return err == nil && len(nodes) == 1 && nodes[0].Self
	})
	eventually(t, 2*time.Second, "journal written", func() bool { return journalLen(r, a) == ":1" })
	eventually(t, 2*time.Second, "fleet-wide grant", func() bool {
		hold(c, 10-int(c.InUse()), 0)
		return hasMetric(metricsText(a.Fleet), "sipedge_fleet_channels_local_share 0") && c.InUse() == 10
	})
}
