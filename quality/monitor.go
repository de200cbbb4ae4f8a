package quality

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// DefaultWebhookTimeout bounds one webhook POST.
const DefaultWebhookTimeout = 2 * time.Second

// Options are what a Monitor needs besides its configuration.
type Options struct {
	// Shards is the number of collectors, one per shard; at least 1.
	Shards int
	// Clock is the shards' clock (the now given to Collector). When set,
	// New starts the reader goroutine, which calls Update after each
	// sampling interval; when nil, the owner calls Update.
	Clock func() time.Duration
	// Metrics receives the gauges and counters (default a new set).
	Metrics *metrics.Set
	// Logger gets a line per event and per webhook failure (default
	// slog.Default()).
	Logger *slog.Logger
	// OnEvent, when set, is called with each bad-destination event, on the
	// goroutine that runs Update, after the event is logged and counted.
	// It must not block.
	OnEvent func(Event)
	// WebhookTimeout bounds one webhook POST (default
	// DefaultWebhookTimeout).
	WebhookTimeout time.Duration
	// Store, when set, keeps the disables across restarts (persist.go):
	// loaded as the Monitor starts, each change written back, both from a
	// goroutine of the Monitor's.
	Store Store
}

// Monitor keeps the quality statistics of a node: it hands each shard a
// Collector, merges them off the call path (Update), scores every (prefix,
// carrier) and (prefix, gateway) pair, and publishes the scores and the
// disables for the shards to read without locks. doc.go states who may
// call what.
type Monitor struct {
	cfg      Config
	mode     string
	interval time.Duration
	span     int64 // sampling intervals in the window
	z        float64
	digits   []string // by Prefix: the prefix without its '+'
	trie     *prefixTrie
	profiles []*profile // by Prefix
	badDst   []float64  // by Prefix: the event threshold, -1 for none

	collectors []*Collector
	snap       atomic.Pointer[snapshot]

	// mu serialises the reader (Update) and the control plane (Disable,
	// Enable, Status); the shards never take it.
	mu       sync.Mutex
	trans    [][]int32 // by collector: slot -> entry
	entries  []*entry
	byKey    map[slotKey]int32
	ring     []ringSlot
	totals   []tally // by entry: the sum of the ring's intervals in the window
	disables map[disableKey]Disable
	updated  time.Time
	// touched are the disables changed here before the stored ones were
	// loaded, which the load leaves alone; nil once loaded or without a
	// Store.
	touched map[disableKey]struct{}
	// stored is what the Store holds, as the persister wrote it and
	// Stored reported it; nil until loaded.
	stored  map[disableKey]Disable
	persist *persister // nil without a Store

	set      *metrics.Set
	log      *slog.Logger
	onEvent  func(Event)
	hook     *webhook
	late     *metrics.Counter
	stop     chan struct{}
	wg       sync.WaitGroup
	startOne sync.Once
	closeOne sync.Once
}

// entry is a pair as the reader keeps it.
type entry struct {
	key     slotKey
	figs    figures // over the window, as of the last Update
	bad     bool    // figs.score is at or above the event threshold
	metrics entryMetrics
}

// ringSlot sums one sampling interval over every shard, by entry.
type ringSlot struct {
	index   int64
	tallies map[int32]tally
}

// New returns a Monitor for cfg (defaults filled in on a copy), or an
// error wrapping ErrInvalidConfig that lists every problem. Close it.
func New(cfg Config, opts Options) (*Monitor, error) {
	cfg = cfg.clone()
	cfg.SetDefaults()
	var errs []error
	cfg.Check(func(field, problem string) { errs = append(errs, fmt.Errorf("%s: %s", field, problem)) })
	if opts.Shards < 1 {
		errs = append(errs, fmt.Errorf("%d shards: want at least 1", opts.Shards))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WebhookTimeout <= 0 {
		opts.WebhookTimeout = DefaultWebhookTimeout
	}
	m := &Monitor{
		cfg:      cfg,
		mode:     cfg.Mode,
		interval: cfg.SamplingInterval(),
		z:        zScore(cfg.Confidence),
		byKey:    map[slotKey]int32{},
		disables: map[disableKey]Disable{},
		set:      opts.Metrics,
		log:      opts.Logger,
		onEvent:  opts.OnEvent,
		late:     opts.Metrics.NewCounter(metricLateBuckets),
		stop:     make(chan struct{}),
	}
	// The window: history_span_secs rounded up to whole intervals.
	m.span = int64((cfg.HistorySpanSecs + cfg.SamplingIntervalSecs - 1) / cfg.SamplingIntervalSecs)
	m.ring = make([]ringSlot, m.span+2)
	for i := range m.ring {
		m.ring[i] = ringSlot{index: -1, tallies: map[int32]tally{}}
	}
	m.digits = make([]string, len(cfg.Prefixes))
	for i, p := range cfg.Prefixes {
		m.digits[i], _ = prefixDigits(p)
	}
	m.trie = newPrefixTrie(m.digits)
	m.profiles, m.badDst = m.assignProfiles()
	m.collectors = make([]*Collector, opts.Shards)
	m.trans = make([][]int32, opts.Shards)
	for i := range m.collectors {
		m.collectors[i] = newCollector(m.interval, len(cfg.Prefixes))
	}
	m.publish()
	opts.Metrics.NewGauge(metricDisables, func() float64 { return float64(m.snap.Load().disables) })
	if cfg.WebhookURL != "" {
		m.hook = newWebhook(cfg.WebhookURL, opts.WebhookTimeout, opts.Metrics, opts.Logger)
		m.wg.Go(m.hook.run)
	}
	if opts.Store != nil {
		m.touched = map[disableKey]struct{}{}
		m.persist = newPersister(m, opts.Store, opts.Metrics, opts.Logger)
		m.wg.Go(m.persist.run)
	}
	if opts.Clock != nil {
		m.Start(opts.Clock)
	}
	return m, nil
}

// assignProfiles returns, by prefix, the profile that judges it and its
// event threshold.
func (m *Monitor) assignProfiles() ([]*profile, []float64) {
	fallback := newProfile(&DefaultProfile)
	byDigits := map[string]*profile{}
	for i := range m.cfg.Profiles {
		p := &m.cfg.Profiles[i]
		q := newProfile(p)
		if p.Name == DefaultProfile.Name {
			fallback = q
		}
		for _, pre := range p.Prefixes {
			d, _ := prefixDigits(pre)
			byDigits[d] = q
		}
	}
	profiles := make([]*profile, len(m.digits))
	badDst := make([]float64, len(m.digits))
	for i, d := range m.digits {
		profiles[i] = fallback
		if q := byDigits[d]; q != nil {
			profiles[i] = q
		}
		switch t := m.cfg.BadDstThreshold; t {
		case Off:
			badDst[i] = -1
		case 0:
			badDst[i] = profiles[i].criticalPenalty
		default:
			badDst[i] = float64(t)
		}
	}
	return profiles, badDst
}

// Collector returns shard i's collector. Only that shard may use it.
func (m *Monitor) Collector(i int) *Collector { return m.collectors[i] }

// Mode returns the configured mode: ModeOff, ModeDemote or ModeSort.
func (m *Monitor) Mode() string { return m.mode }

// Prefix returns the quality prefix of a dialled number (E.164, as
// routed): the longest of the configured prefixes it starts with, a
// leading '+' ignored; NoPrefix when none. Safe from any goroutine; it
// does not allocate.
func (m *Monitor) Prefix(number string) Prefix { return m.trie.match(number) }

// PrefixBytes is Prefix for a number held as bytes (the call core's).
func (m *Monitor) PrefixBytes(number []byte) Prefix { return matchTrie(m.trie.nodes, number) }

// PrefixString returns quality prefix p as configured; "" for NoPrefix.
func (m *Monitor) PrefixString(p Prefix) string {
	if p < 0 || int(p) >= len(m.cfg.Prefixes) {
		return ""
	}
	return m.cfg.Prefixes[p]
}

// Start starts the reader goroutine on clock, the shards' clock: an Update
// a fifth of an interval after each sampling interval ends. New does when
// Options.Clock is set; an owner whose shards' clock exists only later
// (their runtime is built after the Monitor) calls Start then. Only the
// first Start starts a reader; after Close, none. Not concurrently with
// Close.
func (m *Monitor) Start(clock func() time.Duration) {
	m.startOne.Do(func() {
		select {
		case <-m.stop:
			return
		default:
		}
		m.wg.Go(func() { m.run(clock) })
	})
}

// Close stops the reader and the webhook sender (events not yet sent are
// dropped) and, with a Store, writes the disables changed last (each call
// bounded by its timeout) before it returns. The collectors stay usable;
// nothing reads them any more.
func (m *Monitor) Close() {
	m.closeOne.Do(func() {
		close(m.stop)
		if m.hook != nil {
			m.hook.close()
		}
		m.wg.Wait() // the persister writes what changed last, within its calls' timeout
		if m.persist != nil {
			m.persist.cancel()
		}
	})
}

// run is the reader goroutine: an Update a fifth of an interval after each
// sampling interval ends, so that shards ticking at their usual pace have
// sealed their buckets by then (a bucket sealed later is merged at the next
// Update, in its own interval).
func (m *Monitor) run(clock func() time.Duration) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := clock()
		next := (now/m.interval+1)*m.interval + m.interval/5
		t.Reset(next - now)
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.Update(clock())
	}
}

// Update merges the buckets the shards have sealed, recomputes every pair's
// figures and score over the window that ends at now (the shards' clock),
// publishes them for the shards, sets the gauges and raises the
// bad-destination events. It is the reader: call it from one goroutine at
// a time (New's reader goroutine, when Options.Clock is set), never from a
// shard.
func (m *Monitor) Update(now time.Duration) {
	cur := int64(now / m.interval)
	var events []Event
	m.mu.Lock()
	for ci, c := range m.collectors {
		for b := c.sealed.takeAll(); b != nil; {
			next := b.next
			m.fold(ci, b, cur)
			b.keys = nil
			c.free.push(b)
			b = next
		}
	}
	for i := range m.ring {
		if rs := &m.ring[i]; rs.index >= 0 && rs.index < cur-m.span {
			m.expire(rs)
		}
	}
	wall := time.Now()
	for i, e := range m.entries {
		e.figs = judgeTally(&m.totals[i], m.profiles[e.key.prefix], m.z)
		e.metrics.set(&e.figs)
		threshold := m.badDst[e.key.prefix]
		bad := threshold >= 0 && e.figs.score >= threshold
		if bad && !e.bad {
			auto := false
			if m.cfg.AutoDisable && !e.key.gateway {
				k := disableKey{carrier: e.key.name, prefix: e.key.prefix}
				if _, done := m.disables[k]; !done {
					m.disables[k] = Disable{Carrier: k.carrier, Prefix: m.prefixPtr(k.prefix), Auto: true, Since: wall}
					m.touch(k)
					auto = true
				}
			}
			e.metrics.events.Inc()
			events = append(events, Event{Entry: m.entryStatus(e), Time: wall, Threshold: threshold, AutoDisabled: auto})
		}
		if !bad && e.bad {
			m.log.Info("quality: destination no longer bad", e.logAttrs(m)...)
		}
		e.bad = bad
	}
	m.updated = wall
	m.publish()
	m.mu.Unlock()
	for _, ev := range events {
		m.emit(ev)
	}
}

// fold adds a sealed bucket of collector ci to its interval in the ring,
// at reader interval cur.
func (m *Monitor) fold(ci int, b *bucket, cur int64) {
	if b.index < cur-m.span || b.index > cur+1 {
		m.late.Inc()
		return
	}
	tr := m.trans[ci]
	for len(tr) < len(b.keys) {
		tr = append(tr, m.entryIndex(b.keys[len(tr)]))
	}
	m.trans[ci] = tr
	rs := &m.ring[b.index%int64(len(m.ring))]
	if rs.index != b.index {
		// The slot's interval, if any, is older than the window.
		m.expire(rs)
		rs.index = b.index
	}
	for s := range b.tallies {
		t := &b.tallies[s]
		if t.empty() {
			continue
		}
		e := tr[s]
		sum := rs.tallies[e]
		sum.merge(t)
		rs.tallies[e] = sum
		m.totals[e].merge(t)
	}
}

// expire takes an interval out of the window: out of the totals, and its
// ring slot emptied.
func (m *Monitor) expire(rs *ringSlot) {
	for e, t := range rs.tallies {
		m.totals[e].remove(&t)
	}
	clear(rs.tallies)
	rs.index = -1
}

// entryIndex returns the entry of a pair, creating it (and its metrics)
// the first time any shard reports it.
func (m *Monitor) entryIndex(k slotKey) int32 {
	if i, ok := m.byKey[k]; ok {
		return i
	}
	i := int32(len(m.entries))
	m.byKey[k] = i
	e := &entry{key: k}
	e.figs = judgeTally(&tally{}, m.profiles[k.prefix], m.z)
	e.metrics = newEntryMetrics(m.set, m.cfg.Prefixes[k.prefix], k)
	e.metrics.set(&e.figs)
	m.entries = append(m.entries, e)
	m.totals = append(m.totals, tally{})
	return i
}

// emit logs an event and hands it to OnEvent and the webhook.
func (m *Monitor) emit(ev Event) {
	attrs := []any{"prefix", ev.Prefix, "score", ev.Score, "threshold", ev.Threshold}
	if ev.Gateway != "" {
		attrs = append(attrs, "gateway", ev.Gateway)
	} else {
		attrs = append(attrs, "carrier", ev.Carrier, "auto_disabled", ev.AutoDisabled)
	}
	for s := range numStats {
		if f := ev.figure(stat(s)); f.Level == levelWarning.String() || f.Level == levelCritical.String() {
			attrs = append(attrs, stats[s].name, f.Level)
		}
	}
	m.log.Info("quality: bad destination", attrs...)
	if m.onEvent != nil {
		m.onEvent(ev)
	}
	if m.hook != nil {
		m.hook.send(ev)
	}
}

func (e *entry) logAttrs(m *Monitor) []any {
	kind := "carrier"
	if e.key.gateway {
		kind = "gateway"
	}
	return []any{"prefix", m.cfg.Prefixes[e.key.prefix], kind, e.key.name, "score", e.figs.score}
}

func (m *Monitor) prefixPtr(p Prefix) *string {
	if p == NoPrefix {
		return nil
	}
	s := m.cfg.Prefixes[p]
	return &s
}
