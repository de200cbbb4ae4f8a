package quality

import (
	"context"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Store keeps the disables across restarts: a Monitor with Options.Store
// loads them as it starts and writes every change back, from a goroutine
// of its own, never a shard's. Redis is one (quality/redisstore); a shared
// state of the fleet may be another.
type Store interface {
	// Load returns the disables stored.
	Load(ctx context.Context) ([]Disable, error)
	// Put stores d, replacing the disable of its carrier and prefix.
	Put(ctx context.Context, d Disable) error
	// Delete removes the disable of t's carrier and prefix (t.Prefix nil:
	// the one for every prefix), if there is one.
	Delete(ctx context.Context, t Target) error
}

// Bounds of the persister's calls and of its retries after a failure
// (variables for the tests).
var (
	storeTimeout  = 2 * time.Second
	storeRetryMin = time.Second
	storeRetryMax = 30 * time.Second
)

// persister makes the Store hold the Monitor's disables. It loads them
// first, retrying until the Store answers (the Monitor meanwhile routes
// without them: a Store that is down never stalls the start); disables
// changed on this node before the load came win over the stored ones.
// Then, on each change, it writes what differs between the disables and
// what it last knew the Store to hold: a change is never queued, so none
// is lost and a burst costs one pass. A failure is logged, counted and
// retried after a delay that doubles up to storeRetryMax.
type persister struct {
	m      *Monitor
	store  Store
	wake   chan struct{} // a change to write; one pending wake-up is enough
	stored map[disableKey]Disable
	log    *slog.Logger
	ctx    context.Context // cancelled by close: aborts the call in flight
	cancel context.CancelFunc

	loadErrors, writeErrors *metrics.Counter
}

func newPersister(m *Monitor, s Store, set *metrics.Set, log *slog.Logger) *persister {
	ctx, cancel := context.WithCancel(context.Background())
	return &persister{
		ctx:         ctx,
		cancel:      cancel,
		m:           m,
		store:       s,
		wake:        make(chan struct{}, 1),
		log:         log,
		loadErrors:  set.NewCounter(metricStoreErrors + `{op="load"}`),
		writeErrors: set.NewCounter(metricStoreErrors + `{op="write"}`),
	}
}

// changed says a disable changed. Called with m.mu held; never blocks.
func (p *persister) changed() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run loads, then writes changes until the Monitor closes, and what
// changed as it closed (a pass that finds nothing to write calls nothing).
func (p *persister) run() {
	retry := storeRetryMin
	for !p.load() {
		if !p.sleep(&retry) {
			return
		}
	}
	retry = storeRetryMin
	for {
		if !p.write() {
			if !p.sleep(&retry) {
				return
			}
			continue
		}
		retry = storeRetryMin
		select {
		case <-p.m.stop:
			p.write()
			return
		case <-p.wake:
		}
	}
}

// sleep waits out *retry, doubled for the next time; false when the
// Monitor closed meanwhile.
func (p *persister) sleep(retry *time.Duration) bool {
	t := time.NewTimer(*retry)
	defer t.Stop()
	*retry = min(2**retry, storeRetryMax)
	select {
	case <-p.m.stop:
		return false
	case <-t.C:
		return true
	}
}

func (p *persister) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.ctx, storeTimeout)
}

// load reads the stored disables into the Monitor.
func (p *persister) load() bool {
	ctx, cancel := p.context()
	ds, err := p.store.Load(ctx)
	cancel()
	if err != nil {
		p.loadErrors.Inc()
		p.log.Warn("quality: cannot load the stored disables; routing without them until the store answers", "err", err)
		return false
	}
	p.stored = p.m.restore(ds, p.log)
	p.log.Info("quality: stored disables loaded", "disables", len(p.stored))
	return true
}

// write makes the Store hold the Monitor's disables; false when a call
// failed (what succeeded before it is kept).
func (p *persister) write() bool {
	want := p.m.disableMap()
	for k, d := range want {
		was, ok := p.stored[k]
		if ok && sameDisable(was, d) {
			continue
		}
		if ok && !samePrefix(was.Prefix, d.Prefix) {
			// Stored under another spelling of the prefix ("44" for
			// "+44", configured since): that one goes.
			t := Target{Carrier: was.Carrier, Prefix: was.Prefix}
			if !p.do("delete", k, func(ctx context.Context) error { return p.store.Delete(ctx, t) }) {
				return false
			}
			delete(p.stored, k)
		}
		if !p.do("put", k, func(ctx context.Context) error { return p.store.Put(ctx, d) }) {
			return false
		}
		p.stored[k] = d
	}
	for k, d := range p.stored {
		if _, ok := want[k]; ok {
			continue
		}
		t := Target{Carrier: d.Carrier, Prefix: d.Prefix}
		if !p.do("delete", k, func(ctx context.Context) error { return p.store.Delete(ctx, t) }) {
			return false
		}
		delete(p.stored, k)
	}
	return true
}

func (p *persister) do(op string, k disableKey, call func(context.Context) error) bool {
	ctx, cancel := p.context()
	err := call(ctx)
	cancel()
	if err != nil {
		p.writeErrors.Inc()
		p.log.Warn("quality: cannot store a disable change; retrying", "op", op, "carrier", k.carrier,
			"prefix", p.m.PrefixString(k.prefix), "all_prefixes", k.prefix == NoPrefix, "err", err)
		return false
	}
	return true
}

func sameDisable(a, b Disable) bool {
	return a.Carrier == b.Carrier && a.Auto == b.Auto && a.Since.Equal(b.Since) && samePrefix(a.Prefix, b.Prefix)
}

func samePrefix(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// restore adds the stored disables ds to the Monitor's, but for those of
// a carrier and prefix changed here since New (touched), and returns what
// the store holds that this Monitor understands, by key: a disable of a
// prefix no longer configured is logged and left alone, in the store too.
func (m *Monitor) restore(ds []Disable, log *slog.Logger) map[disableKey]Disable {
	stored := make(map[disableKey]Disable, len(ds))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range ds {
		k, err := m.key(Target{Carrier: d.Carrier, Prefix: d.Prefix})
		if err != nil {
			log.Warn("quality: ignoring a stored disable", "carrier", d.Carrier, "err", err)
			continue
		}
		stored[k] = d
		_, one := m.touched[k]
		_, all := m.touched[disableKey{carrier: k.carrier, prefix: NoPrefix}]
		if _, ok := m.disables[k]; ok || one || all {
			continue
		}
		d.Prefix = m.prefixPtr(k.prefix)
		m.disables[k] = d
	}
	m.touched = nil
	m.publish()
	return stored
}

// touch records, until the stored disables are loaded, that k changed
// here, and wakes the persister. Called with m.mu held.
func (m *Monitor) touch(k disableKey) {
	if m.persist == nil {
		return
	}
	if m.touched != nil {
		m.touched[k] = struct{}{}
	}
	m.persist.changed()
}

// disableMap returns a copy of the disables.
func (m *Monitor) disableMap() map[disableKey]Disable {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[disableKey]Disable, len(m.disables))
	for k, d := range m.disables {
		out[k] = d
	}
	return out
}
