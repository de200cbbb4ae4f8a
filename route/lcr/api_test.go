package lcr

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/route"
)

// TestRequestJSON checks the request body field by field, as docs/lcr-api.md shows it.
func TestRequestJSON(t *testing.T) {
	req := Request{
		Version:      1,
		CallID:       "a84b4c76e66710",
		From:         "sip:+13105550100@10.0.0.1",
		To:           "sip:+12025550123@sipedge.example",
		DialedNumber: "+12025550123",
		Source:       CallSource{IP: "10.0.0.1", Port: 5060, Transport: "udp", TrunkGroup: "cust-trunks"},
		Attributes:   map[string]string{"customer": "acme"},
	}
	want := `{"version":1,"call_id":"a84b4c76e66710","from":"sip:+13105550100@10.0.0.1",` +
		`"to":"sip:+12025550123@sipedge.example","dialed_number":"+12025550123",` +
		`"source":{"ip":"10.0.0.1","port":5060,"transport":"udp","trunk_group":"cust-trunks"},` +
		`"attributes":{"customer":"acme"}}`
	if got := mustJSON(t, &req); got != want {
		t.Fatalf("request JSON\n got %s\nwant %s", got, want)
	}
	req.Attributes = nil
	if got := mustJSON(t, &req); strings.Contains(got, "attributes") || strings.Contains(got, "quality") {
		t.Fatalf("empty attributes or quality are not omitted: %s", got)
	}
	req.Quality = &Quality{Prefix: "+1", Carriers: []CarrierQuality{{CarrierID: "carrier-a", Score: 10, Demoted: true},
		{CarrierID: "carrier-b", Disabled: true}}}
	want = `"quality":{"prefix":"+1","carriers":[{"carrier_id":"carrier-a","score":10,"demoted":true,"disabled":false},` +
		`{"carrier_id":"carrier-b","score":0,"demoted":false,"disabled":true}]}}`
	if got := mustJSON(t, &req); !strings.HasSuffix(got, want) {
		t.Fatalf("request JSON with quality\n got %s\nwant ...%s", got, want)
	}
}

// TestResponseJSON decodes every documented field of a response.
func TestResponseJSON(t *testing.T) {
	body := `{
	  "routes": [
	    {"carrier_id": "carrier-a", "gateway_group": "carrier-a", "next_hop": "198.51.100.11:5060",
	     "ruri": "sip:+12025550123@gw.carrier-a.example", "tech_prefix": "1010288",
	     "number_policy": "e164", "caller_id": "+13105550100", "caller_id_presentation": "restricted",
	     "rate": 0.0042, "currency": "USD", "timeout_secs": 6, "reroute_after_progress": true,
	     "reroute_causes": [404, 503], "headers": {"X-Account": "42"}, "cdr_fields": {"deck": "2026-01"}}
	  ],
	  "cache_ttl_secs": 300,
	  "reject": {"code": 403, "reason": "Blocked"}
	}`
	var resp Response
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	want := route.Route{
		CarrierID: "carrier-a", GatewayGroup: "carrier-a", NextHop: "198.51.100.11:5060",
		RURI: "sip:+12025550123@gw.carrier-a.example", TechPrefix: "1010288", NumberPolicy: "e164",
		CallerID: "+13105550100", CallerIDPresentation: "restricted", Rate: 0.0042, Currency: "USD",
		TimeoutSecs: 6, RerouteAfterProgress: true, RerouteCauses: []int{404, 503},
		Headers: map[string]string{"X-Account": "42"}, CDRFields: map[string]string{"deck": "2026-01"},
	}
	if len(resp.Routes) != 1 || !reflect.DeepEqual(resp.Routes[0], want) {
		t.Fatalf("routes %+v, want %+v", resp.Routes, want)
	}
	if resp.CacheTTLSecs == nil || *resp.CacheTTLSecs != 300 {
		t.Fatalf("cache_ttl_secs %v", resp.CacheTTLSecs)
	}
	if resp.Reject == nil || *resp.Reject != (Reject{Code: 403, Reason: "Blocked"}) {
		t.Fatalf("reject %+v", resp.Reject)
	}
	if err := resp.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	f := func(body string, wantErr string) {
		t.Helper()
		var resp Response
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		err := resp.Validate()
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s: unexpected error %v", body, err)
			}
			return
		}
		if err == nil || !errors.Is(err, ErrInvalidResponse) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want one containing %q", body, err, wantErr)
		}
	}
	// Valid.
	f(`{"routes":[]}`, "")
	f(`{"routes":[],"cache_ttl_secs":0}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g"}]}`, "")
	f(`{"routes":[{"carrier_id":"a","next_hop":"192.0.2.1:5060"}]}`, "")
	f(`{"routes":[{"carrier_id":"a","ruri":"sip:1@192.0.2.1"}]}`, "")
	f(`{"reject":{"code":403,"reason":"Forbidden"}}`, "")
	f(`{"reject":{"code":699}}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","caller_id_presentation":"allowed"}]}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","caller_id_presentation":"withheld"}]}`, "") // the policy treats it as restricted
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","reroute_causes":[]}]}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","reroute_causes":[300,699],"timeout_secs":0,"rate":0}]}`, "")
	// Invalid.
	f(`{}`, "neither routes nor reject")
	f(`{"routes":null}`, "neither routes nor reject")
	f(`{"routes":[],"cache_ttl_secs":-1}`, "cache_ttl_secs -1")
	f(`{"reject":{"code":200,"reason":"OK"}}`, "reject.code 200")
	f(`{"reject":{"code":399}}`, "reject.code 399")
	f(`{"reject":{"code":700}}`, "reject.code 700")
	f(`{"reject":{}}`, "reject.code 0")
	f(`{"routes":[{"gateway_group":"g"}]}`, "routes[0]: lcr: invalid response: carrier_id is empty")
	f(`{"routes":[{"carrier_id":"Carrier \"A\" / Zürich","gateway_group":"g"}]}`, "")
	f(`{"routes":[{"carrier_id":"a\tb","gateway_group":"g"}]}`, "carrier_id")
	f(`{"routes":[{"carrier_id":"a\u200bb","gateway_group":"g"}]}`, "carrier_id")
	f(`{"routes":[{"carrier_id":"`+strings.Repeat("c", 129)+`","gateway_group":"g"}]}`, "carrier_id")
	f(`{"routes":[{"carrier_id":"`+strings.Repeat("話", 128)+`","gateway_group":"g"}]}`, "") // characters, not bytes
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g"},{"carrier_id":"b"}]}`, `routes[1]: lcr: invalid response: carrier "b" has none of gateway_group, next_hop, ruri`)
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","rate":-0.01}]}`, "rate -0.01")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","timeout_secs":-1}]}`, "timeout_secs -1")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","reroute_causes":[503,299]}]}`, "reroute cause 299")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","reroute_causes":[700]}]}`, "reroute cause 700")
	// What goes into the carrier's INVITE cannot end a URI or a line.
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","caller_id":"+13105550100","tech_prefix":"#31#","ruri":"sip:1@192.0.2.1:5060"}]}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","caller_id":"+1310@x>\r\nRoute: <sip:evil.example;lr>"}]}`, "caller_id")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","caller_id":"+"}]}`, "caller_id")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","tech_prefix":"1@evil"}]}`, "tech_prefix")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","tech_prefix":"1\r\nX: y"}]}`, "tech_prefix")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","ruri":"tel:+1310"}]}`, "ruri")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","ruri":"sip:1@host>\r\nVia: x"}]}`, "ruri")
	f(`{"reject":{"code":403,"reason":"No\r\nVia: x"}}`, "reject.reason")
	// A route's own cps (docs/design/cps.md 2).
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":5,"burst":2,"max_wait_ms":0,"key":"acct-1"}}]}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":-1}}]}`, "cps.rate -1")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":5,"burst":-1}}]}`, "cps.burst -1")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":5,"max_wait_ms":-5}}]}`, "cps.max_wait_ms -5")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":5,"max_wait_ms":600000}}]}`, "cps.max_wait_ms 600000")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":5,"key":"two words"}}]}`, `cps.key "two words"`)
	// What the CPS limiter cannot pace is refused, not left unpaced: a rate
	// under one call an hour (with its 15 % margin), an hour of calls at once.
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":0.001,"burst":3}}]}`, "")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":0}}]}`, "") // the group's applies
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":0.0002}}]}`, "cps.rate 0.0002")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":0.0002777777777777778}}]}`, "cps.rate") // 1/3600
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":1e-300}}]}`, "cps.rate 1e-300")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":1,"burst":10000}}]}`, "cps.burst 10000")
	f(`{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":1e300,"burst":4000000000}}]}`, "cps.burst 4000000000")
}

// A route's cps decodes with max_wait_ms absent apart from 0.
func TestRouteCPSDecode(t *testing.T) {
	var resp Response
	body := `{"routes":[{"carrier_id":"a","gateway_group":"g","cps":{"rate":5,"key":"acct"}},` +
		`{"carrier_id":"b","gateway_group":"g","cps":{"rate":5,"max_wait_ms":0}}]}`
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	a, b := resp.Routes[0].CPS, resp.Routes[1].CPS
	if a == nil || a.Rate != 5 || a.Key != "acct" || a.MaxWaitMs != nil {
		t.Errorf("route a cps %+v", a)
	}
	if b == nil || b.MaxWaitMs == nil || *b.MaxWaitMs != 0 {
		t.Errorf("route b cps %+v", b)
	}
}
