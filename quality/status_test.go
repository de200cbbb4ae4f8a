package quality

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serve runs one request through the admin handler, with no socket.
func serve(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	b, _ := io.ReadAll(w.Result().Body)
	if ct := w.Result().Header.Get("Content-Type"); ct != "application/json" && w.Code != http.StatusMethodNotAllowed {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return w.Code, string(b)
}

func TestHandler(t *testing.T) {
	m := newTestMonitor(t, Config{Mode: ModeDemote, Prefixes: []string{"", "+44"}}, Options{})
	c := m.Collector(0)
	p := m.Prefix("+447700900123")
	for range 30 {
		c.Record(time.Second, p, &Outcome{Carrier: "a", Gateway: "sip:gw@192.0.2.1", Status: 503, Dialed: true})
	}
	c.Tick(5 * time.Second)
	m.Update(5 * time.Second)
	h := m.Handler()

	code, body := serve(t, h, "POST", "/v1/quality/disable", `{"carrier": "a", "prefix": "44"}`)
	if code != 200 || !strings.Contains(body, `"disabled":[{"carrier":"a","prefix":"+44","auto":false`) {
		t.Fatalf("disable: %d %s", code, body)
	}
	code, body = serve(t, h, "POST", "/v1/quality/disable", `{"carrier": "b"}`)
	if code != 200 || !strings.Contains(body, `{"carrier":"b","auto":false`) {
		t.Fatalf("disable everywhere: %d %s", code, body)
	}

	code, body = serve(t, h, "GET", "/v1/quality", "")
	if code != 200 {
		t.Fatalf("GET: %d %s", code, body)
	}
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode != ModeDemote || st.HistorySpanSecs != 1800 || len(st.Carriers) != 1 || len(st.Gateways) != 1 || len(st.Disabled) != 2 {
		t.Fatalf("status %s", body)
	}
	e := st.Carriers[0]
	if e.Prefix != "+44" || e.Carrier != "a" || e.Profile != "default" || e.Score != 20 || !e.Demoted || !e.Disabled || e.Attempts != 30 ||
		e.ASR.Value != 0 || e.ASR.Samples != 30 || math.Abs(e.ASR.Bound-0.0827) > 1e-4 || e.ASR.Level != "critical" || e.ASR.Penalty != 10 {
		t.Fatalf("carrier entry %+v", e)
	}
	// No samples: null in JSON, NaN in Go.
	if !strings.Contains(body, `"pdd_ms":{"value":null,"samples":0,"bound":null,"level":"ok","penalty":0}`) ||
		!math.IsNaN(e.PDD.Value) || !math.IsNaN(e.PDD.Bound) {
		t.Fatalf("pdd without samples: %+v in %s", e.PDD, body)
	}
	if g := st.Gateways[0]; g.Gateway != "sip:gw@192.0.2.1" || g.Carrier != "" || g.Disabled || g.Score != 20 {
		t.Fatalf("gateway entry %+v", g)
	}

	code, body = serve(t, h, "POST", "/v1/quality/enable", `{"carrier": "a", "prefix": "+44"}`)
	if code != 200 || !strings.HasPrefix(body, `{"disabled":[{"carrier":"b"`) || !strings.Contains(body, `"enabled":true`) {
		t.Fatalf("enable: %d %s", code, body)
	}
	code, body = serve(t, h, "POST", "/v1/quality/enable", `{"carrier": "a", "prefix": "+44"}`)
	if code != 200 || !strings.Contains(body, `"enabled":false`) {
		t.Fatalf("enable again: %d %s", code, body)
	}

	bad := func(path, body, want string) {
		t.Helper()
		code, got := serve(t, h, "POST", path, body)
		if code != 400 || !strings.Contains(got, want) {
			t.Errorf("POST %s %s: %d %s, want 400 %q", path, body, code, got, want)
		}
	}
	bad("/v1/quality/disable", `{"carrier": "a", "prefix": "49"}`, `not a quality prefix: \"49\"`)
	bad("/v1/quality/disable", `{"prefix": "44"}`, "invalid carrier")
	bad("/v1/quality/disable", `{"carrier": "a", "prefixes": ["44"]}`, `unknown field \"prefixes\"`)
	bad("/v1/quality/enable", `{"carrier": "a"} {}`, "trailing data")
	bad("/v1/quality/enable", `not json`, "cannot decode target")
	if code, _ := serve(t, h, "GET", "/v1/quality/disable", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET disable: %d", code)
	}
}

// TestFigureJSON: a Figure round-trips, NaN as null.
func TestFigureJSON(t *testing.T) {
	for _, f := range []Figure{
		{Value: 0.5, Samples: 10, Bound: 0.7, Level: "ok"},
		{Value: math.NaN(), Bound: math.NaN(), Level: "disabled"},
	} {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var g Figure
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
		if !same(f.Value, g.Value) || !same(f.Bound, g.Bound) || f.Samples != g.Samples || f.Level != g.Level {
			t.Errorf("%+v -> %s -> %+v", f, b, g)
		}
	}
}
