package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// adminDo sends a request to the admin API and returns the status and body.
func (e *e2e) adminDo(method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.admin+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json") // without admin.token a change must be JSON
	resp, err := (&http.Client{Timeout: waitMsg}).Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// newCallerOn replaces e's caller by a UDP peer on ip (127.0.0.2: not the
// YAML trunk's 127.0.0.1).
func (e *e2e) newCallerOn(ip string) {
	e.caller = newUDPPeer(e.t, "caller", ip, e.sip)
	e.caller.forbid(carrierSecrets...)
}

// inviteDropped sends a new call's INVITE and checks nobody hears of it:
// an unknown source's INVITE is dropped (b2bua.unknown_source: drop).
func (e *e2e) inviteDropped() {
	e.t.Helper()
	e.caller.send(newUAC(e.caller, dialed).invite())
	e.caller.expectNothing(300 * time.Millisecond)
	e.carrier.expectNothing(0)
}

// A trunk added at run time through the admin API takes calls from its
// source at once, and removing it refuses new calls while the call in
// progress goes on to its end and its CDR, as its trunk's.
func TestRuntimeTrunkE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	e.newCallerOn("127.0.0.2")
	e.inviteDropped()

	code, body := e.adminDo("POST", "/v1/trunks", `{"name":"acme","trunk_group":"acme-tg","sources":["127.0.0.2/32"]}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/trunks: %d %s", code, body)
	}
	c := e.answered()

	if code, body = e.adminDo("DELETE", "/v1/trunks/acme", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE /v1/trunks/acme: %d %s", code, body)
	}
	e.inviteDropped()
	c.byeFromCaller(11)

	e.checkAcmeCallCDR(c.u.callID)
}

// A trunk added at run time with limits.cps refuses the calls over its
// limit with 503 and Retry-After, before routing, as a YAML trunk does.
func TestRuntimeTrunkOverCPSGets503RetryAfter(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	e.newCallerOn("127.0.0.2")
	code, body := e.adminDo("POST", "/v1/trunks", `{"name":"acme","sources":["127.0.0.2"],"limits":{"cps":1,"burst":1}}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/trunks: %d %s", code, body)
	}
	first := e.start() // the limit's one call of this second
	over := newUAC(e.caller, dialed)
	e.caller.send(over.invite())
	e.caller.expect("SIP/2.0 100 Trying", waitMsg)
	m := e.caller.expect("SIP/2.0 503", waitMsg)
	if ra, ok, err := m.RetryAfter(); !ok || err != nil || ra.Seconds < 1 {
		t.Errorf("503 without a valid Retry-After:\n%s", m.Bytes())
	}
	e.caller.send(over.ackFailure(m))
	e.carrier.expectNothing(100 * time.Millisecond) // refused before routing
	first.provisional(180, "Ringing", "")
	first.answer()
	first.byeFromCaller(11)
}

// checkAcmeCallCDR checks that the call of A-leg callID, from trunk acme,
// left one CDR, answered and hung up by the caller, and that the INVITEs
// dropped after acme went left none. It ends the server (cdrs).
func (e *e2e) checkAcmeCallCDR(callID string) {
	t := e.t
	t.Helper()
	var ours []map[string]any
	for _, r := range e.cdrs() {
		if r["a_call_id"] == callID {
			ours = append(ours, r)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d CDRs of the call, want 1 (and none of the dropped INVITEs)", len(ours))
	}
	checkCDR(t, ours[0], 200, "caller")
	if ours[0]["trunk"] != "acme" || ours[0]["trunk_group"] != "acme-tg" {
		t.Errorf("CDR trunk %v group %v, want acme and acme-tg", ours[0]["trunk"], ours[0]["trunk_group"])
	}
}
