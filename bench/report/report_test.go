package main

import (
	"bytes"
	"errors"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/REPORT.golden.md")

// setup copies the testdata inputs into a fresh directory laid out as
// bench/ is: results/benchmarks.txt, results/capacity.csv; it returns the
// directory.
func setup(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "results", f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReportGolden: the golden inputs give the golden report, and the two
// plots are PNGs of the documented size.
func TestReportGolden(t *testing.T) {
	dir := setup(t, "benchmarks.txt", "capacity.csv", "capacity-recheck.csv")
	out := filepath.Join(dir, "REPORT.md")
	results := filepath.Join(dir, "results")
	err := run(filepath.Join(results, "benchmarks.txt"), filepath.Join(results, "capacity.csv"), filepath.Join(results, "capacity-recheck.csv"),
		out, "2026-12-04", 1000, 2500)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "REPORT.golden.md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("REPORT.md differs from %s (go test -update rewrites it); got:\n%s", golden, got)
	}
	for _, name := range []string{"capacity-success.png", "capacity-cpu.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Width != 720 || cfg.Height != 450 {
			t.Errorf("%s is %dx%d, want 720x450", name, cfg.Width, cfg.Height)
		}
	}
}

// TestReportOneInput: either input alone gives a report of that part; a
// missing file counts as left out, and both left out is an error.
func TestReportOneInput(t *testing.T) {
	f := func(bench, capacity string, want, absent []string) {
		t.Helper()
		dir := setup(t, "benchmarks.txt", "capacity.csv")
		out := filepath.Join(dir, "REPORT.md")
		if err := run(bench, capacity, "testdata/missing-recheck.csv", out, "2026-12-04", 1000, 2500); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range want {
			if !strings.Contains(string(got), s) {
				t.Errorf("report lacks %q", s)
			}
		}
		for _, s := range absent {
			if strings.Contains(string(got), s) {
				t.Errorf("report has %q", s)
			}
		}
		_, err = os.Stat(filepath.Join(dir, "capacity-cpu.png"))
		if plotted := err == nil; plotted != (capacity != "" && !strings.Contains(capacity, "missing")) {
			t.Errorf("capacity-cpu.png written: %v", plotted)
		}
	}
	f("testdata/benchmarks.txt", "", []string{"## Benchmarks", "| CallFlow | 2 |"}, []string{"## Capacity"})
	f("testdata/benchmarks.txt", "testdata/missing.csv", []string{"## Benchmarks"}, []string{"## Capacity"})
	f("", "testdata/capacity.csv", []string{"## Capacity", "| sipedge plain udp | 1,000 |"}, []string{"## Benchmarks", "Machine:"})

	out := filepath.Join(t.TempDir(), "REPORT.md")
	if err := run("testdata/missing.txt", "", "testdata/capacity-recheck.csv", out, "2026-12-04", 1000, 2500); err == nil {
		t.Error("no input: no error")
	}
}

func TestResultLine(t *testing.T) {
	f := func(line, wantName string, wantUnits []string, wantValues []float64, wantOK, wantErr bool) {
		t.Helper()
		name, units, values, ok, err := resultLine(line)
		if (err != nil) != wantErr {
			t.Fatalf("%q: error %v, want error %v", line, err, wantErr)
		}
		if ok != wantOK || name != wantName || strings.Join(units, " ") != strings.Join(wantUnits, " ") {
			t.Fatalf("%q: %q %q ok=%v, want %q %q ok=%v", line, name, units, ok, wantName, wantUnits, wantOK)
		}
		for i := range wantValues {
			if values[i] != wantValues[i] {
				t.Fatalf("%q: values %v, want %v", line, values, wantValues)
			}
		}
	}
	f("BenchmarkCallFlow-2  100  8949 ns/op  111750 calls/s  0 allocs/op", "CallFlow-2",
		[]string{"ns/op", "calls/s", "allocs/op"}, []float64{8949, 111750, 0}, true, false)
	f("BenchmarkGCRALocal/keys=64/baseline=mutex-map-2 \t 20 \t 61.0 ns/op", "GCRALocal/keys=64/baseline=mutex-map-2",
		[]string{"ns/op"}, []float64{61}, true, false)
	f("BenchmarkCallFlow", "", nil, nil, false, false)           // -v prints the name alone
	f("BenchmarkX-2 --- FAIL: boom", "", nil, nil, false, false) // not a count
	f("Benchmark 1 2 ns/op", "", nil, nil, false, false)         // no name
	f("ok  \tgithub.com/x\t1.2s", "", nil, nil, false, false)    // go test's summary
	f("BenchmarkX-2 10 fast ns/op", "", nil, nil, false, true)   // a value that is no number
	f("BenchmarkX-2 10 5 ns/op 3", "", nil, nil, false, false)   // a value without a unit
}

func TestConfigLine(t *testing.T) {
	f := func(line, wantKey, wantValue string, wantOK bool) {
		t.Helper()
		k, v, ok := configLine(line)
		if k != wantKey || v != wantValue || ok != wantOK {
			t.Fatalf("%q: %q %q %v, want %q %q %v", line, k, v, ok, wantKey, wantValue, wantOK)
		}
	}
	f("pkg: github.com/sipedge/sipedge/bench", "pkg", "github.com/sipedge/sipedge/bench", true)
	f("loadavg: 1.37 0.60 0.34 3/412 9921", "loadavg", "1.37 0.60 0.34 3/412 9921", true)
	f("cpu: AMD EPYC", "cpu", "AMD EPYC", true)
	f("--- FAIL: BenchmarkBroken", "", "", false)
	f("Benchmark: 1", "", "", false) // keys are lower case
	f("http://x", "", "", false)     // no space after the colon
}

func TestTrimProcs(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := trimProcs(in); got != want {
			t.Fatalf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
	f("CallFlow-2", "CallFlow")
	f("CallFlow", "CallFlow")
	f("GCRALocal/keys=64/baseline=mutex-map-2", "GCRALocal/keys=64/baseline=mutex-map")
	f("GCRALocal/keys=64/baseline=mutex-map", "GCRALocal/keys=64/baseline=mutex-map")
	f("X-", "X-")
}

func TestParseBenchBadValue(t *testing.T) {
	var s benchSet
	err := s.parseBench(strings.NewReader("pkg: p\nBenchmarkA-2 10 5 ns/op\nBenchmarkB-2 10 x ns/op\n"), "in.txt")
	if err == nil || !strings.Contains(err.Error(), "in.txt line 3") {
		t.Fatalf("error %v, want one naming in.txt line 3", err)
	}
}

func TestParseCapacityErrors(t *testing.T) {
	head := "round,server,scenario,transport,offered_cps,step_secs,attempted,answered,failed,success_ratio,uac_retransmissions,carrier_retransmissions,cpu_us_per_call,peak_pss_mb,host_busy_pct,load_start,load_end"
	f := func(in, wantMsg string) {
		t.Helper()
		_, err := parseCapacity(strings.NewReader(in), "c.csv")
		if !errors.Is(err, errCapacity) || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("error %v, want errCapacity with %q", err, wantMsg)
		}
	}
	f(strings.Replace(head, ",cpu_us_per_call", "", 1)+"\n", `no column "cpu_us_per_call"`)
	f(head+"\n1,sipedge,plain,udp,1000,10,10,10,0,1,0,0,n/a,30,80,1,1\n", `line 2: cpu_us_per_call "n/a" is not a number`)

	steps, err := parseCapacity(strings.NewReader(head+"\n1,sipedge,plain,udp,1000,10,10,9,1,0.9,2,3,250.5,30,80,1.1,1.2\n"), "c.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := step{round: 1, series: series{"sipedge", "plain", "udp"}, offered: 1000, secs: 10, attempted: 10, answered: 9, failed: 1,
		successRatio: 0.9, uacRetrans: 2, carrierRetrans: 3, cpuUsPerCall: 250.5, peakMB: 30, hostBusy: 80, loadStart: 1.1, loadEnd: 1.2,
		kamailioChildren: -1, sippNice: -1} // the settings' columns are optional
	if len(steps) != 1 || steps[0] != want {
		t.Fatalf("steps %+v, want [%+v]", steps, want)
	}

	steps, err = parseCapacity(strings.NewReader(head+",kamailio_children,sipp_nice\n1,sipedge,plain,udp,1000,10,10,9,1,0.9,2,3,250.5,30,80,1.1,1.2,4,5\n"), "c.csv")
	if err != nil {
		t.Fatal(err)
	}
	want.kamailioChildren, want.sippNice = 4, 5
	if len(steps) != 1 || steps[0] != want {
		t.Fatalf("steps %+v, want [%+v]", steps, want)
	}
}

func TestNumber(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := number(v); got != want {
			t.Fatalf("number(%v) = %q, want %q", v, got, want)
		}
	}
	f(0, "0")
	f(0.5, "0.5")
	f(9.876, "9.88")
	f(52.34, "52.3")
	f(193.4, "193")
	f(999.4, "999")
	f(999.6, "1,000")
	f(111750, "111,750")
	f(32000000000, "32,000,000,000")
	f(-1234, "-1,234")
}

func TestMedian(t *testing.T) {
	f := func(in []float64, want float64) {
		t.Helper()
		if got := median(in); got != want {
			t.Fatalf("median(%v) = %v, want %v", in, got, want)
		}
	}
	f(nil, 0)
	f([]float64{3}, 3)
	f([]float64{3, 1, 2}, 2)
	f([]float64{4, 1, 3, 2}, 2.5)
}
