package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// A fleet of sipedge processes on one Redis, end to end: SIPp callers,
// SIPp carriers counting what they are offered, kill -9 and a Redis that
// goes away (fleet/doc.go, cmd/sipedge/internal/server/shared.go).

// dialled is the number the SIPp callers dial (-s).
const dialled = "15551234"

// twoCarriers is the gateway and lcr sections of a fleet whose calls try
// carrier-a, limited to limit channels (0: none), then carrier-b.
func twoCarriers(a, b *sipp, limit int) string {
	return fmt.Sprintf(`gateway:
  groups:
    - { name: carrier-a, max_concurrent_calls: %d, destinations: [{ uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d" }] }
    - { name: carrier-b, destinations: [{ uri: "sip:127.0.0.1:%[3]d", address: "127.0.0.1:%[3]d" }] }
lcr:
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.001 }
        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.002 }
`, limit, a.port, b.port)
}

// fleetOf is the fleet section: url's Redis, the node's id, more keys.
func fleetOf(url, id, more string) string {
	return fmt.Sprintf("ratelimit: { nodes: 3 }\nfleet: { redis: %q, node_id: %s, lease_secs: 3%s }\n", url, id, more)
}

// caller places calls through a node: a SIPp UAC dialling dialled.
func caller(t *testing.T, name string, n *node, calls, rate int, hold time.Duration) *sipp {
	t.Helper()
	return startSIPp(t, name, "-sn", "uac", fmt.Sprintf("127.0.0.1:%d", n.sip), "-s", dialled, "-m", fmt.Sprint(calls),
		"-r", fmt.Sprint(rate), "-d", fmt.Sprint(int(hold/time.Millisecond)), "-l", "1000",
		"-trace_shortmsg", "-shortmessage_file", "messages.log", "-timeout", "120s", "-timeout_error")
}

// A carrier's channel limit holds across three nodes: 10 channels, 30
// long calls spread over the nodes: the carrier (a SIPp UAS) never has
// more than 10 up at once, and the other calls fail over to the next
// carrier, skipped as calls_limited. Before that, one node alone takes
// all 10 channels: the idle ones hold none it needs. On one Redis and on
// a Redis Cluster.
func TestFleetChannelLimit(t *testing.T) {
	testtier.RequiresSockets(t)
	skipWithoutSIPp(t)
	t.Run("redis", func(t *testing.T) { fleetChannelLimit(t, redistest.Start(t).URL()) })
	t.Run("cluster", func(t *testing.T) { fleetChannelLimit(t, redistest.StartCluster(t, 3).URL()) })
}

func fleetChannelLimit(t *testing.T, url string) {
	a, b := startUAS(t, "carrier-a"), startUAS(t, "carrier-b")
	var nodes []*node
	for i := range 3 {
		id := fmt.Sprintf("edge-%d", i+1)
		nodes = append(nodes, startNode(t, id, twoCarriers(a, b, 10)+fleetOf(url, id, "")))
	}

	// One node busy, two idle: it gets every channel.
	busy := caller(t, "caller-busy", nodes[0], 20, 10, 6*time.Second)
	waitUntil(t, 10*time.Second, "carrier-a at 10 calls from edge-1 alone", func() bool { _, peak, _ := a.calls(); return peak >= 10 })
	if err := busy.wait(60 * time.Second); err != nil {
		t.Fatalf("edge-1's calls: SIPp %v (a call failed)", err)
	}
	waitUntil(t, 10*time.Second, "the calls ended at the carriers", func() bool {
		_, _, upA := a.calls()
		_, _, upB := b.calls()
		return upA == 0 && upB == 0
	})

	// 30 long calls over the three nodes.
	var callers []*sipp
	for i, n := range nodes {
		callers = append(callers, caller(t, fmt.Sprintf("caller-%d", i+1), n, 10, 5, 8*time.Second))
	}
	waitUntil(t, 10*time.Second, "GET /v1/fleet shows the 30 calls up", func() bool {
		list, ok := nodes[1].fleetNodes()
		sum := int64(0)
		for _, n := range list {
			sum += n.Calls
		}
		return ok && len(list) == 3 && sum == 30
	})
	for i, c := range callers {
		if err := c.wait(60 * time.Second); err != nil {
			t.Errorf("caller %d: SIPp %v (a call failed)", i+1, err)
		}
	}

	callsA, peak, _ := a.calls()
	callsB, _, _ := b.calls()
	t.Logf("carrier-a: %d calls, at most %d at once; carrier-b: %d calls", callsA, peak, callsB)
	if peak > 10 {
		t.Errorf("carrier-a had %d calls up at once, over its 10 channels", peak)
	}
	if callsA+callsB != 50 {
		t.Errorf("the carriers were offered %d calls, want the 50 placed, each once", callsA+callsB)
	}
	var limited, answered int
	waitUntil(t, 5*time.Second, "the 50 calls' CDRs (flushed every 100 ms)", func() bool {
		limited, answered = 0, 0
		for _, n := range nodes {
			for _, r := range n.cdrs() {
				if r["final_code"] == 200.0 {
					answered++
				}
				if r["carrier_id"] != "carrier-b" {
					continue
				}
				at, _ := r["lcr_attempts"].([]any)
				if len(at) == 1 && at[0].(map[string]any)["reason"] == "calls_limited" {
					limited++
				}
			}
		}
		return answered >= 50
	})
	if answered != 50 || limited != callsB {
		t.Errorf("CDRs: %d answered, %d failed over as calls_limited; want 50 and %d", answered, limited, callsB)
	}
}

// A group and a static table added through one node's admin API are
// dialled through another within a second, and a node restarted
// afterwards still dials them.
func TestFleetSharedGroup(t *testing.T) {
	testtier.RequiresSockets(t)
	skipWithoutSIPp(t)
	redis := redistest.Start(t)
	x := startUAS(t, "carrier-x")
	n1 := startNode(t, "edge-1", fleetOf(redis.URL(), "edge-1", ""))
	n2 := startNode(t, "edge-2", fleetOf(redis.URL(), "edge-2", ""))

	group := fmt.Sprintf(`{"name":"carrier-x","destinations":[{"uri":"sip:127.0.0.1:%[1]d","address":"127.0.0.1:%[1]d"}]}`, x.port)
	if code, body := n1.do("POST", "/v1/gateway/groups", group); code != 201 {
		t.Fatalf("POST group on edge-1: %d %s", code, body)
	}
	table := `[{"prefix":"","routes":[{"carrier_id":"carrier-x","gateway_group":"carrier-x","rate":0.001}]}]`
	if code, body := n1.do("PUT", "/v1/lcr/static_routes", table); code != 200 {
		t.Fatalf("PUT table on edge-1: %d %s", code, body)
	}
	took := waitUntil(t, time.Second, "edge-2 routes by edge-1's table", func() bool {
		_, body := n2.get("/v1/lcr/static_routes")
		return strings.TrimSpace(body) == table
	})
	t.Logf("edge-2 applied edge-1's table %v after the PUT", took)
	if err := caller(t, "caller-1", n2, 1, 1, 100*time.Millisecond).wait(30 * time.Second); err != nil {
		t.Fatalf("a call through edge-2: SIPp %v", err)
	}
	if calls, _, _ := x.calls(); calls != 1 {
		t.Fatalf("carrier-x was offered %d calls, want edge-2's", calls)
	}

	n2.stop()
	n2.start()
	if err := caller(t, "caller-2", n2, 1, 1, 100*time.Millisecond).wait(30 * time.Second); err != nil {
		t.Fatalf("a call through edge-2 after its restart: SIPp %v", err)
	}
	if calls, _, _ := x.calls(); calls != 2 {
		t.Fatalf("carrier-x was offered %d calls, want the restarted edge-2's too", calls)
	}
}

// journalled counts the calls node's journals hold in the Redis at url.
func journalled(t *testing.T, url, node string) int {
	t.Helper()
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Do(ctx, c.B().Keys().Pattern("{sipedge:fleet}:journal:"+node+":*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, k := range keys {
		n, err := c.Do(ctx, c.B().Hlen().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		total += int(n)
	}
	return total
}

// kill -9 of a node with answered calls up: the surviving nodes write
// their CDRs within lease_secs and a few seconds, once each, hangup_side
// node_lost, time_end the dead node's last renewal; the calls that had
// ended before have their one CDR, the dead node's.
func TestFleetNodeLost(t *testing.T) {
	testtier.RequiresSockets(t)
	skipWithoutSIPp(t)
	redis := redistest.Start(t)
	const lease = 3 * time.Second
	a, b := startUAS(t, "carrier-a"), startUAS(t, "carrier-b")
	var nodes []*node
	for i := range 3 {
		id := fmt.Sprintf("edge-%d", i+1)
		nodes = append(nodes, startNode(t, id, twoCarriers(a, b, 0)+fleetOf(redis.URL(), id, ", call_journal: true")))
	}
	ended := caller(t, "caller-ended", nodes[0], 2, 10, 100*time.Millisecond)
	if err := ended.wait(30 * time.Second); err != nil {
		t.Fatalf("the short calls: SIPp %v", err)
	}
	long := caller(t, "caller-long", nodes[0], 5, 10, 120*time.Second)
	waitUntil(t, 10*time.Second, "5 calls up at the carrier", func() bool { _, _, up := a.calls(); return up == 5 })
	waitUntil(t, 5*time.Second, "edge-1's journal holds the 5 calls", func() bool { return journalled(t, redis.URL(), "edge-1") == 5 })
	up := long.answered()
	if len(up) != 5 {
		t.Fatalf("%d calls answered at the caller, want 5", len(up))
	}

	killed := time.Now()
	nodes[0].kill()
	long.kill() // its calls are nobody's now
	lost := func() []map[string]any {
		var out []map[string]any
		for _, n := range nodes[1:] {
			for _, r := range n.cdrs() {
				if r["hangup_side"] == "node_lost" {
					out = append(out, r)
				}
			}
		}
		return out
	}
	took := waitUntil(t, lease+5*time.Second, "the lost calls' CDRs on the surviving nodes", func() bool { return len(lost()) >= 5 })
	t.Logf("node_lost CDRs %v after the kill (lease %v)", took, lease)
	time.Sleep(2 * time.Second) // a second copy would come by now
	recs := lost()
	seen := map[string]int{}
	for _, r := range recs {
		id, _ := r["a_call_id"].(string)
		seen[id]++
		answer, _ := time.Parse(time.RFC3339, r["time_answer"].(string))
		end, _ := time.Parse(time.RFC3339, r["time_end"].(string))
		if r["final_code"] != 200.0 || r["carrier_id"] != "carrier-a" || end.Before(answer) || end.After(killed) ||
			killed.Sub(end) > lease/3+time.Second {
			t.Errorf("lost call's CDR %v: want 200 at carrier-a, time_end between its answer and the kill, within a renewal of it (%v)", r, killed)
		}
	}
	for id := range up {
		if seen[id] != 1 {
			t.Errorf("call %s: %d node_lost CDRs, want 1", id, seen[id])
		}
	}
	if len(recs) != 5 {
		t.Errorf("%d node_lost CDRs, want the 5 calls up", len(recs))
	}
	normal := map[string]int{}
	for _, r := range nodes[0].cdrs() {
		normal[r["a_call_id"].(string)]++
	}
	for id := range ended.answered() {
		if normal[id] != 1 || seen[id] != 0 {
			t.Errorf("call %s, ended before the kill: %d CDRs on edge-1, %d node_lost; want 1 and 0", id, normal[id], seen[id])
		}
	}
}

// Redis stopped, and restarted empty, under load: no call waits on it
// (setup stays what the carrier takes to answer), every call succeeds,
// the channel limit falls to the local share meanwhile (at most
// limit + nodes - 1 at once), and the fleet converges again: every node
// back on Redis, the three listed, the grants within the limit.
func TestFleetRedisOutage(t *testing.T) {
	testtier.RequiresSockets(t)
	skipWithoutSIPp(t)
	redis := redistest.Start(t)
	a, b := startUAS(t, "carrier-a"), startUAS(t, "carrier-b")
	var nodes []*node
	for i := range 3 {
		id := fmt.Sprintf("edge-%d", i+1)
		nodes = append(nodes, startNode(t, id, twoCarriers(a, b, 10)+fleetOf(redis.URL(), id, "")))
	}
	var callers []*sipp
	for i, n := range nodes {
		callers = append(callers, caller(t, fmt.Sprintf("caller-%d", i+1), n, 80, 10, time.Second))
	}
	time.Sleep(2 * time.Second)
	redis.Stop()
	time.Sleep(3 * time.Second)
	redis.Restart()
	for i, c := range callers {
		if err := c.wait(90 * time.Second); err != nil {
			t.Errorf("caller %d: SIPp %v (a call failed)", i+1, err)
		}
	}
	calls, peak, _ := a.calls()
	t.Logf("carrier-a: %d calls, at most %d at once", calls, peak)
	if peak > 10+3-1 {
		t.Errorf("carrier-a had %d calls up at once: over the limit plus the local shares' rounding (12)", peak)
	}
	worst := time.Duration(0)
	for _, n := range nodes {
		for _, r := range n.cdrs() {
			invite, _ := time.Parse(time.RFC3339, r["time_invite"].(string))
			answer, err := time.Parse(time.RFC3339, fmt.Sprint(r["time_answer"]))
			if err != nil {
				t.Errorf("a call not answered: %v", r)
				continue
			}
			worst = max(worst, answer.Sub(invite))
		}
	}
	t.Logf("slowest setup %v", worst)
	if worst > time.Second {
		t.Errorf("a call took %v from its INVITE to its answer: it waited on Redis", worst)
	}
	for _, n := range nodes {
		if d := n.metric("sipedge_fleet_redis_down_total"); d < 1 {
			t.Errorf("%s: sipedge_fleet_redis_down_total %v: the outage was not seen", n.id, d)
		}
	}
	waitUntil(t, 15*time.Second, "the fleet converged", func() bool {
		grants := 0.0
		for _, n := range nodes {
			list, ok := n.fleetNodes()
			if !ok || len(list) != 3 || n.metric("sipedge_fleet_redis_up") != 1 || n.metric("sipedge_fleet_channels_local_share") != 0 {
				return false
			}
			grants += max(n.metric(`sipedge_fleet_channel_grant{key="group:carrier-a"}`), 0)
		}
		return grants <= 10
	})
}

// A quality disable is the fleet's: made on one node, in force on the
// other within a second, kept by a node that restarts, lifted on any.
func TestFleetQualityDisable(t *testing.T) {
	testtier.RequiresSockets(t)
	skipWithoutSIPp(t)
	redis := redistest.Start(t)
	a, b := startUAS(t, "carrier-a"), startUAS(t, "carrier-b")
	n1 := startNode(t, "edge-1", twoCarriers(a, b, 0)+fleetOf(redis.URL(), "edge-1", ""))
	n2 := startNode(t, "edge-2", twoCarriers(a, b, 0)+fleetOf(redis.URL(), "edge-2", ""))

	if code, body := n1.do("POST", "/v1/quality/disable", `{"carrier":"carrier-a"}`); code != 200 {
		t.Fatalf("disable on edge-1: %d %s", code, body)
	}
	disabledOn := func(n *node) bool {
		_, body := n.get("/v1/quality")
		return strings.Contains(body, `"disabled":[{"carrier":"carrier-a"`)
	}
	took := waitUntil(t, time.Second, "edge-2 has edge-1's disable", func() bool { return disabledOn(n2) })
	t.Logf("edge-2 applied the disable %v after edge-1's POST", took)
	call := func(name string, n *node) {
		t.Helper()
		if err := caller(t, name, n, 1, 1, 100*time.Millisecond).wait(30 * time.Second); err != nil {
			t.Fatalf("%s: SIPp %v", name, err)
		}
	}
	offered := func() (int, int) { ca, _, _ := a.calls(); cb, _, _ := b.calls(); return ca, cb }
	call("caller-1", n2)
	if ca, cb := offered(); ca != 0 || cb != 1 {
		t.Fatalf("carrier-a offered %d calls, carrier-b %d: want the disabled carrier skipped on edge-2", ca, cb)
	}

	n2.stop()
	n2.start()
	if !disabledOn(n2) {
		t.Fatal("edge-2 lost the fleet's disable in its restart")
	}
	call("caller-2", n2)
	if ca, cb := offered(); ca != 0 || cb != 2 {
		t.Fatalf("after edge-2's restart, carrier-a offered %d calls, carrier-b %d", ca, cb)
	}

	if code, body := n2.do("POST", "/v1/quality/enable", `{"carrier":"carrier-a"}`); code != 200 {
		t.Fatalf("enable on edge-2: %d %s", code, body)
	}
	waitUntil(t, time.Second, "edge-1 has edge-2's enable", func() bool { return !disabledOn(n1) })
	call("caller-3", n1)
	if ca, cb := offered(); ca != 1 || cb != 2 {
		t.Fatalf("after the enable, carrier-a offered %d calls, carrier-b %d: want carrier-a first again", ca, cb)
	}
}
