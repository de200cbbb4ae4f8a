package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// TestCluster: the fleet on a real Redis Cluster (every key in one slot
// by the hash tag, notifications across the cluster's nodes): membership,
// a channel limit under concurrent takes, shared state within a second,
// a dead node's journal claimed once. One cluster: it takes some 2 s to
// come up.
func TestCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	rc := redistest.StartCluster(t, 3)
	ctx := context.Background()
	// Each node knows another seed of the cluster.
	var nodes []*testNode
	for i, id := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, rc.Nodes[i].URL(), id, withJournal))
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	if _, err := newNode(t, rc.URL(), "b"); !errors.Is(err, ErrNodeIDTaken) {
		t.Fatalf("a second b: %v", err)
	}
	eventually(t, 2*time.Second, "three nodes", func() bool {
		list, err := c.Nodes(ctx)
		return err == nil && len(list) == 3
	})

	t.Run("channels", func(t *testing.T) {
		const limit = 6
		var up, peak atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for _, n := range nodes {
			ch := n.Channel("carrier", limit)
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if !ch.Take() {
							time.Sleep(time.Millisecond)
							continue
						}
						v := up.Add(1)
						if v > limit {
							t.Errorf("%d up, limit %d", v, limit)
						}
						for p := peak.Load(); v > p && !peak.CompareAndSwap(p, v); p = peak.Load() {
						}
						time.Sleep(2 * time.Millisecond)
						up.Add(-1)
						ch.Release()
					}
				}()
			}
		}
		time.Sleep(1500 * time.Millisecond)
		close(stop)
		wg.Wait()
		if peak.Load() < limit-1 {
			t.Fatalf("peak %d of %d", peak.Load(), limit)
		}
	})

	t.Run("state", func(t *testing.T) {
		for _, n := range nodes {
			must(t, n.follow())
		}
		if _, err := b.Put(ctx, "group", "g", []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			eventually(t, time.Second, "applied on "+n.NodeID(), func() bool { d, _ := n.doc("group/g"); return d == `{"x":1}` })
		}
		must(t, c.DropDecisions(ctx, "k"))
		eventually(t, time.Second, "drop on a", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.drops) == 1 })
	})

	t.Run("journal", func(t *testing.T) {
		for i := range 3 {
			c.Journal().Answered(uint64(i), testCall(i))
		}
		eventually(t, time.Second, "journalled", func() bool {
			return rc.Owner("{sipedge:fleet}:journals").MustDo("HLEN {sipedge:fleet}:journal:"+c.self.Load().field) == ":3"
		})
		c.abandon()
		eventually(t, 4*time.Second, "claimed", func() bool { return len(a.lostCalls())+len(b.lostCalls()) == 3 })
		time.Sleep(500 * time.Millisecond)
		if n := len(a.lostCalls()) + len(b.lostCalls()); n != 3 {
			t.Fatalf("%d lost calls written, want 3", n)
		}
	})
}
