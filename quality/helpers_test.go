package quality

import (
	"io"
	"log/slog"
	"testing"
)

// newTestMonitor returns a Monitor for cfg, closed when the test ends.
func newTestMonitor(t testing.TB, cfg Config, opts Options) *Monitor {
	t.Helper()
	if opts.Shards == 0 {
		opts.Shards = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// recycle does what the reader does with a collector's sealed buckets,
// minus the merge: hands them back to the shard.
func recycle(c *Collector) {
	for b := c.sealed.takeAll(); b != nil; {
		next := b.next
		b.keys = nil
		c.free.push(b)
		b = next
	}
}
