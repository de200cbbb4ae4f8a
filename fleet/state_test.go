package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// TestStateLocal: without Redis, Put and Delete apply at once, in order,
// with versions; Follow applies what was put before it.
func TestStateLocal(t *testing.T) {
	log := new(syncBuffer)
	f, err := New(Options{Config: Config{NodeID: "a"}, Logger: slog.New(slog.NewTextHandler(log, nil))})
	must(t, err)
	defer f.Close()
	ctx := context.Background()
	ch, err := f.Put(ctx, "group", "g1", []byte(`{"v":1}`))
	if err != nil || ch.Version != 1 || ch.Previous != 0 {
		t.Fatalf("put: %+v %v", ch, err)
	}
	var seen []string
	must(t, f.Follow(func(ch Change) error {
		seen = append(seen, fmt.Sprintf("%s/%s=%s@%d", ch.Kind, ch.Name, ch.Doc, ch.Version))
		if string(ch.Doc) == "bad" {
			return errors.New("refused")
		}
		return nil
	}))
	ch, _ = f.Put(ctx, "group", "g1", []byte(`{"v":2}`))
	if ch.Previous != 1 || ch.Version != 2 {
		t.Fatalf("replace: %+v", ch)
	}
	if _, err := f.PutIf(ctx, "group", "g1", []byte(`{"v":3}`), 1); !errors.Is(err, ErrVersion) {
		t.Fatalf("PutIf on a stale version: %v", err)
	}
	if _, err := f.PutIf(ctx, "group", "g2", []byte(`{}`), 0); err != nil {
		t.Fatalf("PutIf of a new document: %v", err)
	}
	if _, err := f.Put(ctx, "trunk", "t", []byte("bad")); !errors.Is(err, ErrApply) || !log.Contains("cannot apply a shared document") ||
		!hasMetric(metricsText(f), "sipedge_fleet_state_apply_errors_total 1") {
		t.Fatalf("apply error: %v, not logged or counted", err)
	}
	if _, ok, _ := f.Delete(ctx, "group", "g1"); !ok {
		t.Fatal("delete found nothing")
	}
	if _, ok, _ := f.Delete(ctx, "group", "g1"); ok {
		t.Fatal("deleted twice")
	}
	want := []string{"group/g1={\"v\":1}@1", "group/g1={\"v\":2}@2", "group/g2={}@3", "trunk/t=bad@4", "group/g1=@5"}
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Fatalf("applied %q, want %q", seen, want)
	}
	if l := f.List("group"); len(l) != 1 || l[0].Name != "g2" {
		t.Fatalf("list: %+v", l)
	}
	if _, ok := f.Get("group", "g1"); ok {
		t.Fatal("get of a deleted document")
	}
	for _, bad := range [][2]string{{"", "x"}, {"Group", "x"}, {"group", ""}, {"group", "a\nb"}} {
		if _, err := f.Put(ctx, bad[0], bad[1], nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("put %q: %v", bad, err)
		}
	}
	big := make([]byte, MaxDocBytes+1) // no Pub/Sub to bound it
	if _, err := f.Put(ctx, "static_routes", "table", big); err != nil {
		t.Fatalf("a document over MaxDocBytes without Redis: %v", err)
	}
	var drops []string
	solo, _ := New(Options{Config: Config{NodeID: "a"}, OnDropDecisions: func(k string) { drops = append(drops, k) }})
	defer solo.Close()
	must(t, solo.DropDecisions(ctx, "k1"))
	if len(drops) != 1 || drops[0] != "k1" {
		t.Fatalf("drops %q", drops)
	}
}

// TestStateSharedWithinOneSecond: a document put on one node is applied on
// the others within a second, as are its replacement and removal; a node
// that starts later reads the state in force before Follow returns.
func TestStateSharedWithinOneSecond(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	ctx := context.Background()
	a := startNode(t, r.URL(), "a")
	b := startNode(t, r.URL(), "b")
	c := startNode(t, r.URL(), "c")
	for _, n := range []*testNode{a, b, c} {
		must(t, n.follow())
	}
	step := func(what string, do func(), cond func(n *testNode) bool) {
		t.Helper()
		start := time.Now()
		do()
		for _, n := range []*testNode{a, b, c} {
			eventually(t, time.Second, what+" on "+n.NodeID(), func() bool { return cond(n) })
		}
		t.Logf("%s: on every node within %v", what, time.Since(start))
	}
	step("add", func() {
		ch, err := a.Put(ctx, "group", "carrier-x", []byte(`{"name":"carrier-x"}`))
		if err != nil || ch.Previous != 0 {
			t.Fatalf("put: %+v %v", ch, err)
		}
		if d, _ := a.doc("group/carrier-x"); d == "" {
			t.Fatal("not applied on the writing node when Put returned")
		}
	}, func(n *testNode) bool { d, _ := n.doc("group/carrier-x"); return d == `{"name":"carrier-x"}` })
	step("replace", func() {
		if _, err := b.Put(ctx, "group", "carrier-x", []byte(`{"name":"carrier-x","v":2}`)); err != nil {
			t.Fatal(err)
		}
	}, func(n *testNode) bool { d, _ := n.doc("group/carrier-x"); return strings.Contains(d, `"v":2`) })
	must(t, func() error { _, err := c.Put(ctx, "static_routes", "table", []byte(`[]`)); return err }())
	step("remove", func() {
		if _, ok, err := c.Delete(ctx, "group", "carrier-x"); !ok || err != nil {
			t.Fatalf("delete: %v %v", ok, err)
		}
	}, func(n *testNode) bool { _, ok := n.doc("group/carrier-x"); return !ok })

	d := startNode(t, r.URL(), "d")
	must(t, d.follow())
	if doc, ok := d.doc("static_routes/table"); !ok || doc != "[]" {
		t.Fatalf("a new node did not start from the shared state: %v", d.docs)
	}
	if _, ok := d.doc("group/carrier-x"); ok {
		t.Fatal("a new node applied a removed document")
	}
	// Each node applied each change once, in version order per document.
	for _, n := range []*testNode{a, b, c} {
		n.mu.Lock()
		last := map[string]int64{}
		for _, ch := range n.seen {
			if ch.Version <= last[ch.Kind+"/"+ch.Name] {
				t.Errorf("%s applied %s/%s version %d after %d", n.NodeID(), ch.Kind, ch.Name, ch.Version, last[ch.Name])
			}
			last[ch.Kind+"/"+ch.Name] = ch.Version
		}
		if len(n.seen) != 4 {
			t.Errorf("%s applied %d changes, want 4: %+v", n.NodeID(), len(n.seen), n.seen)
		}
		n.mu.Unlock()
	}
}

// TestStateWithoutNotifications: a node that gets no notification (they
// are at most once) still applies every change within a second, by
// polling the versions.
func TestStateWithoutNotifications(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	ctx := context.Background()
	a := startNode(t, r.URL(), "a")
	deaf := startNode(t, r.URL(), "deaf", func(o *Options) { o.noSubscribe = true; o.PollInterval = 500 * time.Millisecond })
	must(t, a.follow())
	must(t, deaf.follow())
	for i := range 3 {
		start := time.Now()
		doc := fmt.Sprintf(`{"v":%d}`, i)
		if _, err := a.Put(ctx, "trunk", "acme", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Second, "polled", func() bool { d, _ := deaf.doc("trunk/acme"); return d == doc })
		t.Logf("applied by polling %v after the put", time.Since(start))
	}
	if _, _, err := a.Delete(ctx, "trunk", "acme"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "removal polled", func() bool { _, ok := deaf.doc("trunk/acme"); return !ok })
	must(t, a.DropDecisions(ctx, "k"))
	eventually(t, time.Second, "drop polled", func() bool {
		deaf.mu.Lock()
		defer deaf.mu.Unlock()
		return len(deaf.drops) == 1 && deaf.drops[0] == "" // missed: all
	})
}

// TestStateConcurrentWriters: nodes writing the same documents at once end
// with the same state everywhere, the last write's; PutIf refuses a write
// over a version it did not see.
func TestStateConcurrentWriters(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	ctx := context.Background()
	nodes := []*testNode{startNode(t, r.URL(), "a"), startNode(t, r.URL(), "b"), startNode(t, r.URL(), "c")}
	for _, n := range nodes {
		must(t, n.follow())
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				name := fmt.Sprintf("g%d", j%5)
				if j%7 == 3 {
					n.Delete(ctx, "group", name)
					continue
				}
				if _, err := n.Put(ctx, "group", name, []byte(fmt.Sprintf("%d-%d", i, j))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// What Redis holds, as a node starting now reads it.
	e := startNode(t, r.URL(), "e")
	must(t, e.follow())
	want := map[string]string{}
	for _, ch := range e.List("group") {
		want["group/"+ch.Name] = string(ch.Doc)
	}
	eventually(t, time.Second, "the state in Redis everywhere", func() bool {
		for _, n := range nodes {
			n.mu.Lock()
			same := fmt.Sprint(n.docs) == fmt.Sprint(want)
			n.mu.Unlock()
			if !same {
				return false
			}
		}
		return true
	})
	ch, _ := nodes[0].Put(ctx, "group", "cas", []byte("1"))
	if _, err := nodes[1].PutIf(ctx, "group", "cas", []byte("2"), ch.Version-1); !errors.Is(err, ErrVersion) {
		t.Fatalf("PutIf over an unseen version: %v", err)
	}
	if _, err := nodes[1].PutIf(ctx, "group", "cas", []byte("2"), ch.Version); err != nil {
		t.Fatalf("PutIf over the version seen: %v", err)
	}
}

// TestDropDecisions: a drop reaches every node, with its key.
func TestDropDecisions(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	ctx := context.Background()
	a, b := startNode(t, r.URL(), "a"), startNode(t, r.URL(), "b")
	must(t, a.follow())
	must(t, b.follow())
	time.Sleep(200 * time.Millisecond) // subscribed
	must(t, a.DropDecisions(ctx, "trunkgrp|+4930"))
	must(t, b.DropDecisions(ctx, ""))
	for _, n := range []*testNode{a, b} {
		eventually(t, time.Second, "drops on "+n.NodeID(), func() bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return strings.Join(n.drops, ",") == "trunkgrp|+4930,"
		})
	}
}

// TestStateRedisDown: with Redis down, writes fail at once with
// ErrUnavailable, the applied state stays; Redis back, the nodes follow
// again.
func TestStateRedisDown(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	ctx := context.Background()
	a, b := startNode(t, r.URL(), "a"), startNode(t, r.URL(), "b")
	must(t, a.follow())
	must(t, b.follow())
	if _, err := a.Put(ctx, "group", "g", []byte("1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "applied", func() bool { _, ok := b.doc("group/g"); return ok })
	r.Stop()
	start := time.Now()
	if _, err := a.Put(ctx, "group", "g", []byte("2")); !errors.Is(err, ErrUnavailable) || time.Since(start) > time.Second {
		t.Fatalf("put with Redis down: %v after %v", err, time.Since(start))
	}
	if d, _ := b.doc("group/g"); d != "1" {
		t.Fatalf("b's state %q with Redis down", d)
	}
	r.Restart() // empty: the shared state is gone with it (no persistence in this test)
	eventually(t, 5*time.Second, "writes again", func() bool {
		_, err := a.Put(ctx, "group", "h", []byte("1"))
		return err == nil
	})
	eventually(t, time.Second, "b follows again", func() bool { _, ok := b.doc("group/h"); return ok })
}

// TestStateRedisLostIt: Redis restarted empty (no persistence): the nodes
// see the version counter go back, write back what they applied, and
// follow new changes again; a drop count gone back drops all decisions.
func TestStateRedisLostIt(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	ctx := context.Background()
	a, b := startNode(t, r.URL(), "a"), startNode(t, r.URL(), "b")
	must(t, a.follow())
	must(t, b.follow())
	for i := range 5 {
		if _, err := a.Put(ctx, "group", fmt.Sprint("g", i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	must(t, a.DropDecisions(ctx, "k"))
	must(t, a.DropDecisions(ctx, "k"))
	eventually(t, time.Second, "applied", func() bool { _, ok := b.doc("group/g4"); return ok })
	eventually(t, time.Second, "dropped", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.drops) == 2 })
	r.Restart()
	defer func() {
		if t.Failed() {
			t.Logf("a:\n%s\nb:\n%s", a.log, b.log)
		}
	}()
	eventually(t, 5*time.Second, "written back", func() bool {
		return r.MustDo("HLEN {sipedge:fleet}:doc:group") == ":5"
	})
	eventually(t, time.Second, "the loss logged and counted on both", func() bool {
		return a.log.Contains("redis lost the shared state") && hasMetric(metricsText(b.Fleet), "sipedge_fleet_state_lost_total 1") &&
			b.log.Contains("redis lost the shared state")
	})
	eventually(t, time.Second, "all decisions dropped after the loss", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.drops) == 3 && b.drops[2] == ""
	})
	if _, err := a.Put(ctx, "group", "g1", []byte("new")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "a change after the loss", func() bool { d, _ := b.doc("group/g1"); return d == "new" })
	for i := range 5 {
		if i != 1 {
			if d, _ := b.doc(fmt.Sprint("group/g", i)); d != fmt.Sprint(i) {
				t.Fatalf("g%d: %q after the loss", i, d)
			}
		}
	}
}
