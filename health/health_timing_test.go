package health

import (
	"sync"
	"sync/atomic"
	"testing"
)

// benchRegistry returns a registry with an 8-member group of the algorithm
// given, weights 1 to 8.
func benchRegistry(b *testing.B, alg string) *Registry {
	d := dests(8)
	for i := range d {
		d[i].Weight = i + 1
	}
	r, _ := newTestRegistry(b, Options{}, GroupConfig{Name: "carrier-a", Algorithm: alg, Destinations: d},
		GroupConfig{Name: "carrier-b", Destinations: dests(2)})
	return r
}

// BenchmarkPickHealthy is a shard's dial: an 8-member weighted group, every
// member healthy, each goroutine with its own Selector.
func BenchmarkPickHealthy(b *testing.B) {
	benchPick(b, AlgorithmWeighted)
}

func BenchmarkPickRoundRobin(b *testing.B) { benchPick(b, AlgorithmRoundRobin) }

func BenchmarkPickHash(b *testing.B) { benchPick(b, AlgorithmHash) }

func benchPick(b *testing.B, alg string) {
	r := benchRegistry(b, alg)
	b.ReportAllocs()
	var seed atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		var sel Selector
		key := seed.Add(1) << 32
		for pb.Next() {
			key++
			if _, res := r.Pick("carrier-a", key, &sel); res != OK {
				b.Fatal(res)
			}
		}
	})
}

// BenchmarkPickMutexBaseline is the same choice under a shared mutex: what
// the lock-free snapshot and per-shard selectors avoid.
func BenchmarkPickMutexBaseline(b *testing.B) {
	r := benchRegistry(b, AlgorithmWeighted)
	var mu sync.Mutex
	var sel Selector
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			_, res := r.Pick("carrier-a", 0, &sel)
			mu.Unlock()
			if res != OK {
				b.Fatal(res)
			}
		}
	})
}

// BenchmarkReportCall is a shard reporting a successful call.
func BenchmarkReportCall(b *testing.B) {
	r := benchRegistry(b, AlgorithmWeighted)
	var sel Selector
	m, _ := r.Pick("carrier-a", 0, &sel)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.ReportCall(m, OutcomeAnswered)
		}
	})
}

// BenchmarkReportCallFailures is a shard reporting calls of which one in
// four failed: every failure is judged (outlier.go), none makes an outlier.
func BenchmarkReportCallFailures(b *testing.B) {
	r := benchRegistry(b, AlgorithmWeighted)
	var sel Selector
	m, _ := r.Pick("carrier-a", 0, &sel)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		o := OutcomeAnswered
		if i++; i%4 == 0 {
			o = OutcomeNoResponse
		}
		r.ReportCall(m, o)
	}
	if m.st.health() != stateUp {
		b.Fatal("a quarter of the calls failing took the member down")
	}
}

// BenchmarkPickOneDown is a dial in an 8-member weighted group with one
// member down: Pick's slow path, and the panic check's.
func BenchmarkPickOneDown(b *testing.B) {
	r := benchRegistry(b, AlgorithmWeighted)
	r.toDown(st(b, r, "carrier-a", 3), false, "bench", nil)
	var sel Selector
	b.ReportAllocs()
	var key uint64
	for b.Loop() {
		key++
		if _, res := r.Pick("carrier-a", key, &sel); res != OK {
			b.Fatal(res)
		}
	}
}
