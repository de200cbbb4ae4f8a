package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// LCR end-to-end tests of per-carrier shaping (docs/design/lcr.md 4) and
// of a failover seen in the log (3.12), on the rig of
// lcr_e2e_helpers_test.go: a real Server over loopback between a scripted
// caller and two scripted carriers.

// usPolicy is a number_policies: section with "us", E.164 with country
// code 1.
const usPolicy = "number_policies:\n  - { name: us, format: e164, country_code: \"1\" }"

// TestLCRRURINumberShaped: a ruri override's number is still shaped by
// the route's policy, when there is one (docs/design/lcr.md 4.3), and
// tech_prefix goes in front of the Request-URI user after the policy
// (4.2). The ruri's host, port and parameters go out as given; To stays
// the dialled number, shaped, without the prefix. A ruri with no user dials
// the dialled number at its host.
func TestLCRRURINumberShaped(t *testing.T) {
	testtier.RequiresSockets(t)
	const number = "12025550123"
	run := func(t *testing.T, ruri, wantRURI string) {
		t.Helper()
		rt := fmt.Sprintf(`{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, ruri: %q, tech_prefix: "1010288", number_policy: us }`, ruri)
		r := newLCR(t, lcrOpts{lcr: staticLCR(rt), extra: usPolicy})
		c := r.call(number, "")
		inv := c.invite(r.a, "")
		if got := string(inv.RequestURI()); got != wantRURI {
			t.Errorf("Request-URI %q, want %q:\n%s", got, wantRURI, inv.Bytes())
		}
		var to parser.Address
		if err := inv.To(&to); err != nil {
			t.Fatalf("To: %v\n%s", err, inv.Bytes())
		}
		if got := string(to.URI); !strings.HasPrefix(got, "sip:+"+number+"@") {
			t.Errorf("To URI %q, want the dialled number shaped, +%s, without the tech prefix", got, number)
		}
		c.reject(r.a, inv, 486, "Busy Here")
		c.final(486)
	}
	t.Run("number-in-ruri", func(t *testing.T) {
		run(t, "sip:2025550100;npdi@gw.carrier-a.example:5080;user=phone",
			"sip:1010288+12025550100;npdi@gw.carrier-a.example:5080;user=phone")
	})
	t.Run("host-only-ruri", func(t *testing.T) {
		run(t, "sip:gw.carrier-a.example:5080", "sip:1010288+"+number+"@gw.carrier-a.example:5080")
	})
}

// headerValues returns every value of header name in m, compact forms and
// any case included, in wire order.
func headerValues(m *parser.Message, name string) []string {
	k := parser.LookupHeader([]byte(name))
	var vs []string
	for i := 0; i < m.NumHeaders(); i++ {
		h := m.HeaderAt(i)
		if h.Kind == k && (k != parser.HeaderOther || strings.EqualFold(string(h.Name), name)) {
			vs = append(vs, string(h.Value))
		}
	}
	return vs
}

// TestLCRRouteHeadersAlwaysLand: a route's headers are applied after the
// header policy (docs/design/lcr.md 4.4): each replaces the
// caller's header of the same name, in any case or compact form, so the
// carrier reads the route's account token and not the caller's. Identity
// headers in a route's headers are refused with a warning: caller_id goes
// through the path that keeps From's tag (4.5), and a PAI or Privacy from
// headers would bypass CLIR.
func TestLCRRouteHeadersAlwaysLand(t *testing.T) {
	testtier.RequiresSockets(t)
	// From the API: a static route's identity header fails at start
	// (TestRejects), an API's is refused call by call.
	api := newLCRAPI(t, 200, `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004,`+
		`"caller_id_presentation":"restricted","headers":{"x-account":"route-42","Subject":"route-subject",`+
		`"P-Asserted-Identity":"<sip:+13105550999@10.1.1.1>","Privacy":"none"}}]}`)
	r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url()),
		b2bua: "header_policy: { allow: [Supported, X-Account, Subject, X-Tag] }"})
	c := r.call(dialed, "X-Account: caller-7\r\ns: caller-subject\r\nX-ACCOUNT: caller-8\r\nX-Tag: t1\r\n")
	inv := c.invite(r.a, dialed)
	if got := headerValues(inv, "X-Account"); !slices.Equal(got, []string{"route-42"}) {
		t.Errorf("X-Account %q, want the route's alone:\n%s", got, inv.Bytes())
	}
	if got := headerValues(inv, "Subject"); !slices.Equal(got, []string{"route-subject"}) {
		t.Errorf("Subject %q, want the route's alone (the caller's was compact):\n%s", got, inv.Bytes())
	}
	if got := headerValues(inv, "X-Tag"); !slices.Equal(got, []string{"t1"}) {
		t.Errorf("X-Tag %q: a header the route does not name is copied as it is", got)
	}
	if got := headerValues(inv, "P-Asserted-Identity"); len(got) != 1 || !strings.Contains(got[0], "sip:"+callerNumber+"@") {
		t.Errorf("P-Asserted-Identity %q, want sipedge's own alone, the caller's real identity:\n%s", got, inv.Bytes())
	}
	if got := headerValues(inv, "Privacy"); !slices.Equal(got, []string{"id"}) {
		t.Errorf("Privacy %q, want id alone (CLIR):\n%s", got, inv.Bytes())
	}
	var from parser.Address
	inv.From(&from)
	if string(from.URI) != "sip:anonymous@anonymous.invalid" {
		t.Errorf("From %q, want anonymous", from.URI)
	}
	c.reject(r.a, inv, 486, "Busy Here")
	c.final(486)
	for _, h := range []string{"P-Asserted-Identity", "Privacy"} {
		if len(logLines(r.logs.String(), "route header refused: identity goes through caller_id and caller_id_presentation",
			"level=WARN", "carrier=carrier-a", "header="+h)) == 0 {
			t.Errorf("no warning for the route's %s", h)
		}
	}
}

// logLines returns the lines of logs with message msg that hold every one
// of attrs ("key=value").
func logLines(logs, msg string, attrs ...string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, fmt.Sprintf("msg=%q", msg)) {
			continue
		}
		ok := true
		for _, a := range attrs {
			ok = ok && (strings.Contains(l, " "+a+" ") || strings.HasSuffix(l, " "+a))
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// TestLCRFailoverLogged: a failover is seen in the log
// (docs/design/lcr.md 3.12): each failed attempt with its carrier, status
// and elapsed time, and the advance to the next carrier, at info; an undialled carrier too
// (LCR: carrier burned without dialling), with its status, 503.
func TestLCRFailoverLogged(t *testing.T) {
	testtier.RequiresSockets(t)
	api := newLCRAPI(t, 200, `{"routes":[`+
		`{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.004},`+
		`{"carrier_id":"ghost","gateway_group":"no-such-group","rate":0.004},`+
		`{"carrier_id":"carrier-b","gateway_group":"carrier-b","rate":0.005}]}`)
	r := newLCR(t, lcrOpts{lcr: fmt.Sprintf("lcr: { api_url: %q, timeout_ms: 1000 }", api.url())})
	c := r.call(dialed, "")
	inv1 := c.invite(r.a, dialed)
	c.reject(r.a, inv1, 503, "Service Unavailable")
	inv2 := c.invite(r.b, dialed)
	c.answer(r.b, inv2)
	c.bye(r.b)

	logs := r.logs.String()
	id := "call_id=" + c.u.callID
	steps := []struct {
		msg   string
		attrs []string
	}{
		{"LCR: carrier failed", []string{"carrier=carrier-a", "status=503"}},
		{"LCR: failing over", []string{"from=carrier-a", "to=ghost"}},
		{"LCR: carrier burned without dialling", []string{"carrier=ghost", "status=503", "reason=unknown_group"}},
		{"LCR: failing over", []string{"from=ghost", "to=carrier-b"}},
	}
	at := 0
	for _, s := range steps {
		lines := logLines(logs, s.msg, append([]string{"level=INFO", id}, s.attrs...)...)
		if len(lines) != 1 {
			t.Fatalf("%d %q lines with %v, want 1:\n%s", len(lines), s.msg, s.attrs, logs)
		}
		i := strings.Index(logs, lines[0])
		if i < at {
			t.Errorf("%q with %v logged out of order:\n%s", s.msg, s.attrs, logs)
		}
		at = i
	}
	if l := logLines(logs, "LCR: carrier failed", id, "carrier=carrier-a"); len(l) == 1 && !strings.Contains(l[0], " elapsed_ms=") {
		t.Errorf("the failed attempt's line has no elapsed time: %s", l[0])
	}
	if n := len(logLines(logs, "LCR: failing over", id)); n != 2 {
		t.Errorf("%d failing over lines, want 2 (carrier-b answered: no advance after it)", n)
	}
}
