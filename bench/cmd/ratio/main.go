// Command ratio compares sipedge's parser benchmarks with the sipgo baseline
// measured in the same run. It reads two `go test -bench` outputs, sipedge's
// first and sipgo's second, takes the median over the -count runs of each
// benchmark and prints the speed-up (sipgo ns/op / sipedge ns/op).
//
//	go run ./bench/cmd/ratio /tmp/sipedge-bench.txt /tmp/sipedge-bench-sipgo.txt
//
// It exits 0 whether or not the goal is met (it is a report) and 1 if an
// input cannot be read or lacks one of the compared benchmarks.
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// goal is the speed-up over sipgo that ParseAndAccess must reach.
const goal = 8

// The absolute goal, ParseAndAccess at or under goalNs, was set when
// sipgo parsed the INVITE in sipgoNsWhenSet on this machine. The machine's
// speed drifts (sipgo has run 2-4x slower since), so the report also scales
// goalNs by this run's sipgo ParseInvite: the same-run baseline the
// project's benchmarks are judged against.
const (
	goalNs         = 400
	sipgoNsWhenSet = 3546
)

// pair names a compared benchmark: sipedge's Benchmark<Name> against
// sipgo's BenchmarkSipgo<Name>.
type pair struct{ name, sipedge, sipgo string }

var pairs = []pair{
	{"ParseInvite", "BenchmarkParseInvite", "BenchmarkSipgoParseInvite"},
	{"Parse200OK", "BenchmarkParse200OK", "BenchmarkSipgoParse200OK"},
	{"ParseAndAccess", "BenchmarkParseAndAccess", "BenchmarkSipgoParseAndAccess"},
}

// samples are one benchmark's results, one entry per run.
type samples struct {
	nsPerOp, allocsPerOp []float64
}

// result is the median of a benchmark's runs.
type result struct {
	ns, allocs float64
	runs       int
}

func (s *samples) median() result {
	return result{ns: median(s.nsPerOp), allocs: median(s.allocsPerOp), runs: len(s.nsPerOp)}
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

// parseBench reads `go test -bench` output and returns each benchmark's
// samples by name, without the GOMAXPROCS suffix. Other lines are ignored.
func parseBench(r io.Reader) (map[string]*samples, error) {
	out := make(map[string]*samples)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Benchmark<Name>-N  <iterations>  <value> <unit>  <value> <unit> ...
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		var (
			ns, allocs       float64
			haveNs, haveAllo bool
		)
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: bad value %q for %s", f[0], f[i], f[i+1])
			}
			switch f[i+1] {
			case "ns/op":
				ns, haveNs = v, true
			case "allocs/op":
				allocs, haveAllo = v, true
			}
		}
		if !haveNs {
			continue
		}
		name := trimProcs(f[0])
		s := out[name]
		if s == nil {
			s = new(samples)
			out[name] = s
		}
		s.nsPerOp = append(s.nsPerOp, ns)
		if haveAllo {
			s.allocsPerOp = append(s.allocsPerOp, allocs)
		}
	}
	return out, sc.Err()
}

// row is one compared benchmark.
type row struct {
	name           string
	sipedge, sipgo result
}

func (r row) speedup() float64 { return r.sipgo.ns / r.sipedge.ns }

// compare pairs the benchmarks; it fails naming every missing one.
func compare(sipedge, sipgo map[string]*samples) ([]row, error) {
	var (
		rows    []row
		missing []string
	)
	for _, p := range pairs {
		a, b := sipedge[p.sipedge], sipgo[p.sipgo]
		if a == nil {
			missing = append(missing, p.sipedge+" (sipedge)")
		}
		if b == nil {
			missing = append(missing, p.sipgo+" (sipgo)")
		}
		if a != nil && b != nil {
			rows = append(rows, row{p.name, a.median(), b.median()})
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing from the benchmark output: %s", strings.Join(missing, ", "))
	}
	return rows, nil
}

func report(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\tsipedge ns/op\tallocs/op\tsipgo ns/op\tallocs/op\tspeed-up\truns\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1fx\t%d/%d\t\n", r.name,
			num(r.sipedge.ns), num(r.sipedge.allocs), num(r.sipgo.ns), num(r.sipgo.allocs),
			r.speedup(), r.sipedge.runs, r.sipgo.runs)
	}
	tw.Flush()
	for _, r := range rows {
		if r.name != "ParseAndAccess" {
			continue
		}
		verdict := "met"
		if r.speedup() < goal {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "\nParseAndAccess: sipedge %s ns/op, sipgo %s ns/op, speed-up %.1f (goal >= %d): %s\n",
			num(r.sipedge.ns), num(r.sipgo.ns), r.speedup(), goal, verdict)
		verdict = "met"
		if r.sipedge.ns > goalNs {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "ParseAndAccess: %s ns/op (goal <= %d ns): %s\n", num(r.sipedge.ns), goalNs, verdict)
		for _, inv := range rows {
			if inv.name != "ParseInvite" {
				continue
			}
			scaled := goalNs * inv.sipgo.ns / sipgoNsWhenSet
			verdict = "met"
			if r.sipedge.ns > scaled {
				verdict = "NOT met"
			}
			fmt.Fprintf(w, "ParseAndAccess: %s ns/op against the %d ns goal scaled by this run's sipgo ParseInvite (%s ns/op, %d when set): %s ns: %s\n",
				num(r.sipedge.ns), goalNs, num(inv.sipgo.ns), sipgoNsWhenSet, num(math.Round(scaled)), verdict)
		}
	}
}

// num formats a median: whole numbers without decimals, others with one.
func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func load(path string) (map[string]*samples, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := parseBench(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: ratio SIPEDGE-BENCH-OUTPUT SIPGO-BENCH-OUTPUT")
		os.Exit(2)
	}
	sipedge, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	sipgo, err := load(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	rows, err := compare(sipedge, sipgo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	report(os.Stdout, rows)
}
