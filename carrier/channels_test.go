package carrier

import (
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// Each node keeps to its share of a group's channels, ceil(limit / nodes);
// a replaced group keeps its count and takes the new limit; a removed one
// limits nothing; a next hop of no group is not counted, nor given back
// to a group added under its name later.
func TestChannels(t *testing.T) {
	ch := newChannels(3, metrics.NewSet())
	ch.setGroup("a", 4)
	ch.setGroup("b", 0)
	take := func(group string) bool {
		t.Helper()
		counted, ok := ch.take(group)
		if ok != counted {
			t.Fatalf("take(%q): counted %v, ok %v", group, counted, ok)
		}
		return ok
	}
	if !take("a") || !take("a") || take("a") {
		t.Fatal("group a: want 2 calls on this node (ceil(4/3)), then a refusal")
	}
	for range 10 {
		if !take("b") {
			t.Fatal("an unlimited group refused a call")
		}
	}
	ch.setGroup("a", 9) // replaced at run time: 3 a node, 2 in use
	if !take("a") || take("a") {
		t.Fatal("group a after its replace: want one more call, then a refusal")
	}
	ch.setGroup("a", 0) // removed: no limit, the count goes on
	if !take("a") {
		t.Fatal("a removed group's limit still applies")
	}
	for range 4 {
		ch.release("a")
	}
	if n := (*ch.groups.Load())["a"].inUse.Load(); n != 0 {
		t.Fatalf("group a: %d in use after every call gave its channel back, want 0", n)
	}

	// A next hop named like a group added later: not counted when taken, so
	// its call gives nothing back to the group.
	if counted, ok := ch.take("x"); counted || !ok {
		t.Fatalf("a next hop: counted %v, ok %v", counted, ok)
	}
	ch.setGroup("x", 1)
	if !take("x") || take("x") {
		t.Fatal("group x: want one call, then a refusal")
	}
}
