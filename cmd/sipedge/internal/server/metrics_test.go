package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/metricdoc"
)

// checkMetricsDocumented fails t on every metric family s exports without
// its row in metricdoc (docs/metrics.md), or with other labels than its
// row's. The end-to-end rigs call it as they stop, so that the families
// calls create (a carrier's, a member's, a trunk's) are checked too.
func checkMetricsDocumented(t *testing.T, s *Server) {
	t.Helper()
	var b bytes.Buffer
	s.WriteMetrics(&b)
	for _, p := range metricdoc.Check(b.Bytes()) {
		t.Errorf("/metrics: %s", p)
	}
}

// TestMetricsHaveHelpAndType: a server built from a configuration with a
// trunk, a probed group and a static table, not started, writes every
// family it has with its # HELP and # TYPE lines first, and every family
// is documented.
func TestMetricsHaveHelpAndType(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: ["udp://127.0.0.1:5060"]
admin: { listen: "" }
trunks: [{ name: t1, sources: ["127.0.0.1"] }]
gateway:
  groups:
    - name: g1
      probe: { enabled: true }
      max_concurrent_calls: 10
      cps: { rate: 5 }
      destinations: [{ uri: "sip:127.0.0.1:5070", address: "127.0.0.1:5070" }]
lcr: { static_routes: [{ prefix: "", routes: [{ carrier_id: c1, gateway_group: g1 }] }] }
cdr: { file: %q }
`, filepath.Join(t.TempDir(), "cdr.jsonl"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.closeParts(t.Context()) })
	var b bytes.Buffer
	s.WriteMetrics(&b)
	if b.Len() == 0 {
		t.Fatal("no metrics")
	}
	for _, p := range metricdoc.Check(b.Bytes()) {
		t.Errorf("/metrics: %s", p)
	}
	// Each family's samples follow its HELP and TYPE lines, once.
	described := map[string]bool{}
	current := ""
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if described[name] {
				t.Errorf("%s described twice", name)
			}
			if help == "" {
				t.Errorf("%s: empty HELP", name)
			}
			described[name], current = true, name
			continue
		}
		if strings.HasPrefix(line, "# TYPE "+current+" ") {
			continue
		}
		f, ok := metricdoc.Lookup(metricdoc.SampleName([]byte(line)))
		if !ok || f.Name != current {
			t.Errorf("%q is not under its family's HELP and TYPE (last HELP: %s)", line, current)
		}
	}
	for _, want := range []string{"sipedge_calls_active", "sipedge_gateway_member_up", "sipedge_trunk_calls", "sipedge_lcr_breaker_state", "go_goroutines"} {
		if !described[want] {
			t.Errorf("%s not written", want)
		}
	}
}
