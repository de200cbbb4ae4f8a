package quality

import (
	"context"
	"fmt"
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
// what it knows the Store to hold (Monitor.stored: what it wrote, and what
// Stored said others wrote): a change is never queued, so none is lost
// and a burst costs one pass. A failure is logged, counted and retried
// after a delay that doubles up to storeRetryMax.
type persister struct {
	m      *Monitor
	store  Store
	wake   chan struct{} // a change to write; one pending wake-up is enough
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
	n := p.m.restore(ds, p.log)
	p.log.Info("quality: stored disables loaded", "disables", n)
	return true
}

// write makes the Store hold the Monitor's disables, one call at a time,
// never holding the Monitor's lock across a call (a Store may apply its
// own change back through Stored, as a fleet's does); false when a call
// failed (what succeeded before it is kept).
func (p *persister) write() bool {
	for {
		w, ok := p.m.nextWrite()
		if !ok {
			return true
		}
		var call func(context.Context) error
		op := "put"
		if w.put {
			call = func(ctx context.Context) error { return p.store.Put(ctx, w.disable) }
		} else {
			op = "delete"
			t := Target{Carrier: w.disable.Carrier, Prefix: w.disable.Prefix}
			call = func(ctx context.Context) error { return p.store.Delete(ctx, t) }
		}
		if !p.do(op, w.key, call) {
			return false
		}
		p.m.wrote(w)
	}
}

// storeWrite is one call that brings the Store closer to the disables:
// put disable, or delete the stored one (disable, as stored).
type storeWrite struct {
	key     disableKey
	put     bool
	disable Disable
}

// nextWrite returns a difference between the disables and what the Store
// holds, as the call that removes it; false when there is none.
func (m *Monitor) nextWrite() (storeWrite, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, d := range m.disables {
		was, ok := m.stored[k]
		switch {
		case ok && sameDisable(was, d):
			continue
		case ok && !samePrefix(was.Prefix, d.Prefix):
			// Stored under another spelling of the prefix ("44" for
			// "+44", configured since): that one goes first.
			return storeWrite{key: k, disable: was}, true
		}
		return storeWrite{key: k, put: true, disable: d}, true
	}
	for k, d := range m.stored {
		if _, ok := m.disables[k]; !ok {
			return storeWrite{key: k, disable: d}, true
		}
	}
	return storeWrite{}, false
}

// wrote records that the Store made w.
func (m *Monitor) wrote(w storeWrite) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.put {
		m.stored[w.key] = w.disable
	} else if was, ok := m.stored[w.key]; ok && samePrefix(was.Prefix, w.disable.Prefix) {
		delete(m.stored, w.key)
	}
}

// Stored applies a change another writer made in the Store: the disable
// of t as the Store now holds it, d, or none (d nil). A Store that several
// nodes share calls it for the others' changes (the sipedge server's fleet
// does, as each reaches the node), and may for this Monitor's own. The
// Monitor takes the change as stored: it is not written back. Safe from
// any goroutine; not for the shards.
func (m *Monitor) Stored(t Target, d *Disable) error {
	k, err := m.key(t)
	if err != nil {
		return err
	}
	if d != nil && (d.Carrier != t.Carrier || !samePrefix(d.Prefix, t.Prefix)) {
		return fmt.Errorf("%w: the disable of %q is not %q's", ErrInvalidTarget, d.Carrier, t.Carrier)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stored == nil {
		m.stored = map[disableKey]Disable{}
	}
	if d == nil {
		delete(m.disables, k)
		delete(m.stored, k)
	} else {
		m.stored[k] = *d
		v := *d
		v.Prefix = m.prefixPtr(k.prefix)
		m.disables[k] = v
	}
	if m.touched != nil {
		// Newer than any load still to come: the load leaves it alone.
		m.touched[k] = struct{}{}
	}
	m.publish()
	return nil
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
// a carrier and prefix changed here since New (touched), and records what
// the store holds that this Monitor understands (Monitor.stored): a
// disable of a prefix no longer configured is logged and left alone, in
// the store too. It returns how many it recorded.
func (m *Monitor) restore(ds []Disable, log *slog.Logger) int {
	stored := make(map[disableKey]Disable, len(ds))
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, d := range m.stored { // what Stored recorded before the load
		stored[k] = d
	}
	for _, d := range ds {
		k, err := m.key(Target{Carrier: d.Carrier, Prefix: d.Prefix})
		if err != nil {
			log.Warn("quality: ignoring a stored disable", "carrier", d.Carrier, "err", err)
			continue
		}
		if _, ok := m.stored[k]; !ok {
			stored[k] = d
		}
		_, one := m.touched[k]
		_, all := m.touched[disableKey{carrier: k.carrier, prefix: NoPrefix}]
		if _, ok := m.disables[k]; ok || one || all {
			continue
		}
		d.Prefix = m.prefixPtr(k.prefix)
		m.disables[k] = d
	}
	m.touched = nil
	m.stored = stored
	m.publish()
	return len(stored)
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
