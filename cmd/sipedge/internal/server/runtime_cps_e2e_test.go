package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
)

// A gateway group added through the admin API carries its cps and
// cps_reject as a YAML group does (the admin API takes the YAML's shape),
// and its dials are paced: at 1 call/s without waiting, a second call in
// the same second finds carrier-x over its limit, burned without an INVITE
// (cps_limited), and carrier-a takes it. An invalid limit refuses the
// group; removing the group drops its pacing with it.
func TestHealthRuntimeGroupCPS(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newRuntimeGroupRig(t)
	x := r.b
	group := fmt.Sprintf(`{"name": "runtime-x", "cps": {"rate": 1, "max_wait_ms": 0, "key": "acct-x"},
		"cps_reject": [{"code": 503, "reason": "CPS"}],
		"destinations": [{"uri": "sip:127.0.0.1:%[1]d", "address": "127.0.0.1:%[1]d"}]}`, x.addr().Port())

	// A limit the limiter cannot keep (one call a day) refuses the group.
	slow := strings.Replace(group, `"rate": 1,`, `"rate": 0.00001,`, 1)
	if code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, slow); code != http.StatusBadRequest || !strings.Contains(body, "cps") {
		t.Fatalf("POST with rate 0.00001: %d %s, want 400 about the cps", code, body)
	}
	if code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, group); code != http.StatusCreated ||
		!strings.Contains(body, `"cps":{"rate":1,"max_wait_ms":0,"key":"acct-x"}`) || !strings.Contains(body, `"cps_reject":[{"code":503,"reason":"CPS"}]`) {
		t.Fatalf("POST runtime-x: %d %s, want 201 showing its cps", code, body)
	}

	c1 := r.call(dialed, "")
	inv := c1.invite(x, dialed)
	c1.answer(x, inv)
	c1.bye(x)
	// The same second: carrier-x is over its 1 call/s.
	c2 := r.call(dialed, "")
	inv = c2.invite(r.a, dialed)
	c2.answer(r.a, inv)
	c2.bye(r.a)
	x.expectNothing(0)
	if !strings.Contains(r.logs.String(), "carrier=carrier-x reason=cps_limited") {
		t.Fatalf("carrier-x not burned as cps_limited; log:\n%s", r.logs.String())
	}

	// Without the group, its pacing is gone too: a group of the same name
	// added again without cps is not paced.
	if code, body := r.adminDo("DELETE", "/v1/gateway/groups/runtime-x", healthToken, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE runtime-x: %d %s", code, body)
	}
	unpaced := strings.Replace(group, `"cps": {"rate": 1, "max_wait_ms": 0, "key": "acct-x"},`, "", 1)
	if code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, unpaced); code != http.StatusCreated {
		t.Fatalf("POST runtime-x without cps: %d %s", code, body)
	}
	for range 2 {
		c := r.call(dialed, "")
		inv := c.invite(x, dialed)
		c.answer(x, inv)
		c.bye(x)
	}
	r.a.expectNothing(0)
}

// A gateway group added through the admin API carries its channel limit:
// with one channel and a call up on it, the next call skips it undialled
// (calls_limited) and carrier-a takes it.
func TestHealthRuntimeGroupChannels(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newRuntimeGroupRig(t)
	x := r.b
	group := fmt.Sprintf(`{"name": "runtime-x", "max_concurrent_calls": 1,
		"destinations": [{"uri": "sip:127.0.0.1:%[1]d", "address": "127.0.0.1:%[1]d"}]}`, x.addr().Port())
	if code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, group); code != http.StatusCreated ||
		!strings.Contains(body, `"max_concurrent_calls":1`) {
		t.Fatalf("POST runtime-x: %d %s, want 201 showing its limit", code, body)
	}
	c1 := r.call(dialed, "")
	inv := c1.invite(x, dialed)
	c1.answer(x, inv)
	c2 := r.call(dialed, "")
	inv2 := c2.invite(r.a, dialed)
	c2.answer(r.a, inv2)
	c2.bye(r.a)
	c1.bye(x)
	if !strings.Contains(r.logs.String(), "carrier=carrier-x reason=calls_limited") {
		t.Fatalf("carrier-x not burned as calls_limited; log:\n%s", r.logs.String())
	}
}
