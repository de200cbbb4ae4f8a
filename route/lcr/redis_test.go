package lcr

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
	"github.com/sipedge/sipedge/route"
)

// testRedisDeadline replaces the 50 ms default in tests that need Redis
// calls to succeed: under -race on a loaded machine a call can take longer,
// and a missed deadline (correctly) marks the tier down.
const testRedisDeadline = time.Second

// redisGet returns the value of a Redis key, ok false when it does not exist.
func redisGet(t *testing.T, s *redistest.Server, key string) (string, bool) {
	t.Helper()
	return redisGetDB(t, s, 0, key)
}

// redisGetDB is redisGet in database db.
func redisGetDB(t *testing.T, s *redistest.Server, db int, key string) (string, bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	br := bufio.NewReader(c)
	if db != 0 {
		io.WriteString(c, "SELECT "+strconv.Itoa(db)+"\r\n")
		if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
			t.Fatalf("SELECT %d: %q %v", db, line, err)
		}
	}
	io.WriteString(c, "*2\r\n$3\r\nGET\r\n$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n")
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if line[0] != '$' || err != nil {
		t.Fatalf("GET %s: %q", key, line)
	}
	if n < 0 {
		return "", false
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(br, buf); err != nil {
		t.Fatal(err)
	}
	return string(buf[:n]), true
}

// waitStored waits until key is in Redis (the flight stores it after done).
func waitStored(t *testing.T, s *redistest.Server, key string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if v, ok := redisGet(t, s, key); ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not stored in Redis", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedisSharedAcrossResolvers: a decision cached by one node is used by
// another without asking the API.
func TestRedisSharedAcrossResolvers(t *testing.T) {
	testtier.RequiresSockets(t)
	rs := redistest.Start(t)
	api := newAPIServer(t, staticReply(200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.01,"headers":{"X-A":"1"}}],"cache_ttl_secs":60}`))
	a := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})
	b := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})

	da := a.lookup(t, testRequest("+12025550123"))
	stored := waitStored(t, rs, "sipedge:lcr:cust-trunks:+12025550123") // the documented key form
	var resp Response
	if err := json.Unmarshal([]byte(stored), &resp); err != nil || resp.Validate() != nil {
		t.Fatalf("stored value %q is not a response: %v", stored, err)
	}
	pttl := rs.MustDo("PTTL sipedge:lcr:cust-trunks:+12025550123")
	if ms, err := strconv.Atoi(strings.TrimPrefix(pttl, ":")); err != nil || ms < 58000 || ms > 60000 {
		t.Fatalf("PTTL %s, want about 60000", pttl)
	}

	db := b.lookup(t, testRequest("+12025550123"))
	if n := api.requests.Load(); n != 1 {
		t.Fatalf("%d API requests, want 1: B did not use A's decision", n)
	}
	if db.Source != route.SourceLCR || carriers(db.Routes) != carriers(da.Routes) || db.Routes[0].Headers["X-A"] != "1" {
		t.Fatalf("B's decision %+v", db)
	}
	if db.TTL <= 58*time.Second || db.TTL > 60*time.Second {
		t.Fatalf("B's TTL %v, want what remained in Redis", db.TTL)
	}
	if n := b.metric(t, metricCacheHits+`{tier="redis"}`); n != 1 {
		t.Fatalf("B's Redis hits %v", n)
	}
	// B now has it in process too.
	if _, ok := b.LookupCached(b.AppendKey(nil, "cust-trunks", "+12025550123", nil)); !ok {
		t.Fatal("a Redis hit was not kept in process")
	}
	if n := b.metric(t, metricRedisUp); n != 1 {
		t.Fatalf("redis_up %v", n)
	}
}

// TestRedisTTLZeroNotStored: "do not cache" holds for Redis too.
func TestRedisTTLZeroNotStored(t *testing.T) {
	testtier.RequiresSockets(t)
	rs := redistest.Start(t)
	api := newAPIServer(t, staticReply(200, `{"routes":[],"cache_ttl_secs":0}`))
	a := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline, CacheTTL: time.Hour})
	a.lookup(t, testRequest("+1"))
	a.Close() // waits for the flight, including its (absent) store
	if _, ok := redisGet(t, rs, RedisKeyPrefix+"cust-trunks:+1"); ok {
		t.Fatal("a cache_ttl_secs 0 answer was stored in Redis")
	}
}

// TestRedisDown: with Redis gone, lookups use the in-process tier and the
// API; the outage is logged once, counted and shown by the gauge; Redis
// coming back is noticed.
func TestRedisDown(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	rs := redistest.Start(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})
	r.lookup(t, testRequest("+1"))
	waitStored(t, rs, RedisKeyPrefix+"cust-trunks:+1")

	rs.Stop()
	for _, n := range []string{"+2", "+3", "+4"} {
		start := time.Now()
		if d := r.lookup(t, testRequest(n)); d.Source != route.SourceLCR {
			t.Fatalf("%s: decision %+v", n, d)
		}
		// The first call to find Redis gone may wait out its deadline
		// (the lookup then carries on without it); none may wait longer.
		if el := time.Since(start); el > testRedisDeadline+time.Second {
			t.Fatalf("%s: lookup took %v with Redis down, its deadline %v", n, el, testRedisDeadline)
		}
	}
	// The in-process tier still serves.
	for _, n := range []string{"+1", "+2", "+3", "+4"} {
		r.lookup(t, testRequest(n))
	}
	if n := api.requests.Load(); n != 4 {
		t.Fatalf("%d API requests, want 4", n)
	}
	if n := strings.Count(r.log.String(), "Redis cache unavailable"); n != 1 {
		t.Fatalf("%d unavailable log lines, want 1:\n%s", n, r.log.String())
	}
	if n := r.metric(t, metricRedisErrors); n < 1 {
		t.Fatalf("redis errors %v", n)
	}
	if n := r.metric(t, metricRedisUp); n != 0 {
		t.Fatalf("redis_up %v", n)
	}

	// Redis comes back on the same port; after the retry interval the next
	// lookup probes it.
	rs.Restart()
	time.Sleep(redisRetry + 100*time.Millisecond)
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; r.metric(t, metricRedisUp) != 1; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("Redis not back:\n%s", r.log.String())
		}
		r.lookup(t, testRequest("+5"+strconv.Itoa(i)))
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(r.log.String(), "Redis cache available again"); n != 1 {
		t.Fatalf("%d available-again log lines, want 1", n)
	}
	waitStored(t, rs, RedisKeyPrefix+"cust-trunks:+50")
}

// TestRedisUnreachableAtStart: New does not fail; the tier starts down.
func TestRedisUnreachableAtStart(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	api := newAPIServer(t, nil)
	port := redistest.FreePort(t)
	start := time.Now()
	r := newTestResolver(t, Options{APIURL: api.URL, RedisURL: "redis://127.0.0.1:" + strconv.Itoa(port)})
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("New took %v", el)
	}
	r.lookup(t, testRequest("+1"))
	r.lookup(t, testRequest("+1"))
	if n := api.requests.Load(); n != 1 {
		t.Fatalf("%d API requests, want 1", n)
	}
	if n := r.metric(t, metricRedisUp); n != 0 {
		t.Fatalf("redis_up %v", n)
	}
	if n := strings.Count(r.log.String(), "Redis cache unavailable"); n != 1 {
		t.Fatalf("%d unavailable log lines, want 1", n)
	}
	// It is dialled again in the background.
	redistest.StartOn(t, port)
	deadline := time.Now().Add(3 * time.Second)
	for r.metric(t, metricRedisUp) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected:\n%s", r.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisDatabaseRefused: a database the Redis reached refuses fails New
// with the reason; one it accepts is used. Refused by a Redis that came up
// after New, it is logged as an error, once.
func TestRedisDatabaseRefused(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	rs := redistest.Start(t)
	api := newAPIServer(t, nil)
	_, err := New(Options{APIURL: api.URL, RedisURL: rs.URL() + "/99", Log: discardLog()})
	if !errors.Is(err, ErrInvalidOption) || !errors.Is(err, ErrRedisURL) || !strings.Contains(err.Error(), "database 99: Redis at "+rs.Addr()+" refuses it") {
		t.Fatalf("database 99: %v, want ErrRedisURL saying Redis refuses it", err)
	}
	a := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL() + "/1", RedisDeadline: testRedisDeadline})
	a.lookup(t, testRequest("+1"))
	key := RedisKeyPrefix + "cust-trunks:+1"
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, ok := redisGetDB(t, rs, 1, key); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("database 1: %s was not stored there", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := redisGet(t, rs, key); ok {
		t.Fatalf("database 1: %s was stored in database 0", key)
	}

	port := redistest.FreePort(t)
	r := newTestResolver(t, Options{APIURL: api.URL, RedisURL: "redis://127.0.0.1:" + strconv.Itoa(port) + "/99"})
	redistest.StartOn(t, port)
	deadline = time.Now().Add(3 * time.Second)
	for !strings.Contains(r.log.String(), "level=ERROR") {
		if time.Now().After(deadline) {
			t.Fatalf("database 99 refused after New, not logged:\n%s", r.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(redisRetry + 100*time.Millisecond) // another attempt
	if log := r.log.String(); strings.Count(log, "level=ERROR") != 1 || !strings.Contains(log, "database 99: Redis at 127.0.0.1:"+strconv.Itoa(port)+" refuses it") {
		t.Fatalf("want one error saying why:\n%s", log)
	}
}

// TestBreakerOpenRedisStillServes: with the API dead and the breaker open,
// decisions other nodes cached in Redis are still used; the rest fail fast.
func TestBreakerOpenRedisStillServes(t *testing.T) {
	testtier.RequiresSockets(t)
	rs := redistest.Start(t)
	api := newAPIServer(t, nil)
	a := newTestResolver(t, Options{APIURL: api.URL, RedisURL: rs.URL(), RedisDeadline: testRedisDeadline})
	a.lookup(t, testRequest("+1"))
	waitStored(t, rs, RedisKeyPrefix+"cust-trunks:+1")

	b := newTestResolver(t, Options{APIURL: closedURL(t), RedisURL: rs.URL(), RedisDeadline: testRedisDeadline, BreakerThreshold: 1,
		FallbackGatewayGroup: "fb"})
	if d := b.lookup(t, testRequest("+2")); d.Source != route.SourceFallback {
		t.Fatalf("dead API: %+v", d)
	}
	if s := b.metric(t, metricBreakerState); s != breakerOpen {
		t.Fatalf("breaker state %v", s)
	}
	if d := b.lookup(t, testRequest("+1")); d.Source != route.SourceLCR || carriers(d.Routes) != "carrier-a" {
		t.Fatalf("cached in Redis: %+v", d)
	}
	start := time.Now()
	if d := b.lookup(t, testRequest("+3")); d.Source != route.SourceFallback {
		t.Fatalf("open breaker: %+v", d)
	}
	if el := time.Since(start); el > 50*time.Millisecond {
		t.Fatalf("open breaker: lookup took %v", el)
	}
	if n := b.failures(t, "breaker_open"); n != 1 {
		t.Fatalf("breaker_open %v", n)
	}
}
