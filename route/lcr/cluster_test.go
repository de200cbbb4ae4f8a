package lcr

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
	"github.com/sipedge/sipedge/route"
)

// TestRedisCluster: the Redis tier on a real Redis Cluster, through the
// URL form of the server's cache[].url (every node as a seed, or one seed).
// One cluster for the subtests: it takes some 2 s to come up.
func TestRedisCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	c := redistest.StartCluster(t, 3)

	// Fleet-wide: a decision one resolver cached is found by another,
	// which knows a single node of the cluster.
	t.Run("shared", func(t *testing.T) {
		api := newAPIServer(t, staticReply(200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.01,"headers":{"X-A":"1"}}],"cache_ttl_secs":60}`))
		for i, s := range c.Nodes {
			a := newTestResolver(t, Options{APIURL: api.URL, RedisURL: c.URL(), RedisDeadline: testRedisDeadline})
			b := newTestResolver(t, Options{APIURL: api.URL, RedisURL: s.URL(), RedisDeadline: testRedisDeadline})
			number := "+120255501" + strconv.Itoa(i) // a key per seed
			key := RedisKeyPrefix + "cust-trunks:" + number
			before := api.requests.Load()

			da := a.lookup(t, testRequest(number))
			stored := waitStored(t, c.Owner(key), key)
			var resp Response
			if err := json.Unmarshal([]byte(stored), &resp); err != nil || resp.Validate() != nil {
				t.Fatalf("stored value %q is not a response: %v", stored, err)
			}
			db := b.lookup(t, testRequest(number))
			if n := api.requests.Load() - before; n != 1 {
				t.Fatalf("seed %s: %d API requests, want 1: B did not use A's decision", s.Addr(), n)
			}
			if db.Source != route.SourceLCR || carriers(db.Routes) != carriers(da.Routes) || db.Routes[0].Headers["X-A"] != "1" {
				t.Fatalf("seed %s: B's decision %+v", s.Addr(), db)
			}
			if db.TTL <= 50*time.Second || db.TTL > 60*time.Second {
				t.Fatalf("seed %s: B's TTL %v, want what remained in Redis", s.Addr(), db.TTL)
			}
			for _, r := range []*testResolver{a, b} {
				if n := r.metric(t, metricRedisErrors); n != 0 {
					t.Fatalf("seed %s: %v Redis errors:\n%s", s.Addr(), n, r.log.String())
				}
			}
			if n := b.metric(t, metricCacheHits+`{tier="redis"}`); n != 1 {
				t.Fatalf("seed %s: B's Redis hits %v", s.Addr(), n)
			}
		}
	})

	// Spread: the decisions go to every master, by their keys' slots, not
	// all to the one slot a shared hash tag would give them.
	t.Run("spread", func(t *testing.T) {
		api := newAPIServer(t, nil)
		r := newTestResolver(t, Options{APIURL: api.URL, RedisURL: c.URL(), RedisDeadline: testRedisDeadline})
		held := map[*redistest.Server]int{}
		for i := range 30 {
			number := "+1303555" + strconv.Itoa(1000+i)
			r.lookup(t, testRequest(number))
			key := RedisKeyPrefix + "cust-trunks:" + number
			owner := c.Owner(key)
			waitStored(t, owner, key)
			held[owner]++
		}
		for _, s := range c.Nodes {
			size := s.MustDo("DBSIZE")
			if held[s] == 0 || size == ":0" {
				t.Errorf("node %s: DBSIZE %s, %d of the 30 decisions: want some on every master", s.Addr(), size, held[s])
			}
		}
		if n := r.metric(t, metricRedisErrors); n != 0 {
			t.Fatalf("%v Redis errors:\n%s", n, r.log.String())
		}
	})

	// A database other than 0, which a Cluster does not have, fails New
	// with the reason, instead of a tier that never connects.
	t.Run("database", func(t *testing.T) {
		for _, url := range []string{c.URL() + "&db=1", c.Nodes[1].URL() + "/2"} {
			r, err := New(Options{APIURL: "http://127.0.0.1/", RedisURL: url, Log: discardLog()})
			if err == nil {
				r.Close()
				t.Fatalf("%s: New succeeded", url)
			}
			if !errors.Is(err, ErrInvalidOption) || !errors.Is(err, ErrRedisURL) || !strings.Contains(err.Error(), "is a Redis Cluster, which has only database 0") {
				t.Fatalf("%s: %v, want ErrRedisURL saying a Cluster has only database 0", url, err)
			}
		}
	})
}
