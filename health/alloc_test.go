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
		r.toDown(st(t, r, "g", 0), "test", nil)
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
			r.toDown(st(t, r, "g", i), "test", nil)
		}
		f("g", OK) // tier 2
		for i := range 8 {
			r.toDown(st(t, r, "g", i), "test", nil)
		}
		f("g", GroupDown)
	}
}
