package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// A benchmark is one benchmark's runs as `go test -bench` printed them:
// each metric (by unit: ns/op, allocs/op, calls/s...) once per run.
type benchmark struct {
	pkg   string // import path, from the "pkg:" line before it
	name  string // as printed, without "Benchmark": "CallFlow", "GCRALocal/keys=64-2"
	units []string
	runs  map[string][]float64 // unit -> one value per run
}

// median returns the median of the benchmark's runs in unit, and false
// when no run reported it.
func (b *benchmark) median(unit string) (float64, bool) {
	v := b.runs[unit]
	return median(v), len(v) > 0
}

// count is the number of runs: those that reported the first unit.
func (b *benchmark) count() int { return len(b.runs[b.units[0]]) }

// benchSet is the parsed output of one or more `go test -bench` runs.
type benchSet struct {
	benchmarks []*benchmark // in the order first seen
	config     map[string][]string
}

// key is how runs of one benchmark are told apart from others.
func key(pkg, name string) string { return pkg + "\x00" + name }

// parseBench reads `go test -bench` output (the Go benchmark format:
// "key: value" configuration lines, benchmark result lines, anything else
// ignored) and adds it to s. A "pkg:" line names the package of the
// results after it; every configuration value is kept, in order, for the
// report's header (goos, goarch, cpu, and the loadavg lines make bench
// writes before and after).
func (s *benchSet) parseBench(r io.Reader, file string) error {
	if s.config == nil {
		s.config = make(map[string][]string)
	}
	index := make(map[string]*benchmark, len(s.benchmarks))
	for _, b := range s.benchmarks {
		index[key(b.pkg, b.name)] = b
	}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if k, v, ok := configLine(line); ok {
			if k == "pkg" {
				pkg = v
			}
			s.config[k] = append(s.config[k], v)
			continue
		}
		name, units, values, ok, err := resultLine(line)
		if err != nil {
			return fmt.Errorf("cannot read %s line %d: %w", file, n, err)
		}
		if !ok {
			continue
		}
		b := index[key(pkg, name)]
		if b == nil {
			b = &benchmark{pkg: pkg, name: name, runs: make(map[string][]float64)}
			index[key(pkg, name)] = b
			s.benchmarks = append(s.benchmarks, b)
		}
		for i, u := range units {
			if _, seen := b.runs[u]; !seen {
				b.units = append(b.units, u)
			}
			b.runs[u] = append(b.runs[u], values[i])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read %s: %w", file, err)
	}
	return nil
}

// configLine splits a configuration line, "key: value" with a key of
// lower-case letters, digits and '-' (the Go benchmark format).
func configLine(line string) (key, value string, ok bool) {
	k, v, found := strings.Cut(line, ":")
	if !found || k == "" || (len(v) > 0 && v[0] != ' ') {
		return "", "", false
	}
	for _, c := range k {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return "", "", false
		}
	}
	return k, strings.TrimSpace(v), true
}

// resultLine parses "BenchmarkName-2  1000  123 ns/op  0 allocs/op ...":
// a name, an iteration count, then value-unit pairs. ok is false for a
// line that is not a result (a "Benchmark..." name alone, as -v prints
// it, or a FAIL line); err is set for a result line with a value that is
// not a number.
func resultLine(line string) (name string, units []string, values []float64, ok bool, err error) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") || len(f[0]) == len("Benchmark") {
		return "", nil, nil, false, nil
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return "", nil, nil, false, nil
	}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, nil, false, fmt.Errorf("%s: %q is not a number", f[0], f[i])
		}
		values = append(values, v)
		units = append(units, f[i+1])
	}
	return strings.TrimPrefix(f[0], "Benchmark"), units, values, true, nil
}

// trimProcs strips the -N GOMAXPROCS suffix go test appends to a name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// find returns the benchmark of package pkg named name (GOMAXPROCS suffix
// ignored), or nil.
func (s *benchSet) find(pkg, name string) *benchmark {
	for _, b := range s.benchmarks {
		if b.pkg == pkg && trimProcs(b.name) == name {
			return b
		}
	}
	return nil
}

// median returns the median of v, the mean of the middle two for an even
// count, and 0 for none. It does not modify v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
