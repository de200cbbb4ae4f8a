package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// LCR end-to-end tests, one per rule of docs/design/lcr.md not covered by
// lcr_e2e_test.go and lcr_shaping_e2e_test.go: a scripted caller and two
// scripted carriers around a real Server over loopback, the routing API a
// real HTTP server. See lcr_e2e_helpers_test.go.

// apiLCR is an lcr: section asking api, with more keys of the flow map
// ("fallback_gateway_group: carrier-b"), "" for none.
func apiLCR(api *lcrAPI, more string) string {
	s := fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000", api.url())
	if more != "" {
		s += ", " + more
	}
	return s + " }"
}

// TestLCRUndialableTailOwn503: when none of the carriers left can be
// dialled, the caller gets sipedge's own 503, whatever the carrier before
// them did, not turned into 500 (docs/design/lcr.md 3.9); each of those
// carriers is its own 503 attempt, dialed false (3.8).
func TestLCRUndialableTailOwn503(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[`+
		`{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004},`+
		`{"carrier_id":"ghost","gateway_group":"no-such-group","rate":0.005}]}`)
	r := newLCR(t, lcrOpts{lcr: apiLCR(api, "")})
	c := r.call(dialed, "")
	inv := c.invite(r.a, dialed)
	// carrier-a's 503 has a phrase and a Reason (relayed on a carrier's
	// failure) of its own, to tell it from sipedge's.
	r.a.send(string(parser.AppendBody(append(parser.AppendResponse(nil, inv, 503, "Carrier Congested", []byte("btag9")),
		"Reason: Q.850;cause=34\r\n"...), "", nil)))
	r.a.expect("ACK "+string(inv.RequestURI())+" SIP/2.0", waitMsg)
	// A 500 here would be carrier-a's 503 forwarded (RFC 3261 16.7).
	m := c.final(503)
	if got := firstLine(string(m.Bytes())); got != "SIP/2.0 503 Service Unavailable" || m.Get(parser.HeaderReason) != nil {
		t.Errorf("caller got %q with Reason %q, want sipedge's own 503 Service Unavailable, nothing of carrier-a's:\n%s",
			got, hdr(m, parser.HeaderReason), m.Bytes())
	}
	r.b.expectNothing(quiet)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 503, "")
	checkFields(t, rec, map[string]any{"final_reason": "Service Unavailable"})
	checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""}, wantAttempt{"ghost", 503, false, "unknown_group"})
}

// TestLCRUnknownGroupUsesNextHop: a route naming a gateway_group sipedge
// does not know is warned of and dialled at its next_hop
// (docs/design/lcr.md 3.13). The API, since a static route is checked at
// start.
func TestLCRUnknownGroupUsesNextHop(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[]}`)
	r := newLCR(t, lcrOpts{lcr: apiLCR(api, "")})
	// carrier-b's socket, reached by its address alone.
	api.mu.Lock()
	api.body = fmt.Sprintf(`{"routes":[{"carrier_id":"hop","gateway_group":"no-such-group","next_hop":"sip:%s","rate":0.003}]}`, r.b.addr())
	api.mu.Unlock()
	c := r.call(dialed, "")
	inv := c.invite(r.b, dialed)
	r.a.expectNothing(0)
	c.answer(r.b, inv)
	c.bye(r.b)
	if len(logLines(r.logs.String(), "route names an unknown gateway_group", "level=WARN", "carrier=hop", "gateway_group=no-such-group")) != 1 {
		t.Error("the unknown gateway_group is not warned about")
	}

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"carrier_id": "hop", "rate": 0.003, "route_source": "lcr"})
	checkAttempts(t, rec)
}

// TestLCRRerouteCausesPrecedence: the reroute set is overridden at three
// levels, the most specific wins (docs/design/lcr.md 3.5): lcr.reroute_causes,
// gateway.groups[].reroute_causes, the route's reroute_causes. Here global
// [480, 503], carrier-a's group [404, 503], and carrier-b's group none.
func TestLCRRerouteCausesPrecedence(t *testing.T) {
	testtier.RequiresSockets(t)
	// rig has the global and carrier-a's group causes, over routes.
	rig := func(t *testing.T, routes ...string) *lcrRig {
		l := strings.Replace(staticLCR(routes...), "lcr:\n", "lcr:\n  reroute_causes: [480, 503]\n", 1)
		return newLCR(t, lcrOpts{lcr: l, groupA: "reroute_causes: [404, 503]"})
	}
	// failsOver: carrier p's code moves the call to carrier q, which
	// answers 486, forwarded.
	failsOver := func(t *testing.T, r *lcrRig, p, q *sipPeer, code int) {
		t.Helper()
		c := r.call(dialed, "")
		c.reject(p, c.invite(p, dialed), code, "Failed")
		c.reject(q, c.invite(q, dialed), 486, "Busy Here")
		c.final(486)
	}
	// forwarded: carrier p's code goes to the caller as it is; q is not tried.
	forwarded := func(t *testing.T, r *lcrRig, p, q *sipPeer, code int) {
		t.Helper()
		c := r.call(dialed, "")
		c.reject(p, c.invite(p, dialed), code, "Failed")
		c.final(code)
		q.expectNothing(quiet)
	}
	t.Run("route-over-group", func(t *testing.T) {
		a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, reroute_causes: [486] }`
		r := rig(t, a, yRouteB)
		failsOver(t, r, r.a, r.b, 486)
		forwarded(t, r, r.a, r.b, 404) // the group's, which the route overrides
	})
	t.Run("group-over-global", func(t *testing.T) {
		r := rig(t, yRouteA, yRouteB)
		failsOver(t, r, r.a, r.b, 404)
		forwarded(t, r, r.a, r.b, 480) // the global one's, which the group overrides
	})
	t.Run("global-over-default", func(t *testing.T) {
		// carrier-b first: its group sets no causes.
		b := `{ carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.001 }`
		r := rig(t, b, yRouteA)
		failsOver(t, r, r.b, r.a, 480)
		forwarded(t, r, r.b, r.a, 502) // a default cause, which the global set overrides
	})
}

// usNational is a number_policies: section with "us-national": US numbers
// without country code or national prefix.
const usNational = "number_policies:\n  - { name: us-national, format: national, country_code: \"1\" }"

// checkNumbers checks the numbers of a carrier's INVITE: the Request-URI
// and To user callee, the From and P-Asserted-Identity user caller.
func checkNumbers(t *testing.T, inv *parser.Message, callee, caller string) {
	t.Helper()
	var to, from parser.Address
	if err := inv.To(&to); err != nil {
		t.Fatalf("To: %v\n%s", err, inv.Bytes())
	}
	if err := inv.From(&from); err != nil {
		t.Fatalf("From: %v\n%s", err, inv.Bytes())
	}
	for _, h := range []struct{ name, uri, user string }{
		{"Request-URI", string(inv.RequestURI()), callee},
		{"To", string(to.URI), callee},
		{"From", string(from.URI), caller},
		{"P-Asserted-Identity", strings.Trim(hdr(inv, parser.HeaderPAssertedIdentity), "<>"), caller},
	} {
		if !strings.HasPrefix(h.uri, "sip:"+h.user+"@") {
			t.Errorf("%s %q, want user %s:\n%s", h.name, h.uri, h.user, inv.Bytes())
		}
	}
}

// TestLCRNationalNumberPolicy: a route's number_policy shapes the dialled
// number in the Request-URI and the identity headers (From, To, PAI)
// alike (docs/design/lcr.md 4.1).
func TestLCRNationalNumberPolicy(t *testing.T) {
	testtier.RequiresSockets(t)
	a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, number_policy: us-national }`
	r := newLCR(t, lcrOpts{lcr: staticLCR(a), extra: usNational})
	c := r.call("+12025550123", "")
	inv := c.invite(r.a, "2025550123")
	checkNumbers(t, inv, "2025550123", "3105550199")
	c.reject(r.a, inv, 486, "Busy Here")
	c.final(486)
}

// TestLCRUnknownNumberPolicyShapesNothing: a number policy name that is
// not configured shapes nothing and is logged with the carrier
// (docs/design/lcr.md 4.1) - not even by b2bua.default_number_policy. From the API,
// since a static route's is checked at start.
func TestLCRUnknownNumberPolicyShapesNothing(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,"number_policy":"no-such-policy"}]}`)
	r := newLCR(t, lcrOpts{lcr: apiLCR(api, ""), extra: usNational, b2bua: "default_number_policy: us-national"})
	c := r.call("+12025550123", "")
	inv := c.invite(r.a, "+12025550123")
	checkNumbers(t, inv, "+12025550123", callerNumber)
	c.reject(r.a, inv, 486, "Busy Here")
	c.final(486)
	if len(logLines(r.logs.String(), "unknown number_policy: the number is not shaped", "level=WARN",
		"carrier=carrier-a", "number_policy=no-such-policy")) == 0 {
		t.Error("the unknown number_policy is not warned about with the carrier")
	}
}

// TestLCRUnknownPresentationIsRestricted: a caller_id_presentation sipedge
// does not understand counts as restricted, because a withheld call going
// out with the real number is the failure that matters
// (docs/design/lcr.md 4.6); and caller_id, the number this carrier is
// presented on From and on P-Asserted-Identity (4.5), allowed by default.
// From the API, since a static route's presentation is checked at start.
func TestLCRUnknownPresentationIsRestricted(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Run("bogus", func(t *testing.T) {
		api := newLCRAPI(t, 200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,"caller_id_presentation":"bogus"}]}`)
		r := newLCR(t, lcrOpts{lcr: apiLCR(api, "")})
		c := r.call(dialed, "")
		inv := c.invite(r.a, dialed)
		checkCLIR(t, inv, callerNumber)
		c.reject(r.a, inv, 486, "Busy Here")
		c.final(486)
		if len(logLines(r.logs.String(), "unknown caller_id_presentation, treated as restricted", "level=WARN",
			"carrier=carrier-a", "presentation=bogus")) == 0 {
			t.Error("the unknown caller_id_presentation is not logged")
		}
	})
	t.Run("caller_id-allowed", func(t *testing.T) {
		api := newLCRAPI(t, 200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,`+
			`"caller_id":"+13105550100","caller_id_presentation":"allowed"}]}`)
		r := newLCR(t, lcrOpts{lcr: apiLCR(api, "")})
		c := r.call(dialed, "")
		inv := c.invite(r.a, dialed)
		checkNumbers(t, inv, dialed, "+13105550100")
		if p := hdr(inv, parser.HeaderPrivacy); strings.Contains(p, "id") {
			t.Errorf("Privacy %q on an allowed presentation", p)
		}
		if strings.Contains(string(inv.Bytes()), callerNumber) {
			t.Errorf("the caller's own number %s is still presented:\n%s", callerNumber, inv.Bytes())
		}
		c.reject(r.a, inv, 486, "Busy Here")
		c.final(486)
	})
}

// TestLCRAPIRejectAndEmptyRoutes: a decision's reject reaches the caller
// with its code and reason, and a decision without routes is 404 No Route
// (docs/design/lcr.md 2.2, docs/lcr-api.md: the default policy). No
// carrier is dialled either way.
func TestLCRAPIRejectAndEmptyRoutes(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, tt := range []struct{ name, body, status string }{
		{"reject", `{"reject":{"code":404,"reason":"Unallocated Number"}}`, "SIP/2.0 404 Unallocated Number"},
		{"empty-routes", `{"routes":[]}`, "SIP/2.0 404 No Route"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newLCRAPI(t, 200, tt.body)
			r := newLCR(t, lcrOpts{lcr: apiLCR(api, "fallback_gateway_group: carrier-b")})
			c := r.call(dialed, "")
			m := c.final(404)
			if got := firstLine(string(m.Bytes())); got != tt.status {
				t.Errorf("caller got %q, want %q", got, tt.status)
			}
			r.a.expectNothing(quiet)
			r.b.expectNothing(0) // an answer is not an API failure: no fallback
			rec := r.cdrOf(c.u.callID)
			checkCDR(t, rec, 404, "")
			checkFields(t, rec, map[string]any{"final_reason": strings.TrimPrefix(tt.status, "SIP/2.0 404 ")})
			checkAttempts(t, rec)
		})
	}
}

// TestLCRCDRFields: a route's cdr_fields are stamped onto the CDR when
// that carrier wins, with the winning carrier's carrier_id, rate and
// currency (docs/design/lcr.md 5), with the burned carriers as lcr_attempts. docs/lcr-api.md: the fields are
// flat top-level keys; one naming a built-in field is left out.
func TestLCRCDRFields(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[`+
		`{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.0042,"currency":"USD","cdr_fields":{"deck":"a-deck","a_only":"x"}},`+
		`{"carrier_id":"carrier-b","gateway_group":"carrier-b","rate":0.0051,"currency":"EUR",`+
		`"cdr_fields":{"deck":"b-deck","account":"acme-7","Carrier_ID":"spoof"}}]}`)
	r := newLCR(t, lcrOpts{lcr: apiLCR(api, "")})
	c := r.call(dialed, "")
	c.reject(r.a, c.invite(r.a, dialed), 503, "Service Unavailable")
	inv := c.invite(r.b, dialed)
	c.answer(r.b, inv)
	c.bye(r.b)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"deck": "b-deck", "account": "acme-7",
		"carrier_id": "carrier-b", "rate": 0.0051, "currency": "EUR", "route_source": "lcr"})
	for _, k := range []string{"a_only", "Carrier_ID", "cdr_fields"} {
		if v, ok := rec[k]; ok {
			t.Errorf("CDR has %s = %v: only the winner's cdr_fields, flat, none shadowing a built-in field", k, v)
		}
	}
	checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""})
}

// TestLCRBreakerOpensAfterConsecutiveFailures: docs/lcr-api.md, Circuit breaker:
// "After 5 consecutive failures ... sipedge stops asking for 5 seconds:
// every lookup that misses the cache fails at once, without waiting
// timeout_ms"; with the fallback group (lcr.fallback_gateway_group) used
// when the API is unreachable or times out (docs/design/lcr.md 2.5).
func TestLCRBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	testtier.RequiresSockets(t)
	const timeout = 200 * time.Millisecond
	api := newLCRAPI(t, 200, "")
	api.mu.Lock()
	api.wait = true // never answers
	api.mu.Unlock()
	r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: %d, fallback_gateway_group: carrier-b }",
		api.url(), timeout.Milliseconds())})
	// fallbackCall places a call carrier-b fails 486 and returns how long
	// after the caller's INVITE carrier-b got it.
	fallbackCall := func() time.Duration {
		t.Helper()
		c := r.call(dialed, "")
		inv := c.invite(r.b, dialed)
		d := time.Since(c.sentAt)
		c.reject(r.b, inv, 486, "Busy Here")
		c.final(486)
		return d
	}
	for i := range 5 {
		if d := fallbackCall(); d < timeout*3/4 {
			t.Fatalf("call %d: fallback after %v, before the API's timeout_ms", i+1, d)
		}
	}
	if got := r.metricWith("sipedge_lcr_breaker_state", ""); got != 1 {
		t.Errorf("sipedge_lcr_breaker_state %v after 5 timeouts, want 1 (open)", got)
	}
	for i := range 3 {
		if d := fallbackCall(); d > timeout/2 {
			t.Errorf("call %d with the breaker open: fallback after %v, want at once", 6+i, d)
		}
	}
	r.a.expectNothing(0)
	if n := api.hits.Load(); n != 5 {
		t.Errorf("%d API requests, want 5 (none once the breaker opened)", n)
	}
	if n := r.metricWith("sipedge_lcr_api_failures_total", `kind="breaker_open"`); n != 3 {
		t.Errorf(`sipedge_lcr_api_failures_total{kind="breaker_open"} %v, want 3`, n)
	}
	if n := r.metricWith("sipedge_lcr_fallbacks_total", ""); n != 8 {
		t.Errorf("sipedge_lcr_fallbacks_total %v, want 8", n)
	}
}

// TestLCRFinalFailureAfterProgressFailsOver: a final failure after
// progress (a 503, say) still fails over; only the timeout changes with
// progress (docs/design/lcr.md 3.6).
func TestLCRFinalFailureAfterProgressFailsOver(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	respond(r.a, inv1, 180, "Ringing", "")
	r.caller.expect("SIP/2.0 180 Ringing", waitMsg)
	c.reject(r.a, inv1, 503, "Service Unavailable")
	inv2 := c.invite(r.b, dialed)
	c.answer(r.b, inv2)
	c.bye(r.b)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"carrier_id": "carrier-b"})
	checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""})
}

// TestLCRRetransmittedInviteNotRequeried: a caller's INVITE retransmitted
// while its routing lookup is in flight is absorbed by its server
// transaction (RFC 3261 17.2.1: the 100 Trying again), not a second call:
// the API is asked once (it is on the call-setup path, docs/design/lcr.md
// 2.4), the carrier gets one INVITE, the CDR has one record.
func TestLCRRetransmittedInviteNotRequeried(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004}]}`)
	api.mu.Lock()
	api.delay = 400 * time.Millisecond
	api.mu.Unlock()
	r := newLCR(t, lcrOpts{lcr: apiLCR(api, "")}) // no cache: a second call would ask again
	c := r.call(dialed, "")
	for range 2 {
		time.Sleep(100 * time.Millisecond)
		r.caller.send(c.fix(c.u.invite())) // the same INVITE, same branch
		r.caller.expect("SIP/2.0 100 Trying", waitMsg)
	}
	inv := c.invite(r.a, dialed)
	c.reject(r.a, inv, 486, "Busy Here")
	c.final(486)
	r.a.expectNothing(quiet)
	r.caller.expectNothing(0)
	if n := api.hits.Load(); n != 1 {
		t.Errorf("%d API requests, want 1", n)
	}
	if recs := r.cdrs(); len(recs) != 1 {
		t.Errorf("%d CDRs, want 1: %v", len(recs), recs)
	}
}
