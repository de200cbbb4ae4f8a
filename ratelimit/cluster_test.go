package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// TestRedisCluster: the limiter on a real Redis Cluster, through the URL
// form of the server's ratelimit.redis (every node as a seed, or one seed
// that does not serve the keys' slot). One cluster for the subtests: it
// takes some 2 s to come up.
func TestRedisCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	c := redistest.StartCluster(t, 3)
	owner := c.Owner(keyPrefix + "x")
	var other *redistest.Server // a node that does not serve the CPS slot
	for _, s := range c.Nodes {
		if s != owner {
			other = s
		}
	}

	// Spacing: a few keys, each one interval apart on Redis' clock, and
	// Over past MaxWait; all the keys in the one slot the script needs.
	// At 2/s the slots are 575 ms apart, far more than a loaded machine
	// delays a reply.
	t.Run("spacing", func(t *testing.T) {
		for u, url := range []string{c.URL(), other.URL()} {
			n := newNode(t, url, Options{})
			for i := range 3 {
				name := "spacing-" + strconv.Itoa(u) + "-" + strconv.Itoa(i)
				k := n.register(t, name, Limit{Rate: 2, MaxWait: 2 * time.Second})
				start := time.Now()
				var slots []time.Duration
				for range 4 { // 0, 575, 1150, 1725 ms
					d, err := n.Reserve(context.Background(), k)
					if err != nil || d.Over || d.Source != SourceRedis {
						t.Fatalf("%s: %+v %v; logs:\n%s", url, d, err, n.logs)
					}
					slots = append(slots, time.Since(start)+d.Wait)
				}
				for j := 1; j < len(slots); j++ {
					// Each slot's time is the reply's arrival plus
					// the wait: it jitters by a round trip.
					if gap := slots[j] - slots[j-1]; gap < 475*ms || gap > 675*ms {
						t.Fatalf("%s: gap %d: %v, want 575 ms: %v", url, j, gap, slots)
					}
				}
				// The next slot, 2300 ms out: Over.
				if d, err := n.Reserve(context.Background(), k); err != nil || !d.Over || d.Source != SourceRedis {
					t.Fatalf("%s: past max wait: %+v %v", url, d, err)
				}
				if got := c.Owner(keyPrefix + name); got != owner {
					t.Fatalf("key %s on %s, want %s with the others", keyPrefix+name, got.Addr(), owner.Addr())
				}
				if got := owner.MustDo("EXISTS " + keyPrefix + name); got != ":1" {
					t.Fatalf("EXISTS %s = %s", keyPrefix+name, got)
				}
			}
			if errs := n.metric(t, "sipedge_ratelimit_redis_errors_total"); errs != 0 {
				t.Fatalf("%s: %v errors; logs:\n%s", url, errs, n.logs)
			}
		}
	})

	// Group: decisions on several keys queued while the slot's node does
	// not answer go in one script call (no CROSSSLOT), each key decided
	// on its own.
	t.Run("group", func(t *testing.T) {
		n := newNode(t, c.URL(), Options{})
		warm := n.register(t, "group-warm", Limit{Rate: 1000})
		waitRedisMode(t, n, warm)
		var keys []Key
		for i := range 4 {
			keys = append(keys, n.register(t, "group-"+strconv.Itoa(i), Limit{Rate: 2, MaxWait: 2 * time.Second}))
		}
		trips := n.metric(t, "sipedge_ratelimit_redis_round_trips_total")
		owner.Freeze()
		thawed := false
		defer func() {
			if !thawed {
				owner.Thaw()
			}
		}()
		const perKey = 3
		var mu sync.Mutex
		waits := make([][]time.Duration, len(keys))
		var wg, ready sync.WaitGroup
		for range perKey {
			for i, k := range keys {
				ready.Add(1)
				wg.Go(func() {
					ready.Done()
					d, err := n.Reserve(context.Background(), k)
					mu.Lock()
					defer mu.Unlock()
					if err != nil || d.Over || d.Source != SourceRedis {
						t.Errorf("key %d: %+v %v", i, d, err)
						return
					}
					waits[i] = append(waits[i], d.Wait)
				})
			}
		}
		settle(t, n.Redis(), &ready)
		owner.Thaw()
		thawed = true
		wg.Wait()
		if t.Failed() {
			t.Fatalf("logs:\n%s", n.logs)
		}
		got := n.metric(t, "sipedge_ratelimit_redis_round_trips_total") - trips
		if got > defaultPipelines+1 {
			t.Errorf("%v script calls for %d decisions queued together, want at most %d", got, perKey*len(keys), defaultPipelines+1)
		}
		// Each key's slots are its own: 0, 575 ms, 1150 ms (less the time
		// between the calls, which Redis' now moved on by, for those of
		// the later call; see TestRedisGroupMixedKeys).
		for i, w := range waits {
			slices.Sort(w)
			if len(w) != perKey || w[0] != 0 || w[1] < 275*ms || w[1] > 575*ms || w[2] < 850*ms || w[2] > 1150*ms {
				t.Errorf("key %d: waits %v, want 0, 575 ms, 1150 ms", i, w)
			}
		}
	})

	// A database other than 0, which a Cluster does not have, fails New
	// with the reason, instead of a limiter that never connects.
	t.Run("database", func(t *testing.T) {
		for _, url := range []string{c.URL() + "&db=1", other.URL() + "/2"} {
			l, err := New(Options{Config: Config{Redis: url}, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				l.Close()
				t.Fatalf("%s: New succeeded", url)
			}
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrRedisURL) || !strings.Contains(err.Error(), "is a Redis Cluster, which has only database 0") {
				t.Fatalf("%s: %v, want ErrRedisURL saying a Cluster has only database 0", url, err)
			}
		}
	})
}
