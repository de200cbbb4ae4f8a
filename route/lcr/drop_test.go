package lcr

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// TestDrop: Drop deletes a decision from Redis and this node's in-process
// tier, DropLocal from another node's; the next lookups ask the API. ""
// drops them all.
func TestDrop(t *testing.T) {
	testtier.RequiresSockets(t)
	rs := redistest.Start(t)
	api := newAPIServer(t, nil)
	ctx := context.Background()
	a := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})
	b := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})
	numbers := []string{"+12025550101", "+12025550102", "+12025550103"}
	for _, n := range numbers {
		a.lookup(t, testRequest(n))
		waitStored(t, rs, RedisKeyPrefix+"cust-trunks:"+n)
		b.lookup(t, testRequest(n)) // from Redis, kept in b's process
	}
	if n := api.requests.Load(); n != 3 {
		t.Fatalf("%d API requests, want 3", n)
	}
	key := "cust-trunks:" + numbers[0]
	c, err := b.Cached(ctx, key)
	if err != nil || c.Local == nil || c.Local.TTL <= 0 || len(c.Local.Routes) != 1 || !strings.Contains(string(c.Redis), "carrier-a") || c.RedisTTL < 50*time.Second {
		t.Fatalf("cached: %+v %v", c, err)
	}

	n, err := a.Drop(ctx, key)
	if err != nil || n != 1 {
		t.Fatalf("drop: %d %v", n, err)
	}
	if _, ok := redisGet(t, rs, RedisKeyPrefix+key); ok {
		t.Fatal("still in Redis")
	}
	if _, ok := a.LookupCached([]byte(key)); ok {
		t.Fatal("still in the dropping node's process")
	}
	if _, ok := b.LookupCached([]byte(key)); !ok {
		t.Fatal("b's tier is b's: only DropLocal drops it")
	}
	b.DropLocal(key)
	if c, _ := b.Cached(ctx, key); c.Local != nil || c.Redis != nil {
		t.Fatalf("cached after the drop: %+v", c)
	}
	b.lookup(t, testRequest(numbers[0]))
	if n := api.requests.Load(); n != 4 {
		t.Fatalf("%d API requests, want 4: the dropped decision came from a cache", n)
	}
	if _, ok := b.LookupCached([]byte("cust-trunks:" + numbers[1])); !ok {
		t.Fatal("another decision was dropped")
	}

	waitStored(t, rs, RedisKeyPrefix+key)
	if n, err := a.Drop(ctx, ""); err != nil || n != 3 {
		t.Fatalf("drop all: %d %v", n, err)
	}
	b.DropLocal("")
	for _, num := range numbers {
		if _, ok := redisGet(t, rs, RedisKeyPrefix+"cust-trunks:"+num); ok {
			t.Fatalf("%s still in Redis", num)
		}
		for _, r := range []*testResolver{a, b} {
			if _, ok := r.LookupCached([]byte("cust-trunks:" + num)); ok {
				t.Fatalf("%s still in process", num)
			}
		}
	}
	rs.MustDo("SET other:key 1")
	if n, _ := a.Drop(ctx, ""); n != 0 || rs.MustDo("EXISTS other:key") != ":1" {
		t.Fatal("drop all touched a key that is not a decision")
	}
}

// TestDropDuringFlight: a lookup in flight when a drop runs delivers its
// decision but caches it nowhere: it may have read what was dropped.
func TestDropDuringFlight(t *testing.T) {
	testtier.RequiresSockets(t)
	rs := redistest.Start(t)
	release := make(chan struct{})
	api := newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
		<-release
		io.WriteString(w, oneRoute)
	})
	r := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})
	done := make(chan Decision, 1)
	r.Lookup(testRequest("+12025550199"), func(d Decision) { done <- d })
	for api.requests.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.DropLocal("")
	close(release)
	if d := <-done; len(d.Routes) != 1 {
		t.Fatalf("decision %+v", d)
	}
	time.Sleep(100 * time.Millisecond) // the flight would store in Redis now
	key := "cust-trunks:+12025550199"
	if c, err := r.Cached(context.Background(), key); err != nil || c.Local != nil || c.Redis != nil {
		t.Fatalf("cached after a drop during the flight: %+v %v", c, err)
	}
}

// TestDropWithoutRedis: without a Redis tier, Drop drops the in-process
// tier and says there is no Redis.
func TestDropWithoutRedis(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL})
	r.lookup(t, testRequest("+12025550100"))
	key := []byte("cust-trunks:+12025550100")
	if _, ok := r.LookupCached(key); !ok {
		t.Fatal("not cached")
	}
	if _, err := r.Drop(context.Background(), string(key)); !errors.Is(err, ErrNoRedis) {
		t.Fatalf("drop: %v", err)
	}
	if _, ok := r.LookupCached(key); ok {
		t.Fatal("still cached")
	}
}

// TestDropAllCluster: on a Redis Cluster, "" drops the decisions on every
// master.
func TestDropAllCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	c := redistest.StartCluster(t, 3)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL, RedisURL: c.URL(), RedisDeadline: testRedisDeadline})
	owners := map[*redistest.Server]bool{}
	var keys []string
	for i := range 12 {
		n := "+1202555" + string(rune('0'+i/10)) + string(rune('0'+i%10)) + "00"
		r.lookup(t, testRequest(n))
		key := RedisKeyPrefix + "cust-trunks:" + n
		waitStored(t, c.Owner(key), key)
		owners[c.Owner(key)] = true
		keys = append(keys, key)
	}
	if len(owners) < 2 {
		t.Fatal("12 decisions on one master")
	}
	if n, err := r.Drop(context.Background(), ""); err != nil || n != 12 {
		t.Fatalf("drop all: %d %v", n, err)
	}
	for _, key := range keys {
		if _, ok := redisGet(t, c.Owner(key), key); ok {
			t.Fatalf("%s still on %s", key, c.Owner(key).Addr())
		}
	}
}
