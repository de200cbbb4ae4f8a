package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

const module = "github.com/sipedge/sipedge"

// packages titles the benchmark packages, in the report's order; packages
// not listed follow, titled by their path.
var packages = []struct{ path, title string }{
	{"parser", "Parser"},
	{"bench/sipgo", "sipgo, the parser baseline"},
	{"bench", "Calls: through one shard's engine, on the wire, heap per call"},
	{"ratelimit", "CPS limits: GCRA in process and through Redis"},
	{"shard/timer", "Timer wheel"},
	{"health", "Gateway pick and health"},
	{"route/lcr", "LCR decision cache and static table"},
	{"route", "Failover sequence"},
	{"dialog/txn", "Transactions"},
	{"dialog/cdr", "CDR encoding"},
	{"shard", "Shard dispatch"},
}

// parserPairs are the parser benchmarks compared with sipgo's
// BenchmarkSipgo<Name> from the same run.
var parserPairs = []string{"ParseInvite", "Parse200OK", "ParseAndAccess"}

// A report is what REPORT.md is made of. Paths are as the reader of
// REPORT.md finds them, relative to it.
type report struct {
	date         string
	bench        *benchSet // nil: no benchmark output
	benchFile    string
	points       []point // nil: no capacity CSV
	capacityFile string
	recheck      []point // nil: no second capacity CSV
	recheckFile  string
	successPlot  string
	cpuPlot      string
	children     []int // Kamailio's worker processes, as the steps recorded them
	sippNice     []int // SIPp's niceness, as the steps recorded it
	cpuAt        int   // the offered rate of the CPU per call comparison
	successAt    int   // the offered rate of the success ratio comparison
}

// write renders the report as Markdown.
func (r *report) write(out io.Writer) error {
	w := bufio.NewWriter(out)
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# sipedge: benchmarks and capacity\n\n")
	p("Generated on %s by `bench/report` from", r.date)
	var from []string
	if r.bench != nil {
		from = append(from, "`"+r.benchFile+"` (`make bench`)")
	}
	if r.points != nil {
		from = append(from, "`"+r.capacityFile+"` (`make capacity`)")
	}
	p(" %s. Each figure says what it measures and how; the raw output is in those files.\n", strings.Join(from, " and "))
	if r.bench != nil {
		r.writeMachine(p)
		r.writeBenchmarks(p)
	}
	if r.points != nil {
		r.writeCapacity(p)
	}
	return w.Flush()
}

// writeMachine prints what go test and make bench recorded of the machine.
func (r *report) writeMachine(p func(string, ...any)) {
	c := r.bench.config
	first := func(k string) string {
		if v := c[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var m []string
	if v := first("cpu"); v != "" {
		m = append(m, v)
	}
	if v := first("nproc"); v != "" {
		m = append(m, v+" cores")
	}
	if first("goos") != "" {
		m = append(m, first("goos")+"/"+first("goarch"))
	}
	if v := first("go"); v != "" {
		m = append(m, v)
	}
	if len(m) > 0 {
		p("\nMachine: %s.", strings.Join(m, ", "))
	}
	if l := c["loadavg"]; len(l) > 0 {
		p(" Load average (1, 5, 15 min) as the benchmarks started: %s; as they ended: %s.", loadTriple(l[0]), loadTriple(l[len(l)-1]))
	}
	p("\n")
}

// loadTriple keeps the three averages of a /proc/loadavg line.
func loadTriple(s string) string {
	f := strings.Fields(s)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

func (r *report) writeBenchmarks(p func(string, ...any)) {
	runs := 0
	for _, b := range r.bench.benchmarks {
		runs = max(runs, b.count())
	}
	p("\n## Benchmarks\n\n")
	p("`go test -bench`, medians of %d runs (`-count`). Times drift with the machine's load (it is shared, and its\n", runs)
	p("speed varies several-fold): compare against a baseline from the same run, such as sipgo below; allocations do not drift.\n")
	r.writeParserPairs(p)
	for _, pkg := range r.packageOrder() {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		title := rel
		for _, t := range packages {
			if t.path == rel {
				title = t.title
			}
		}
		if rel == "" {
			rel = "."
		}
		p("\n### %s (`%s`)\n\n", title, rel)
		p("| benchmark | runs | ns/op | B/op | allocs/op | other metrics |\n|---|--:|--:|--:|--:|---|\n")
		for _, b := range r.bench.benchmarks {
			if b.pkg != pkg {
				continue
			}
			var other []string
			for _, u := range b.units {
				if u == "ns/op" || u == "B/op" || u == "allocs/op" {
					continue
				}
				v, _ := b.median(u)
				other = append(other, number(v)+" "+u)
			}
			p("| %s | %d | %s | %s | %s | %s |\n", b.name, b.count(), b.cell("ns/op"), b.cell("B/op"), b.cell("allocs/op"), strings.Join(other, ", "))
		}
	}
}

// cell is the median of unit, or "" when the benchmark does not report it.
func (b *benchmark) cell(unit string) string {
	v, ok := b.median(unit)
	if !ok {
		return ""
	}
	return number(v)
}

// packageOrder lists the packages with results: the known ones in
// packages' order, then the rest sorted.
func (r *report) packageOrder() []string {
	var seen []string
	for _, b := range r.bench.benchmarks {
		if !slices.Contains(seen, b.pkg) {
			seen = append(seen, b.pkg)
		}
	}
	rank := func(pkg string) int {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		for i, t := range packages {
			if t.path == rel {
				return i
			}
		}
		return len(packages)
	}
	slices.SortStableFunc(seen, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	return seen
}

// writeParserPairs compares sipedge's parser with sipgo's, when both ran.
func (r *report) writeParserPairs(p func(string, ...any)) {
	header := false
	for _, name := range parserPairs {
		se := r.bench.find(module+"/parser", name)
		sg := r.bench.find(module+"/bench/sipgo", "Sipgo"+name)
		if se == nil || sg == nil {
			continue
		}
		if !header {
			p("\n### Parser against sipgo\n\n")
			p("The same messages (`shared/testdata/bench`), the two alternating run by run (`make bench`).\n\n")
			p("| benchmark | sipedge ns/op | sipgo ns/op | speed-up | allocs/op, sipedge and sipgo |\n|---|--:|--:|--:|---|\n")
			header = true
		}
		a, _ := se.median("ns/op")
		b, _ := sg.median("ns/op")
		p("| %s | %s | %s | %sx | %s, %s |\n", name, number(a), number(b), ratio(b, a), se.cell("allocs/op"), sg.cell("allocs/op"))
	}
}

func (r *report) writeCapacity(p func(string, ...any)) {
	var rates []int
	rounds, secs := 0, 0
	for _, pt := range r.points {
		if !slices.Contains(rates, pt.offered) {
			rates = append(rates, pt.offered)
		}
		rounds = max(rounds, pt.rounds)
		secs = max(secs, pt.secs)
	}
	slices.Sort(rates)
	p("\n## Capacity on the wire: sipedge and Kamailio under SIPp\n\n")
	p("`bench/sipp/capacity.sh` on this machine: a SIPp UAC steps its call rate through %s calls/s, %d s a step,\n",
		joinRates(rates), secs)
	p("%s; each point is the median over the rounds. SIPp's caller and carriers run on the same cores as the\n", plural(rounds, "round"))
	p("server, so past some rate SIPp, not the server, is what saturates: read the success ratio with the CPU per\n")
	p("call. `plain`: one carrier answers; `failover`: the first carrier answers 503 and the second answers, one\n")
	p("failover per call. Kamailio is a stateful proxy with dispatcher failover (`bench/kamailio/kamailio.cfg`). CPU\n")
	p("per call is the server's (all its processes) over the calls attempted; answered is SIPp's successful calls\n")
	p("over those it attempted; retransmissions are those SIPp's caller and carriers sent.")
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range r.points {
		lo, hi = min(lo, pt.loadMin), max(hi, pt.loadMax)
	}
	p(" The 1-minute load average went from %s to %s over the steps.", strconv.FormatFloat(lo, 'f', 2, 64), strconv.FormatFloat(hi, 'f', 2, 64))
	if len(r.children) > 0 {
		p(" Kamailio ran with %s worker processes (`children`).", joinInts(r.children, " or "))
	}
	if len(r.sippNice) > 0 {
		if len(r.sippNice) == 1 && r.sippNice[0] == 0 {
			p(" SIPp ran at the server's priority.")
		} else {
			p(" SIPp ran niced by %s.", joinInts(r.sippNice, " or "))
		}
	}
	p("\n")
	p("\nsipedge against Kamailio over UDP, medians over the rounds. CPU per call compares like with like only where both\n")
	p("servers answered nearly every call: otherwise the calls lost, and the retransmissions they cause, are in the figure too.\n")
	r.writeComparison(p, r.points)
	if r.recheck != nil {
		lo, hi, rounds := math.Inf(1), math.Inf(-1), 0
		for _, pt := range r.recheck {
			lo, hi, rounds = min(lo, pt.loadMin), max(hi, pt.loadMax), max(rounds, pt.rounds)
		}
		p("\nThe same comparison measured again (`%s`, %s of the compared rates only), the 1-minute load average\n", r.recheckFile, plural(rounds, "round"))
		p("from %s to %s:\n", strconv.FormatFloat(lo, 'f', 2, 64), strconv.FormatFloat(hi, 'f', 2, 64))
		r.writeComparison(p, r.recheck)
	}
	if r.successPlot != "" {
		p("\n![calls answered against the offered rate](%s)\n", r.successPlot)
	}
	if r.cpuPlot != "" {
		p("\n![server CPU per call against the offered rate](%s)\n", r.cpuPlot)
	}
	p("\n### Every step\n\n")
	p("Medians over the rounds; CPU per call with its range over the rounds; the load average is the range of the\n")
	p("1-minute figure at the steps' starts and ends, and host busy the share of both cores in use, SIPp's included.\n\n")
	p("| series | offered calls/s | rounds | attempted | answered | retransmissions | CPU µs/call | peak MB | host busy | load average |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, pt := range r.points {
		cpu := number(pt.cpuUs)
		if pt.rounds > 1 {
			cpu += " (" + number(pt.cpuMin) + "–" + number(pt.cpuMax) + ")"
		}
		p("| %s | %s | %d | %s | %s %% | %s | %s | %s | %s %% | %s–%s |\n", pt.series, number(float64(pt.offered)), pt.rounds,
			number(pt.attempted), percent(pt.successPct), number(pt.retrans), cpu, number(pt.peakMB),
			strconv.FormatFloat(pt.hostBusy, 'f', 0, 64), strconv.FormatFloat(pt.loadMin, 'f', 2, 64), strconv.FormatFloat(pt.loadMax, 'f', 2, 64))
	}
}

// writeComparison is the headline: sipedge against Kamailio over UDP, CPU
// per call at cpuAt and the success ratio at successAt.
func (r *report) writeComparison(p func(string, ...any), points []point) {
	var rows []string
	for _, scenario := range []string{"plain", "failover"} {
		a, okA := lookup(points, series{"sipedge", scenario, "udp"}, r.cpuAt)
		b, okB := lookup(points, series{"kamailio", scenario, "udp"}, r.cpuAt)
		if okA && okB {
			rows = append(rows, fmt.Sprintf("| CPU per call at %s calls/s, %s | %s µs (%s %% answered) | %s µs (%s %% answered) | %s |",
				number(float64(r.cpuAt)), scenario, number(a.cpuUs), percent(a.successPct), number(b.cpuUs), percent(b.successPct), ratio(a.cpuUs, b.cpuUs)))
		}
	}
	for _, scenario := range []string{"plain", "failover"} {
		a, okA := lookup(points, series{"sipedge", scenario, "udp"}, r.successAt)
		b, okB := lookup(points, series{"kamailio", scenario, "udp"}, r.successAt)
		if okA && okB {
			rows = append(rows, fmt.Sprintf("| calls answered at %s calls/s, %s | %s %% | %s %% | %s |",
				number(float64(r.successAt)), scenario, percent(a.successPct), percent(b.successPct), ratio(a.successPct, b.successPct)))
		}
	}
	if len(rows) == 0 {
		return
	}
	p("\n| over UDP | sipedge | Kamailio | sipedge / Kamailio |\n|---|--:|--:|--:|\n")
	for _, row := range rows {
		p("%s\n", row)
	}
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}

func joinRates(rates []int) string {
	s := make([]string, len(rates))
	for i, r := range rates {
		s[i] = number(float64(r))
	}
	return strings.Join(s, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// ratio is a/b to two decimals, or "-" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

// percent prints a percentage to one decimal.
func percent(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// number prints v with three significant digits at most below 1,000 and
// as a whole number with thousands separators above: 0, 0.52, 9.87, 52.3,
// 193, 111,750.
func number(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 999.5:
		return thousands(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case a >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 9.995:
		return trimZeros(strconv.FormatFloat(v, 'f', 1, 64))
	default:
		return trimZeros(strconv.FormatFloat(v, 'f', 2, 64))
	}
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// thousands puts a comma between each group of three digits of an integer.
func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
