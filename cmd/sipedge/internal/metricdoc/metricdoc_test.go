package metricdoc

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../../../.."

func TestWriteGroupsFamiliesWithHelpAndType(t *testing.T) {
	in := `sipedge_calls_active{shard="0"} 1
sipedge_lcr_pdd_seconds_bucket{carrier="a",vmrange="1.000e-01...1.136e-01"} 2
sipedge_lcr_pdd_seconds_sum{carrier="a"} 0.21
sipedge_lcr_pdd_seconds_count{carrier="a"} 2
someone_elses_metric 7
sipedge_calls_active{shard="1"} 3
go_gc_duration_seconds{quantile="0"} 0
go_gc_duration_seconds_sum 0
`
	want := `# HELP sipedge_calls_active calls up now
# TYPE sipedge_calls_active gauge
sipedge_calls_active{shard="0"} 1
sipedge_calls_active{shard="1"} 3
# HELP sipedge_lcr_pdd_seconds post-dial delay: from each attempt's INVITE to its first 101-199, for the dialled attempts that had one
# TYPE sipedge_lcr_pdd_seconds untyped
sipedge_lcr_pdd_seconds_bucket{carrier="a",vmrange="1.000e-01...1.136e-01"} 2
sipedge_lcr_pdd_seconds_sum{carrier="a"} 0.21
sipedge_lcr_pdd_seconds_count{carrier="a"} 2
someone_elses_metric 7
# HELP go_gc_duration_seconds garbage collection pause durations
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 0
go_gc_duration_seconds_sum 0
`
	var b bytes.Buffer
	if err := Write(&b, []byte(in)); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("Write:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestLookup(t *testing.T) {
	for name, want := range map[string]string{
		"sipedge_calls_active":              "sipedge_calls_active",
		"sipedge_lcr_pdd_seconds_bucket":    "sipedge_lcr_pdd_seconds",
		"sipedge_lcr_pdd_seconds_count":     "sipedge_lcr_pdd_seconds",
		"go_gc_duration_seconds_sum":        "go_gc_duration_seconds",
		"go_gc_duration_seconds_bucket":     "", // a summary has no buckets
		"sipedge_calls_active_count":        "", // nor a gauge a count
		"sipedge_calls_started_total_count": "",
		"sipedge_no_such_metric":            "",
	} {
		f, ok := Lookup(name)
		switch {
		case want == "" && ok:
			t.Errorf("Lookup(%s) = %s, want none", name, f.Name)
		case want != "" && (!ok || f.Name != want):
			t.Errorf("Lookup(%s) = %v, %v; want %s", name, f, ok, want)
		}
	}
}

func TestCheck(t *testing.T) {
	in := `sipedge_calls_active{shard="0"} 1
sipedge_calls_active{shard="1",extra="x"} 1
sipedge_lcr_attempts_total{carrier="a\"b,c=d",code="503",dialed="true",reason=""} 1
sipedge_lcr_pdd_seconds_bucket{carrier="a",vmrange="1...2"} 1
sipedge_new_thing_total 1
sipedge_new_thing_total 2
`
	got := Check([]byte(in))
	if len(got) != 2 || !strings.HasPrefix(got[0], "sipedge_calls_active: labels [shard extra]") ||
		!strings.HasPrefix(got[1], "sipedge_new_thing_total: no row") {
		t.Errorf("Check: %q", got)
	}
}

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// TestFamiliesWellFormed: every row can be written as HELP and TYPE and
// listed in docs/metrics.md.
func TestFamiliesWellFormed(t *testing.T) {
	for _, f := range Families {
		if !metricName.MatchString(f.Name) {
			t.Errorf("%s: not a metric name", f.Name)
		}
		if !slices.Contains([]Type{Counter, Gauge, Summary, Histogram, VMHistogram}, f.Type) {
			t.Errorf("%s: type %q", f.Name, f.Type)
		}
		if f.Help == "" || strings.ContainsAny(f.Help, "\n") {
			t.Errorf("%s: help must be one line of text", f.Name)
		}
		if !slices.Contains(Sections, f.Section) {
			t.Errorf("%s: section %q is not in Sections", f.Name, f.Section)
		}
		if f.Type == Counter && !strings.HasSuffix(f.Name, "_total") && !strings.HasSuffix(f.Name, "_count") {
			t.Errorf("%s: a counter's name ends in _total", f.Name)
		}
		for i, l := range f.Labels {
			if slices.Contains(f.Labels[:i], l) {
				t.Errorf("%s: label %s twice", f.Name, l)
			}
		}
	}
}

// TestMarkdownUpToDate: docs/metrics.md is what go generate writes from
// Families.
func TestMarkdownUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := Markdown(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, "docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Error("docs/metrics.md is not what families.go generates: run go generate ./cmd/sipedge/internal/metricdoc")
	}
}

// TestSourceMetricsDocumented: every sipedge_ metric name written in the
// module's Go source has its row, so that a metric created only once calls
// reach it (a carrier's, a trunk's) is documented before a scrape shows it.
// A name ending in _ is a prefix (sipedge_quality_ + statistic): the
// families built from it are checked by the server's scrape tests.
func TestSourceMetricsDocumented(t *testing.T) {
	token := regexp.MustCompile(`sipedge_[a-z0-9_]+`)
	seen := map[string]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != repoRoot && (strings.HasPrefix(d.Name(), ".") || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir // another module (bench/sipgo, bench/report)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range token.FindAllString(string(src), -1) {
			if _, ok := seen[name]; !ok && !strings.HasSuffix(name, "_") {
				seen[name] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 50 {
		t.Fatalf("found %d metric names in the source: is %s the module's root?", len(seen), repoRoot)
	}
	for name, path := range seen {
		if _, ok := Lookup(name); !ok {
			t.Errorf("%s (%s) has no row in families.go", name, path)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
