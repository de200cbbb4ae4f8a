package quality

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestSetDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	want := Config{
		Mode:                 ModeOff,
		Prefixes:             []string{""},
		SamplingIntervalSecs: 5,
		HistorySpanSecs:      1800,
		Confidence:           0.95,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	var problems []string
	c.Check(func(field, problem string) { problems = append(problems, field+": "+problem) })
	if len(problems) > 0 {
		t.Fatalf("the defaults do not pass Check: %v", problems)
	}

	// A profile's zero fields come from DefaultProfile, its own stay.
	p := Profile{Name: "x", ASR: Limits{Warning: 0.5}, PDD: Limits{Critical: Off, Weight: 2}}
	p.SetDefaults()
	wantP := DefaultProfile
	wantP.Name = "x"
	wantP.ASR.Warning = 0.5
	wantP.PDD.Critical, wantP.PDD.Weight = Off, 2
	if !reflect.DeepEqual(p, wantP) {
		t.Fatalf("profile defaults %+v, want %+v", p, wantP)
	}
	// The built-in profile passes its own check.
	d := DefaultProfile
	d.check(func(field, problem string) { t.Errorf("DefaultProfile: %s: %s", field, problem) })
}

// TestThresholdDecoding: -1 and numbers from 0 decode from YAML and JSON;
// other negatives and non-numbers do not.
func TestThresholdDecoding(t *testing.T) {
	f := func(text string, want Threshold, wantErr bool) {
		t.Helper()
		var y struct {
			T Threshold `yaml:"t"`
		}
		err := yaml.Unmarshal([]byte("t: "+text), &y)
		if (err != nil) != wantErr || !wantErr && y.T != want {
			t.Errorf("YAML %q: %v, %v; want %v (error %v)", text, y.T, err, want, wantErr)
		}
		var j struct {
			T Threshold `json:"t"`
		}
		err = json.Unmarshal([]byte(`{"t": `+text+`}`), &j)
		if (err != nil) != wantErr || !wantErr && j.T != want {
			t.Errorf("JSON %q: %v, %v; want %v (error %v)", text, j.T, err, want, wantErr)
		}
	}
	f("-1", Off, false)
	f("0", 0, false)
	f("0.25", 0.25, false)
	f("5000", 5000, false)
	f("-2", 0, true)
	f("-0.5", 0, true)
	f(`"x"`, 0, true)
	f("true", 0, true)
	// Encoded as plain numbers.
	b, err := json.Marshal(Limits{Warning: Off, Critical: 0.5, Weight: 1})
	if err != nil || string(b) != `{"warning":-1,"critical":0.5,"weight":1}` {
		t.Errorf("JSON %s, %v", b, err)
	}
	y, err := yaml.Marshal(Limits{Warning: Off, Critical: 0.5, Weight: 1})
	if err != nil || string(y) != "warning: -1\ncritical: 0.5\nweight: 1\n" {
		t.Errorf("YAML %q, %v", y, err)
	}
}

// TestConfigShapes: the YAML and JSON shapes are the same keys.
func TestConfigShapes(t *testing.T) {
	const text = `{"mode": "sort", "prefixes": ["", "+44"], "sampling_interval_secs": 10,
		"history_span_secs": 600, "confidence": 0.99, "bad_dst_threshold": -1,
		"webhook_url": "https://hooks.example.com/q", "auto_disable": true,
		"profiles": [{"name": "uk", "prefixes": ["+44"], "warning_penalty": 2, "critical_penalty": 20,
			"asr": {"warning": 0.3, "critical": 0.15, "weight": 2}, "ccr": {"warning": -1},
			"pdd_ms": {"warning": 4000, "critical": 8000}, "ast_ms": {"critical": -1},
			"acd_secs": {"warning": 20, "critical": 4}}]}`
	var fromJSON, fromYAML Config
	d := json.NewDecoder(strings.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(&fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(text), &fromYAML); err != nil { // JSON is YAML
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, fromYAML) {
		t.Fatalf("JSON %+v\nYAML %+v", fromJSON, fromYAML)
	}
	if fromJSON.BadDstThreshold != Off || fromJSON.Profiles[0].CCR.Warning != Off || fromJSON.Profiles[0].PDD.Critical != 8000 {
		t.Fatalf("decoded %+v", fromJSON)
	}
	if _, err := New(fromJSON, Options{Shards: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefuses(t *testing.T) {
	_, err := New(Config{Mode: "fast"}, Options{Shards: 0})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "mode:") || !strings.Contains(err.Error(), "0 shards") {
		t.Fatalf("New: %v", err)
	}
	// New works on a copy: the caller's config keeps its zeros.
	c := Config{Profiles: []Profile{{Name: "p"}}}
	m, err := New(c, Options{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if c.Mode != "" || c.Prefixes != nil || c.Profiles[0].ASR.Warning != 0 {
		t.Fatalf("New changed its argument: %+v", c)
	}
}

func TestPrefixMatch(t *testing.T) {
	m, err := New(Config{Prefixes: []string{"", "+1", "1202", "44", "447"}}, Options{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := func(number, want string) {
		t.Helper()
		p := m.Prefix(number)
		if got := m.PrefixString(p); got != want || p == NoPrefix {
			t.Errorf("Prefix(%q) = %d %q, want %q", number, p, got, want)
		}
		if b := m.PrefixBytes([]byte(number)); b != p {
			t.Errorf("PrefixBytes(%q) = %d, Prefix %d", number, b, p)
		}
	}
	f("+12025550123", "1202")
	f("12035550123", "+1")
	f("+447700900123", "447")
	f("+441632960000", "44")
	f("+33100000000", "")
	f("", "")
	f("+", "")
	f("4", "")
	f("44x7", "44") // the match stops at a non-digit
	f("*447", "")

	n, err := New(Config{Prefixes: []string{"44"}}, Options{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if p := n.Prefix("+33100000000"); p != NoPrefix || n.PrefixString(p) != "" {
		t.Errorf("no \"\" prefix: %d", p)
	}
}
