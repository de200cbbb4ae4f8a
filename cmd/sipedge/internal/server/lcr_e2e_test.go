package server

import (
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/ratelimit/redistest"
	"github.com/sipedge/sipedge/route/lcr"
)

// LCR end-to-end tests, one per rule of docs/design/lcr.md: sequential
// failover and ring-out (3), caching and fallback (2.4, 2.5), presented
// number and CLIR (4.5, 4.6): a scripted caller and two scripted carriers
// (carrier-a, carrier-b: two UDP sockets, two gateway groups) around a real
// Server over loopback, the routing API a real HTTP server, the shared
// cache tier a real redis-server. See lcr_e2e_helpers_test.go.

// TestLCR503ThenAnswer: a carrier's 503 fails over to the next carrier on a
// fresh B-leg dialog, nothing reaching the caller in between; the A-leg
// Call-ID is stable and the CDR records the burned carrier.
func TestLCR503ThenAnswer(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	c.reject(r.a, inv1, 503, "Service Unavailable")
	inv2 := c.invite(r.b, dialed) // checks the fresh dialog
	r.caller.expectNothing(100 * time.Millisecond)
	respond(r.b, inv2, 180, "Ringing", "")
	r.caller.expect("SIP/2.0 180 Ringing", waitMsg)
	c.answer(r.b, inv2)
	c.bye(r.b)
	r.a.expectNothing(0)
	// Attempts per carrier and outcome, for trending carrier quality.
	if got := r.metricWith("sipedge_lcr_attempts_total", `carrier="carrier-a",code="503",dialed="true"`); got != 1 {
		t.Errorf("carrier-a 503 attempts metric %v, want 1", got)
	}
	if got := r.metricWith("sipedge_lcr_attempts_total", `carrier="carrier-b",code="200",dialed="true"`); got != 1 {
		t.Errorf("carrier-b answers metric %v, want 1", got)
	}

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"carrier_id": "carrier-b", "rate": 0.005, "currency": "USD",
		"route_source": "static", "b_call_id": hdr(inv2, parser.HeaderCallID)})
	checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""})
}

// TestLCRCarrierQualityTimes: each carrier's post-dial delay, setup time
// and call duration are histograms per carrier (PDD, AST, ACD as
// docs/design/quality.md defines them),
// measured from the carrier's own INVITE: a carrier that rang and failed
// has a PDD and nothing else; the one that answered all three.
func TestLCRCarrierQualityTimes(t *testing.T) {
	testtier.RequiresSockets(t)
	const step = 200 * time.Millisecond
	r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
	c := r.call(dialed, "")
	// carrier-a is slow to ring, and rings a while: what carrier-b's times
	// would wrongly include if they counted from the call's INVITE or its
	// first provisional.
	inv1 := c.invite(r.a, dialed)
	respond(r.a, inv1, 100, "Trying", "") // no progress, and no retransmission
	time.Sleep(3 * step)
	respond(r.a, inv1, 183, "Session Progress", "")
	r.caller.expect("SIP/2.0 183 Session Progress", waitMsg)
	time.Sleep(2 * step)
	c.reject(r.a, inv1, 503, "Service Unavailable")
	inv2 := c.invite(r.b, dialed)
	time.Sleep(step)
	respond(r.b, inv2, 180, "Ringing", "")
	r.caller.expect("SIP/2.0 180 Ringing", waitMsg)
	time.Sleep(step)
	c.answer(r.b, inv2)
	time.Sleep(step)
	c.bye(r.b)
	// The call ends once the carrier's 200 for the BYE is in.
	for end := time.Now().Add(waitMsg); r.metricWith("sipedge_lcr_call_duration_seconds_count", "") == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}

	// The sleeps bound each time from below; from above, max leaves a
	// loaded machine's delays some slack but stays below what a time
	// counted from the wrong message would be.
	for _, w := range []struct {
		name, carrier string
		count         float64
		min, max      time.Duration
	}{
		{"sipedge_lcr_pdd_seconds", "carrier-a", 1, 3 * step, 5 * step},
		{"sipedge_lcr_setup_seconds", "carrier-a", 0, 0, 0},
		{"sipedge_lcr_call_duration_seconds", "carrier-a", 0, 0, 0},
		{"sipedge_lcr_pdd_seconds", "carrier-b", 1, step, 5 * step / 2},
		{"sipedge_lcr_setup_seconds", "carrier-b", 1, 2 * step, 4 * step},
		{"sipedge_lcr_call_duration_seconds", "carrier-b", 1, step, 3 * step},
	} {
		label := fmt.Sprintf("carrier=%q", w.carrier)
		if got := r.metricWith(w.name+"_count", label); got != w.count {
			t.Errorf("%s_count{%s} = %v, want %v", w.name, label, got, w.count)
		}
		sum := time.Duration(r.metricWith(w.name+"_sum", label) * float64(time.Second))
		if sum < w.min || sum > w.max {
			t.Errorf("%s_sum{%s} = %v, want %v to %v", w.name, label, sum, w.min, w.max)
		}
	}
}

// TestLCR486ForwardedWithoutFailover: a non-reroute cause (486) is
// forwarded to the caller as is; the next carrier is not tried.
func TestLCR486ForwardedWithoutFailover(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	c.reject(r.a, inv1, 486, "Busy Here")
	c.final(486)
	r.b.expectNothing(quiet)
	r.caller.expectNothing(0)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 486, "")
	checkAttempts(t, rec, wantAttempt{"carrier-a", 486, true, ""})
}

// TestLCR6xxStops: a 6xx stops the sequence (RFC 3261 16.7), even on a
// route whose reroute_causes name it.
func TestLCR6xxStops(t *testing.T) {
	testtier.RequiresSockets(t)
	a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, reroute_causes: [503, 603] }`
	r := newLCR(t, lcrOpts{lcr: staticLCR(a, yRouteB)})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	c.reject(r.a, inv1, 603, "Decline")
	c.final(603)
	r.b.expectNothing(quiet)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 603, "")
	checkAttempts(t, rec, wantAttempt{"carrier-a", 603, true, ""})
}

// TestLCRNoProgressInTimeoutFailsOver: a carrier that shows no progress
// (a 100 Trying is none) within its timeout_secs is CANCELled and the next
// carrier dialled; the attempt is a 408.
func TestLCRNoProgressInTimeoutFailsOver(t *testing.T) {
	testtier.RequiresSockets(t)
	a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: 1 }`
	r := newLCR(t, lcrOpts{lcr: staticLCR(a, yRouteB)})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	respond(r.a, inv1, 100, "Trying", "") // hop by hop: not progress
	at := c.cancelled(r.a, inv1, 3*time.Second)
	if d := at.Sub(c.sentAt); d < 900*time.Millisecond || d > 1600*time.Millisecond {
		t.Errorf("carrier-a CANCELled %v after the INVITE, want about timeout_secs (1 s)", d)
	}
	inv2 := c.invite(r.b, dialed)
	c.answer(r.b, inv2)
	c.bye(r.b)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"carrier_id": "carrier-b"})
	got := checkAttempts(t, rec, wantAttempt{"carrier-a", 408, true, "ring_timeout"})
	if ms := elapsedMs(got[0]); ms < 900 || ms > 1600 {
		t.Errorf("carrier-a elapsed_ms %d, want about 1000", ms)
	}
}

// TestLCRProgressThenRingOut408: a carrier that rang keeps the call past its
// timeout_secs until the sequence's ring bound (from its dial); then it is
// CANCELled and the caller gets 408 without the rest being tried.
func TestLCRProgressThenRingOut408(t *testing.T) {
	testtier.RequiresSockets(t)
	a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: 1 }`
	r := newLCR(t, lcrOpts{lcr: staticLCR(a, yRouteB), b2bua: "ring_timeout_secs: 2"})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	respond(r.a, inv1, 180, "Ringing", "")
	r.caller.expect("SIP/2.0 180 Ringing", waitMsg)
	at := c.cancelled(r.a, inv1, 4*time.Second)
	if d := at.Sub(c.sentAt); d < 1800*time.Millisecond || d > 2600*time.Millisecond {
		t.Errorf("carrier-a CANCELled %v after the INVITE, want about the ring bound (2 s), not timeout_secs (1 s)", d)
	}
	c.final(408)
	r.b.expectNothing(quiet)
	r.caller.expectNothing(0)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 408, "")
	got := checkAttempts(t, rec, wantAttempt{"carrier-a", 408, true, "ring_timeout"})
	if ms := elapsedMs(got[0]); ms < 1800 || ms > 2600 {
		t.Errorf("carrier-a elapsed_ms %d, want about 2000", ms)
	}
}

// TestLCRRerouteAfterProgress: a route with reroute_after_progress fails
// over at timeout_secs although the carrier sent a 183.
func TestLCRRerouteAfterProgress(t *testing.T) {
	testtier.RequiresSockets(t)
	a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: 1, reroute_after_progress: true }`
	r := newLCR(t, lcrOpts{lcr: staticLCR(a, yRouteB), b2bua: "ring_timeout_secs: 10"})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	respond(r.a, inv1, 183, "Session Progress", carrierSDP)
	r.caller.expect("SIP/2.0 183 Session Progress", waitMsg)
	at := c.cancelled(r.a, inv1, 3*time.Second)
	if d := at.Sub(c.sentAt); d < 900*time.Millisecond || d > 1600*time.Millisecond {
		t.Errorf("carrier-a CANCELled %v after the INVITE, want about timeout_secs (1 s)", d)
	}
	inv2 := c.invite(r.b, dialed)
	c.answer(r.b, inv2) // the cancelled carrier's 487 never reaches the caller
	c.bye(r.b)
	r.caller.expectNothing(0)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkFields(t, rec, map[string]any{"carrier_id": "carrier-b"})
	checkAttempts(t, rec, wantAttempt{"carrier-a", 408, true, "ring_timeout"})
}

// TestLCRBestFailure408Over503: the caller gets the best of the carriers'
// failures (RFC 3261 16.7), not the last: a 408 outranks a 503, whichever
// came first.
func TestLCRBestFailure408Over503(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Run("ring-out-then-503", func(t *testing.T) {
		a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: 1 }`
		r := newLCR(t, lcrOpts{lcr: staticLCR(a, yRouteB)})
		c := r.call(dialed, "")
		inv1 := c.invite(r.a, dialed)
		respond(r.a, inv1, 100, "Trying", "")
		c.cancelled(r.a, inv1, 3*time.Second)
		inv2 := c.invite(r.b, dialed)
		c.reject(r.b, inv2, 503, "Service Unavailable")
		c.final(408)
		rec := r.cdrOf(c.u.callID)
		checkCDR(t, rec, 408, "")
		checkAttempts(t, rec, wantAttempt{"carrier-a", 408, true, "ring_timeout"}, wantAttempt{"carrier-b", 503, true, ""})
	})
	t.Run("503-then-408", func(t *testing.T) {
		r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
		c := r.call(dialed, "")
		inv1 := c.invite(r.a, dialed)
		c.reject(r.a, inv1, 503, "Service Unavailable")
		inv2 := c.invite(r.b, dialed)
		c.reject(r.b, inv2, 408, "Request Timeout")
		c.final(408)
		rec := r.cdrOf(c.u.callID)
		checkCDR(t, rec, 408, "")
		checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""}, wantAttempt{"carrier-b", 408, true, ""})
	})
}

// TestLCRCarrier503ReachesCallerAs500: when the best failure is a carrier's
// 503, the caller gets 500 (RFC 3261 16.7 step 6), not the carrier's 503.
func TestLCRCarrier503ReachesCallerAs500(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	c.reject(r.a, inv1, 503, "Service Unavailable")
	inv2 := c.invite(r.b, dialed)
	c.reject(r.b, inv2, 503, "Service Unavailable")
	c.final(500)
	r.caller.expectNothing(quiet)

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 500, "")
	checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""}, wantAttempt{"carrier-b", 503, true, ""})
}

// TestLCRUndialableSkippedWithoutWaiting: a carrier sipedge cannot dial (an
// unknown gateway group without next_hop; a group with no member to dial; a
// next hop that does not resolve) is skipped at once, recorded dialed:false
// status 503, and logged at info.
func TestLCRUndialableSkippedWithoutWaiting(t *testing.T) {
	testtier.RequiresSockets(t)
	check := func(t *testing.T, r *lcrRig, reason, source string) {
		t.Helper()
		c := r.call(dialed, "")
		inv2 := c.invite(r.b, dialed)
		if d := time.Since(c.sentAt); d > 100*time.Millisecond {
			t.Errorf("carrier-b dialled %v after the caller's INVITE, want at once (< 100 ms)", d)
		}
		r.a.expectNothing(0)
		c.answer(r.b, inv2)
		c.bye(r.b)
		if !strings.Contains(r.logs.String(), "carrier burned without dialling") {
			t.Error(`no "carrier burned without dialling" log line`)
		}
		rec := r.cdrOf(c.u.callID)
		checkCDR(t, rec, 200, "caller")
		checkFields(t, rec, map[string]any{"carrier_id": "carrier-b", "route_source": source})
		got := checkAttempts(t, rec, wantAttempt{"ghost", 503, false, reason})
		if ms := elapsedMs(got[0]); ms != 0 {
			t.Errorf("undialled carrier elapsed_ms %d, want 0", ms)
		}
	}
	t.Run("unknown-group-from-api", func(t *testing.T) {
		api := newLCRAPI(t, 200, `{"routes":[`+
			`{"carrier_id":"ghost","gateway_group":"no-such-group","rate":0.001,"timeout_secs":5},`+
			`{"carrier_id":"carrier-b","gateway_group":"carrier-b","rate":0.005}]}`)
		r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url())})
		// Every call names it: the warning comes once a minute per shard
		// (the rig runs two), not once a call.
		for range 5 {
			c := r.call(dialed, "")
			inv := c.invite(r.b, dialed)
			c.answer(r.b, inv)
			c.bye(r.b)
		}
		check(t, r, "unknown_group", "lcr")
		if !strings.Contains(r.logs.String(), "level=WARN") || !strings.Contains(r.logs.String(), "no-such-group") {
			t.Error("an unknown gateway_group is not warned about")
		}
		if n := strings.Count(r.logs.String(), "route names an unknown gateway_group"); n > 2 {
			t.Errorf("%d warnings for 6 calls, want at most one per shard", n)
		}
	})
	t.Run("group-down", func(t *testing.T) {
		// carrier-a's only member answers 503 with Retry-After: it is in
		// cooldown, so its group has no member to dial for the next call.
		r := newLCR(t, lcrOpts{lcr: staticLCR(yRouteA, yRouteB)})
		c := r.call(dialed, "")
		inv1 := c.invite(r.a, dialed)
		r.a.send(string(parser.AppendBody(append(parser.AppendResponse(nil, inv1, 503, "Service Unavailable", []byte("btag9")),
			"Retry-After: 60\r\n"...), "", nil)))
		r.a.expect("ACK "+string(inv1.RequestURI())+" SIP/2.0", waitMsg)
		inv2 := c.invite(r.b, dialed)
		c.reject(r.b, inv2, 486, "Busy Here")
		c.final(486)

		c = r.call(dialed, "")
		inv2 = c.invite(r.b, dialed)
		if d := time.Since(c.sentAt); d > 100*time.Millisecond {
			t.Errorf("carrier-b dialled %v after the caller's INVITE, want at once (< 100 ms)", d)
		}
		r.a.expectNothing(0)
		c.answer(r.b, inv2)
		c.bye(r.b)
		if !strings.Contains(r.logs.String(), "carrier burned without dialling") {
			t.Error(`no "carrier burned without dialling" log line`)
		}
		rec := r.cdrOf(c.u.callID)
		checkCDR(t, rec, 200, "caller")
		checkFields(t, rec, map[string]any{"carrier_id": "carrier-b", "route_source": "static"})
		got := checkAttempts(t, rec, wantAttempt{"carrier-a", 503, false, "group_down"})
		if ms := elapsedMs(got[0]); ms != 0 {
			t.Errorf("undialled carrier elapsed_ms %d, want 0", ms)
		}
	})
	t.Run("unresolvable-next-hop-from-api", func(t *testing.T) {
		// A name in next_hop: no DNS on a call's path (the static table
		// refuses one at start).
		api := newLCRAPI(t, 200, `{"routes":[`+
			`{"carrier_id":"ghost","next_hop":"sip:gw.example.invalid:5060","rate":0.001,"timeout_secs":5},`+
			`{"carrier_id":"carrier-b","gateway_group":"carrier-b","rate":0.005}]}`)
		r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url())})
		check(t, r, "unresolvable", "lcr")
	})
}

// lcrCacheRoutes is the route of the cache tests' API answers.
const lcrCacheRoutes = `{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,"currency":"USD"}`

// lcrBusyCall places a call that carrier-a answers 486.
func lcrBusyCall(t *testing.T, r *lcrRig) {
	t.Helper()
	c := r.call(dialed, "")
	inv := c.invite(r.a, dialed)
	c.reject(r.a, inv, 486, "Busy Here")
	c.final(486)
	r.b.expectNothing(0)
}

// TestLCRCacheHitAvoidsAPI: a decision with a cache TTL is reused for the
// same trunk_group:dialed_number without asking the API again: in process,
// and through Redis by another node.
func TestLCRCacheHitAvoidsAPI(t *testing.T) {
	testtier.RequiresSockets(t)
	t.Run("in-process", func(t *testing.T) {
		api := newLCRAPI(t, 200, `{"routes":[`+lcrCacheRoutes+`]}`) // TTL: lcr.cache_ttl_secs
		r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, cache_ttl_secs: 60 }", api.url())})
		lcrBusyCall(t, r)
		lcrBusyCall(t, r)
		if n := api.hits.Load(); n != 1 {
			t.Errorf("%d API requests for two calls to one number, want 1 (the second from the cache)", n)
		}
		if n := r.metricWith("sipedge_lcr_cache_hits_total", `tier="local"`); n != 1 {
			t.Errorf(`sipedge_lcr_cache_hits_total{tier="local"} %v, want 1`, n)
		}
		if reqs := api.requests(); len(reqs) > 0 {
			q := reqs[0]
			if q.Version != lcr.APIVersion || q.DialedNumber != dialed || q.Source.TrunkGroup != "cust-trunks" ||
				q.Source.Transport != "udp" || q.Source.IP != "127.0.0.1" {
				t.Errorf("API request %+v", q)
			}
			// The contract: to is the To URI, source.port the INVITE's source port.
			if !strings.HasPrefix(q.To, "sip:"+dialed+"@") || q.Source.Port != int(r.caller.addr().Port()) {
				t.Errorf("API request to %q source port %d, want the To URI and %d", q.To, q.Source.Port, r.caller.addr().Port())
			}
		}
		for _, rec := range r.cdrs() {
			checkFields(t, rec, map[string]any{"route_source": "lcr", "carrier_id": "carrier-a", "rate": 0.004})
		}
	})
	t.Run("ttl-0-not-cached", func(t *testing.T) {
		api := newLCRAPI(t, 200, `{"routes":[`+lcrCacheRoutes+`],"cache_ttl_secs":0}`)
		r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, cache_ttl_secs: 60 }", api.url())})
		lcrBusyCall(t, r)
		lcrBusyCall(t, r)
		if n := api.hits.Load(); n != 2 {
			t.Errorf("%d API requests for two calls with cache_ttl_secs 0, want 2", n)
		}
	})
	t.Run("redis-shared-by-two-nodes", func(t *testing.T) {
		redis := redistest.Start(t)
		lcrSharedByTwoNodes(t, redis.URL(), func(string) *redistest.Server { return redis })
	})
}

// TestLCRTrunkAttributes: a trunk's attributes (trunks[].attributes) are the
// API request's attributes for its calls, and those lcr.attributes names
// are part of the cache key: trunks that differ in a keyed attribute do
// not share a cached decision, trunks equal in every keyed one do.
func TestLCRTrunkAttributes(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[`+lcrCacheRoutes+`],"cache_ttl_secs":60}`)
	r := newLCR(t, lcrOpts{
		lcr: fmt.Sprintf("lcr: { api_url: %q, attributes: [customer, tier] }", api.url()),
		trunks: `  - { name: acme-eu, trunk_group: cust-trunks, sources: ["127.0.0.1/32"], attributes: { customer: acme, region: eu } }
  - { name: acme-us, trunk_group: cust-trunks, sources: ["127.0.0.2/32"], attributes: { customer: acme, region: us } }
  - { name: globex, trunk_group: cust-trunks, sources: ["127.0.0.3/32"], attributes: { customer: globex } }
  - { name: plain, trunk_group: cust-trunks, sources: ["127.0.0.4/32"] }`,
	})
	callers := map[string]*sipPeer{"acme-eu": r.caller}
	for name, ip := range map[string]string{"acme-us": "127.0.0.2", "globex": "127.0.0.3", "plain": "127.0.0.4"} {
		callers[name] = newUDPPeer(t, name, ip, r.sip)
		callers[name].forbid(carrierSecrets...)
	}
	for _, step := range []struct {
		trunk string
		hits  int64             // API requests so far
		attrs map[string]string // the last request's attributes
	}{
		{"acme-eu", 1, map[string]string{"customer": "acme", "region": "eu"}},
		{"acme-us", 1, nil}, // region is not keyed: acme-eu's decision
		{"globex", 2, map[string]string{"customer": "globex"}},
		{"plain", 3, nil},  // keyed customer= and tier=, sent no attributes
		{"globex", 3, nil}, // its own cached decision
	} {
		r.caller = callers[step.trunk]
		lcrBusyCall(t, r)
		if n := api.hits.Load(); n != step.hits {
			t.Fatalf("after a call from %s: %d API requests, want %d", step.trunk, n, step.hits)
		}
		reqs := api.requests()
		if last := reqs[len(reqs)-1]; step.attrs != nil && !reflect.DeepEqual(last.Attributes, step.attrs) {
			t.Errorf("call from %s: API request attributes %v, want %v", step.trunk, last.Attributes, step.attrs)
		}
	}
	if last := api.requests()[2]; last.Attributes != nil {
		t.Errorf("call from a trunk without attributes: API request attributes %v, want none", last.Attributes)
	}
	if n := r.metricWith("sipedge_lcr_cache_hits_total", `tier="local"`); n != 2 {
		t.Errorf(`sipedge_lcr_cache_hits_total{tier="local"} %v, want 2`, n)
	}
}

// lcrSharedByTwoNodes: a decision one node got from the API is stored in
// the Redis at url (on the server owner says holds a key) and used by a
// second node without asking the API.
func lcrSharedByTwoNodes(t *testing.T, url string, owner func(key string) *redistest.Server) {
	t.Helper()
	// A node's first Redis calls set up its connections (to a Cluster, the
	// topology and the key's node too): under -race on a loaded machine
	// they can take longer than lcr's 50 ms deadline, and a missed one
	// (correctly) marks the tier down, so that node 1 never stored the
	// decision. What is tested here is the sharing, not the deadline: as in
	// route/lcr's tests, each call has 1 s.
	old := lcrRedisDeadline
	lcrRedisDeadline = time.Second
	t.Cleanup(func() { lcrRedisDeadline = old })
	api := newLCRAPI(t, 200, `{"routes":[`+lcrCacheRoutes+`],"cache_ttl_secs":60}`)
	o := lcrOpts{
		lcr:   fmt.Sprintf("lcr: { api_url: %q, cache: lcr }", api.url()),
		extra: fmt.Sprintf("cache:\n  - { name: lcr, url: %q, local_ttl_secs: 60 }", url),
	}
	node1 := newLCR(t, o)
	lcrBusyCall(t, node1)
	if n := api.hits.Load(); n != 1 {
		t.Fatalf("node 1: %d API requests, want 1", n)
	}
	// The decision is stored in Redis after the call got it: wait for it.
	key := lcr.RedisKeyPrefix + "cust-trunks:" + dialed
	redis := owner(key)
	deadline := time.Now().Add(2 * time.Second)
	for {
		reply, err := redis.Do("EXISTS " + key)
		if err == nil && reply == ":1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 did not store the decision in Redis under %q (EXISTS: %q %v)", key, reply, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	node2 := newLCR(t, o)
	lcrBusyCall(t, node2)
	if n := api.hits.Load(); n != 1 {
		t.Errorf("%d API requests after a call on a second node sharing Redis, want 1 (the decision from Redis)", n)
	}
	if n := node2.metricWith("sipedge_lcr_cache_hits_total", `tier="redis"`); n != 1 {
		t.Errorf(`node 2: sipedge_lcr_cache_hits_total{tier="redis"} %v, want 1`, n)
	}
	for _, rec := range node2.cdrs() {
		checkFields(t, rec, map[string]any{"route_source": "lcr", "carrier_id": "carrier-a"})
	}
}

// TestLCRCacheRedisCluster: cache[].url and ratelimit.redis on a real Redis
// Cluster: the decision cache is shared by two nodes through it, and a
// database other than 0 fails New with the field and the reason.
func TestLCRCacheRedisCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	c := redistest.StartCluster(t, 3)
	t.Run("shared-by-two-nodes", func(t *testing.T) {
		lcrSharedByTwoNodes(t, c.URL(), c.Owner)
	})
	t.Run("database", func(t *testing.T) {
		url := c.Nodes[0].URL() + "/1" // one seed: only the server tells it is a Cluster
		for _, tt := range []struct{ yaml, want string }{
			{fmt.Sprintf("lcr: { api_url: \"http://127.0.0.1:9/route\", cache: lcr }\ncache:\n  - { name: lcr, url: %q }", url), "cache[0].url: "},
			{fmt.Sprintf("ratelimit: { redis: %q }", url), "ratelimit.redis: "},
		} {
			cfg, err := config.Parse([]byte(tt.yaml), nil)
			if err != nil {
				t.Fatalf("config: %v\n%s", err, tt.yaml)
			}
			_, err = New(cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatalf("New succeeded with %s", tt.yaml)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tt.want) || !strings.Contains(msg, "database 1: "+c.Nodes[0].Addr()+" is a Redis Cluster, which has only database 0") {
				t.Errorf("New: %v, want %q and that a Redis Cluster has only database 0", err, tt.want)
			}
		}
	})
}

// TestLCRAPIDownUsesFallback: when the API is unreachable, answers 5xx or
// times out, the call goes to lcr.fallback_gateway_group; without one the
// caller gets 503.
func TestLCRAPIDownUsesFallback(t *testing.T) {
	testtier.RequiresSockets(t)
	fallback := func(t *testing.T, apiURL, timeoutMs string, minDelay time.Duration) {
		t.Helper()
		r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: %s, fallback_gateway_group: carrier-b }", apiURL, timeoutMs)})
		c := r.call(dialed, "")
		inv := c.invite(r.b, dialed)
		if d := time.Since(c.sentAt); d < minDelay {
			t.Errorf("fallback dialled after %v, before the API timeout %v", d, minDelay)
		}
		r.a.expectNothing(0)
		c.answer(r.b, inv)
		c.bye(r.b)
		if n := r.metricWith("sipedge_lcr_fallbacks_total", ""); n != 1 {
			t.Errorf("sipedge_lcr_fallbacks_total %v, want 1", n)
		}
		rec := r.cdrOf(c.u.callID)
		checkCDR(t, rec, 200, "caller")
		checkFields(t, rec, map[string]any{"route_source": "fallback", "carrier_id": lcr.FallbackCarrierID})
	}
	t.Run("unreachable", func(t *testing.T) { fallback(t, closedURL(t), "1000", 0) })
	t.Run("5xx", func(t *testing.T) {
		api := newLCRAPI(t, 500, `{"error":"down"}`)
		fallback(t, api.url(), "1000", 0)
		if n := api.hits.Load(); n != 1 {
			t.Errorf("%d API requests, want 1", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		api := newLCRAPI(t, 200, "")
		api.mu.Lock()
		api.wait = true // never answers
		api.mu.Unlock()
		fallback(t, api.url(), "300", 250*time.Millisecond)
	})
	t.Run("invalid-json", func(t *testing.T) {
		api := newLCRAPI(t, 200, `{"routes":[{"gateway_group":"carrier-a"}]}`) // no carrier_id
		fallback(t, api.url(), "1000", 0)
	})
	t.Run("no-fallback-503", func(t *testing.T) {
		r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", closedURL(t))})
		c := r.call(dialed, "")
		c.final(503)
		r.a.expectNothing(quiet)
		r.b.expectNothing(0)
		rec := r.cdrOf(c.u.callID)
		checkCDR(t, rec, 503, "")
		checkAttempts(t, rec)
	})
}

// checkCLIR checks the four CLIR changes (docs/design/lcr.md 4.6) on a
// carrier's INVITE m:
// anonymous From with its tag, Privacy: id, a P-Asserted-Identity with pai,
// no P-Preferred-Identity; and that the caller's own number does not leak
// unless it is pai.
func checkCLIR(t *testing.T, m *parser.Message, pai string) {
	t.Helper()
	var from parser.Address
	if err := m.From(&from); err != nil {
		t.Fatalf("From: %v\n%s", err, m.Bytes())
	}
	if string(from.Display) != "Anonymous" || string(from.URI) != "sip:anonymous@anonymous.invalid" || len(from.Tag) == 0 {
		t.Errorf("From %q, want \"Anonymous\" <sip:anonymous@anonymous.invalid> with a tag:\n%s", hdr(m, parser.HeaderFrom), m.Bytes())
	}
	hasID := false
	for _, v := range strings.Split(hdr(m, parser.HeaderPrivacy), ";") {
		hasID = hasID || strings.TrimSpace(v) == "id"
	}
	if !hasID {
		t.Errorf("Privacy %q, want it to contain id:\n%s", hdr(m, parser.HeaderPrivacy), m.Bytes())
	}
	if got := hdr(m, parser.HeaderPAssertedIdentity); !strings.Contains(got, "sip:"+pai+"@") {
		t.Errorf("P-Asserted-Identity %q, want the real identity %s:\n%s", got, pai, m.Bytes())
	}
	if m.Get(parser.HeaderPPreferredIdentity) != nil {
		t.Errorf("P-Preferred-Identity forwarded past the privacy boundary:\n%s", m.Bytes())
	}
	if strings.Contains(string(m.Bytes()), callerNumber) && pai != callerNumber {
		t.Errorf("the caller's own number %s leaks on a restricted route:\n%s", callerNumber, m.Bytes())
	}
}

// TestLCRCLIRHeaders: caller_id_presentation: restricted does its four
// things together (docs/design/lcr.md 4.6) on that carrier's INVITE (anonymous From with its
// tag, Privacy: id, a P-Asserted-Identity with the presented caller_id, no
// P-Preferred-Identity); a failover to a route that does not say so is not
// anonymised.
func TestLCRCLIRHeaders(t *testing.T) {
	testtier.RequiresSockets(t)
	const ppi = "P-Preferred-Identity: <sip:+13105550777@10.9.9.9>\r\n"
	t.Run("caller_id-restricted-then-failover", func(t *testing.T) {
		a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, caller_id: "+13105550100", caller_id_presentation: restricted }`
		r := newLCR(t, lcrOpts{lcr: staticLCR(a, yRouteB)})
		// The caller asks for no privacy (a Privacy: id, user or header
		// would be honoured as CLIR on every route).
		c := r.call(dialed, ppi+"Privacy: none\r\n")
		inv1 := c.invite(r.a, dialed)
		checkCLIR(t, inv1, "+13105550100")
		c.reject(r.a, inv1, 503, "Service Unavailable")
		// carrier-b's route says nothing: the call is not anonymised there.
		inv2 := c.invite(r.b, dialed)
		var from parser.Address
		inv2.From(&from)
		if !strings.HasPrefix(string(from.URI), "sip:"+callerNumber+"@") {
			t.Errorf("carrier-b From %q, want the caller's number (presentation is per route):\n%s", from.URI, inv2.Bytes())
		}
		if strings.Contains(hdr(inv2, parser.HeaderPrivacy), "id") {
			t.Errorf("carrier-b Privacy %q: carrier-a's CLIR carried across", hdr(inv2, parser.HeaderPrivacy))
		}
		c.reject(r.b, inv2, 486, "Busy Here")
		c.final(486)
	})
	t.Run("restricted-without-caller_id", func(t *testing.T) {
		a := `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, caller_id_presentation: restricted }`
		r := newLCR(t, lcrOpts{lcr: staticLCR(a)})
		c := r.call(dialed, ppi)
		inv := c.invite(r.a, dialed)
		checkCLIR(t, inv, callerNumber) // the PAI carries the caller's own identity
		c.reject(r.a, inv, 486, "Busy Here")
		c.final(486)
	})
}

// TestLCRTechPrefixNotInTo: a route's tech_prefix goes on the Request-URI
// user only, after the number policy; never on To.
func TestLCRTechPrefixNotInTo(t *testing.T) {
	testtier.RequiresSockets(t)
	const number = "12025550123"
	run := func(t *testing.T, route, extra, ruriUser, toUser string) {
		t.Helper()
		r := newLCR(t, lcrOpts{lcr: staticLCR(route), extra: extra})
		c := r.call(number, "")
		inv := c.invite(r.a, "")
		if got, want := string(inv.RequestURI()), fmt.Sprintf("sip:%s@127.0.0.1:%d", ruriUser, r.a.addr().Port()); got != want {
			t.Errorf("Request-URI %q, want %q (tech_prefix on the user after the number policy)", got, want)
		}
		want := fmt.Sprintf("<sip:%s@127.0.0.1:%d>", toUser, r.a.addr().Port())
		if to := hdr(inv, parser.HeaderTo); to != want || strings.Contains(to, "1010288") {
			t.Errorf("To %q, want %q (no tech prefix):\n%s", to, want, inv.Bytes())
		}
		c.reject(r.a, inv, 486, "Busy Here")
		c.final(486)
	}
	t.Run("no-policy", func(t *testing.T) {
		run(t, `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, tech_prefix: "1010288" }`, "",
			"1010288"+number, number)
	})
	t.Run("e164-policy", func(t *testing.T) {
		run(t, `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, tech_prefix: "1010288", number_policy: us }`,
			"number_policies:\n  - { name: us, format: e164, country_code: \"1\" }",
			"1010288+"+number, "+"+number)
	})
}

// TestLCRNextHopNeverBanned: a carrier the API routes to by next_hop alone
// (no gateway group) is exempt from the flood guard once a call went
// there, as gateways are (docs/design/cps.md 9: never ban carriers). At
// 10 messages/s,
// its 20 OPTIONS in a burst between two calls are all answered, and its
// second call's answer gets through.
func TestLCRNextHopNeverBanned(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[]}`)
	r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url()),
		extra: "ratelimit: { flood: { messages_per_sec: 10, ban_secs: 60 } }"})
	h := newUDPPeer(t, "hop", "127.0.0.7", r.sip)
	h.forbid(callerSecrets...)
	api.mu.Lock()
	api.body = fmt.Sprintf(`{"routes":[{"carrier_id":"hop","next_hop":"sip:%s","rate":0.001}]}`, h.addr())
	api.mu.Unlock()

	for call := range 2 {
		c := r.call(dialed, "")
		inv := c.invite(h, "")
		for i := range 20 {
			h.send(withBody("OPTIONS sip:"+r.sip.String()+" SIP/2.0\r\n"+
				fmt.Sprintf("Via: SIP/2.0/UDP %s;branch=z9hG4bKhop%d-%d;rport\r\n", h.addr(), call, i)+
				"Max-Forwards: 70\r\n"+
				fmt.Sprintf("From: <sip:gw@%s>;tag=h%d\r\n", h.addr(), i)+
				"To: <sip:"+r.sip.String()+">\r\n"+
				fmt.Sprintf("Call-ID: hop-%d-%d@127.0.0.7\r\n", call, i)+
				fmt.Sprintf("CSeq: %d OPTIONS\r\n", i+1), ""))
			h.expect("SIP/2.0 200 OK", waitMsg)
		}
		c.answer(h, inv)
		c.bye(h)
	}
	if bans := r.metricWith("sipedge_flood_bans_total", ""); bans != 0 {
		t.Errorf("sipedge_flood_bans_total %v, want 0", bans)
	}
}

// TestLCRTransportErrorFailsOverAtOnce: a carrier whose TCP connection is
// refused fails at once, as a 503 (RFC 3261 8.1.3.1, 17.1.4), and the next
// carrier is dialled then, not when the first one's timeout_secs (10 s)
// runs out.
func TestLCRTransportErrorFailsOverAtOnce(t *testing.T) {
	testtier.RequiresSockets(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there: the dial is refused
	dead := fmt.Sprintf(`{ carrier_id: dead, next_hop: "sip:127.0.0.1:%d;transport=tcp", rate: 0.001, timeout_secs: 10 }`, closed)
	r := newLCR(t, lcrOpts{lcr: staticLCR(dead, yRouteB)})
	c := r.call(dialed, "")
	inv := c.invite(r.b, dialed) // within waitMsg (3 s)
	t.Logf("carrier-b dialled %v after the caller's INVITE", time.Since(c.sentAt).Round(time.Millisecond))
	c.answer(r.b, inv)
	c.bye(r.b)
	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 200, "caller")
	checkAttempts(t, rec, wantAttempt{"dead", 503, true, ""})
}

// TestLCRCallerCancelDuringCPSWaitNotDialled: a caller who gives up while
// the carrier in flight waits for its CPS slot leaves an attempt with
// dialed false (docs/design/lcr.md 3.10: dialed says whether its INVITE
// left), so the carrier's ASR does not
// count a call it never saw.
func TestLCRCallerCancelDuringCPSWaitNotDialled(t *testing.T) {
	testtier.RequiresSockets(t)
	// carrier-b's account: one call per 2 s; a call waits up to 5 s for it.
	api := newLCRAPI(t, 200, `{"routes":[`+
		`{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004},`+
		`{"carrier_id":"carrier-b","gateway_group":"carrier-b","rate":0.005,"cps":{"rate":0.5,"max_wait_ms":5000}}]}`)
	r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url())})

	// The first call takes carrier-b's slot.
	c := r.call(dialed, "")
	c.reject(r.a, c.invite(r.a, dialed), 503, "Service Unavailable")
	c.reject(r.b, c.invite(r.b, dialed), 486, "Busy Here")
	c.final(486)

	// The second fails over to carrier-b, which waits for its slot: the
	// shard paces it while handling carrier-a's 503, before the ACK taken
	// here, so the CANCEL finds it waiting.
	c = r.call(dialed, "")
	c.reject(r.a, c.invite(r.a, dialed), 503, "Service Unavailable")
	r.caller.send(c.fix(c.u.cancel()))
	if ok := r.caller.expect("SIP/2.0 200 OK", waitMsg); cseqOf(t, ok).Method != parser.MethodCancel {
		t.Fatalf("200 is not for the CANCEL:\n%s", ok.Bytes())
	}
	c.final(487)
	r.b.expectNothing(0)

	// The attempt is counted on the shard right after the caller's 487
	// left: wait for it, then check it counted as not dialled.
	undialled := `carrier="carrier-b",code="487",dialed="false"`
	for end := time.Now().Add(waitMsg); r.metricWith("sipedge_lcr_attempts_total", undialled) == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.metricWith("sipedge_lcr_attempts_total", undialled); got != 1 {
		t.Errorf("carrier-b {%s} attempts %v, want 1", undialled, got)
	}
	if got := r.metricWith("sipedge_lcr_attempts_total", `carrier="carrier-b",code="487",dialed="true"`); got != 0 {
		t.Errorf(`carrier-b {code="487",dialed="true"} attempts %v, want 0`, got)
	}

	rec := r.cdrOf(c.u.callID)
	checkCDR(t, rec, 487, "caller")
	got := checkAttempts(t, rec, wantAttempt{"carrier-a", 503, true, ""},
		wantAttempt{"carrier-b", 487, false, "caller_cancelled"})
	if ms := elapsedMs(got[1]); ms != 0 {
		t.Errorf("undialled carrier-b elapsed_ms %d, want 0", ms)
	}
}
