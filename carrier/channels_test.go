package carrier

import (
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/fleet"
)

// Each node keeps to its share of a group's channels, ceil(limit / nodes),
// in the fleet's Channel "group:<name>"; a replaced group keeps its count
// and takes the new limit; a removed one limits nothing; a next hop of no
// group is not counted, nor given back to a group added under its name
// later.
func TestChannels(t *testing.T) {
	f, err := fleet.New(fleet.Options{Config: fleet.Config{NodeID: "test"}, Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ch := newChannels(f, metrics.NewSet())
	ch.setGroup("a", 4)
	ch.setGroup("b", 0)
	var held []*fleet.Channel
	take := func(group string) bool {
		t.Helper()
		c, ok := ch.take(group)
		if ok != (c != nil) {
			t.Fatalf("take(%q): channel %v, ok %v", group, c, ok)
		}
		if ok {
			held = append(held, c)
		}
		return ok
	}
	first, second, third := take("a"), take("a"), take("a")
	if !first || !second || third {
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
	a := f.Channel(channelKey("a"), 0)
	if n := a.InUse(); n != 4 {
		t.Fatalf("group a: %d in use, want 4", n)
	}
	for _, c := range held {
		c.Release()
	}
	if n := a.InUse(); n != 0 {
		t.Fatalf("group a: %d in use after every call gave its channel back, want 0", n)
	}

	// A next hop named like a group added later: not counted when taken, so
	// its call gives nothing back to the group.
	if c, ok := ch.take("x"); c != nil || !ok {
		t.Fatalf("a next hop: channel %v, ok %v", c, ok)
	}
	ch.setGroup("x", 1)
	if !take("x") || take("x") {
		t.Fatal("group x: want one call, then a refusal")
	}
}
