package quality

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
)

// memStore is a Store in memory that fails while told to.
type memStore struct {
	mu        sync.Mutex
	m         map[string]Disable // by storeKey
	loadFails int                // Load fails this many more times
	putFails  int                // Put fails this many more times
	loads     int
}

func storeKey(carrier string, prefix *string) string {
	if prefix == nil {
		return carrier + "|*"
	}
	return carrier + "|" + *prefix
}

func (s *memStore) Load(context.Context) ([]Disable, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	if s.loadFails > 0 {
		s.loadFails--
		return nil, errors.New("store down")
	}
	var out []Disable
	for _, d := range s.m {
		out = append(out, d)
	}
	return out, nil
}

func (s *memStore) Put(_ context.Context, d Disable) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.putFails > 0 {
		s.putFails--
		return errors.New("store down")
	}
	s.m[storeKey(d.Carrier, d.Prefix)] = d
	return nil
}

func (s *memStore) Delete(_ context.Context, t Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, storeKey(t.Carrier, t.Prefix))
	return nil
}

// keys returns the stored disables' keys, sorted.
func (s *memStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// disableKeys returns the Monitor's disables as memStore keys, sorted.
func disableKeys(m *Monitor) []string {
	var out []string
	for _, d := range m.Disables() {
		out = append(out, storeKey(d.Carrier, d.Prefix))
	}
	slices.Sort(out)
	return out
}

func fastRetries(t *testing.T) {
	minR, maxR := storeRetryMin, storeRetryMax
	storeRetryMin, storeRetryMax = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { storeRetryMin, storeRetryMax = minR, maxR })
}

func ptr(s string) *string { return &s }

// TestStoreLoadAndWrite: the stored disables come back at start (a prefix
// no longer configured left alone, in the store too), and each change is
// written back.
func TestStoreLoadAndWrite(t *testing.T) {
	testtier.RequiresWallClock(t)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &memStore{m: map[string]Disable{
		"a|*":  {Carrier: "a", Since: since},
		"b|44": {Carrier: "b", Prefix: ptr("44"), Auto: true, Since: since},
		"c|99": {Carrier: "c", Prefix: ptr("99"), Since: since},
	}}
	m := newTestMonitor(t, Config{Prefixes: []string{"", "+44"}}, Options{Store: st})
	testtier.Eventually(t, 5*time.Second, "the load", func() bool { return len(m.Disables()) == 2 })
	if got, want := disableKeys(m), []string{"a|*", "b|+44"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	if !m.Disabled(m.Prefix("+447700900123"), "b") || !m.Disabled(m.Prefix("+1202"), "a") {
		t.Fatal("the loaded disables are not in force")
	}
	if err := m.Disable(Target{Carrier: "x", Prefix: ptr("")}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enable(Target{Carrier: "b", Prefix: ptr("44")}); err != nil {
		t.Fatal(err)
	}
	// b's was stored as "44", configured "+44" now: gone under either
	// spelling; x's is written, c's left alone.
	testtier.Eventually(t, 5*time.Second, "the writes", func() bool { return reflect.DeepEqual(st.keys(), []string{"a|*", "c|99", "x|"}) })
}

// TestStoreDownAtStart: a store that does not answer leaves the Monitor
// routing without its disables (counted), retried until it answers; what
// was changed here meanwhile wins over what it held.
func TestStoreDownAtStart(t *testing.T) {
	testtier.RequiresWallClock(t)
	fastRetries(t)
	st := &memStore{loadFails: 3, m: map[string]Disable{
		"a|*":  {Carrier: "a"},
		"a|44": {Carrier: "a", Prefix: ptr("44")},
		"b|*":  {Carrier: "b"},
		"c|*":  {Carrier: "c"},
	}}
	set := metrics.NewSet()
	m := newTestMonitor(t, Config{Prefixes: []string{"", "44"}}, Options{Store: st, Metrics: set})
	// Before the load: a enabled everywhere (lifting nothing here), d
	// disabled, c disabled too.
	if _, err := m.Enable(Target{Carrier: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c", "d"} {
		if err := m.Disable(Target{Carrier: c}); err != nil {
			t.Fatal(err)
		}
	}
	testtier.Eventually(t, 5*time.Second, "the load", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.loads == 4
	})
	testtier.Eventually(t, 5*time.Second, "the store in step", func() bool { return reflect.DeepEqual(st.keys(), []string{"b|*", "c|*", "d|*"}) })
	if got, want := disableKeys(m), []string{"b|*", "c|*", "d|*"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("disables %v, want %v", got, want)
	}
	var b strings.Builder
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), `sipedge_quality_store_errors_total{op="load"} 3`) {
		t.Fatalf("load errors not counted:\n%s", b.String())
	}
}

// TestStoreWriteRetried: a write that fails is retried, and counted.
func TestStoreWriteRetried(t *testing.T) {
	testtier.RequiresWallClock(t)
	fastRetries(t)
	st := &memStore{m: map[string]Disable{}}
	set := metrics.NewSet()
	m := newTestMonitor(t, Config{}, Options{Store: st, Metrics: set})
	testtier.Eventually(t, 5*time.Second, "the load", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.loads == 1
	})
	st.mu.Lock()
	st.putFails = 2
	st.mu.Unlock()
	if err := m.Disable(Target{Carrier: "a"}); err != nil {
		t.Fatal(err)
	}
	testtier.Eventually(t, 5*time.Second, "the retried write", func() bool { return reflect.DeepEqual(st.keys(), []string{"a|*"}) })
	var b strings.Builder
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), `sipedge_quality_store_errors_total{op="write"} 2`) {
		t.Fatalf("write errors not counted:\n%s", b.String())
	}
}

// sharedStore is a Store several Monitors share, as a fleet's shared
// state is: a write is applied, before it returns, on every Monitor
// following it through Stored, the writer's included.
type sharedStore struct {
	memStore
	followers     []*Monitor
	puts, deletes int
}

func (s *sharedStore) Put(ctx context.Context, d Disable) error {
	if err := s.memStore.Put(ctx, d); err != nil {
		return err
	}
	s.mu.Lock()
	s.puts++
	s.mu.Unlock()
	return s.tell(Target{Carrier: d.Carrier, Prefix: d.Prefix}, &d)
}

func (s *sharedStore) Delete(ctx context.Context, t Target) error {
	if err := s.memStore.Delete(ctx, t); err != nil {
		return err
	}
	s.mu.Lock()
	s.deletes++
	s.mu.Unlock()
	return s.tell(t, nil)
}

func (s *sharedStore) tell(t Target, d *Disable) error {
	for _, m := range s.followers {
		if err := m.Stored(t, d); err != nil {
			return err
		}
	}
	return nil
}

func (s *sharedStore) writes() (puts, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.deletes
}

// TestStoreShared: a disable made on one node is in force on another
// that shares the store as soon as the store tells it, an enable too, and
// neither node writes back what the store told it.
func TestStoreShared(t *testing.T) {
	testtier.RequiresWallClock(t)
	st := &sharedStore{memStore: memStore{m: map[string]Disable{}}}
	cfg := Config{Prefixes: []string{"", "44"}}
	a := newTestMonitor(t, cfg, Options{Store: st})
	b := newTestMonitor(t, cfg, Options{Store: st})
	st.followers = []*Monitor{a, b}
	for _, m := range []*Monitor{a, b} {
		testtier.Eventually(t, 5*time.Second, "the load", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.stored != nil })
	}
	if err := a.Disable(Target{Carrier: "x", Prefix: ptr("44")}); err != nil {
		t.Fatal(err)
	}
	testtier.Eventually(t, 5*time.Second, "x disabled on b", func() bool { return b.Disabled(b.Prefix("447700900123"), "x") })
	if b.Disabled(b.Prefix("1202"), "x") {
		t.Fatal("x disabled on b for a prefix it was not disabled for")
	}
	if _, err := b.Enable(Target{Carrier: "x"}); err != nil {
		t.Fatal(err)
	}
	testtier.Eventually(t, 5*time.Second, "x enabled on a", func() bool { return !a.Disabled(a.Prefix("447700900123"), "x") })
	// Let both persisters run out of work, then count: one write each.
	time.Sleep(50 * time.Millisecond)
	if puts, deletes := st.writes(); puts != 1 || deletes != 1 {
		t.Fatalf("the store got %d puts and %d deletes, want 1 and 1: a node wrote back what it was told", puts, deletes)
	}
	if got := st.keys(); len(got) != 0 {
		t.Fatalf("the store holds %v after the enable", got)
	}
}
