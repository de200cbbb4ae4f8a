package metricdoc

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Check returns what in exposition (the Prometheus text format) Families
// does not document: a sample of a family without a row, or whose label
// names are not its row's (le, vmrange and quantile aside); one problem per
// family. Tests of what exports metrics call it on a scrape.
func Check(exposition []byte) []string {
	var problems []string
	seen := map[string]bool{}
	for _, line := range bytes.Split(exposition, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 || line[0] == '#' {
			continue
		}
		name := SampleName(line)
		f, ok := Lookup(name)
		switch {
		case !ok && !seen[name]:
			seen[name] = true
			problems = append(problems, fmt.Sprintf("%s: no row in cmd/sipedge/internal/metricdoc/families.go (%s)", name, line))
		case ok && !seen[f.Name]:
			if got := labelNames(line); !sameSet(got, f.Labels) {
				seen[f.Name] = true
				problems = append(problems, fmt.Sprintf("%s: labels %v, documented %v (%s)", f.Name, got, f.Labels, line))
			}
		}
	}
	return problems
}

// labelNames returns the names of a sample line's labels but le, vmrange
// and quantile.
func labelNames(line []byte) []string {
	open := bytes.IndexByte(line, '{')
	if open < 0 {
		return nil
	}
	var names []string
	rest := string(line[open+1:])
	for {
		rest = strings.TrimLeft(rest, ", ")
		eq := strings.IndexByte(rest, '=')
		if eq < 0 || strings.HasPrefix(rest, "}") {
			return names
		}
		if n := rest[:eq]; n != "le" && n != "vmrange" && n != "quantile" {
			names = append(names, n)
		}
		// Skip the quoted value, its escapes included.
		i := eq + 2
		for i < len(rest) && rest[i] != '"' {
			if rest[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(rest) {
			return names
		}
		rest = rest[i+1:]
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
