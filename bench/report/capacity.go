package main

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// A step is one row of bench/sipp/capacity.sh's CSV: one offered rate of
// one series in one round.
type step struct {
	round                          int
	series                         series
	offered, secs                  int
	attempted, answered, failed    int
	successRatio                   float64
	uacRetrans, carrierRetrans     int
	cpuUsPerCall, peakMB, hostBusy float64
	loadStart, loadEnd             float64
	kamailioChildren, sippNice     int // -1: not in the CSV
}

// A series is what one ramp measures: a server, a scenario, a transport.
type series struct{ server, scenario, transport string }

func (s series) String() string { return s.server + " " + s.scenario + " " + s.transport }

// seriesOrder sorts sipedge before Kamailio, UDP before TCP, plain before
// failover, then by name.
func seriesOrder(a, b series) int {
	rank := func(s series) []int {
		return []int{boolInt(s.server != "sipedge"), boolInt(s.transport != "udp"), boolInt(s.scenario != "plain")}
	}
	if c := slices.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	return cmp.Compare(a.String(), b.String())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// capacityColumns are the CSV columns the report reads.
var capacityColumns = []string{
	"round", "server", "scenario", "transport", "offered_cps", "step_secs",
	"attempted", "answered", "failed", "success_ratio", "uac_retransmissions",
	"carrier_retransmissions", "cpu_us_per_call", "peak_pss_mb", "host_busy_pct",
	"load_start", "load_end",
}

var errCapacity = errors.New("report: bad capacity CSV")

// parseCapacity reads capacity.sh's CSV: a header naming at least
// capacityColumns (in any order), then one row per step.
func parseCapacity(r io.Reader, file string) ([]step, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %w", file, err)
	}
	col := make(map[string]int, len(head))
	for i, h := range head {
		col[h] = i
	}
	for _, c := range capacityColumns {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("%w: %s has no column %q", errCapacity, file, c)
		}
	}
	var steps []step
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return steps, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %q: %w", file, err)
		}
		var bad error
		num := func(c string) float64 {
			v, err := strconv.ParseFloat(rec[col[c]], 64)
			if err != nil && bad == nil {
				bad = fmt.Errorf("%w: %s line %d: %s %q is not a number", errCapacity, file, line, c, rec[col[c]])
			}
			return v
		}
		integer := func(c string) int { return int(num(c)) }
		// The run's settings, written by later versions of the script.
		optional := func(c string) int {
			if _, ok := col[c]; !ok {
				return -1
			}
			return integer(c)
		}
		s := step{
			round:            integer("round"),
			series:           series{rec[col["server"]], rec[col["scenario"]], rec[col["transport"]]},
			offered:          integer("offered_cps"),
			secs:             integer("step_secs"),
			attempted:        integer("attempted"),
			answered:         integer("answered"),
			failed:           integer("failed"),
			successRatio:     num("success_ratio"),
			uacRetrans:       integer("uac_retransmissions"),
			carrierRetrans:   integer("carrier_retransmissions"),
			cpuUsPerCall:     num("cpu_us_per_call"),
			peakMB:           num("peak_pss_mb"),
			hostBusy:         num("host_busy_pct"),
			loadStart:        num("load_start"),
			loadEnd:          num("load_end"),
			kamailioChildren: optional("kamailio_children"),
			sippNice:         optional("sipp_nice"),
		}
		if bad != nil {
			return nil, bad
		}
		steps = append(steps, s)
	}
}

// A point is one series at one offered rate, over the rounds that ran it:
// the medians of its figures, and the spread of those plotted.
type point struct {
	series                 series
	offered                int
	rounds                 int
	attempted, answered    float64 // medians
	successPct             float64 // median, percent
	successMin, successMax float64
	retrans                float64 // median of UAC + carriers
	cpuUs, cpuMin, cpuMax  float64
	peakMB, hostBusy       float64 // medians
	loadMin, loadMax       float64 // over the starts and ends of every round
	secs                   int
}

// aggregate groups steps by series and offered rate, sorted by series
// (seriesOrder) then rate.
func aggregate(steps []step) []point {
	type groupKey struct {
		s       series
		offered int
	}
	groups := make(map[groupKey][]step)
	for _, s := range steps {
		k := groupKey{s.series, s.offered}
		groups[k] = append(groups[k], s)
	}
	points := make([]point, 0, len(groups))
	for k, g := range groups {
		pick := func(f func(step) float64) []float64 {
			v := make([]float64, len(g))
			for i, s := range g {
				v[i] = f(s)
			}
			return v
		}
		success := pick(func(s step) float64 { return s.successRatio * 100 })
		cpu := pick(func(s step) float64 { return s.cpuUsPerCall })
		loads := append(pick(func(s step) float64 { return s.loadStart }), pick(func(s step) float64 { return s.loadEnd })...)
		points = append(points, point{
			series:     k.s,
			offered:    k.offered,
			rounds:     len(g),
			attempted:  median(pick(func(s step) float64 { return float64(s.attempted) })),
			answered:   median(pick(func(s step) float64 { return float64(s.answered) })),
			successPct: median(success),
			successMin: slices.Min(success),
			successMax: slices.Max(success),
			retrans:    median(pick(func(s step) float64 { return float64(s.uacRetrans + s.carrierRetrans) })),
			cpuUs:      median(cpu),
			cpuMin:     slices.Min(cpu),
			cpuMax:     slices.Max(cpu),
			peakMB:     median(pick(func(s step) float64 { return s.peakMB })),
			hostBusy:   median(pick(func(s step) float64 { return s.hostBusy })),
			loadMin:    slices.Min(loads),
			loadMax:    slices.Max(loads),
			secs:       g[0].secs,
		})
	}
	slices.SortFunc(points, func(a, b point) int {
		if c := seriesOrder(a.series, b.series); c != 0 {
			return c
		}
		return cmp.Compare(a.offered, b.offered)
	})
	return points
}

// lookup returns the point of s at rate offered.
func lookup(points []point, s series, offered int) (point, bool) {
	for _, p := range points {
		if p.series == s && p.offered == offered {
			return p, true
		}
	}
	return point{}, false
}

// settings are the distinct values, sorted, of the run settings the steps
// recorded: Kamailio's worker processes (of Kamailio's steps) and SIPp's
// niceness; empty when the CSV has no such column.
func settings(steps []step) (children, nice []int) {
	for _, s := range steps {
		if s.series.server == "kamailio" && s.kamailioChildren >= 0 && !slices.Contains(children, s.kamailioChildren) {
			children = append(children, s.kamailioChildren)
		}
		if s.sippNice >= 0 && !slices.Contains(nice, s.sippNice) {
			nice = append(nice, s.sippNice)
		}
	}
	slices.Sort(children)
	slices.Sort(nice)
	return children, nice
}
