package lcr

import (
	"hash/maphash"
	"sync"
)

// localShards is the number of independently locked parts of the
// in-process tier, so that shards reading decisions on many cores do not
// contend on one lock.
const localShards = 64

// localCache is the in-process tier: decisions by cache key, each with its
// expiry on the resolver's monotonic clock (nanoseconds since its epoch).
// Expired entries are ignored by get and removed by put (when a part is
// full) and by sweep.
type localCache struct {
	seed    maphash.Seed
	maxPart int // entries per part
	parts   [localShards]cachePart
}

type cachePart struct {
	mu sync.RWMutex
	m  map[string]*cacheEntry
	_  [32]byte // keep parts on separate cache lines
}

type cacheEntry struct {
	d       Decision
	expires int64
}

func newLocalCache(maxEntries int) *localCache {
	c := &localCache{seed: maphash.MakeSeed(), maxPart: max(1, maxEntries/localShards)}
	for i := range c.parts {
		c.parts[i].m = make(map[string]*cacheEntry)
	}
	return c
}

// getBytes returns the unexpired entry under key, nil if there is none.
// It does not allocate. The entry is immutable: put replaces, never
// modifies, an entry.
func (c *localCache) getBytes(key []byte, now int64) *cacheEntry {
	p := &c.parts[maphash.Bytes(c.seed, key)%localShards]
	p.mu.RLock()
	e := p.m[string(key)]
	p.mu.RUnlock()
	if e == nil || now >= e.expires {
		return nil
	}
	return e
}

// put stores d under key until expires. A full part first drops its expired
// entries, then, if still full, an arbitrary one.
func (c *localCache) put(key string, d Decision, expires int64, now int64) {
	p := &c.parts[maphash.String(c.seed, key)%localShards]
	p.mu.Lock()
	if _, ok := p.m[key]; !ok && len(p.m) >= c.maxPart {
		for k, e := range p.m {
			if now >= e.expires {
				delete(p.m, k)
			}
		}
		if len(p.m) >= c.maxPart {
			for k := range p.m {
				delete(p.m, k)
				break
			}
		}
	}
	p.m[key] = &cacheEntry{d: d, expires: expires}
	p.mu.Unlock()
}

// sweep removes the expired entries.
func (c *localCache) sweep(now int64) {
	for i := range c.parts {
		p := &c.parts[i]
		p.mu.Lock()
		for k, e := range p.m {
			if now >= e.expires {
				delete(p.m, k)
			}
		}
		p.mu.Unlock()
	}
}
