package health

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// SyncFixed makes the given groups the fixed set: new names are added and
// fixed, unchanged fixed groups are left untouched (their members' state
// object, health included), changed ones are replaced keeping the health
// of unchanged members, a runtime group named in the set becomes fixed,
// fixed groups not named are removed (after between), and runtime groups
// of other names stay; OnAdd and OnRemove hear of each change.
func TestSyncFixed(t *testing.T) {
	var added, removed []string
	r, _ := newTestRegistry(t, Options{
		OnAdd:    func(g GroupConfig) error { added = append(added, g.Name); return nil },
		OnRemove: func(name string) { removed = append(removed, name) },
	},
		GroupConfig{Name: "same", Destinations: dests(2)},
		GroupConfig{Name: "changed", Destinations: dests(2)},
		GroupConfig{Name: "gone", Destinations: dests(1)})
	if err := r.AddGroup(GroupConfig{Name: "promoted", Destinations: dests(1)}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddGroup(GroupConfig{Name: "runtime", Destinations: dests(1)}); err != nil {
		t.Fatal(err)
	}
	added = nil
	r.toDown(st(t, r, "same", 0), true, "test", nil)
	r.toDown(st(t, r, "changed", 1), true, "test", nil)
	sameState, sameGroup := st(t, r, "same", 0), r.snap.Load().groups["same"]
	changedKept := st(t, r, "changed", 1)

	changed := dests(3) // a member more; 0 and 1 as before
	file := []GroupConfig{
		{Name: "same", Destinations: dests(2)},
		{Name: "changed", Destinations: changed},
		{Name: "promoted", Destinations: dests(1)},
		{Name: "new", Destinations: dests(1)},
	}
	want := FixedChanges{Added: []string{"new"}, Replaced: []string{"changed", "promoted"}, Removed: []string{"gone"}}
	plan, err := r.PlanFixed(file)
	if err != nil || !reflect.DeepEqual(plan, want) {
		t.Fatalf("PlanFixed = %+v, %v; want %+v", plan, err, want)
	}
	if _, ok := r.Group("new"); ok || len(added) != 0 {
		t.Fatal("PlanFixed changed the registry")
	}
	var gonePresentInBetween bool
	got, err := r.SyncFixed(file, func() {
		_, gonePresentInBetween = r.Group("gone")
		if _, ok := r.Group("new"); !ok {
			t.Error("between runs before the new group is added")
		}
	})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("SyncFixed = %+v, %v; want %+v", got, err, want)
	}
	if !gonePresentInBetween {
		t.Error("the group that left the file was removed before between ran")
	}
	if !slices.Equal(added, []string{"changed", "promoted", "new"}) || !slices.Equal(removed, []string{"gone"}) {
		t.Errorf("OnAdd heard %v, OnRemove %v", added, removed)
	}
	if g := r.snap.Load().groups["same"]; g != sameGroup || st(t, r, "same", 0) != sameState || sameState.health() != stateDown {
		t.Error("the unchanged group was touched: its member lost its state")
	}
	if s := st(t, r, "changed", 1); s != changedKept || s.health() != stateDown {
		t.Error("the changed group's unchanged member lost its health")
	}
	for name, fixed := range map[string]bool{"same": true, "changed": true, "promoted": true, "new": true, "runtime": false} {
		if g, ok := r.Group(name); !ok || g.Fixed != fixed {
			t.Errorf("group %s: present %v, fixed %v; want fixed %v", name, ok, g.Fixed, fixed)
		}
	}
	if _, ok := r.Group("gone"); ok {
		t.Error("the group that left the file is still there")
	}
	if err := r.RemoveGroup("promoted"); !errors.Is(err, ErrFixedGroup) {
		t.Errorf("RemoveGroup(promoted) = %v, want ErrFixedGroup", err)
	}

	// The same again changes nothing.
	added, removed = nil, nil
	got, err = r.SyncFixed(file, nil)
	none := FixedChanges{Added: []string{}, Replaced: []string{}, Removed: []string{}}
	if err != nil || !reflect.DeepEqual(got, none) || len(added)+len(removed) != 0 {
		t.Fatalf("SyncFixed again = %+v, %v (OnAdd %v, OnRemove %v); want no change", got, err, added, removed)
	}
}

// An invalid group refuses the whole set before anything changes.
func TestSyncFixedInvalidChangesNothing(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "a", Destinations: dests(1)})
	before := r.snap.Load()
	for _, file := range [][]GroupConfig{
		{{Name: "b", Destinations: dests(1)}, {Name: "bad", Destinations: []DestConfig{{URI: "mailto:x", Address: "nohost"}}}},
		{{Name: "b", Destinations: dests(1)}, {Name: "b", Destinations: dests(2)}},
	} {
		called := false
		if _, err := r.SyncFixed(file, func() { called = true }); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("SyncFixed(%v) = %v, want ErrInvalidGroup", file, err)
		}
		if r.snap.Load() != before || called {
			t.Fatal("a refused SyncFixed changed the registry or ran between")
		}
	}
}
