package quality

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.yaml.in/yaml/v3"

	"github.com/sipedge/sipedge/internal/script"
	"github.com/sipedge/sipedge/route"
)

// TestScripts runs the scripts in testdata/: a Monitor fed synthetic
// outcome streams on a fake clock, its figures, orderings, disables and
// events checked against the expected output. Each case is a command line,
// optional input lines, "----", and the expected output up to a blank
// line (internal/script). go test -run TestScripts -rewrite rewrites the
// expectations.
//
// Commands (durations on the shards' clock, e.g. at=12s):
//
//	new [shards=N]                    input: the YAML quality config; prints ok or the error
//	record at=D number=N carrier=C status=S [shard=I] [gateway=G] [reason=R] [undialled]
//	       [local] [pdd=D] [setup=D] [n=K every=D]
//	                                  K outcomes at D, D+every, ...
//	end at=D number=N carrier=C duration=D [shard=I] [gateway=G] [n=K every=D]
//	tick at=D [shard=I]               every shard when no shard= is given
//	update at=D                       prints the events raised
//	status [brief] [gateways]         the carriers' (or gateways') figures
//	order number=N routes=a,b,c       the routes Reorder returns ("(same)": routes itself)
//	disabled number=N carrier=C
//	disable|enable carrier=C [prefix=P]
//	metrics [grep=S]                  the Prometheus lines containing S
func TestScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(t *testing.T) func(*script.Command) string {
		d := &driver{t: t}
		t.Cleanup(d.close)
		return d.run
	})
}

// driver is the state of one script.
type driver struct {
	t      *testing.T
	m      *Monitor
	set    *metrics.Set
	events []Event
}

func (s *driver) close() {
	if s.m != nil {
		s.m.Close()
	}
}

// args are a command's key=value arguments and bare flags.
type args map[string]string

func (a args) str(key string) string { return a[key] }

func (a args) has(key string) bool { _, ok := a[key]; return ok }

func (a args) int(t *testing.T, key string, def int) int {
	t.Helper()
	v, ok := a[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return n
}

func (a args) dur(t *testing.T, key string) time.Duration {
	t.Helper()
	v, ok := a[key]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return d
}

func (s *driver) run(c *script.Command) string {
	t := s.t
	fields := strings.Fields(c.Line)
	a := args{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	if fields[0] != "new" && s.m == nil {
		t.Fatalf("%s: %s before new", c.Pos, fields[0])
	}
	switch fields[0] {
	case "new":
		return s.newMonitor(a, strings.Join(c.Input, "\n"))
	case "record":
		o := Outcome{
			Carrier: a.str("carrier"),
			Gateway: a.str("gateway"),
			Status:  a.int(t, "status", 0),
			Reason:  a.str("reason"),
			Dialed:  !a.has("undialled"),
			Local:   a.has("local"),
			PDD:     a.dur(t, "pdd"),
			Setup:   a.dur(t, "setup"),
		}
		s.repeat(a, func(col *Collector, now time.Duration, p Prefix) { col.Record(now, p, &o) })
		return ""
	case "end":
		d := a.dur(t, "duration")
		s.repeat(a, func(col *Collector, now time.Duration, p Prefix) {
			col.RecordEnd(now, p, a.str("carrier"), a.str("gateway"), d)
		})
		return ""
	case "tick":
		now := a.dur(t, "at")
		if a.has("shard") {
			s.m.Collector(a.int(t, "shard", 0)).Tick(now)
			return ""
		}
		for _, col := range s.m.collectors {
			col.Tick(now)
		}
		return ""
	case "update":
		s.events = s.events[:0]
		s.m.Update(a.dur(t, "at"))
		var b strings.Builder
		for _, ev := range s.events {
			name := "carrier " + ev.Carrier
			if ev.Gateway != "" {
				name = "gateway " + ev.Gateway
			}
			fmt.Fprintf(&b, "event %q %s: score=%s threshold=%s", ev.Prefix, name, num(ev.Score), num(ev.Threshold))
			if ev.AutoDisabled {
				b.WriteString(" auto-disabled")
			}
			b.WriteString("\n")
		}
		return b.String()
	case "status":
		st := s.m.Status()
		entries := st.Carriers
		if a.has("gateways") {
			entries = st.Gateways
		}
		var b strings.Builder
		for _, e := range entries {
			writeEntry(&b, &e, a.has("brief"))
		}
		for _, d := range st.Disabled {
			p := "every prefix"
			if d.Prefix != nil {
				p = strconv.Quote(*d.Prefix)
			}
			fmt.Fprintf(&b, "disabled %s for %s auto=%v\n", d.Carrier, p, d.Auto)
		}
		return b.String()
	case "order":
		var routes []route.Route
		for _, c := range strings.Split(a.str("routes"), ",") {
			routes = append(routes, route.Route{CarrierID: c})
		}
		got := s.m.Reorder(make([]route.Route, 0, len(routes)), routes, s.m.Prefix(a.str("number")))
		names := make([]string, len(got))
		for i := range got {
			names[i] = got[i].CarrierID
		}
		out := strings.Join(names, " ")
		if &got[0] == &routes[0] {
			out += " (same)"
		}
		return out
	case "disabled":
		return strconv.FormatBool(s.m.Disabled(s.m.Prefix(a.str("number")), a.str("carrier")))
	case "score":
		return num(s.m.Score(s.m.Prefix(a.str("number")), a.str("carrier")))
	case "disable", "enable":
		tg := Target{Carrier: a.str("carrier")}
		if a.has("prefix") {
			p := a.str("prefix")
			tg.Prefix = &p
		}
		if fields[0] == "disable" {
			if err := s.m.Disable(tg); err != nil {
				return err.Error()
			}
			return "ok"
		}
		lifted, err := s.m.Enable(tg)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("lifted=%v", lifted)
	case "metrics":
		var buf bytes.Buffer
		s.set.WritePrometheus(&buf)
		var b strings.Builder
		for _, l := range strings.Split(buf.String(), "\n") {
			if l != "" && strings.Contains(l, a.str("grep")) {
				b.WriteString(l + "\n")
			}
		}
		return b.String()
	}
	t.Fatalf("%s: unknown command %q", c.Pos, fields[0])
	return ""
}

func (s *driver) newMonitor(a args, input string) string {
	if s.m != nil {
		s.m.Close()
	}
	var cfg Config
	if err := yaml.Unmarshal([]byte(input), &cfg); err != nil {
		return "yaml: " + err.Error()
	}
	s.set = metrics.NewSet()
	m, err := New(cfg, Options{
		Shards:  a.int(s.t, "shards", 1),
		Metrics: s.set,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(ev Event) { s.events = append(s.events, ev) },
	})
	if err != nil {
		s.m = nil
		return err.Error()
	}
	s.m = m
	return "ok"
}

// repeat calls f n times (n=, default 1) from at= every every=, on shard
// shard= (default 0), with the prefix of number=.
func (s *driver) repeat(a args, f func(c *Collector, now time.Duration, p Prefix)) {
	t := s.t
	col := s.m.Collector(a.int(t, "shard", 0))
	p := s.m.Prefix(a.str("number"))
	at, every := a.dur(t, "at"), a.dur(t, "every")
	for i := range a.int(t, "n", 1) {
		f(col, at+time.Duration(i)*every, p)
	}
}

func writeEntry(b *strings.Builder, e *Entry, brief bool) {
	name := "carrier " + e.Carrier
	if e.Gateway != "" {
		name = "gateway " + e.Gateway
	}
	fmt.Fprintf(b, "%q %s: attempts=%d score=%s", e.Prefix, name, e.Attempts, num(e.Score))
	if e.Demoted {
		b.WriteString(" demoted")
	}
	if e.Disabled {
		b.WriteString(" disabled")
	}
	if !brief {
		b.WriteString(" profile=" + e.Profile)
	}
	b.WriteString("\n")
	if brief {
		return
	}
	for s := range numStats {
		f := e.figure(stat(s))
		fmt.Fprintf(b, "  %s %s n=%d bound=%s %s", stats[s].key, num(f.Value), f.Samples, num(f.Bound), f.Level)
		if f.Penalty != 0 {
			fmt.Fprintf(b, " +%s", num(f.Penalty))
		}
		b.WriteString("\n")
	}
}

// num prints a figure with 4 significant digits; "-" for NaN.
func num(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}
