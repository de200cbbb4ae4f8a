package embed_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/embed"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/route"
)

// The static routes: the table tries them cheapest first.
const (
	routeA = `{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, currency: USD }`
	routeB = `{ carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005, currency: USD }`
	// routeX is a dear carrier on carrier-a's gateway.
	routeX = `{ carrier_id: carrier-x, gateway_group: carrier-a, rate: 0.05, currency: USD }`
)

var backupB = route.Route{CarrierID: "carrier-b", GatewayGroup: "carrier-b", Rate: 0.005, Currency: "USD"}

// OnInvite filters and reorders the decision's routes: carriers over a
// rate ceiling dropped, carrier-b preferred. carrier-b is dialled first,
// then carrier-a; carrier-x, dropped, never is (it would be dialled on
// carrier-a's socket).
func TestOnInviteFiltersAndReorders(t *testing.T) {
	testtier.RequiresSockets(t)
	var mu sync.Mutex
	var seen []string
	policy := b2bua.Policy{OnInvite: func(r *route.Request, d *route.Decision) {
		mu.Lock()
		seen = append(seen, string(r.Dialed))
		mu.Unlock()
		var keep []route.Route // a new slice: d.Routes is the static table's
		for _, rt := range d.Routes {
			if rt.Rate <= 0.01 {
				keep = append(keep, rt)
			}
		}
		slices.SortStableFunc(keep, func(x, y route.Route) int {
			return b2i(y.CarrierID == "carrier-b") - b2i(x.CarrierID == "carrier-b")
		})
		d.Routes = keep
	}}
	r := start(t, embed.Options{Policy: policy}, staticLCR(routeA, routeB, routeX))
	c := r.dial("15551234")
	r.b.reject(r.b.expect("INVITE sip:15551234@"), 503, "Service Unavailable")
	r.a.reject(r.a.expect("INVITE sip:15551234@"), 503, "Service Unavailable")
	c.final("500 Server Internal Error") // a carrier's 503 reaches the caller as 500
	r.a.nothing()
	rec := r.cdr()
	if got := attempts(rec); !slices.Equal(got, []string{"carrier-b:503", "carrier-a:503"}) {
		t.Errorf("lcr_attempts %v, want carrier-b then carrier-a", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{"15551234"}) {
		t.Errorf("OnInvite saw %v, want one call to 15551234", seen)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// OnInvite rejects with a code and reason of its own; no carrier is dialled.
func TestOnInviteRejects(t *testing.T) {
	testtier.RequiresSockets(t)
	policy := b2bua.Policy{OnInvite: func(r *route.Request, d *route.Decision) {
		if strings.HasPrefix(string(r.Dialed), "1900") {
			d.Code, d.Reason = 403, "Premium Blocked"
		}
	}}
	r := start(t, embed.Options{Policy: policy}, staticLCR(routeA))
	r.dial("19005550000").final("403 Premium Blocked")
	r.a.nothing()
	if rec := r.cdr(); rec["final_code"] != float64(403) || len(attempts(rec)) != 0 {
		t.Errorf("CDR final_code %v, lcr_attempts %v; want 403 and none", rec["final_code"], attempts(rec))
	}
}

// A panicking OnInvite takes neither the node nor the next call down: the
// call gets 500 (the documented answer), the panic is logged with the call
// and counted, and the next call is routed and answered.
func TestOnInvitePanicRecovered(t *testing.T) {
	testtier.RequiresSockets(t)
	var mu sync.Mutex
	calls := 0
	policy := b2bua.Policy{OnInvite: func(*route.Request, *route.Decision) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			panic("policy bug")
		}
	}}
	r := start(t, embed.Options{Policy: policy}, staticLCR(routeA))
	first := r.dial("15551234")
	first.final("500 Server Internal Error")
	r.a.nothing()
	c := r.dial("15551234")
	r.a.respond(r.a.expect("INVITE sip:15551234@"), 200, "OK")
	c.answered(r.a)
	c.hangUp(r.a)
	if v := r.metric(`sipedge_policy_panics_total{shard="0",hook="OnInvite"}`); v != 1 {
		t.Errorf("sipedge_policy_panics_total{hook=OnInvite} = %v, want 1", v)
	}
	if l := r.logs.String(); !strings.Contains(l, "hook=OnInvite call_id="+first.callID+` panic="policy bug"`) {
		t.Errorf("the panic is not logged with the hook and the call:\n%s", l)
	}
}

// OnFailure routes the call again after the only carrier's 503: carrier-b
// answers, the CDR lists carrier-a's attempt. The user's OnRouteFailure
// and OnAnswer run, and sipedge's per-carrier metrics count both carriers
// all the same: the user's hooks add to them, never replace them.
func TestOnFailureRoutesAgain(t *testing.T) {
	testtier.RequiresSockets(t)
	var mu sync.Mutex
	var events []string
	note := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	policy := b2bua.Policy{
		OnFailure: func(_ *b2bua.Call, code int, _ string) b2bua.FailureAction {
			note("failure:" + itoa(code))
			return b2bua.FailureAction{Routes: []route.Route{backupB}}
		},
		OnRouteFailure: func(_ *b2bua.Call, rt *route.Route, a route.Attempt) {
			note("route_failure:" + rt.CarrierID + ":" + itoa(a.Status))
		},
		OnAnswer: func(_ *b2bua.Call, rt *route.Route) { note("answer:" + rt.CarrierID) },
	}
	r := start(t, embed.Options{Policy: policy}, staticLCR(routeA))
	c := r.dial("15551234")
	r.a.reject(r.a.expect("INVITE sip:15551234@"), 503, "Service Unavailable")
	r.b.respond(r.b.expect("INVITE sip:15551234@"), 200, "OK")
	c.answered(r.b)
	c.hangUp(r.b)
	rec := r.cdr()
	if rec["final_code"] != float64(200) || rec["carrier_id"] != "carrier-b" {
		t.Errorf("CDR final_code %v carrier_id %v, want 200 on carrier-b", rec["final_code"], rec["carrier_id"])
	}
	if got := attempts(rec); !slices.Equal(got, []string{"carrier-a:503"}) {
		t.Errorf("lcr_attempts %v, want carrier-a's 503", got)
	}
	mu.Lock()
	want := []string{"route_failure:carrier-a:503", "failure:500", "answer:carrier-b"}
	if !slices.Equal(events, want) {
		t.Errorf("hooks ran %v, want %v", events, want)
	}
	mu.Unlock()
	for _, m := range []string{
		`sipedge_lcr_attempts_total{carrier="carrier-a",code="503",dialed="true",reason=""}`,
		`sipedge_lcr_attempts_total{carrier="carrier-b",code="200",dialed="true",reason=""}`,
	} {
		if v := r.metric(m); v != 1 {
			t.Errorf("%s = %v, want 1", m, v)
		}
	}
}

// OnFailure rejects with 480: the caller gets it, not the 500 the
// carrier's 503 would have become.
func TestOnFailureRejects(t *testing.T) {
	testtier.RequiresSockets(t)
	policy := b2bua.Policy{OnFailure: func(*b2bua.Call, int, string) b2bua.FailureAction {
		return b2bua.FailureAction{Code: 480, Reason: "Temporarily Unavailable"}
	}}
	r := start(t, embed.Options{Policy: policy}, staticLCR(routeA))
	c := r.dial("15551234")
	r.a.reject(r.a.expect("INVITE sip:15551234@"), 503, "Service Unavailable")
	c.final("480 Temporarily Unavailable")
	r.b.nothing()
	if rec := r.cdr(); rec["final_code"] != float64(480) {
		t.Errorf("CDR final_code %v, want 480", rec["final_code"])
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// With the LCR API unreachable and no fallback there is no decision: by
// default the caller gets 503 Route Unavailable; a policy sees NoDecision
// (which an API's 503 reject does not set) and may route the call itself.
func TestOnInviteNoDecision(t *testing.T) {
	testtier.RequiresSockets(t)
	api := closedURL(t)
	lcr := fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api)
	t.Run("default", func(t *testing.T) {
		r := start(t, embed.Options{}, lcr)
		r.dial("15551234").final("503 Route Unavailable")
		r.a.nothing()
	})
	t.Run("policy", func(t *testing.T) {
		var mu sync.Mutex
		var got []route.Decision
		policy := b2bua.Policy{OnInvite: func(_ *route.Request, d *route.Decision) {
			mu.Lock()
			got = append(got, *d)
			mu.Unlock()
			if d.NoDecision {
				d.Code, d.Reason, d.Routes = 0, "", []route.Route{backupB}
			}
		}}
		r := start(t, embed.Options{Policy: policy}, lcr)
		c := r.dial("15551234")
		r.b.reject(r.b.expect("INVITE sip:15551234@"), 486, "Busy Here")
		c.final("486 Busy Here")
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || !got[0].NoDecision || got[0].Code != 503 || got[0].Reason != "Route Unavailable" {
			t.Errorf("OnInvite saw %+v, want one NoDecision with 503 Route Unavailable", got)
		}
	})
}

// closedURL is an API URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String() + "/route"
}

// A configuration is checked as the binary checks it: every problem at
// once, by its path, with the file's name when read from one.
func TestConfigErrors(t *testing.T) {
	bad := "listen: [\"udp://127.0.0.1:5060\"]\nshards: -1\nnope: 1\n"
	if _, err := embed.ParseConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "shards") || !strings.Contains(err.Error(), "nope") {
		t.Errorf("ParseConfig: %v, want errors naming shards and nope", err)
	}
	path := filepath.Join(t.TempDir(), "sipedge.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := embed.LoadConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadConfig: %v, want errors naming %s", err, path)
	}
	if _, err := embed.LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadConfig of a missing file: no error")
	}
}
