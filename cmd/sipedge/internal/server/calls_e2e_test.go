package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/internal/testtier"
)

// liveCalls fetches GET /v1/calls with query.
func (e *e2e) liveCalls(query string) callsJSON {
	e.t.Helper()
	code, body := e.httpGet("/v1/calls" + query)
	var out callsJSON
	if err := json.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil {
		e.t.Fatalf("GET /v1/calls%s: %d %s (%v)", query, code, body, err)
	}
	return out
}

// A long call between SIPp caller and carrier is listed by GET /v1/calls
// (answered, its trunk and carrier; the filters select it or not) and
// ended by DELETE /v1/calls/{a_call_id}: both SIPp legs get a BYE, which
// their scenarios wait for, and the CDR says hangup_side "admin".
func TestLiveCallsEndedByAdminE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e, logs := newE2EBase(t)
	uas := sippCarrier(t, "carrier", "uas_held.xml", "-m", "1")
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - { name: carrier-a, destinations: [{ uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d" }] }
lcr:
  static_routes:
    - { prefix: "", routes: [{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }] }
cdr: { file: %[3]q }
`, e.port, uas.port, e.cdrPath), logs)
	uac := runSIPp(t, "caller", e.sip.String(), "-sf", sippScenario(t, "uac_held.xml"), "-s", "15551234", "-m", "1")

	var call b2bua.CallInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if cs := e.liveCalls("").Calls; len(cs) == 1 && cs[0].State == b2bua.CallAnswered {
			call = cs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answered call listed: %+v", e.liveCalls(""))
		}
	}
	if call.Trunk != "local" || call.Carrier != "carrier-a" || call.Start.IsZero() || call.Answer.Before(call.Start) {
		t.Errorf("listed %+v, want trunk local, carrier carrier-a, started and answered", call)
	}
	for q, want := range map[string]int{"?trunk=local": 1, "?trunk=other": 0, "?carrier=carrier-a": 1,
		"?carrier=carrier-b": 0, "?trunk=local&carrier=carrier-a": 1} {
		if got := len(e.liveCalls(q).Calls); got != want {
			t.Errorf("GET /v1/calls%s lists %d calls, want %d", q, got, want)
		}
	}

	path := "/v1/calls/" + url.PathEscape(call.ACallID)
	if code, body := e.adminDo("DELETE", "/v1/calls/no-such-call", ""); code != http.StatusNotFound {
		t.Errorf("DELETE an unknown call: %d %s, want 404", code, body)
	}
	if code, body := e.adminDo("DELETE", path, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE %s: %d %s, want 204", path, code, body)
	}
	for _, p := range []*sipp{uac, uas} { // each got its BYE
		if p.wait(10 * time.Second); p.err != nil {
			t.Fatalf("SIPp %s: %v", p.name, p.err)
		}
	}
	if cs := e.liveCalls("").Calls; len(cs) != 0 {
		t.Errorf("after DELETE, %d calls listed", len(cs))
	}
	if code, _ := e.adminDo("DELETE", path, ""); code != http.StatusNotFound {
		t.Errorf("DELETE the ended call again: %d, want 404", code)
	}
	checkCDR(t, e.cdrOf(call.ACallID), 200, "admin")
	if !strings.Contains(logs.String(), "call ended through the admin API") {
		t.Error("the end is not logged")
	}
}
