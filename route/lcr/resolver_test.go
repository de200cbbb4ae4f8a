package lcr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
)

// TestAPIRequest: the body is the documented JSON, POSTed with the
// Authorization header, and the answer becomes the decision.
func TestAPIRequest(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, staticReply(200, `{"routes":[
		{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.0042,"currency":"USD","timeout_secs":6,
		 "tech_prefix":"1010288","headers":{"X-Account":"42"},"cdr_fields":{"deck":"7"}},
		{"carrier_id":"carrier-b","next_hop":"203.0.113.21:5060","rate":0.005,"reroute_causes":[404,503]}],
		"cache_ttl_secs":120}`))
	r := newTestResolver(t, Options{APIURL: api.URL + "/route", AuthHeader: "Bearer s3cret",
		KeyAttributes: []string{"customer"}})
	req := testRequest("+12025550123")
	req.Attributes = map[string]string{"customer": "acme", "other": "x"}
	d := r.lookup(t, req)

	body, hdr := api.last()
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
	want := map[string]any{
		"version": 1.0, "call_id": "call-+12025550123", "from": "sip:+13105550100@10.0.0.1",
		"to": "sip:+12025550123@sipedge", "dialed_number": "+12025550123",
		"source":     map[string]any{"ip": "10.0.0.1", "port": 5060.0, "transport": "udp", "trunk_group": "cust-trunks"},
		"attributes": map[string]any{"customer": "acme", "other": "x"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("request body\n got %v\nwant %v", got, want)
	}
	if a := hdr.Get("Authorization"); a != "Bearer s3cret" {
		t.Fatalf("Authorization %q", a)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if req.Version != 0 {
		t.Fatal("Lookup modified the request")
	}

	wantRoutes := []route.Route{
		{CarrierID: "carrier-a", GatewayGroup: "carrier-a", Rate: 0.0042, Currency: "USD", TimeoutSecs: 6,
			TechPrefix: "1010288", Headers: map[string]string{"X-Account": "42"}, CDRFields: map[string]string{"deck": "7"}},
		{CarrierID: "carrier-b", NextHop: "203.0.113.21:5060", Rate: 0.005, RerouteCauses: []int{404, 503}},
	}
	if d.Source != route.SourceLCR || d.NoDecision || d.Reject != nil || d.TTL != 120*time.Second || !reflect.DeepEqual(d.Routes, wantRoutes) {
		t.Fatalf("decision %+v", d)
	}
	if n := r.metric(t, metricCacheMisses); n != 1 {
		t.Fatalf("misses %v", n)
	}
	if !strings.Contains(r.set.ListMetricNames()[0], "sipedge_lcr_") {
		t.Fatal("metric names")
	}
}

// TestAPIRequestQuality: with Options.Quality the request carries the
// scores of the number's prefix, asked for as the request leaves; a
// number without one carries none.
func TestAPIRequestQuality(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	var asked []string
	r := newTestResolver(t, Options{APIURL: api.URL, CacheTTL: 0, Quality: func(number string) *Quality {
		asked = append(asked, number)
		if !strings.HasPrefix(number, "+44") {
			return nil
		}
		return &Quality{Prefix: "+44", Carriers: []CarrierQuality{{CarrierID: "cheap", Score: 10, Demoted: true}}}
	}})
	r.lookup(t, testRequest("+447700900123"))
	body, _ := api.last()
	var got struct {
		Quality *Quality `json:"quality"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := &Quality{Prefix: "+44", Carriers: []CarrierQuality{{CarrierID: "cheap", Score: 10, Demoted: true}}}
	if !reflect.DeepEqual(got.Quality, want) {
		t.Fatalf("quality %+v, want %+v in %s", got.Quality, want, body)
	}
	r.lookup(t, testRequest("+12025550123"))
	if body, _ := api.last(); strings.Contains(string(body), "quality") {
		t.Fatalf("a number without a quality prefix: %s", body)
	}
	if !reflect.DeepEqual(asked, []string{"+447700900123", "+12025550123"}) {
		t.Fatalf("asked for %v", asked)
	}
}

func TestAPIReject(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, staticReply(200, `{"routes":[],"reject":{"code":403,"reason":"Destination Blocked"},"cache_ttl_secs":60}`))
	r := newTestResolver(t, Options{APIURL: api.URL})
	d := r.lookup(t, testRequest("+8819123"))
	if d.Reject == nil || *d.Reject != (Reject{403, "Destination Blocked"}) || d.Source != route.SourceLCR || d.NoDecision {
		t.Fatalf("decision %+v", d)
	}
	// A reject is a decision: cached like routes.
	d = r.lookup(t, testRequest("+8819123"))
	if d.Reject == nil || api.requests.Load() != 1 {
		t.Fatalf("second lookup: %+v after %d requests", d, api.requests.Load())
	}
}

// TestAPINoRoute: an empty route list is a decision (the policy answers 404).
func TestAPINoRoute(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, staticReply(200, `{"routes":[]}`))
	r := newTestResolver(t, Options{APIURL: api.URL, FallbackGatewayGroup: "fb"})
	d := r.lookup(t, testRequest("+999"))
	if d.Source != route.SourceLCR || d.NoDecision || d.Reject != nil || len(d.Routes) != 0 || d.TTL != 0 {
		t.Fatalf("decision %+v", d)
	}
}

// TestMalformedResponses: each breach of the contract is an API failure,
// logged, counted as invalid, and answered with the fallback.
func TestMalformedResponses(t *testing.T) {
	testtier.RequiresSockets(t)
	f := func(body, wantLog string) {
		t.Helper()
		api := newAPIServer(t, staticReply(200, body))
		r := newTestResolver(t, Options{APIURL: api.URL, FallbackGatewayGroup: "carrier-z", CacheTTL: time.Hour})
		d := r.lookup(t, testRequest("+12025550123"))
		if d.Source != route.SourceFallback ||
			!reflect.DeepEqual(d.Routes, []route.Route{{CarrierID: "fallback", GatewayGroup: "carrier-z"}}) {
			t.Fatalf("%s: decision %+v", body, d)
		}
		if n := r.failures(t, "invalid"); n != 1 {
			t.Fatalf("%s: invalid failures %v", body, n)
		}
		log := r.log.String()
		if !strings.Contains(log, "invalid routing API response, treated as an API failure") || !strings.Contains(log, wantLog) {
			t.Fatalf("%s: log %q lacks %q", body, log, wantLog)
		}
		// Not cached: the next lookup asks again.
		r.lookup(t, testRequest("+12025550123"))
		if api.requests.Load() != 2 {
			t.Fatalf("%s: a failure was cached", body)
		}
	}
	f(`not json`, "invalid character")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g"}]`, "unexpected end of JSON input")
	f(`{"routes":{"carrier_id":"a"}}`, "cannot unmarshal object")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","timeout_secs":1.5}]}`, "cannot unmarshal number 1.5")
	f(`{}`, "neither routes nor reject")
	f(`{"routes":[{"gateway_group":"g"}]}`, "carrier_id is empty")
	f(`{"routes":[{"carrier_id":"a"}]}`, "none of gateway_group, next_hop, ruri")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","rate":-1}]}`, "rate -1")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","timeout_secs":-5}]}`, "timeout_secs -5")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","reroute_causes":[100]}]}`, "reroute cause 100")
	f(`{"reject":{"code":302,"reason":"Moved"}}`, "reject.code 302")
	f(`{"routes":[],"cache_ttl_secs":-60}`, "cache_ttl_secs -60")
	f(strings.Repeat(" ", MaxResponseSize+1), "body larger than")
}

// TestUnknownPresentationAccepted: the policy, not the client, deals with an
// unknown caller_id_presentation.
func TestUnknownPresentationAccepted(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, staticReply(200, `{"routes":[{"carrier_id":"a","gateway_group":"g","caller_id_presentation":"private"}]}`))
	r := newTestResolver(t, Options{APIURL: api.URL})
	d := r.lookup(t, testRequest("1"))
	if d.Source != route.SourceLCR || len(d.Routes) != 1 || d.Routes[0].CallerIDPresentation != "private" {
		t.Fatalf("decision %+v", d)
	}
}

// TestCacheHitAvoidsAPI: the second lookup of a key does not reach the API;
// LookupCached answers it synchronously.
func TestCacheHitAvoidsAPI(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL})
	key := r.AppendKey(nil, "cust-trunks", "+12025550123", nil)
	if string(key) != "cust-trunks:+12025550123" {
		t.Fatalf("key %q", key)
	}
	if _, ok := r.LookupCached(key); ok {
		t.Fatal("hit before any lookup")
	}
	d1 := r.lookup(t, testRequest("+12025550123"))
	d2 := r.lookup(t, testRequest("+12025550123"))
	d3, ok := r.LookupCached(key)
	if !ok || api.requests.Load() != 1 {
		t.Fatalf("LookupCached %v after %d API requests", ok, api.requests.Load())
	}
	for _, d := range []Decision{d1, d2, d3} {
		if d.Source != route.SourceLCR || carriers(d.Routes) != "carrier-a" || d.TTL != time.Minute {
			t.Fatalf("decision %+v", d)
		}
	}
	if n := r.metric(t, metricCacheHits+`{tier="local"}`); n != 2 {
		t.Fatalf("local hits %v", n)
	}
	// Another number, another trunk group: other keys.
	r.lookup(t, testRequest("+12025550124"))
	other := testRequest("+12025550123")
	other.Source.TrunkGroup = "other-trunks"
	r.lookup(t, other)
	if api.requests.Load() != 3 {
		t.Fatalf("%d API requests, want 3", api.requests.Load())
	}
}

// TestCacheKeyAttributes: named attributes are part of the key, sorted.
func TestCacheKeyAttributes(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL, KeyAttributes: []string{"tier", "customer", "tier"}})
	key := r.AppendKey(nil, "tg", "+1", map[string]string{"customer": "acme", "tier": "gold", "x": "y"})
	if string(key) != "tg:+1:customer=acme,tier=gold" {
		t.Fatalf("key %q", key)
	}
	if key := r.AppendKey(nil, "tg", "+1", nil); string(key) != "tg:+1:customer=,tier=" {
		t.Fatalf("key %q", key)
	}
	req := func(customer, other string) *Request {
		q := testRequest("+1")
		q.Attributes = map[string]string{"customer": customer, "unkeyed": other}
		return q
	}
	r.lookup(t, req("acme", "1"))
	r.lookup(t, req("acme", "2")) // unkeyed attribute: same key, cached
	r.lookup(t, req("globex", "1"))
	if n := api.requests.Load(); n != 2 {
		t.Fatalf("%d API requests, want 2", n)
	}
}

// TestKeyAttributesValidated: a key name that could blur the key's
// separators, or too many, is refused at New.
func TestKeyAttributesValidated(t *testing.T) {
	many := make([]string, MaxAttributes+1)
	for i := range many {
		many[i] = fmt.Sprint("a", i)
	}
	for _, names := range [][]string{{"customer", "a,b"}, {""}, {"x=y"}, many} {
		if r, err := New(Options{KeyAttributes: names}); !errors.Is(err, ErrInvalidOption) {
			if r != nil {
				r.Close()
			}
			t.Errorf("KeyAttributes %q: error %v, want ErrInvalidOption", names, err)
		}
	}
}

// TestCacheTTL: cache_ttl_secs 0 and absent-without-a-default do not cache;
// absent uses Options.CacheTTL.
func TestCacheTTL(t *testing.T) {
	testtier.RequiresSockets(t)
	f := func(body string, defaultTTL time.Duration, wantRequests int64, wantTTL time.Duration) {
		t.Helper()
		api := newAPIServer(t, staticReply(200, body))
		r := newTestResolver(t, Options{APIURL: api.URL, CacheTTL: defaultTTL})
		var d Decision
		for range 3 {
			d = r.lookup(t, testRequest("+44"))
		}
		if n := api.requests.Load(); n != wantRequests || d.TTL != wantTTL {
			t.Fatalf("%s, CacheTTL %v: %d requests, TTL %v; want %d, %v", body, defaultTTL, n, d.TTL, wantRequests, wantTTL)
		}
	}
	route := `"routes":[{"carrier_id":"a","gateway_group":"g"}]`
	f(`{`+route+`,"cache_ttl_secs":0}`, time.Hour, 3, 0)
	f(`{`+route+`}`, 0, 3, 0)
	f(`{`+route+`}`, time.Hour, 1, time.Hour)
	f(`{`+route+`,"cache_ttl_secs":30}`, time.Hour, 1, 30*time.Second)
	f(`{`+route+`,"cache_ttl_secs":30}`, 0, 1, 30*time.Second)
	// An API's "forever" past time.Duration's range is cached, as long as
	// can be, not wrapped into a negative TTL that cached nothing.
	f(`{`+route+`,"cache_ttl_secs":9999999999}`, 0, 1, maxCacheTTL)
}

// TestLocalTTLCapsTTL: an in-process entry lives min(local_ttl, TTL).
func TestLocalTTLCapsTTL(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	t.Run("local shorter", func(t *testing.T) {
		t.Parallel()
		api := newAPIServer(t, staticReply(200, `{"routes":[],"cache_ttl_secs":3600}`))
		r := newTestResolver(t, Options{APIURL: api.URL, LocalTTL: 100 * time.Millisecond})
		key := r.AppendKey(nil, "cust-trunks", "+1", nil)
		r.lookup(t, testRequest("+1"))
		if _, ok := r.LookupCached(key); !ok {
			t.Fatal("not cached")
		}
		time.Sleep(150 * time.Millisecond)
		if _, ok := r.LookupCached(key); ok {
			t.Fatal("the entry outlived local_ttl")
		}
		r.lookup(t, testRequest("+1"))
		if n := api.requests.Load(); n != 2 {
			t.Fatalf("%d requests, want 2", n)
		}
	})
	t.Run("API shorter", func(t *testing.T) {
		t.Parallel()
		api := newAPIServer(t, staticReply(200, `{"routes":[],"cache_ttl_secs":1}`))
		r := newTestResolver(t, Options{APIURL: api.URL, LocalTTL: time.Hour})
		key := r.AppendKey(nil, "cust-trunks", "+1", nil)
		r.lookup(t, testRequest("+1"))
		time.Sleep(900 * time.Millisecond)
		if _, ok := r.LookupCached(key); !ok {
			t.Fatal("expired early")
		}
		time.Sleep(200 * time.Millisecond)
		if _, ok := r.LookupCached(key); ok {
			t.Fatal("the entry outlived cache_ttl_secs")
		}
	})
	t.Run("no local tier", func(t *testing.T) {
		t.Parallel()
		api := newAPIServer(t, nil)
		r := newTestResolver(t, Options{APIURL: api.URL, LocalTTL: NoLocalTier})
		r.lookup(t, testRequest("+1"))
		r.lookup(t, testRequest("+1"))
		if _, ok := r.LookupCached(r.AppendKey(nil, "cust-trunks", "+1", nil)); ok || api.requests.Load() != 2 {
			t.Fatalf("cached without a local tier (%d requests)", api.requests.Load())
		}
	})
}

// TestCoalescing: 50 concurrent lookups of one key make one API request and
// all get its decision.
func TestCoalescing(t *testing.T) {
	testtier.RequiresSockets(t)
	release := make(chan struct{})
	api := newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
		<-release
		io.WriteString(w, oneRoute)
	})
	r := newTestResolver(t, Options{APIURL: api.URL})
	const n = 50
	var wg sync.WaitGroup
	decisions := make(chan Decision, n)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r.Lookup(testRequest("+12025550123"), func(d Decision) { decisions <- d })
		}()
	}
	close(start)
	wg.Wait() // every Lookup has returned: all have joined the flight
	close(release)
	for range n {
		select {
		case d := <-decisions:
			if d.Source != route.SourceLCR || carriers(d.Routes) != "carrier-a" {
				t.Fatalf("decision %+v", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a coalesced lookup got no decision")
		}
	}
	if got := api.requests.Load(); got != 1 {
		t.Fatalf("%d API requests, want 1", got)
	}
	if c := r.metric(t, metricCoalesced); c != n-1 {
		t.Fatalf("coalesced %v, want %d", c, n-1)
	}
}

// TestLookupRacingTheEndOfAFlight: a lookup that missed the cache while a
// flight for its key was about to end finds the flight's answer in the
// cache once it has the lock, rather than send a second request (docs/lcr-api.md:
// lookups of a key in progress share one request). The lock is held here
// while the flight ends as fly ends it: its answer cached, the flight gone.
func TestLookupRacingTheEndOfAFlight(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, nil)
	r := newTestResolver(t, Options{APIURL: api.URL})
	first := r.lookup(t, testRequest("+12025550999")) // a decision to cache, from another key
	req := testRequest("+12025550123")
	key := string(r.AppendKey(nil, req.Source.TrunkGroup, req.DialedNumber, req.Attributes))

	r.mu.Lock()
	got := make(chan Decision, 1)
	go r.Lookup(req, func(d Decision) { got <- d })
	time.Sleep(50 * time.Millisecond) // the lookup misses the cache and waits for the lock
	now := r.coarseNow()
	r.local.put(key, first, now+int64(time.Minute), now)
	r.mu.Unlock()
	select {
	case d := <-got:
		if d.Source != route.SourceLCR || carriers(d.Routes) != "carrier-a" {
			t.Fatalf("decision %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no decision")
	}
	if n := api.requests.Load(); n != 1 {
		t.Fatalf("%d API requests, want 1: the lookup did not look at the cache again", n)
	}
}

// TestAPIDown: an unreachable, slow, failing or garbled API gives the
// fallback when configured, NoDecision otherwise, and is counted by kind.
func TestAPIDown(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	cases := []struct {
		name, kind string
		url        func(t *testing.T) string
	}{
		{"closed port", "transport", closedURL},
		{"timeout", "timeout", func(t *testing.T) string {
			return newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
				time.Sleep(300 * time.Millisecond)
				io.WriteString(w, oneRoute)
			}).URL
		}},
		{"500", "5xx", func(t *testing.T) string { return newAPIServer(t, staticReply(500, `{"routes":[]}`)).URL }},
		{"503", "5xx", func(t *testing.T) string { return newAPIServer(t, staticReply(503, "")).URL }},
		{"401", "status", func(t *testing.T) string { return newAPIServer(t, staticReply(401, "no")).URL }},
		{"invalid JSON", "invalid", func(t *testing.T) string { return newAPIServer(t, staticReply(200, "<html>")).URL }},
	}
	for _, c := range cases {
		for _, fallback := range []string{"", "carrier-z"} {
			t.Run(fmt.Sprintf("%s fallback=%q", c.name, fallback), func(t *testing.T) {
				t.Parallel()
				r := newTestResolver(t, Options{APIURL: c.url(t), Timeout: 100 * time.Millisecond,
					FallbackGatewayGroup: fallback, CacheTTL: time.Hour})
				start := time.Now()
				d := r.lookup(t, testRequest("+12025550123"))
				if el := time.Since(start); el > 2*time.Second {
					t.Fatalf("took %v", el)
				}
				if fallback == "" {
					if !d.NoDecision || d.Source != route.SourceNone || d.Routes != nil || d.Reject != nil {
						t.Fatalf("decision %+v, want NoDecision", d)
					}
					if n := r.metric(t, metricNoDecisions); n != 1 {
						t.Fatalf("no decisions %v", n)
					}
				} else {
					want := []route.Route{{CarrierID: FallbackCarrierID, GatewayGroup: fallback}}
					if d.NoDecision || d.Source != route.SourceFallback || !reflect.DeepEqual(d.Routes, want) {
						t.Fatalf("decision %+v, want the fallback", d)
					}
					if n := r.metric(t, metricFallbacks); n != 1 {
						t.Fatalf("fallbacks %v", n)
					}
				}
				if n := r.failures(t, c.kind); n != 1 {
					t.Fatalf("failures{kind=%q} %v", c.kind, n)
				}
				if !strings.Contains(r.log.String(), "kind="+c.kind) {
					t.Fatalf("log %q", r.log.String())
				}
			})
		}
	}
}

// TestBreaker: after BreakerThreshold consecutive failures the API is not
// asked and lookups fail fast; after the cool-down one trial goes through
// and a success closes the breaker.
func TestBreaker(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	var slow sync.Mutex
	sleeping := true
	api := newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
		slow.Lock()
		s := sleeping
		slow.Unlock()
		if s {
			time.Sleep(400 * time.Millisecond)
		}
		io.WriteString(w, oneRoute)
	})
	r := newTestResolver(t, Options{APIURL: api.URL, Timeout: 100 * time.Millisecond,
		BreakerThreshold: 3, BreakerCooldown: 500 * time.Millisecond, FallbackGatewayGroup: "fb"})
	for i := range 3 {
		start := time.Now()
		d := r.lookup(t, testRequest(fmt.Sprint(i)))
		if el := time.Since(start); d.Source != route.SourceFallback || el < 100*time.Millisecond {
			t.Fatalf("lookup %d: %v after %v", i, d.Source, el)
		}
	}
	if s := r.metric(t, metricBreakerState); s != breakerOpen {
		t.Fatalf("breaker state %v", s)
	}
	requests := api.requests.Load()
	for i := range 20 {
		start := time.Now()
		d := r.lookup(t, testRequest(fmt.Sprint(100+i)))
		if el := time.Since(start); el >= 5*time.Millisecond || d.Source != route.SourceFallback {
			t.Fatalf("open breaker: %v after %v", d.Source, el)
		}
	}
	if api.requests.Load() != requests {
		t.Fatal("the API was asked while the breaker was open")
	}
	if n := r.failures(t, "breaker_open"); n != 20 {
		t.Fatalf("breaker_open failures %v", n)
	}
	if n := strings.Count(r.log.String(), "circuit breaker open"); n != 1 {
		t.Fatalf("%d breaker-open log lines, want 1", n)
	}

	// Cool-down over, API still slow: the trial fails and the breaker opens again.
	time.Sleep(550 * time.Millisecond)
	if d := r.lookup(t, testRequest("trial1")); d.Source != route.SourceFallback {
		t.Fatalf("trial: %v", d.Source)
	}
	if s := r.metric(t, metricBreakerState); s != breakerOpen {
		t.Fatalf("after a failed trial: state %v", s)
	}
	start := time.Now()
	r.lookup(t, testRequest("fast"))
	if el := time.Since(start); el >= 5*time.Millisecond {
		t.Fatalf("reopened breaker: lookup took %v", el)
	}

	// The API recovers: the next trial closes the breaker.
	slow.Lock()
	sleeping = false
	slow.Unlock()
	time.Sleep(550 * time.Millisecond)
	if d := r.lookup(t, testRequest("trial2")); d.Source != route.SourceLCR {
		t.Fatalf("trial: %v", d.Source)
	}
	if s := r.metric(t, metricBreakerState); s != breakerClosed {
		t.Fatalf("after a good trial: state %v", s)
	}
	if d := r.lookup(t, testRequest("after")); d.Source != route.SourceLCR {
		t.Fatalf("closed breaker: %v", d.Source)
	}
	if !strings.Contains(r.log.String(), "circuit breaker closed") {
		t.Fatal("closing not logged")
	}
}

// TestBreakerHalfOpenOneTrial: while the trial is in flight, other lookups
// fail fast.
func TestBreakerHalfOpenOneTrial(t *testing.T) {
	b := breaker{threshold: 1, cooldown: time.Millisecond, log: discardLog()}
	var clock int64
	b.now = func() int64 { return clock }
	if ok, trial := b.allow(); !ok || trial {
		t.Fatal("closed breaker refused")
	}
	b.record(false, false)
	if ok, _ := b.allow(); ok {
		t.Fatal("open breaker allowed")
	}
	clock += int64(time.Millisecond)
	if ok, trial := b.allow(); !ok || !trial {
		t.Fatal("no trial after the cool-down")
	}
	if ok, _ := b.allow(); ok {
		t.Fatal("a second request during the trial")
	}
	b.record(false, false) // a late failure from before: no change
	if b.state.Load() != breakerHalfOpen {
		t.Fatal("a late failure changed the half-open state")
	}
	b.record(true, true)
	if ok, _ := b.allow(); !ok || b.state.Load() != breakerClosed {
		t.Fatal("not closed after a good trial")
	}
}

// TestMaxInFlight: past the bound, a lookup fails at once, synchronously.
func TestMaxInFlight(t *testing.T) {
	testtier.RequiresSockets(t)
	release := make(chan struct{})
	api := newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
		<-release
		io.WriteString(w, oneRoute)
	})
	r := newTestResolver(t, Options{APIURL: api.URL, MaxInFlight: 2, FallbackGatewayGroup: "fb"})
	pending := make(chan Decision, 3)
	r.Lookup(testRequest("1"), func(d Decision) { pending <- d })
	r.Lookup(testRequest("2"), func(d Decision) { pending <- d })
	r.Lookup(testRequest("2"), func(d Decision) { pending <- d }) // joins: no slot needed
	if n := r.metric(t, metricInFlight); n != 2 {
		t.Fatalf("in flight %v", n)
	}
	var got *Decision
	start := time.Now()
	r.Lookup(testRequest("3"), func(d Decision) { got = &d })
	if el := time.Since(start); got == nil || got.Source != route.SourceFallback || el > 5*time.Millisecond {
		t.Fatalf("over the bound: %+v after %v, want the fallback at once", got, el)
	}
	if n := r.failures(t, "overloaded"); n != 1 {
		t.Fatalf("overloaded %v", n)
	}
	close(release)
	for range 3 {
		if d := <-pending; d.Source != route.SourceLCR {
			t.Fatalf("decision %+v", d)
		}
	}
	if d := r.lookup(t, testRequest("3")); d.Source != route.SourceLCR {
		t.Fatalf("after the flights ended: %v", d.Source)
	}
}

// TestClose: flights in progress get their decision, later lookups the
// failure decision at once.
func TestClose(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
		time.Sleep(time.Second)
		io.WriteString(w, oneRoute)
	})
	r := newTestResolver(t, Options{APIURL: api.URL})
	got := make(chan Decision, 1)
	r.Lookup(testRequest("1"), func(d Decision) { got <- d })
	start := time.Now()
	r.Close()
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("Close took %v", el)
	}
	select {
	case d := <-got:
		if !d.NoDecision {
			t.Fatalf("decision %+v", d)
		}
	default:
		t.Fatal("Close returned before the flight's done")
	}
	if d := r.lookup(t, testRequest("2")); !d.NoDecision {
		t.Fatalf("after Close: %+v", d)
	}
	r.Close()
}

func TestOptionsErrors(t *testing.T) {
	f := func(opts Options, want string) {
		t.Helper()
		_, err := New(opts)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("New(%+v): %v, want an error containing %q", opts, err, want)
		}
	}
	f(Options{APIURL: "ftp://x/route"}, "not an http or https URL")
	f(Options{APIURL: "http://"}, "not an http or https URL")
	f(Options{Timeout: -1}, "negative duration")
	f(Options{MaxInFlight: -1}, "negative count")
	f(Options{APIURL: "http://127.0.0.1/", RedisURL: "http://x"}, "cannot parse Redis URL")
	r := newTestResolver(t, Options{})
	if _, err := New(Options{Metrics: r.set}); !errors.Is(err, ErrMetricsInUse) {
		t.Fatalf("shared metrics set: %v", err)
	}
}

// TestAPIRedirectNotFollowed: a 3xx is a non-2xx status like any other
// (docs/lcr-api.md): sipedge neither re-sends the call, and its Authorization, to the
// Location, nor takes that answer as the API's.
func TestAPIRedirectNotFollowed(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Parallel()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			elsewhere := newAPIServer(t, nil) // would answer a valid route
			api := newAPIServer(t, func(w http.ResponseWriter, _ []byte) {
				w.Header().Set("Location", elsewhere.URL+"/route")
				w.WriteHeader(code)
			})
			r := newTestResolver(t, Options{APIURL: api.URL, AuthHeader: "Bearer s3cret", FallbackGatewayGroup: "fb"})
			if d := r.lookup(t, testRequest("+12025550123")); d.Source != route.SourceFallback {
				t.Fatalf("decision %+v, want the fallback", d)
			}
			if n := elsewhere.requests.Load(); n != 0 {
				t.Fatalf("the redirect was followed: %d requests to its Location", n)
			}
			if n := r.failures(t, "status"); n != 1 {
				t.Fatalf("failures{kind=status} %v", n)
			}
			if !strings.Contains(r.log.String(), "status="+strconv.Itoa(code)) {
				t.Fatalf("log %q", r.log.String())
			}
		})
	}
}
