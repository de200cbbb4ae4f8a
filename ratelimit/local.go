package ratelimit

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// keyPrefix is the Redis key prefix. The braces are a Redis Cluster hash
// tag: every limiter key hashes to the same slot, so the fleet's keys live
// on one node and the script never touches two slots.
const keyPrefix = "{sipedge:cps}:"

// entry is the state of one registered key.
type entry struct {
	_   [64]byte     // keep tat off the cache line of the previous object
	tat atomic.Int64 // theoretical arrival time, ns on the caller's clock
	_   [56]byte

	p    atomic.Pointer[params]
	aimd atomic.Pointer[aimdState]
	// overUntil (Redis mode): until then, on the limiter clock, Redis is
	// known to have no slot within MaxWait.
	overUntil atomic.Int64
	name      string
	rkey      []string // {keyPrefix + name}: the script's KEYS
	blk       block    // slots reserved in Redis ahead of use (batch mode)
}

// Local is the in-process GCRA limiter: the embedded default when no Redis
// is configured, and Redis' fallback in failure_mode local.
//
// Reserve, Backoff and Rate are lock-free, never block and may be called
// from any goroutine, shards included; Reserve allocates nothing. Register
// takes a lock and allocates: call it when configuration is loaded.
type Local struct {
	keys    atomic.Pointer[[]*entry]   // copy-on-write, indexed by Key
	mu      sync.Mutex                 // serialises Register
	names   map[string]Key             // guarded by mu
	args    map[scriptArgs]*scriptArgs // guarded by mu: the keys' shared script arguments
	shares  map[*scriptArgs]int        // guarded by mu: how many keys share each
	divisor int64                      // nodes sharing the key (fallback), else 1
	aimd    AIMD
	now     func() time.Duration // for the rate gauges only
	set     *metrics.Set
}

// NewLocal returns an in-process limiter. It uses o.Metrics, o.Now and
// o.AIMD; o.Redis is ignored.
func NewLocal(o Options) (*Local, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return newLocal(&o, 1), nil
}

func newLocal(o *Options, divisor int) *Local {
	l := &Local{names: make(map[string]Key), args: make(map[scriptArgs]*scriptArgs), shares: make(map[*scriptArgs]int), divisor: int64(divisor), aimd: o.AIMD, now: o.Now, set: o.Metrics}
	l.keys.Store(new([]*entry))
	return l
}

// Register returns the Key of name, with lim as its limit. Registering a
// name again updates its limit and returns the same Key; the key's slots
// already reserved stay reserved.
func (l *Local) Register(name string, lim Limit) (Key, error) {
	if name == "" {
		return 0, fmt.Errorf("%w: empty key name", ErrInvalid)
	}
	p, err := lim.params()
	if err != nil {
		return 0, fmt.Errorf("ratelimit: cannot register %q: %w", name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Keys with the same limit share their script arguments: a group call
	// sends them once (see groupCall).
	if a, ok := l.args[*p.args]; ok {
		p.args = a
	} else {
		l.args[*p.args] = p.args
	}
	l.shares[p.args]++
	if k, ok := l.names[name]; ok {
		e := (*l.keys.Load())[k]
		// The limit replaced: its arguments are forgotten with their last
		// key, or a key whose limit keeps changing would keep them all.
		if a := e.p.Load().args; l.shares[a] == 1 {
			delete(l.shares, a)
			delete(l.args, *a)
		} else {
			l.shares[a]--
		}
		e.p.Store(p)
		e.overUntil.Store(0) // MaxWait may have grown
		return k, nil
	}
	old := *l.keys.Load()
	k := Key(len(old))
	e := &entry{name: name, rkey: []string{keyPrefix + name}}
	e.p.Store(p)
	keys := make([]*entry, len(old)+1)
	copy(keys, old)
	keys[k] = e
	l.keys.Store(&keys)
	l.names[name] = k
	if l.set != nil {
		l.set.GetOrCreateGauge(`sipedge_ratelimit_effective_rate{key="`+escapeLabel(name)+`"}`, func() float64 {
			return l.rate(e, int64(l.now()))
		})
	}
	return k, nil
}

// Lookup returns the Key registered for name.
func (l *Local) Lookup(name string) (Key, bool) {
	l.mu.Lock()
	k, ok := l.names[name]
	l.mu.Unlock()
	return k, ok
}

func (l *Local) entry(k Key) *entry {
	keys := *l.keys.Load()
	if int(k) >= len(keys) {
		panic(fmt.Sprintf("BUG: ratelimit: key %d was not registered", k))
	}
	return keys[k]
}

// Reserve takes the next free slot of k at now, or reports Over when that
// slot is more than the key's MaxWait away (taking nothing). now is a
// monotonic time on a clock of the caller's choosing (time.Since of a fixed
// start, a shard's cached tick), the same clock for every call on this
// Local.
func (l *Local) Reserve(k Key, now time.Duration) Decision {
	return l.reserve(l.entry(k), int64(now), SourceLocal)
}

// interval returns e's interval between slots at now with the AIMD factor
// applied, at the fleet rate (not divided by the nodes).
func (l *Local) interval(e *entry, p *params, now int64) int64 {
	s := e.aimd.Load()
	if s == nil {
		return p.interval
	}
	f := l.aimd.factor(s, now)
	if f >= 1 {
		e.aimd.CompareAndSwap(s, nil) // recovered: back to the fast path
		return p.interval
	}
	return int64(math.Ceil(float64(p.interval) / f)) // round up: never faster
}

// reserve is GCRA, "defer to the next free slot" (docs/design/cps.md 3),
// with burst.
// With T the interval and τ = (burst-1)·T the tolerance, the slot given is
// max(now, tat-τ) and tat advances to max(tat, now)+T. For burst 1 this is
// docs/design/cps.md 3.1 exactly; see script for why it is sound.
func (l *Local) reserve(e *entry, now int64, src Source) Decision {
	p := e.p.Load()
	iv := l.interval(e, p, now) * l.divisor
	tau := (p.burst - 1) * iv
	for {
		tat := e.tat.Load()
		base := max(tat, now)
		wait := max(base-tau-now, 0)
		if wait > p.maxWait {
			return Decision{Over: true, Source: src}
		}
		if e.tat.CompareAndSwap(tat, base+iv) {
			return Decision{Wait: time.Duration(wait), Source: src}
		}
	}
}

// Peek returns the decision Reserve would make for k at now, taking
// nothing: a dry run's view of the key. Like Reserve it never blocks.
func (l *Local) Peek(k Key, now time.Duration) Decision {
	return l.peek(l.entry(k), int64(now), SourceLocal)
}

// peek is reserve's arithmetic without its compare-and-swap: reserve stays
// one loop on the decision path.
func (l *Local) peek(e *entry, now int64, src Source) Decision {
	p := e.p.Load()
	iv := l.interval(e, p, now) * l.divisor
	wait := max(max(e.tat.Load(), now)-(p.burst-1)*iv-now, 0)
	if wait > p.maxWait {
		return Decision{Over: true, Source: src}
	}
	return Decision{Wait: time.Duration(wait), Source: src}
}

// Backoff records a CPS reject from the carrier behind k at now: the
// effective rate drops by the AIMD decrease, unless it already dropped
// within the AIMD hold. It reports whether the rate dropped.
func (l *Local) Backoff(k Key, now time.Duration) bool {
	return l.backoff(l.entry(k), int64(now))
}

func (l *Local) backoff(e *entry, now int64) bool {
	for {
		s := e.aimd.Load()
		if s != nil && now-s.at < int64(l.aimd.Hold) {
			return false
		}
		n := &aimdState{factor: max(l.aimd.Floor, l.aimd.factor(s, now)*l.aimd.Decrease), at: now}
		if e.aimd.CompareAndSwap(s, n) {
			return true
		}
	}
}

// Rate returns k's effective rate at now, calls per second across the fleet:
// the configured rate lowered by Backoff and recovering since.
func (l *Local) Rate(k Key, now time.Duration) float64 {
	return l.rate(l.entry(k), int64(now))
}

func (l *Local) rate(e *entry, now int64) float64 {
	return e.p.Load().rate * l.aimd.factor(e.aimd.Load(), now)
}

// escapeLabel escapes a Prometheus label value.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
