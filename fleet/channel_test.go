package fleet

import (
	"math"
	"testing"
)

// TestLocalChannelShare: without Redis a node keeps to ceil(limit / nodes),
// as the static split does.
func TestLocalChannelShare(t *testing.T) {
	f, err := New(Options{Config: Config{NodeID: "a"}, Nodes: 3})
	must(t, err)
	defer f.Close()
	c := f.Channel("carrier-1", 10)
	if c.Grant() != 4 || c.Limit() != 10 || c.Name() != "carrier-1" {
		t.Fatalf("grant %d limit %d, want 4 of 10", c.Grant(), c.Limit())
	}
	for i := range 4 {
		if !c.Take() {
			t.Fatalf("take %d refused", i+1)
		}
	}
	if c.Take() {
		t.Fatal("a fifth take within a share of 4")
	}
	if c.InUse() != 4 {
		t.Fatalf("in use %d after a refused take, want 4", c.InUse())
	}
	c.Release()
	if !c.Take() {
		t.Fatal("take after a release refused")
	}
	if !hasMetric(metricsText(f), `sipedge_fleet_channel_refused_total{key="carrier-1"} 1`) ||
		!hasMetric(metricsText(f), `sipedge_fleet_channel_grant{key="carrier-1"} 4`) {
		t.Fatalf("metrics:\n%s", metricsText(f))
	}

	// The same name is the same Channel; a new limit applies at once.
	if f.Channel("carrier-1", 30) != c || c.Grant() != 10 {
		t.Fatalf("grant %d after limit 30, want 10", c.Grant())
	}
	c.SetLimit(0)
	if c.Grant() != math.MaxInt64 {
		t.Fatalf("grant %d without a limit", c.Grant())
	}
	for range 100 {
		if !c.Take() {
			t.Fatal("take refused without a limit")
		}
	}
	c.SetLimit(6) // a share of 2, below the calls up: they stay, new ones wait
	if c.Take() || c.InUse() != 104 {
		t.Fatalf("take within a lowered limit, in use %d", c.InUse())
	}
	for range 103 {
		c.Release()
	}
	if !c.Take() || c.Take() {
		t.Fatalf("in use %d: want exactly one more take within a share of 2", c.InUse())
	}
}

func TestReleaseWithoutTakePanics(t *testing.T) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(t, err)
	defer f.Close()
	c := f.Channel("k", 1)
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		}
	}()
	c.Release()
}
