package fleet

import (
	"bytes"
	"strings"
	"sync"
	"testing"
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
