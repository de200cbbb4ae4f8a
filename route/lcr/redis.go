package lcr

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sipedge/sipedge/internal/redisurl"
)

// RedisKeyPrefix is put before the cache key to form the Redis key. It has
// no hash tag: a decision's commands (GET and PTTL, SET) touch its one key,
// so on a Redis Cluster the decisions spread over all the slots, hence all
// the masters, instead of filling one.
const RedisKeyPrefix = "sipedge:lcr:"

// redisRetry is how long the Redis tier is left alone after a failure; then
// one lookup probes it again.
const redisRetry = time.Second

// redisTier is the fleet-wide tier: the API's JSON response under
// RedisKeyPrefix+key with a PX expiry. Every call has Options.RedisDeadline.
// A failure marks the tier down (logged once, sipedge_lcr_redis_up 0): until
// redisRetry has passed the tier is skipped, then one lookup probes it, and
// a success marks it up again (logged once).
type redisTier struct {
	r        *Resolver
	deadline time.Duration
	owned    bool // Close closes the client

	mu     sync.Mutex
	client rueidis.Client // nil until connected

	up      atomic.Bool
	retryAt atomic.Int64 // resolver clock; while down, the tier is skipped before it
}

func (t *redisTier) get() rueidis.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.client
}

// usable reports whether a lookup should use Redis now: it is up, or it is
// down and this caller is the one probe allowed after redisRetry.
func (t *redisTier) usable(now int64) bool {
	if t.up.Load() {
		return true
	}
	at := t.retryAt.Load()
	return now >= at && t.retryAt.CompareAndSwap(at, now+int64(redisRetry))
}

func (t *redisTier) failed(err error) {
	if t.r.ctx.Err() != nil {
		return // cancelled by Close: not Redis's fault
	}
	t.r.m.redisErrors.Inc()
	t.retryAt.Store(t.r.now() + int64(redisRetry))
	if t.up.CompareAndSwap(true, false) {
		t.r.log.Warn("lcr: Redis cache unavailable, using the in-process tier only", "err", err)
	}
}

func (t *redisTier) succeeded() {
	if t.up.CompareAndSwap(false, true) {
		t.r.log.Info("lcr: Redis cache available again")
	}
}

// lookup returns the stored response body under key and its remaining TTL.
func (t *redisTier) lookup(ctx context.Context, key string) ([]byte, time.Duration, bool) {
	c := t.get()
	if c == nil || !t.usable(t.r.now()) {
		return nil, 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.deadline)
	defer cancel()
	k := RedisKeyPrefix + key
	res := c.DoMulti(ctx, c.B().Get().Key(k).Build(), c.B().Pttl().Key(k).Build())
	if err := res[0].Error(); err != nil {
		if rueidis.IsRedisNil(err) {
			t.succeeded()
		} else {
			t.failed(err)
		}
		return nil, 0, false
	}
	body, err := res[0].AsBytes()
	if err != nil {
		t.failed(err)
		return nil, 0, false
	}
	pttl, err := res[1].AsInt64()
	if err != nil {
		t.failed(err)
		return nil, 0, false
	}
	t.succeeded()
	if pttl <= 0 { // expired between the two commands, or a key without expiry
		return nil, 0, false
	}
	return body, time.Duration(pttl) * time.Millisecond, true
}

// store saves body under key for ttl.
func (t *redisTier) store(ctx context.Context, key string, body []byte, ttl time.Duration) {
	c := t.get()
	ms := ttl.Milliseconds()
	if c == nil || ms <= 0 || !t.usable(t.r.now()) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, t.deadline)
	defer cancel()
	err := c.Do(ctx, c.B().Set().Key(RedisKeyPrefix+key).Value(rueidis.BinaryString(body)).PxMilliseconds(ms).Build()).Error()
	if err != nil {
		t.failed(err)
		return
	}
	t.succeeded()
}

// connectLater dials Redis once every redisRetry until it succeeds or ctx
// is done: New's first attempt failed. A Redis that came up refusing the
// URL's database is logged, once, as an error.
func (t *redisTier) connectLater(ctx context.Context, opt rueidis.ClientOption) {
	logged := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(redisRetry):
		}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.failed(err)
			if !logged {
				if err := redisurl.DBRefused(opt, err); err != nil {
					t.r.log.Error("lcr: Redis refuses the URL's database", "err", err)
					logged = true
				}
			}
			continue
		}
		t.mu.Lock()
		if ctx.Err() != nil { // closed meanwhile
			t.mu.Unlock()
			c.Close()
			return
		}
		t.client = c
		t.mu.Unlock()
		t.retryAt.Store(0)
		t.succeeded()
		return
	}
}

func (t *redisTier) close() {
	t.mu.Lock()
	c := t.client
	t.client = nil
	t.mu.Unlock()
	if c != nil && t.owned {
		c.Close()
	}
}
