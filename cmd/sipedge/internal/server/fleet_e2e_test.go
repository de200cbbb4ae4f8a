package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
	"github.com/sipedge/sipedge/route/lcr"
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

// within polls cond every 20 ms until it holds, failing after d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupOf reads GET /v1/gateway/groups/{name}: its status, whether it is
// fixed and its first destination's address.
func (e *e2e) groupOf(name string) (code int, fixed bool, address string) {
	e.t.Helper()
	code, body := e.httpGet("/v1/gateway/groups/" + name)
	var g struct {
		Fixed        bool `json:"fixed"`
		Destinations []struct {
			Address string `json:"address"`
		} `json:"destinations"`
	}
	if code == 200 {
		if err := json.Unmarshal([]byte(body), &g); err != nil || len(g.Destinations) == 0 {
			e.t.Fatalf("GET group %s: %v\n%s", name, err, body)
		}
		address = g.Destinations[0].Address
	}
	return code, g.Fixed, address
}

// The admin API's groups, trunks and static table are the fleet's: what
// one node writes, the others apply within a second, and a node that
// starts reads back; on a name its file defines, the file wins on that
// node, and a reload changes only the file's layer (shared.go).
func TestE2EFleetSharedState(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	a := fleetNode(t, redis, "edge-a", "")
	b := fleetNode(t, redis, "edge-b", "")
	const staticURL = "/v1/lcr/static_routes"
	sharedGW := b.carrier.addr().String()
	group := fmt.Sprintf(`{"name":"carrier-x","destinations":[{"uri":"sip:%[1]s","address":"%[1]s"}]}`, sharedGW)
	table := `[{"prefix":"","routes":[{"carrier_id":"cx","gateway_group":"carrier-x","rate":0.001}]}]`

	// Written through edge-a, dialled through edge-b within a second.
	if code, body := a.adminDo("POST", "/v1/gateway/groups", group); code != 201 {
		t.Fatalf("POST group on edge-a: %d %s", code, body)
	}
	if code, body := a.adminDo("PUT", staticURL, table); code != 200 {
		t.Fatalf("PUT table on edge-a: %d %s", code, body)
	}
	within(t, time.Second, "edge-b routes by edge-a's table", func() bool {
		_, body := b.httpGet(staticURL)
		return strings.TrimSpace(body) == table
	})
	if code, fixed, addr := b.groupOf("carrier-x"); code != 200 || fixed || addr != sharedGW {
		t.Fatalf("carrier-x on edge-b: %d fixed %v %s", code, fixed, addr)
	}
	c := b.answered()
	c.byeFromCaller(11)
	if _, body := b.httpGet("/metrics"); !strings.Contains(body, `sipedge_lcr_attempts_total{carrier="cx",code="200"`) {
		t.Errorf("edge-b's call did not go to carrier cx:\n%s", body)
	}
	if code, body := a.adminDo("POST", "/v1/gateway/groups", group); code != 200 {
		t.Errorf("POST the same group again: %d %s, want 200 (replaced)", code, body)
	}

	// Trunks likewise, removal included.
	trunk := `{"name":"acme","sources":["127.0.0.9/32"],"limits":{"max_concurrent_calls":5}}`
	if code, body := a.adminDo("POST", "/v1/trunks", trunk); code != 201 {
		t.Fatalf("POST trunk on edge-a: %d %s", code, body)
	}
	within(t, time.Second, "edge-b has edge-a's trunk", func() bool { code, _ := b.httpGet("/v1/trunks/acme"); return code == 200 })
	if code, body := b.adminDo("DELETE", "/v1/trunks/acme", ""); code != 204 {
		t.Fatalf("DELETE trunk on edge-b: %d %s", code, body)
	}
	within(t, time.Second, "edge-a loses the trunk edge-b removed", func() bool { code, _ := a.httpGet("/v1/trunks/acme"); return code == 404 })
	if code, _ := b.adminDo("DELETE", "/v1/trunks/acme", ""); code != 404 {
		t.Errorf("DELETE of a removed trunk: %d, want 404", code)
	}

	// A node that starts reads the shared state before it takes calls.
	if err := b.shutdown(); err != nil {
		t.Fatal(err)
	}
	b2 := fleetNode(t, redis, "edge-b", "")
	if code, _, addr := b2.groupOf("carrier-x"); code != 200 || addr != sharedGW {
		t.Fatalf("carrier-x after edge-b's restart: %d %s", code, addr)
	}
	if _, body := b2.httpGet(staticURL); strings.TrimSpace(body) != table {
		t.Fatalf("static table after edge-b's restart: %s", body)
	}
	u := newUAC(b2.caller, dialed)
	b2.caller.send(u.invite())
	b2.caller.expect("SIP/2.0 100 Trying", waitMsg)
	b.carrier.expect("INVITE sip:"+dialed+"@"+sharedGW, waitMsg) // carrier-x, the shared group's member
	b2.caller.send(u.cancel())

	// The file wins on its node: edge-a's file now names carrier-x.
	a.editConfig("gateway:\n  groups:\n", "gateway:\n  groups:\n    - { name: carrier-x, destinations: [{ uri: \"sip:192.0.2.99:5060\", address: \"192.0.2.99:5060\" }] }\n")
	if r := a.reloadOK(""); !sameNames(r.GatewayGroups.Replaced, "carrier-x") || r.StaticRoutes.Replaced {
		t.Errorf("reload naming carrier-x: %+v, want carrier-x replaced, the shared table kept", r)
	}
	if code, fixed, addr := a.groupOf("carrier-x"); code != 200 || !fixed || addr != "192.0.2.99:5060" {
		t.Errorf("carrier-x on edge-a after its file named it: %d fixed %v %s", code, fixed, addr)
	}
	if code, body := a.adminDo("POST", "/v1/gateway/groups", group); code != 409 {
		t.Errorf("POST carrier-x on edge-a, whose file names it: %d %s, want 409", code, body)
	}
	if _, body := a.httpGet(staticURL); strings.TrimSpace(body) != table {
		t.Errorf("a reload whose file kept its table replaced the shared one: %s", body)
	}
	if code, fixed, addr := b2.groupOf("carrier-x"); code != 200 || fixed || addr != sharedGW {
		t.Errorf("carrier-x on edge-b after edge-a's reload: %d fixed %v %s", code, fixed, addr)
	}
	// Its file drops the name: the shared group applies again there.
	a.editConfig("    - { name: carrier-x, destinations: [{ uri: \"sip:192.0.2.99:5060\", address: \"192.0.2.99:5060\" }] }\n", "")
	if r := a.reloadOK(""); !sameNames(r.GatewayGroups.Removed, "carrier-x") {
		t.Errorf("reload dropping carrier-x: %+v", r)
	}
	if code, fixed, addr := a.groupOf("carrier-x"); code != 200 || fixed || addr != sharedGW {
		t.Errorf("carrier-x on edge-a after its file dropped it: %d fixed %v %s, want the shared group", code, fixed, addr)
	}

	// A reload whose file changed the table deletes the shared table: each
	// node is back to its file's.
	a.editConfig("rate: 0.004", "rate: 0.005")
	if r := a.reloadOK(""); !r.StaticRoutes.Replaced {
		t.Errorf("reload changing the table: %+v, want it replaced", r)
	}
	if _, body := a.httpGet(staticURL); !strings.Contains(body, `"rate":0.005`) {
		t.Errorf("edge-a's table after its reload: %s", body)
	}
	within(t, time.Second, "edge-b back to its file's table", func() bool {
		_, body := b2.httpGet(staticURL)
		return strings.Contains(body, `"gateway_group":"carrier-a","rate":0.004`)
	})

	// Redis down: a change is refused, and nothing changes.
	redis.Stop()
	if code, body := a.adminDo("POST", "/v1/gateway/groups", strings.ReplaceAll(group, "carrier-x", "carrier-y")); code != 503 {
		t.Errorf("POST with Redis down: %d %s, want 503", code, body)
	}
	if code, _, _ := a.groupOf("carrier-y"); code != 404 {
		t.Errorf("a refused POST added the group: %d", code)
	}
}

// cachedJSON is GET /v1/lcr/cache's answer.
type cachedJSON struct {
	Key        string          `json:"key"`
	Local      json.RawMessage `json:"local"`
	Redis      json.RawMessage `json:"redis"`
	RedisTTLMs int64           `json:"redis_ttl_ms"`
}

func (r *lcrRig) cached(key string) cachedJSON {
	r.t.Helper()
	code, body := r.httpGet("/v1/lcr/cache?key=" + key)
	var c cachedJSON
	if code != 200 || json.Unmarshal([]byte(body), &c) != nil {
		r.t.Fatalf("GET /v1/lcr/cache?key=%s: %d %s", key, code, body)
	}
	return c
}

// A decision dropped through one node's admin API is gone from Redis and
// from every node's in-process tier within a second: the next call asks
// the API again. GET /v1/lcr/cache shows what each tier holds.
func TestE2EFleetDecisionDrop(t *testing.T) {
	testtier.RequiresSockets(t)
	old := lcrRedisDeadline // see lcrSharedByTwoNodes
	lcrRedisDeadline = time.Second
	t.Cleanup(func() { lcrRedisDeadline = old })
	redis := redistest.Start(t)
	api := newLCRAPI(t, 200, `{"routes":[`+lcrCacheRoutes+`],"cache_ttl_secs":60}`)
	node := func(id string) *lcrRig {
		return newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, cache: lcr }", api.url()),
			extra: fmt.Sprintf("cache:\n  - { name: lcr, url: %q, local_ttl_secs: 60 }\nfleet: { redis: %q, node_id: %s }", redis.URL(), redis.URL(), id)})
	}
	a, b := node("edge-a"), node("edge-b")
	const key = "cust-trunks:" + dialed
	lcrBusyCall(t, a)
	within(t, 2*time.Second, "edge-a stored the decision in Redis", func() bool {
		reply, err := redis.Do("EXISTS " + lcr.RedisKeyPrefix + key)
		return err == nil && reply == ":1"
	})
	lcrBusyCall(t, b)
	if n := api.hits.Load(); n != 1 {
		t.Fatalf("%d API requests, want 1: edge-b's decision from Redis", n)
	}
	if c := b.cached(key); string(c.Local) == "null" || string(c.Redis) == "null" || c.RedisTTLMs <= 0 {
		t.Fatalf("edge-b's cache before the drop: %+v, want the decision in both tiers", c)
	}

	if code, body := a.adminDo("DELETE", "/v1/lcr/cache?key="+key, "", ""); code != 200 || !strings.Contains(body, `"redis_deleted":1`) {
		t.Fatalf("DELETE /v1/lcr/cache?key=: %d %s", code, body)
	}
	within(t, time.Second, "edge-b dropped the decision", func() bool {
		c := b.cached(key)
		return string(c.Local) == "null" && string(c.Redis) == "null"
	})
	lcrBusyCall(t, b)
	if n := api.hits.Load(); n != 2 {
		t.Fatalf("%d API requests after the drop, want 2", n)
	}

	if code, body := b.adminDo("DELETE", "/v1/lcr/cache", "", ""); code != 200 {
		t.Fatalf("DELETE /v1/lcr/cache: %d %s", code, body)
	}
	within(t, time.Second, "every decision dropped", func() bool {
		c, d := a.cached(key), b.cached(key)
		return string(c.Local) == "null" && string(d.Local) == "null" && string(d.Redis) == "null"
	})
	if code, _ := a.httpGet("/v1/lcr/cache"); code != 400 {
		t.Errorf("GET /v1/lcr/cache without a key: %d, want 400", code)
	}
	if code, _ := a.adminDo("DELETE", "/v1/lcr/cache?key=", "", ""); code != 400 {
		t.Errorf("DELETE /v1/lcr/cache?key= (empty): %d, want 400", code)
	}
	if n := b.metricWith("sipedge_fleet_decision_drops_total", ""); n < 2 {
		t.Errorf("sipedge_fleet_decision_drops_total %v on edge-b, want 2", n)
	}
}

// journalLen is the number of calls edge's journal holds in Redis.
func journalLen(t *testing.T, redis *redistest.Server, node string) int {
	t.Helper()
	c, br, err := redisSend(redis, "KEYS {sipedge:fleet}:journal:"+node+":*")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []string
	if line, _ := br.ReadString('\n'); strings.HasPrefix(line, "*") {
		var n int
		fmt.Sscanf(line, "*%d", &n)
		for range n {
			br.ReadString('\n') // $len
			k, _ := br.ReadString('\n')
			keys = append(keys, strings.TrimSpace(k))
		}
	}
	total := 0
	for _, k := range keys {
		var n int
		fmt.Sscanf(redis.MustDo("HLEN "+k), ":%d", &n)
		total += n
	}
	return total
}

// With fleet.call_journal an answered call is in its node's journal in
// Redis while it is up, and leaves it as it ends.
func TestE2EFleetCallJournal(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	a := fleetNode(t, redis, "edge-a", ", call_journal: true")
	c := a.answered()
	within(t, 2*time.Second, "the call in edge-a's journal", func() bool { return journalLen(t, redis, "edge-a") == 1 })
	c.byeFromCaller(11)
	within(t, 2*time.Second, "the call gone from edge-a's journal", func() bool { return journalLen(t, redis, "edge-a") == 0 })
}

// redisSend sends one inline command to redis on a fresh connection; the
// caller reads the reply and closes it.
func redisSend(redis *redistest.Server, cmd string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", redis.Addr(), time.Second)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, bufio.NewReader(c), nil
}
