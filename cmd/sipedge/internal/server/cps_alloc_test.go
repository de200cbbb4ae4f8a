//go:build !race

package server

import (
	"io"
	"log/slog"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/route"
)

// Finding the account of a route's own cps, once registered, allocates
// nothing: it runs on every paced dial.
func TestRouteCPSKeyAllocs(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cpsSet: metrics.NewSet()}
	c, err := newCPS(&config.Config{}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.limiter.Close()
	r := &route.Route{CarrierID: "wholesale", CPS: &route.CPS{Rate: 10}}
	target := &b2bua.Target{Group: "g"}
	if _, ok := c.keyOf(r, target); !ok {
		t.Fatal("not registered")
	}
	if n := testing.AllocsPerRun(100, func() { c.keyOf(r, target) }); n != 0 {
		t.Errorf("%v allocations per lookup, want 0", n)
	}
}
