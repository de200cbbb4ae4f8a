package lcr

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/redis/rueidis"
)

// Decision cache control: an operator drops decisions that must not wait
// for their TTL (a rate changed). Drop deletes them from Redis and from
// this node's in-process tier; the other nodes of the fleet drop theirs
// with DropLocal when told (the fleet package broadcasts it). A lookup
// already in flight when a drop runs does not cache what it gets: it may
// have read the decision before the drop.

// ErrNoRedis: the resolver has no Redis tier, or it is not connected.
var ErrNoRedis = errors.New("lcr: no Redis tier connected")

// dropBatch is how many keys a SCAN asks for, and an UNLINK deletes.
const dropBatch = 500

// dropDeadline bounds each Redis call of Drop and Cached: they run on an
// admin goroutine, where a second is affordable, unlike a lookup.
const dropDeadline = time.Second

// Drop deletes the decision cached under key (as AppendKey builds it) from
// Redis and from the in-process tier; key "" deletes all of them: every
// RedisKeyPrefix key, on every master of a Redis Cluster. It returns how
// many Redis keys it deleted. The in-process tier is dropped whatever
// Redis answers; without a Redis tier the error is ErrNoRedis. It blocks
// on Redis: call it from an admin goroutine, never a shard.
func (r *Resolver) Drop(ctx context.Context, key string) (int, error) {
	r.DropLocal(key)
	if r.redis == nil {
		return 0, ErrNoRedis
	}
	c := r.redis.get()
	if c == nil {
		return 0, ErrNoRedis
	}
	if key != "" {
		cctx, cancel := context.WithTimeout(ctx, dropDeadline)
		defer cancel()
		n, err := c.Do(cctx, c.B().Unlink().Key(RedisKeyPrefix+key).Build()).AsInt64()
		if err != nil {
			return 0, fmt.Errorf("lcr: cannot delete %q from Redis: %w", RedisKeyPrefix+key, err)
		}
		return int(n), nil
	}
	total := 0
	for addr, node := range c.Nodes() {
		n, err := dropAll(ctx, c, node)
		total += n
		if err != nil {
			return total, fmt.Errorf("lcr: cannot delete the decisions on %s: %w", addr, err)
		}
	}
	return total, nil
}

// dropAll deletes every decision key node holds: SCAN on the node (a
// replica, should the client know one, lists its master's keys), UNLINK
// through the client, which sends each key to its slot's master.
func dropAll(ctx context.Context, c, node rueidis.Client) (int, error) {
	total := 0
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, dropDeadline)
		e, err := node.Do(cctx, node.B().Scan().Cursor(cursor).Match(RedisKeyPrefix+"*").Count(dropBatch).Build()).AsScanEntry()
		cancel()
		if err != nil {
			return total, err
		}
		if len(e.Elements) > 0 {
			cmds := make(rueidis.Commands, len(e.Elements))
			for i, k := range e.Elements {
				cmds[i] = c.B().Unlink().Key(k).Build()
			}
			cctx, cancel := context.WithTimeout(ctx, dropDeadline)
			for _, res := range c.DoMulti(cctx, cmds...) {
				n, err := res.AsInt64()
				if err != nil {
					cancel()
					return total, err
				}
				total += int(n)
			}
			cancel()
		}
		if cursor = e.Cursor; cursor == 0 {
			return total, nil
		}
	}
}

// DropLocal drops the decision cached under key from the in-process tier
// only ("" for all): what another node's Drop asks of this one. A lookup
// in flight does not cache what it gets. Any goroutine but a shard's may
// call it: it takes the tier's locks.
func (r *Resolver) DropLocal(key string) {
	r.drops.Add(1)
	if r.local == nil {
		return
	}
	if key == "" {
		r.local.clear()
		return
	}
	r.local.remove(key)
}

// Cached is what the cache holds under a key, tier by tier (GET
// /v1/lcr/cache?key=).
type Cached struct {
	// Local is the in-process tier's decision, its TTL what remains of
	// its life there; nil when it has none.
	Local *Decision
	// Redis is the routing API's answer as Redis holds it, nil when it has
	// none; RedisTTL is what remains of its TTL.
	Redis    []byte
	RedisTTL time.Duration
}

// Cached returns what the cache holds under key, without asking the API.
// Redis is asked when there is a Redis tier (an error when it does not
// answer, with the in-process tier's decision all the same). It blocks on
// Redis: call it from an admin goroutine.
func (r *Resolver) Cached(ctx context.Context, key string) (Cached, error) {
	var out Cached
	if r.local != nil {
		now := r.coarseNow()
		if e := r.local.getBytes([]byte(key), now); e != nil {
			d := e.d
			d.TTL = time.Duration(e.expires - now)
			out.Local = &d
		}
	}
	if r.redis == nil {
		return out, nil
	}
	c := r.redis.get()
	if c == nil {
		return out, ErrNoRedis
	}
	cctx, cancel := context.WithTimeout(ctx, dropDeadline)
	defer cancel()
	k := RedisKeyPrefix + key
	res := c.DoMulti(cctx, c.B().Get().Key(k).Build(), c.B().Pttl().Key(k).Build())
	body, err := res[0].AsBytes()
	if rueidis.IsRedisNil(err) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("lcr: cannot read %q from Redis: %w", k, err)
	}
	pttl, err := res[1].AsInt64()
	if err != nil {
		return out, fmt.Errorf("lcr: cannot read %q from Redis: %w", k, err)
	}
	out.Redis, out.RedisTTL = body, time.Duration(max(pttl, 0))*time.Millisecond
	return out, nil
}

// remove drops key's entry.
func (c *localCache) remove(key string) {
	p := &c.parts[maphash.String(c.seed, key)%localShards]
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
}

// clear drops every entry.
func (c *localCache) clear() {
	for i := range c.parts {
		p := &c.parts[i]
		p.mu.Lock()
		clear(p.m)
		p.mu.Unlock()
	}
}
