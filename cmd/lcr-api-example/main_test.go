package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

func carriers(t *testing.T, routes []routeJSON) string {
	t.Helper()
	ids := make([]string, len(routes))
	for i, r := range routes {
		ids[i] = r.CarrierID
	}
	return strings.Join(ids, ",")
}

type routeJSON struct {
	CarrierID    string  `json:"carrier_id"`
	GatewayGroup string  `json:"gateway_group"`
	Rate         float64 `json:"rate"`
	Currency     string  `json:"currency"`
}

func newServer(t *testing.T, deck string, auth string) *httptest.Server {
	t.Helper()
	tab, _, err := parseDeck(strings.NewReader(deck))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{table: tab, ttl: 120, auth: auth, log: slog.New(slog.DiscardHandler)}
	ts := httptest.NewServer(s.routes())
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, url, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestParseDeck(t *testing.T) {
	tab, rows, err := parseDeck(bytes.NewReader(exampleDeck))
	if err != nil {
		t.Fatalf("the example deck: %v", err)
	}
	if rows != 10 || tab.Len() != 6 {
		t.Fatalf("example deck: %d rows, %d prefixes", rows, tab.Len())
	}
	f := func(deck, number, want string) {
		t.Helper()
		tab, _, err := parseDeck(strings.NewReader(deck))
		if err != nil {
			t.Fatalf("%q: %v", deck, err)
		}
		routes, _ := tab.Lookup(number)
		var got []string
		for _, r := range routes {
			got = append(got, r.CarrierID+"/"+r.GatewayGroup+"/"+r.Currency)
		}
		if s := strings.Join(got, ","); s != want {
			t.Fatalf("%q, %s: %s, want %s", deck, number, s, want)
		}
	}
	f("1,a,ga,0.2\n1,b,gb,0.1,EUR\n", "+1555", "b/gb/EUR,a/ga/")
	f("prefix,carrier_id,gateway_group,rate\n44,a,ga,0.1\n", "4420", "a/ga/") // header skipped
	f("# comment\n 44 , a , ga , 0.1 \n", "4420", "a/ga/")                    // spaces trimmed
	f("+44,a,ga,0.1\n447,b,gb,0.2\n", "+447700", "b/gb/")                     // longest prefix, + ignored
	f(",d,gd,0.5\n44,a,ga,0.1\n", "33", "d/gd/")                              // "" matches all
	f("44,a,ga,0.1\n", "33", "")                                              // nothing matches

	bad := func(deck, want string) {
		t.Helper()
		_, _, err := parseDeck(strings.NewReader(deck))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: error %v, want one containing %q", deck, err, want)
		}
	}
	bad("44,a,ga\n", "line 1: 3 columns")
	bad("44,a,ga,0.1\n44,b,gb,cheap\n", `line 2: rate "cheap"`)
	bad("44,a,ga,-1\n", `rate "-1"`)
	bad("44,,ga,0.1\n", "line 1: lcr: invalid response: carrier_id is empty")
	bad("44,a,,0.1\n", "none of gateway_group")
	bad("4x,a,ga,0.1\n", `prefix "4x" is not digits`)
	bad("44,a,ga,0.1,USD,extra\n", "6 columns")
}

// TestServer: longest prefix, cheapest first, an empty list when nothing
// matches, the TTL, and the errors.
func TestServer(t *testing.T) {
	testtier.RequiresSockets(t)
	ts := newServer(t, "1,a,ga,0.02,USD\n1,b,gb,0.01,USD\n1202,c,gc,0.03\n1202,d,gd,0.005\n", "")
	f := func(number, want string) {
		t.Helper()
		code, body := post(t, ts.URL+"/route", `{"version":1,"call_id":"x","dialed_number":"`+number+`","source":{"trunk_group":"t"}}`, nil)
		if code != 200 {
			t.Fatalf("%s: status %d %s", number, code, body)
		}
		var resp struct {
			Routes       []routeJSON `json:"routes"`
			CacheTTLSecs *int        `json:"cache_ttl_secs"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Routes == nil || resp.CacheTTLSecs == nil || *resp.CacheTTLSecs != 120 {
			t.Fatalf("%s: response %s", number, body)
		}
		if got := carriers(t, resp.Routes); got != want {
			t.Fatalf("%s: %s, want %s", number, got, want)
		}
	}
	f("+12025550123", "d,c")
	f("+13105550100", "b,a")
	f("+442079460000", "")

	if code, _ := post(t, ts.URL+"/route", "{not json", nil); code != 400 {
		t.Fatalf("invalid JSON: %d", code)
	}
	resp, err := http.Get(ts.URL + "/route")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

func TestServerAuth(t *testing.T) {
	testtier.RequiresSockets(t)
	ts := newServer(t, "1,a,ga,0.02\n", "Bearer s3cret")
	body := `{"dialed_number":"1"}`
	if code, _ := post(t, ts.URL+"/route", body, nil); code != 401 {
		t.Fatalf("no auth: %d", code)
	}
	if code, _ := post(t, ts.URL+"/route", body, map[string]string{"Authorization": "Bearer s3cret"}); code != 200 {
		t.Fatalf("auth: %d", code)
	}
}

// TestWithResolver: sipedge's client against the example server, in
// process: API mode in a minute.
func TestWithResolver(t *testing.T) {
	testtier.RequiresSockets(t)
	ts := newServer(t, string(exampleDeck), "Bearer k")
	r, err := lcr.New(lcr.Options{APIURL: ts.URL + "/route", AuthHeader: "Bearer k",
		Metrics: metrics.NewSet(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ch := make(chan lcr.Decision, 1)
	r.Lookup(&lcr.Request{CallID: "c1", DialedNumber: "+12025550123", Source: lcr.CallSource{TrunkGroup: "cust-trunks"}},
		func(d lcr.Decision) { ch <- d })
	d := <-ch
	if d.Source != route.SourceLCR || len(d.Routes) != 2 || d.Routes[0].CarrierID != "carrier-a" ||
		d.Routes[0].Rate != 0.0028 || d.Routes[1].CarrierID != "carrier-b" || d.TTL.Seconds() != 120 || d.Routes[0].RerouteCauses != nil {
		t.Fatalf("decision %+v", d)
	}
}

func TestRunFlags(t *testing.T) {
	var stderr bytes.Buffer
	if err := run([]string{"-ttl", "-1"}, &stderr); err == nil {
		t.Fatal("negative -ttl accepted")
	}
	if err := run([]string{"-deck", "/nonexistent/deck.csv"}, &stderr); err == nil {
		t.Fatal("missing deck accepted")
	}
}
