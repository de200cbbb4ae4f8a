package metricdoc

import (
	"bytes"
	"io"
	"strings"
)

// Type is a family's Prometheus type.
type Type string

// The types. A VMHistogram is VictoriaMetrics/metrics' histogram: buckets
// labelled vmrange="lo...hi" rather than le, and _sum and _count; its TYPE
// line says untyped, as VictoriaMetrics' own does, since the Prometheus data
// model requires le on a histogram's buckets.
const (
	Counter     Type = "counter"
	Gauge       Type = "gauge"
	Summary     Type = "summary"
	Histogram   Type = "histogram"
	VMHistogram Type = "vmhistogram"
)

// Family documents one metric family.
type Family struct {
	Name    string
	Type    Type
	Labels  []string // the labels of its series, le, vmrange and quantile aside
	Help    string   // one line, what # HELP says and docs/metrics.md shows
	Section string   // the docs/metrics.md section it is listed under
}

// promType is what the # TYPE line says.
func (f *Family) promType() string {
	if f.Type == VMHistogram {
		return "untyped"
	}
	return string(f.Type)
}

var byName = func() map[string]*Family {
	m := make(map[string]*Family, len(Families))
	for i := range Families {
		f := &Families[i]
		if _, dup := m[f.Name]; dup {
			panic("BUG: metricdoc: " + f.Name + " listed twice")
		}
		m[f.Name] = f
	}
	return m
}()

// Lookup returns the family a sample's metric name (without labels) belongs
// to: the family of that name, or, for a name ending in _bucket, _sum or
// _count, the histogram or summary it is part of.
func Lookup(name string) (*Family, bool) {
	if f, ok := byName[name]; ok {
		return f, true
	}
	for _, suffix := range [...]string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := byName[base]; ok && f.Type != Counter && f.Type != Gauge && (suffix != "_bucket" || f.Type != Summary) {
			return f, true
		}
	}
	return nil, false
}

// SampleName returns the metric name of a sample line of the Prometheus
// text format: what comes before its labels or its value.
func SampleName(line []byte) string {
	if i := bytes.IndexAny(line, "{ "); i >= 0 {
		line = line[:i]
	}
	return string(line)
}

// Write writes exposition, the Prometheus text format without metadata (as
// VictoriaMetrics/metrics writes it), to w with each family's samples
// together and, before them, its # HELP and # TYPE lines from Families. A
// family not in Families is written as it came, without metadata. Comment
// lines in exposition are dropped.
func Write(w io.Writer, exposition []byte) error {
	type group struct {
		f     *Family
		lines [][]byte
	}
	var order []*group
	groups := map[string]*group{}
	for len(exposition) > 0 {
		line := exposition
		if i := bytes.IndexByte(exposition, '\n'); i >= 0 {
			line, exposition = exposition[:i+1], exposition[i+1:]
		} else {
			line, exposition = append(line, '\n'), nil
		}
		if len(bytes.TrimSpace(line)) == 0 || line[0] == '#' {
			continue
		}
		name := SampleName(line)
		f, ok := Lookup(name)
		key := name
		if ok {
			key = f.Name
		}
		g := groups[key]
		if g == nil {
			g = &group{f: f}
			groups[key] = g
			order = append(order, g)
		}
		g.lines = append(g.lines, line)
	}
	var b bytes.Buffer
	for _, g := range order {
		if g.f != nil {
			b.WriteString("# HELP " + g.f.Name + " " + escapeHelp(g.f.Help) + "\n")
			b.WriteString("# TYPE " + g.f.Name + " " + g.f.promType() + "\n")
		}
		for _, l := range g.lines {
			b.Write(l)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// escapeHelp escapes a help text as the text format wants: backslash and
// line feed.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
