package server

import (
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/health"
)

// Each node keeps to its share of a group's channels, ceil(limit / nodes);
// a replaced group keeps its count and takes the new limit; a removed one
// limits nothing; a next hop of no group is not counted; releases never
// take a count below zero.
func TestChannels(t *testing.T) {
	ch := newChannels(3, metrics.NewSet(), []health.GroupConfig{{Name: "a", MaxConcurrentCalls: 4}, {Name: "b"}})
	a, b, hop := "a", "b", ""
	if !ch.take(a) || !ch.take(a) || ch.take(a) {
		t.Fatal("group a: want 2 calls on this node (ceil(4/3)), then a refusal")
	}
	for range 10 {
		if !ch.take(b) || !ch.take(hop) {
			t.Fatal("an unlimited group or a next hop refused a call")
		}
	}
	ch.setGroup("a", 9) // replaced at run time: 3 a node, 2 in use
	if !ch.take(a) || ch.take(a) {
		t.Fatal("group a after its replace: want one more call, then a refusal")
	}
	ch.setGroup("a", 0) // removed: its calls give their channels back
	if !ch.take(a) {
		t.Fatal("a removed group's limit still applies")
	}
	for range 6 {
		ch.release(a)
	}
	if n := (*ch.groups.Load())["a"].inUse.Load(); n != 0 {
		t.Fatalf("group a: %d in use after more releases than takes, want 0", n)
	}
	ch.release(hop) // no group: nothing to do
}
