package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// The static table replaced through the admin API routes the next call at
// once, to a group itself added at run time, with the new rate in its CDR;
// the call in progress, decided by the old table, goes on to its end.
func TestStaticRoutesReplacedE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	r := newHealthRig(t, "carrier-a", "carrier-x", healthToken, carrierAOnly, staticLCR(yRouteA))
	x := r.b

	// (1) The YAML's table: carrier-a, and the call stays up.
	c1 := r.call(dialed, "")
	inv1 := c1.invite(r.a, dialed)
	c1.answer(r.a, inv1)

	// (2) A table naming runtime-x is refused until the group exists.
	table := `[{"prefix":"","routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,"currency":"USD"}]},` +
		`{"prefix":"` + dialed[:3] + `","routes":[{"carrier_id":"carrier-x","gateway_group":"runtime-x","rate":0.007,"currency":"EUR"}]}]`
	code, body := r.adminDo("PUT", "/v1/lcr/static_routes", healthToken, table)
	if code != http.StatusBadRequest || !strings.Contains(body, `static_routes[1].routes[0].gateway_group: unknown group \"runtime-x\"`) {
		t.Fatalf("PUT naming an unknown group: %d %s, want 400", code, body)
	}
	group := fmt.Sprintf(`{"name": "runtime-x", "destinations": [{"uri": "sip:127.0.0.1:%[1]d", "address": "127.0.0.1:%[1]d"}]}`,
		x.addr().Port())
	if code, body := r.adminDo("POST", "/v1/gateway/groups", healthToken, group); code != http.StatusCreated {
		t.Fatalf("POST runtime-x: %d %s", code, body)
	}
	if code, body := r.adminDo("PUT", "/v1/lcr/static_routes", "", table); code != http.StatusUnauthorized {
		t.Fatalf("PUT without the token: %d %s, want 401", code, body)
	}
	if code, body := r.adminDo("PUT", "/v1/lcr/static_routes", healthToken, table); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if !strings.Contains(r.logs.String(), "static routes replaced") || !strings.Contains(r.logs.String(), "prefixes=2") {
		t.Error("the replacement is not logged with its number of prefixes")
	}

	// (3) The next call goes to carrier-x, at the new rate.
	c2 := r.call(dialed, "")
	inv2 := c2.invite(x, dialed)
	c2.answer(x, inv2)
	c2.bye(x)
	r.a.expectNothing(0)

	// (4) The call of the old table ends normally.
	c1.bye(r.a)
	x.expectNothing(0)

	rec1, rec2 := r.cdrOf(c1.u.callID), r.cdrOf(c2.u.callID)
	checkCDR(t, rec1, 200, "caller")
	checkFields(t, rec1, map[string]any{"carrier_id": "carrier-a", "rate": 0.004, "currency": "USD",
		"route_source": "static", "b_call_id": hdr(inv1, parser.HeaderCallID)})
	checkCDR(t, rec2, 200, "caller")
	checkFields(t, rec2, map[string]any{"carrier_id": "carrier-x", "rate": 0.007, "currency": "EUR",
		"route_source": "static", "b_call_id": hdr(inv2, parser.HeaderCallID)})
}
