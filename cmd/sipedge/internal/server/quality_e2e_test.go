package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/ratelimit/redistest"
	"github.com/sipedge/sipedge/route/lcr"
)

// Quality routing end to end: carriers and callers are SIPp processes,
// sipedge a real Server on loopback.

// builtInNoACD is the built-in profile without ACD: SIPp's callers hang up
// at once, which ACD rightly judges unusable calls (below 5 s, critical).
const builtInNoACD = "  profiles: [{ name: default, acd_secs: { warning: -1 } }]\n"

const (
	ukNumber = "447700900123" // under the quality prefix "44"
	usNumber = "12025550123"  // under ""

	cheapRoute = "{ carrier_id: cheap, gateway_group: cheap, rate: 0.001 }"
	goodRoute  = "{ carrier_id: good, gateway_group: good, rate: 0.002 }"
)

// checkRoutes fails t unless every CDR in recs was answered by carrier,
// after the carriers tried (nil: none).
func checkRoutes(t *testing.T, what string, recs []map[string]any, carrier string, tried []string) {
	t.Helper()
	for i, r := range recs {
		got, gotTried := routedBy(r)
		if fc, _ := r["final_code"].(float64); fc != 200 || got != carrier || !slices.Equal(gotTried, tried) {
			t.Fatalf("%s: call %d answered %v by %q after %v, want 200 by %q after %v: %v", what, i, r["final_code"], got, gotTried, carrier, tried, r)
		}
	}
}

// A cheap carrier that answers every call 480 is demoted within the window
// (demote mode), so that later calls are answered by the next carrier at
// once; quiet for history_span_secs, it is tried first again and,
// answering now, stays first.
func TestQualityDemoteE2E(t *testing.T) {
	requireSIPp(t)
	cheap, cheapPort := sippUAS(t, "cheap", "uas_480.xml")
	_, goodPort := sippUAS(t, "good", "uas")
	e, logs := newE2EBase(t)
	e.run(qualityYAML(e, []string{sippGroup("cheap", cheapPort), sippGroup("good", goodPort)}, []string{cheapRoute, goodRoute}, "",
		"quality:\n  mode: demote\n  prefixes: [\"\", \"44\"]\n  sampling_interval_secs: 1\n  history_span_secs: 8\n"+builtInNoACD, ""), logs)

	// Every call fails over from cheap's 480 to good, until cheap is
	// demoted: 25 failures in a row are conclusive at 95 % (ASR's bound
	// under the built-in profile's critical 10 %).
	sippCalls(t, e.sip, ukNumber, 30, 15)
	recs := e.waitCDRs(30)
	for i, r := range recs {
		if c, _ := routedBy(r); c != "good" {
			t.Fatalf("call %d answered by %q: %v", i, c, r)
		}
	}
	st := e.waitQuality("cheap demoted", 5*time.Second, func(st quality.Status) bool {
		c, ok := carrierEntry(st, "44", "cheap")
		return ok && c.Demoted
	})
	c, _ := carrierEntry(st, "44", "cheap")
	if c.Attempts < 25 || c.ASR.Value != 0 || c.ASR.Level != "critical" || c.CCR.Value != 1 || c.Score != 10 {
		t.Fatalf("cheap under 44: %+v", c)
	}
	if !slices.ContainsFunc(st.Gateways, func(g quality.Entry) bool {
		return g.Prefix == "44" && g.Gateway == fmt.Sprintf("sip:127.0.0.1:%d", cheapPort) && g.Attempts == c.Attempts
	}) {
		t.Fatalf("no figures for cheap's gateway: %+v", st.Gateways)
	}
	// The bad-destination event: a log line and a counter; the gauges.
	e.waitMetric(`sipedge_quality_bad_destination_events_total{prefix="44",carrier="cheap"}`, 1)
	if !strings.Contains(logs.String(), `msg="quality: bad destination" prefix=44 score=10 threshold=10 carrier=cheap`) {
		t.Fatalf("no bad-destination line in the log")
	}
	if got := e.metric(`sipedge_quality_score{prefix="44",carrier="cheap"}`); got != 10 {
		t.Fatalf("sipedge_quality_score %v", got)
	}
	// Every attempt counted, those of the interval not judged yet too.
	if got := e.metric(`sipedge_lcr_attempts_total{carrier="cheap",code="480",dialed="true",reason=""}`); got < float64(c.Attempts) || got > 30 {
		t.Fatalf("sipedge_lcr_attempts_total %v, want %d to 30", got, c.Attempts)
	}

	// Later calls go to good at once: cheap is not tried.
	sippCalls(t, e.sip, ukNumber, 10, 10)
	checkRoutes(t, "demoted", e.waitCDRs(40)[30:], "good", nil)

	// cheap comes back, answering now; it is not tried until its samples
	// have aged out of the window, then tried first again.
	cheap.stop()
	sippUASOn(t, "cheap-back", "uas", cheapPort)
	e.waitQuality("cheap's samples aged out", 20*time.Second, func(st quality.Status) bool {
		c, ok := carrierEntry(st, "44", "cheap")
		return ok && c.Attempts == 0 && !c.Demoted
	})
	sippCalls(t, e.sip, ukNumber, 30, 15)
	checkRoutes(t, "cheap back", e.waitCDRs(70)[40:], "cheap", nil)
	st = e.waitQuality("cheap's answers counted", 5*time.Second, func(st quality.Status) bool {
		c, ok := carrierEntry(st, "44", "cheap")
		return ok && c.Attempts >= 20
	})
	if c, _ := carrierEntry(st, "44", "cheap"); c.Score != 0 || c.Demoted || c.ASR.Value != 1 {
		t.Fatalf("cheap answering: %+v", c)
	}
}

// Three carriers answering none, half and all of their calls end, in sort
// mode, in score order: the one answering all first, the one answering
// none last.
func TestQualitySortE2E(t *testing.T) {
	requireSIPp(t)
	_, nonePort := sippUAS(t, "none", "uas_480.xml")
	_, halfBusy := sippUAS(t, "half-480", "uas_480.xml")
	_, halfOK := sippUAS(t, "half-200", "uas")
	_, allPort := sippUAS(t, "all", "uas")
	e, logs := newE2EBase(t)
	// ASR alone judges: a warning below 90 %, a critical below 20 %.
	q := `quality:
  mode: sort
  sampling_interval_secs: 4
  history_span_secs: 60
  profiles:
    - name: default
      asr: { warning: 0.9, critical: 0.2 }
      ccr: { warning: -1 }
      pdd_ms: { warning: -1 }
      ast_ms: { warning: -1 }
      acd_secs: { warning: -1 }
`
	// The half carrier is two gateways taken in turn: one answers 480, the
	// other answers.
	e.run(qualityYAML(e, []string{sippGroup("none", nonePort), sippGroup("half", halfBusy, halfOK), sippGroup("all", allPort)},
		[]string{"{ carrier_id: none, gateway_group: none, rate: 0.001 }", "{ carrier_id: half, gateway_group: half, rate: 0.002 }",
			"{ carrier_id: all, gateway_group: all, rate: 0.003 }"}, "", q, ""), logs)

	// The first calls are judged together: sent right after the reader's
	// update, they fall in one sampling interval. Judged a few at a time,
	// the carrier answering none could be sorted last with a warning
	// before its critical, and get no call after.
	last := e.qualityStatus().Updated
	e.waitQuality("the reader's update", 10*time.Second, func(st quality.Status) bool { return !st.Updated.Equal(last) })
	sippCalls(t, e.sip, usNumber, 20, 20)
	e.waitCDRs(20)
	st := e.waitQuality("the scores", 15*time.Second, func(st quality.Status) bool {
		n, _ := carrierEntry(st, "", "none")
		h, _ := carrierEntry(st, "", "half")
		a, ok := carrierEntry(st, "", "all")
		return ok && n.Score == 10 && h.Score == 1 && a.Score == 0
	})
	h, _ := carrierEntry(st, "", "half")
	if h.ASR.Value < 0.4 || h.ASR.Value > 0.6 {
		t.Fatalf("half answered %v of its calls", h.ASR.Value)
	}
	// The order is all, half, none: every call is answered by all at once.
	sippCalls(t, e.sip, usNumber, 10, 10)
	checkRoutes(t, "sorted", e.waitCDRs(30)[20:], "all", nil)
}

// POST /v1/quality/disable takes a carrier out for a prefix (its calls
// there skip it undialled, reason disabled) without touching its gateway's
// health or another prefix; /enable puts it back; GET /v1/quality lists
// the disable; the admin guard keeps its rules.
func TestQualityDisableE2E(t *testing.T) {
	requireSIPp(t)
	_, cheapPort := sippUAS(t, "cheap", "uas")
	_, goodPort := sippUAS(t, "good", "uas")
	e, logs := newE2EBase(t)
	e.run(qualityYAML(e, []string{sippGroup("cheap", cheapPort), sippGroup("good", goodPort)}, []string{cheapRoute, goodRoute}, "",
		"quality: { prefixes: [\"\", \"44\"] }\n", ""), logs)

	code, body := e.postJSON("/v1/quality/disable", `{"carrier": "cheap", "prefix": "44"}`)
	if code != 200 || !strings.Contains(body, `"carrier":"cheap","prefix":"44"`) {
		t.Fatalf("disable: %d %s", code, body)
	}
	if code, body := e.postJSON("/v1/quality/disable", `{"carrier": "cheap", "prefix": "99"}`); code != 400 || !strings.Contains(body, "not a quality prefix") {
		t.Fatalf("disable for an unknown prefix: %d %s", code, body)
	}
	if st := e.qualityStatus(); len(st.Disabled) != 1 || st.Disabled[0].Carrier != "cheap" || st.Mode != "off" {
		t.Fatalf("GET /v1/quality: %+v", st)
	}

	sippCalls(t, e.sip, ukNumber, 5, 10)
	recs := e.waitCDRs(5)
	checkRoutes(t, "disabled", recs, "good", []string{"cheap"})
	a := recs[0]["lcr_attempts"].([]any)[0].(map[string]any)
	if a["reason"] != "disabled" || a["dialed"] != false || a["status"] != 503.0 || a["b_call_id"] != nil {
		t.Fatalf("the disabled carrier's attempt: %v", a)
	}
	if got := e.metric(`sipedge_lcr_attempts_total{carrier="cheap",code="503",dialed="false",reason="disabled"}`); got != 5 {
		t.Fatalf("disabled attempts counted %v", got)
	}
	// Another prefix: cheap as before.
	sippCalls(t, e.sip, usNumber, 3, 10)
	checkRoutes(t, "another prefix", e.waitCDRs(8)[5:], "cheap", nil)
	// Its gateway is up: quality is not health.
	if code, body := e.httpGet("/v1/gateway/groups/cheap"); code != 200 || !strings.Contains(body, `"state":"up"`) {
		t.Fatalf("cheap's group: %d %s", code, body)
	}

	code, body = e.postJSON("/v1/quality/enable", `{"carrier": "cheap", "prefix": "+44"}`)
	if code != 200 || !strings.Contains(body, `"enabled":true`) {
		t.Fatalf("enable: %d %s", code, body)
	}
	sippCalls(t, e.sip, ukNumber, 3, 10)
	checkRoutes(t, "enabled", e.waitCDRs(11)[8:], "cheap", nil)

	// The admin guard: a change must be JSON.
	c := &http.Client{Timeout: waitMsg}
	resp, err := c.Post("http://"+e.admin+"/v1/quality/disable", "text/plain", strings.NewReader(`{"carrier": "cheap"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || len(e.qualityStatus().Disabled) != 0 {
		t.Fatalf("a text/plain disable: %d, disables %+v", resp.StatusCode, e.qualityStatus().Disabled)
	}
}

// With Redis configured for the decision cache, the disables persist
// across a restart.
func TestQualityDisablesSurviveRestartE2E(t *testing.T) {
	requireSIPp(t)
	r := redistest.Start(t)
	_, cheapPort := sippUAS(t, "cheap", "uas")
	_, goodPort := sippUAS(t, "good", "uas")
	yaml := func(e *e2e) string {
		return qualityYAML(e, []string{sippGroup("cheap", cheapPort), sippGroup("good", goodPort)}, []string{cheapRoute, goodRoute},
			"  cache: lcr\n", "quality: { prefixes: [\"\", \"44\"] }\n", fmt.Sprintf("cache:\n  - { name: lcr, url: %q }\n", r.URL()))
	}
	first, logs := newE2EBase(t)
	first.run(yaml(first), logs)
	if code, body := first.postJSON("/v1/quality/disable", `{"carrier": "cheap", "prefix": "44"}`); code != 200 {
		t.Fatalf("disable: %d %s", code, body)
	}
	if code, body := first.postJSON("/v1/quality/disable", `{"carrier": "gone"}`); code != 200 {
		t.Fatalf("disable: %d %s", code, body)
	}
	if err := first.shutdown(); err != nil {
		t.Fatal(err)
	}

	second, logs := newE2EBase(t)
	second.run(yaml(second), logs)
	second.waitQuality("the stored disables loaded", 5*time.Second, func(st quality.Status) bool { return len(st.Disabled) == 2 })
	sippCalls(t, second.sip, ukNumber, 3, 10)
	checkRoutes(t, "after the restart", second.waitCDRs(3), "good", []string{"cheap"})
	if !strings.Contains(logs.String(), `msg="quality: stored disables loaded" disables=2`) {
		t.Fatal("the load is not logged")
	}
}

// lcr.send_quality: the API's requests carry the scores of the number's
// prefix; a cached decision is reordered by the current scores too.
func TestQualitySendQualityE2E(t *testing.T) {
	requireSIPp(t)
	var mu sync.Mutex
	var requests []lcr.Request
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q lcr.Request
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &q); err != nil {
			t.Errorf("API request %s: %v", b, err)
		}
		mu.Lock()
		requests = append(requests, q)
		mu.Unlock()
		io.WriteString(w, `{"routes": [{"carrier_id": "cheap", "gateway_group": "cheap"}, {"carrier_id": "good", "gateway_group": "good"}], "cache_ttl_secs": 300}`)
	}))
	defer api.Close()
	_, cheapPort := sippUAS(t, "cheap", "uas_480.xml")
	_, goodPort := sippUAS(t, "good", "uas")
	e, logs := newE2EBase(t)
	e.run(qualityYAML(e, []string{sippGroup("cheap", cheapPort), sippGroup("good", goodPort)}, nil,
		fmt.Sprintf("  api_url: %q\n  send_quality: true\n", api.URL),
		"quality:\n  mode: demote\n  prefixes: [\"\", \"44\"]\n  sampling_interval_secs: 1\n  history_span_secs: 60\n"+builtInNoACD, ""), logs)

	sippCalls(t, e.sip, ukNumber, 30, 15)
	e.waitCDRs(30)
	e.waitQuality("cheap demoted", 5*time.Second, func(st quality.Status) bool {
		c, ok := carrierEntry(st, "44", "cheap")
		return ok && c.Demoted
	})
	// The cached decision, cheap first, is reordered: good answers at once.
	sippCalls(t, e.sip, ukNumber, 3, 10)
	checkRoutes(t, "cached decision", e.waitCDRs(33)[30:], "good", nil)
	// A new number asks the API, with the scores.
	sippCalls(t, e.sip, "447700900999", 1, 10)
	checkRoutes(t, "new decision", e.waitCDRs(34)[33:], "good", nil)
	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 2 {
		t.Fatalf("%d API requests, want 2: %+v", len(requests), requests)
	}
	first, last := requests[0].Quality, requests[1].Quality
	if first == nil || first.Prefix != "44" || len(first.Carriers) != 0 {
		t.Fatalf("the first request's quality: %+v", first)
	}
	want := &lcr.Quality{Prefix: "44", Carriers: []lcr.CarrierQuality{{CarrierID: "cheap", Score: 10, Demoted: true}, {CarrierID: "good"}}}
	if last == nil || fmt.Sprint(*last) != fmt.Sprint(*want) {
		t.Fatalf("the request after the demotion: %+v, want %+v", last, want)
	}
}
