package health

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// newTestRegistry returns a registry with the fixed groups given, logging
// into the returned buffer, closed at the end of the test.
func newTestRegistry(t testing.TB, opts Options, fixed ...GroupConfig) (*Registry, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	opts.Groups = fixed
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	return r, logs
}

// dests returns n destinations on 127.0.0.1, ports 5061.., weight 1.
func dests(n int) []DestConfig {
	d := make([]DestConfig, n)
	for i := range d {
		d[i] = DestConfig{URI: fmt.Sprintf("sip:gw%d.example.com", i), Address: fmt.Sprintf("127.0.0.1:%d", 5061+i)}
	}
	return d
}

// st returns the state of the group's member configured at index i.
func st(t testing.TB, r *Registry, group string, i int) *state {
	t.Helper()
	g := r.snap.Load().groups[group]
	if g == nil {
		t.Fatalf("no group %q", group)
	}
	for j := range g.members {
		if g.members[j].index == i {
			return g.members[j].st
		}
	}
	t.Fatalf("group %q has no destination %d", group, i)
	return nil
}

// pickCounts picks n times and counts the members chosen by config index.
func pickCounts(t testing.TB, r *Registry, group string, n int) map[int]int {
	t.Helper()
	var sel Selector
	counts := map[int]int{}
	for i := range n {
		m, res := r.Pick(group, uint64(i), &sel)
		if res != OK {
			t.Fatalf("Pick(%q) = %v, want OK", group, res)
		}
		counts[m.Index]++
	}
	return counts
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(substr string) int { return strings.Count(s.String(), substr) }

var _ io.Writer = (*syncBuffer)(nil)

// fakeClock is a registry clock that moves only when a test says.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Duration                  { return time.Duration(c.t.Load()) }
func (c *fakeClock) advance(d time.Duration)             { c.t.Add(int64(d)) }
func (c *fakeClock) set(d time.Duration)                 { c.t.Store(int64(d)) }
func (c *fakeClock) since(t time.Duration) time.Duration { return c.now() - t }

// newClockRegistry is newTestRegistry on a fake clock, an hour in; the
// probe loop is not started (tests call tick).
func newClockRegistry(t testing.TB, opts Options, fixed ...GroupConfig) (*Registry, *fakeClock, *syncBuffer) {
	t.Helper()
	r, logs := newTestRegistry(t, opts, fixed...)
	c := &fakeClock{}
	c.set(time.Hour)
	r.clock = c.now
	return r, c, logs
}
