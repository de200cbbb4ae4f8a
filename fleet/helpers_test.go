package fleet

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer collects log output safely across goroutines.
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

func (s *syncBuffer) Contains(text string) bool { return strings.Contains(s.String(), text) }

// metricsText returns a metric set's Prometheus text.
func metricsText(f *Fleet) string {
	var b bytes.Buffer
	f.o.Metrics.WritePrometheus(&b)
	return b.String()
}

// hasMetric reports whether the Prometheus text has the line.
func hasMetric(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testNode is one in-process node of a test fleet: a Fleet with its own
// Redis client, metrics and log.
type testNode struct {
	*Fleet
	log   *syncBuffer
	calls atomic.Int64

	mu    sync.Mutex
	lost  []LostCall
	drops []string
	docs  map[string]string // kind/name -> document, as applied
	seen  []Change
}

// startNode starts a node on url with the test timings: a lease of a
// second, a round every 20 ms, a poll every 100 ms.
func startNode(t testing.TB, url, id string, mod ...func(*Options)) *testNode {
	t.Helper()
	n, err := newNode(t, url, id, mod...)
	if err != nil {
		t.Fatalf("node %s: %v", id, err)
	}
	return n
}

func newNode(t testing.TB, url, id string, mod ...func(*Options)) (*testNode, error) {
	n := &testNode{log: new(syncBuffer), docs: map[string]string{}}
	o := Options{
		Config:        Config{Redis: url, NodeID: id, LeaseSecs: 1},
		SIPAddr:       "udp://10.0.0.1:5060",
		Calls:         n.calls.Load,
		Logger:        slog.New(slog.NewTextHandler(n.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Deadline:      200 * time.Millisecond,
		GrantInterval: 20 * time.Millisecond,
		PollInterval:  100 * time.Millisecond,
		OnLost: func(calls []LostCall) {
			n.mu.Lock()
			n.lost = append(n.lost, calls...)
			n.mu.Unlock()
		},
		OnDropDecisions: func(key string) {
			n.mu.Lock()
			n.drops = append(n.drops, key)
			n.mu.Unlock()
		},
	}
	for _, m := range mod {
		m(&o)
	}
	f, err := New(o)
	if err != nil {
		return nil, err
	}
	n.Fleet = f
	t.Cleanup(f.Close)
	return n, nil
}

// withJournal turns the journal on; the node collects the lost calls.
func withJournal(o *Options) { o.CallJournal = true }

func (n *testNode) lostCalls() []LostCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]LostCall(nil), n.lost...)
}

// follow makes n follow the shared state into n.docs.
func (n *testNode) follow() error {
	return n.Follow(func(ch Change) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.seen = append(n.seen, ch)
		if ch.Doc == nil {
			delete(n.docs, ch.Kind+"/"+ch.Name)
		} else {
			n.docs[ch.Kind+"/"+ch.Name] = string(ch.Doc)
		}
		return nil
	})
}

func (n *testNode) doc(key string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.docs[key]
	return d, ok
}

// eventually polls cond every 10 ms for up to d; it reports how long cond
// took, failing t if it never held.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
