package metricdoc

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes docs/metrics.md: every family of Families, by section,
// with its type, labels and help.
func Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# Metrics reference

<!-- Generated from cmd/sipedge/internal/metricdoc (families.go) by
     go generate ./cmd/sipedge/internal/metricdoc; do not edit. -->

sipedge exports its metrics on the admin API's ` + "`GET /metrics`" + ` in the Prometheus text format,
each family with its ` + "`# HELP`" + ` (the meaning below) and ` + "`# TYPE`" + `. The text of this page and of
the HELP lines is one table, ` + "`cmd/sipedge/internal/metricdoc/families.go`" + `; the server's tests fail on
a family it exports without a row there.

Types: *counter* and *gauge* as in Prometheus; *histogram (vmrange)* is VictoriaMetrics' histogram,
buckets ` + "`NAME_bucket{vmrange=\"lo...hi\"}`" + ` with ` + "`NAME_sum`" + ` and ` + "`NAME_count`" + ` (its ` + "`# TYPE`" + ` says
untyped; VictoriaMetrics and vmagent read it, ` + "`histogram_quantile`" + ` in MetricsQL takes it; for
Prometheus, take ` + "`rate(NAME_sum[5m]) / rate(NAME_count[5m])`" + `); *histogram* and *summary* as in
Prometheus. Labels baked into a series are listed; ` + "`shard`" + ` is the event loop, 0 to ` + "`shards`" + ` - 1.
Series labelled by a trunk, group, member, carrier, key or node are created when sipedge first sees
it and kept for the process's life.

`)
	for _, sec := range Sections {
		fmt.Fprintf(&b, "## %s\n\n| name | type | labels | meaning |\n|---|---|---|---|\n", sec)
		for _, f := range Families {
			if f.Section != sec {
				continue
			}
			labels := make([]string, len(f.Labels))
			for i, l := range f.Labels {
				labels[i] = "`" + l + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, typeName(f.Type), strings.Join(labels, ", "),
				strings.ReplaceAll(f.Help, "|", `\|`))
		}
		b.WriteString("\n")
		if extra := sectionNotes[sec]; extra != "" {
			b.WriteString(extra + "\n")
		}
	}
	_, err := io.WriteString(w, strings.TrimSuffix(b.String(), "\n"))
	return err
}

func typeName(t Type) string {
	if t == VMHistogram {
		return "histogram (vmrange)"
	}
	return string(t)
}

// sectionNotes follow a section's table: how the families combine.
var sectionNotes = map[string]string{
	secCarriers: "The figures of OpenSIPS' qrouting, per carrier, over the last 15 minutes:\n\n" +
		"    ASR = sum by (carrier) (increase(sipedge_lcr_attempts_total{code=\"200\"}[15m]))\n" +
		"        / sum by (carrier) (increase(sipedge_lcr_attempts_total{dialed=\"true\"}[15m]))\n" +
		"    PDD = rate(sipedge_lcr_pdd_seconds_sum[15m]) / rate(sipedge_lcr_pdd_seconds_count[15m])\n" +
		"    ACD = rate(sipedge_lcr_call_duration_seconds_sum[15m]) / rate(sipedge_lcr_call_duration_seconds_count[15m])\n\n" +
		"sipedge's own ring-out is `code=\"408\",reason=\"ring_timeout\"`, told from the carrier's own 408 (`reason=\"\"`).\n",
	secTrunks: "The share of each customer's INVITEs refused over its limits, over the last 15 minutes:\n\n" +
		"    sum by (trunk) (increase(sipedge_trunk_refused_total[15m]))\n" +
		"      / (sum by (trunk) (increase(sipedge_trunk_refused_total[15m]))\n" +
		"         + sum by (trunk) (increase(sipedge_trunk_calls_total[15m])))\n",
	secQuality: "Values are NaN without samples. The statistics and their bounds are defined in `quality/doc.go` and\n" +
		"`docs/design/quality.md`; the live figures are also on `GET /v1/quality`.\n",
}
