package health

import (
	"math"
	"testing"
	"time"

	"github.com/sipedge/sipedge/transport"
)

func TestPickWeightedDistribution(t *testing.T) {
	f := func(weights []int, down []int) {
		t.Helper()
		d := dests(len(weights))
		for i, w := range weights {
			d[i].Weight = w
		}
		r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: d})
		for _, i := range down {
			r.toDown(st(t, r, "g", i), true, "test", nil)
		}
		const n = 30000
		counts := pickCounts(t, r, "g", n)
		total := 0
		for i, w := range weights {
			if contains(down, i) {
				if counts[i] != 0 {
					t.Errorf("weights %v: down member %d picked %d times", weights, i, counts[i])
				}
				continue
			}
			total += max(w, 1)
		}
		for i, w := range weights {
			if contains(down, i) {
				continue
			}
			want := float64(n) * float64(max(w, 1)) / float64(total)
			if got := float64(counts[i]); math.Abs(got-want) > 0.03*want {
				t.Errorf("weights %v down %v: member %d picked %v times, want %v ±3%%", weights, down, i, got, want)
			}
		}
	}
	f([]int{2, 1}, nil)
	f([]int{1, 1, 1}, nil)
	f([]int{5, 3, 1, 1}, nil)
	f([]int{2, 1, 4}, []int{2})
	f([]int{0, 3}, nil) // weight 0 is the default, 1
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Smooth weighted round robin interleaves: 2:1 never picks the heavy member
// three times in a row.
func TestPickWeightedSmooth(t *testing.T) {
	d := dests(2)
	d[0].Weight = 2
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: d})
	var sel Selector
	var seq []int
	for range 9 {
		m, _ := r.Pick("g", 0, &sel)
		seq = append(seq, m.Index)
	}
	want := []int{0, 1, 0, 0, 1, 0, 0, 1, 0}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("sequence %v, want %v", seq, want)
		}
	}
}

// Each Selector has its own state: two shards both start the cycle at the
// heavy member; neither disturbs the other's distribution.
func TestPickSelectorsIndependent(t *testing.T) {
	d := dests(2)
	d[0].Weight = 2
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: d})
	var a, b Selector
	counts := [2]map[int]int{{}, {}}
	for i := range 4500 {
		sel, k := &a, 0
		if i%3 == 0 {
			sel, k = &b, 1
		}
		m, _ := r.Pick("g", 0, sel)
		counts[k][m.Index]++
	}
	if counts[0][0] != 2*counts[0][1] || counts[1][0] != 2*counts[1][1] {
		t.Fatalf("per-selector counts %v, want exactly 2:1 each", counts)
	}
}

func TestPickPriorityTiers(t *testing.T) {
	d := dests(4)
	d[0].Priority, d[1].Priority = 1, 1
	d[2].Priority = 2
	d[3].Priority = 5
	for _, alg := range []string{AlgorithmWeighted, AlgorithmRoundRobin, AlgorithmHash} {
		r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Algorithm: alg, Destinations: d})
		f := func(wantOnly ...int) {
			t.Helper()
			counts := pickCounts(t, r, "g", 300)
			for i, c := range counts {
				if !contains(wantOnly, i) {
					t.Fatalf("%s: member %d picked %d times, want only %v (counts %v)", alg, i, c, wantOnly, counts)
				}
			}
			if alg != AlgorithmHash && len(counts) != len(wantOnly) {
				t.Fatalf("%s: counts %v, want every one of %v", alg, counts, wantOnly)
			}
		}
		f(0, 1)
		r.toDown(st(t, r, "g", 0), true, "test", nil)
		f(1)
		r.toDown(st(t, r, "g", 1), true, "test", nil)
		f(2) // tier 2 only when tier 1 is all down
		r.setCooldown(st(t, r, "g", 2), time.Hour, "test")
		f(3) // cooldown counts as unusable too
		r.toHalfOpen(st(t, r, "g", 1), "test")
		var sel Selector
		m, res := r.Pick("g", 0, &sel)
		if res != OK || m.Index != 1 {
			t.Fatalf("%s: half-open tier-1 member not preferred: %d %v", alg, m.Index, res)
		}
	}
}

func TestPickRoundRobinCycles(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Algorithm: AlgorithmRoundRobin, Destinations: dests(3)})
	var sel Selector
	seq := func(n int) []int {
		var s []int
		for range n {
			m, res := r.Pick("g", 0, &sel)
			if res != OK {
				t.Fatalf("Pick: %v", res)
			}
			s = append(s, m.Index)
		}
		return s
	}
	equal := func(got, want []int) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	}
	equal(seq(7), []int{0, 1, 2, 0, 1, 2, 0})
	r.toDown(st(t, r, "g", 2), true, "test", nil)
	equal(seq(4), []int{1, 0, 1, 0})
}

func TestPickHashStable(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		d := dests(5)
		if weighted {
			d[0].Weight, d[1].Weight = 3, 2
		}
		r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Algorithm: AlgorithmHash, Destinations: d})
		const keys = 5000
		pickAll := func(group string) []string {
			var sel Selector
			out := make([]string, keys)
			for k := range keys {
				m, res := r.Pick(group, uint64(k)*0x9e3779b97f4a7c15, &sel)
				if res != OK {
					t.Fatalf("Pick: %v", res)
				}
				out[k] = m.URI
			}
			return out
		}
		before := pickAll("g")
		again := pickAll("g")
		spread := map[string]int{}
		for k := range before {
			if before[k] != again[k] {
				t.Fatalf("key %d: %s then %s", k, before[k], again[k])
			}
			spread[before[k]]++
		}
		if len(spread) != 5 {
			t.Fatalf("keys spread over %v, want all 5 members", spread)
		}
		if weighted && !(spread[d[0].URI] > spread[d[1].URI] && spread[d[1].URI] > spread[d[2].URI]) {
			t.Fatalf("weighted hash spread %v, want 3:2:1:1:1 ordering", spread)
		}

		// An unrelated member added (first in the list, so every other one
		// moves in the configuration): keys move only to it, about 1/6 of
		// them (less when weighted).
		const newURI = "sip:new.example.com"
		d2 := append([]DestConfig{{URI: newURI, Address: "127.0.0.1:6000"}}, d...)
		if err := r.AddGroup(GroupConfig{Name: "g2", Algorithm: AlgorithmHash, Destinations: d2}); err != nil {
			t.Fatal(err)
		}
		moved := 0
		for k, uri := range pickAll("g2") {
			if uri != before[k] {
				moved++
				if uri != newURI {
					t.Fatalf("key %d moved from %s to %s, not to the new member", k, before[k], uri)
				}
			}
		}
		if frac := float64(moved) / keys; frac < 0.05 || frac > 0.30 {
			t.Fatalf("%.1f%% of keys moved, want about 1/6 (weighted=%v)", 100*frac, weighted)
		}

		// A member down: only its keys move.
		r.toDown(st(t, r, "g", 3), true, "test", nil)
		after := pickAll("g")
		for k := range keys {
			if before[k] != d[3].URI && after[k] != before[k] {
				t.Fatalf("key %d moved from %s to %s though %s is up", k, before[k], after[k], before[k])
			}
			if after[k] == d[3].URI {
				t.Fatalf("key %d still on the down member", k)
			}
		}
	}
}

func TestPickResults(t *testing.T) {
	r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(2)})
	var sel Selector
	if _, res := r.Pick("nope", 0, &sel); res != UnknownGroup {
		t.Fatalf("unknown group: %v", res)
	}
	m, res := r.Pick("g", 0, &sel)
	if res != OK || m.Group != "g" || m.Transport != transport.UDP || m.Addr.String() != "127.0.0.1:5061" || m.URI != "sip:gw0.example.com" {
		t.Fatalf("Pick = %+v %v", m, res)
	}
	r.toDown(st(t, r, "g", 0), true, "test", nil)
	r.toDown(st(t, r, "g", 1), true, "test", nil)
	start := time.Now()
	for range 1000 {
		if _, res := r.Pick("g", 0, &sel); res != GroupDown {
			t.Fatalf("all down: %v", res)
		}
	}
	if el := time.Since(start); el > 50*time.Millisecond {
		t.Fatalf("1000 Picks of a down group took %v", el)
	}
	if UnknownGroup.String() != "unknown_group" || GroupDown.String() != "group_down" || Unresolvable.String() != "unresolvable" {
		t.Fatal("Result names")
	}
}
