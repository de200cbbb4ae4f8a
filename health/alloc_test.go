//go:build !race

package health

import (
	"testing"
	"time"
)

func TestPickAllocs(t *testing.T) {
	for _, alg := range []string{AlgorithmWeighted, AlgorithmRoundRobin, AlgorithmHash} {
		d := dests(8)
		for i := range d {
			d[i].Weight = 1 + i%3
			d[i].Priority = i / 4
		}
		r, _ := newTestRegistry(t, Options{}, GroupConfig{Name: "g", Algorithm: alg, Destinations: d})
		r.toDown(st(t, r, "g", 0), true, "test", nil)
		r.setCooldown(st(t, r, "g", 1), time.Hour, "test") // Pick reads the clock
		var sel Selector
		var key uint64
		f := func(name string, want Result) {
			t.Helper()
			n := testing.AllocsPerRun(1000, func() {
				key++
				m, res := r.Pick(name, key, &sel)
				if res != want {
					t.Fatalf("%s: Pick(%q) = %v, want %v", alg, name, res, want)
				}
				if res == OK {
					r.ReportCall(m, OutcomeAnswered)
				}
			})
			if n != 0 {
				t.Errorf("%s: Pick(%q)+ReportCall: %v allocs, want 0", alg, name, n)
			}
		}
		f("g", OK)
		f("unknown", UnknownGroup)
		for i := range 4 {
			r.toDown(st(t, r, "g", i), true, "test", nil)
		}
		f("g", OK) // tier 2
		for i := range 8 {
			r.toDown(st(t, r, "g", i), true, "test", nil)
		}
		f("g", GroupDown)
	}
}

// ReportCall does not allocate unless the member changes state: failures
// judged and found no outlier, successes, abandoned trials. Nor do the
// picks of a group in panic or of a last resort.
func TestReportCallAllocs(t *testing.T) {
	r, clk, _ := newClockRegistry(t, Options{}, GroupConfig{Name: "g", Destinations: dests(3)},
		GroupConfig{Name: "down", Destinations: dests(2)})
	var sel Selector
	m, _ := r.Pick("g", 0, &sel)
	i := 0
	n := testing.AllocsPerRun(1000, func() {
		clk.advance(time.Millisecond)
		o := OutcomeAnswered
		if i++; i%4 == 0 {
			o = OutcomeNoResponse // 25 %: judged, kept up
		}
		r.ReportCall(m, o)
	})
	if n != 0 || m.st.health() != stateUp {
		t.Fatalf("ReportCall: %v allocs, member %s", n, stateNames[m.st.health()])
	}

	r.toDown(st(t, r, "g", 0), false, "test", nil)
	r.toDown(st(t, r, "g", 1), false, "test", nil)
	r.toDown(st(t, r, "down", 0), false, "test", nil)
	r.toDown(st(t, r, "down", 1), false, "test", nil)
	f := func(name string, pick func() (Member, Result)) {
		t.Helper()
		n := testing.AllocsPerRun(1000, func() {
			m, res := pick()
			if res != OK {
				t.Fatalf("%s: %v", name, res)
			}
			r.ReportCall(m, OutcomeNoResponse) // a rescued member stays down
		})
		if n != 0 {
			t.Errorf("%s: %v allocs, want 0", name, n)
		}
	}
	f("panic", func() (Member, Result) { return r.Pick("g", 0, &sel) })
	f("last resort", func() (Member, Result) { return r.PickLastResort("down", 0, &sel) })
}
