// Command report turns sipedge's benchmark output and the SIPp capacity
// ramp into bench/REPORT.md and its plots.
//
//	go run . -bench ../results/benchmarks.txt -capacity ../results/capacity.csv -out ../REPORT.md
//
// -bench is `go test -bench` output (the Go benchmark format; several
// packages and -count runs in one file, "pkg:" lines telling them apart);
// every benchmark in it gets the medians of its runs, and the parser is
// compared with sipgo when both ran. Extra "key: value" lines (nproc, go,
// loadavg, as make bench writes them) go into the header. -capacity is
// bench/sipp/capacity.sh's CSV: a table of every step (medians over the
// rounds), sipedge against Kamailio at -cpu-at and -success-at calls/s,
// and two PNG plots beside the report (success ratio and CPU per call
// against the offered rate, every series on one plot). Either input may
// be left out (an empty flag or a missing file), not both. -recheck is a
// second capacity CSV, the compared rates measured again (in a quieter
// window, say): its comparison table follows the first.
//
// It lives in its own module (bench/report) so that gonum/plot never
// becomes a dependency of sipedge.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

func main() {
	benchFile := flag.String("bench", "", "`go test -bench` output")
	capacityFile := flag.String("capacity", "", "bench/sipp/capacity.sh's CSV")
	recheckFile := flag.String("recheck", "", "a second capacity.sh CSV, the compared rates measured again: its comparison is shown too")
	out := flag.String("out", "REPORT.md", "the report to write; the plots go beside it")
	date := flag.String("date", time.Now().UTC().Format("2006-01-02"), "the date the report names")
	cpuAt := flag.Int("cpu-at", 1000, "the offered rate (calls/s) of the CPU per call comparison")
	successAt := flag.Int("success-at", 2500, "the offered rate (calls/s) of the success ratio comparison")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*benchFile, *capacityFile, *recheckFile, *out, *date, *cpuAt, *successAt); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// run reads the inputs and writes the report and, with capacity steps,
// the plots capacity-success.png and capacity-cpu.png beside it.
func run(benchFile, capacityFile, recheckFile, out, date string, cpuAt, successAt int) error {
	dir := filepath.Dir(out)
	r := &report{date: date, cpuAt: cpuAt, successAt: successAt}
	if benchFile != "" {
		data, err := os.ReadFile(benchFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil {
			r.bench = new(benchSet)
			if err := r.bench.parseBench(bytes.NewReader(data), benchFile); err != nil {
				return err
			}
			if len(r.bench.benchmarks) == 0 {
				return fmt.Errorf("no benchmark results in %q", benchFile)
			}
			r.benchFile = relTo(dir, benchFile)
		}
	}
	if capacityFile != "" {
		steps, err := readCapacity(capacityFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil {
			r.points = aggregate(steps)
			r.children, r.sippNice = settings(steps)
			r.capacityFile = relTo(dir, capacityFile)
			success := filepath.Join(dir, "capacity-success.png")
			cpu := filepath.Join(dir, "capacity-cpu.png")
			if err := savePlots(success, cpu, r.points); err != nil {
				return err
			}
			r.successPlot, r.cpuPlot = relTo(dir, success), relTo(dir, cpu)
		}
	}
	if recheckFile != "" && r.points != nil {
		steps, err := readCapacity(recheckFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil {
			r.recheck = aggregate(steps)
			r.recheckFile = relTo(dir, recheckFile)
		}
	}
	if r.bench == nil && r.points == nil {
		return errors.New("neither benchmark output nor capacity steps to report (-bench, -capacity)")
	}
	var buf bytes.Buffer
	if err := r.write(&buf); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// relTo is path as seen from dir, or path itself when it cannot be.
func relTo(dir, path string) string {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// readCapacity reads a capacity CSV with at least one step.
func readCapacity(file string) ([]step, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	steps, err := parseCapacity(f, file)
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no steps in %q", file)
	}
	return steps, nil
}
