package carrier

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/ratelimit"
)

// newTestPlane returns a plane with groups and an in-process limiter,
// closed when the test ends.
func newTestPlane(t *testing.T, groups ...health.GroupConfig) *Plane {
	t.Helper()
	p, err := New(Options{Groups: groups, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newTestCPS returns the CPS accounts of groups over an in-process
// limiter, closed when the test ends.
func newTestCPS(t *testing.T, groups ...health.GroupConfig) *cps {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	c, err := newCPS(l, slog.New(slog.DiscardHandler), groups)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// group is a gateway group of one member at addr.
func group(name, addr string) health.GroupConfig {
	return health.GroupConfig{Name: name, Destinations: []health.DestConfig{{URI: "sip:" + addr, Address: addr}}}
}

// shardOf is a Shard of p on a clock that stands still.
func shardOf(p *Plane) *Shard {
	return p.NewShard(ShardOptions{Now: func() time.Duration { return 0 }})
}
