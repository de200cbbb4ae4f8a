package b2bua

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
)

func TestNumberPolicyShape(t *testing.T) {
	us := NumberPolicy{CountryCode: "1"}
	uk := NumberPolicy{CountryCode: "44", NationalPrefix: "0"}
	ukNat := NumberPolicy{National: true, CountryCode: "44", NationalPrefix: "0"}
	f := func(p NumberPolicy, in, want string) {
		t.Helper()
		if got := string(p.Shape(nil, []byte(in))); got != want {
			t.Errorf("%+v.Shape(%q) = %q, want %q", p, in, got, want)
		}
	}
	f(us, "+12025550123", "+12025550123")
	f(us, "12025550123", "+12025550123")
	f(us, "2025550123", "+12025550123")
	f(us, "(202) 555-0123", "+12025550123")
	f(us, "0044207946000", "+44207946000")
	f(uk, "02079460000", "+442079460000")
	f(ukNat, "+442079460000", "02079460000")
	f(ukNat, "+12025550123", "+12025550123") // another country's number stays international
	f(us, "anonymous", "anonymous")          // no policy reformats a name
	f(us, "911", "911")                      // short codes are dialled as they are
	f(uk, "999", "999")
	f(ukNat, "112", "112")
	f(uk, "118118", "118118")
	f(uk, "0044999", "+44999") // but an international number is one
	f(us, "000", "000")        // no country code starts with 0: a short code, not "+0"
	f(us, "", "")
}

// shapedInvite dials one route for a call from "+13105550199" to
// "12025550123", whose INVITE carries a P-Preferred-Identity, and returns
// the carrier's INVITE.
func shapedInvite(t *testing.T, r route.Route, mod func(*Config)) (*rig, *parser.Message) {
	return shapedInviteWith(t, r, mod, "")
}

// shapedInviteWith is shapedInvite with extra header lines in the caller's
// INVITE.
func shapedInviteWith(t *testing.T, r route.Route, mod func(*Config), extra string) (*rig, *parser.Message) {
	return shapedInviteLogged(t, r, mod, extra, nil)
}

// shapedInviteLogged is shapedInviteWith logging to logs, when not nil.
func shapedInviteLogged(t *testing.T, r route.Route, mod func(*Config), extra string, logs *bytes.Buffer) (*rig, *parser.Message) {
	rg := newRig(t, func(c *Config) {
		c.NumberPolicies = map[string]NumberPolicy{"e164": {CountryCode: "1"}, "national": {National: true, CountryCode: "1", NationalPrefix: "1"}}
		c.AssertIdentity = true
		if mod != nil {
			mod(c)
		}
	})
	if logs != nil {
		rg.e.env.Log = slog.New(slog.NewTextHandler(logs, nil))
	}
	rg.routes = []route.Route{r}
	inv := strings.Replace(callerInvite("1", "a-call-1", "12025550123"), "sip:alice@caller.example.org>;tag=atag1", "sip:+13105550199@caller.example.org>;tag=atag1", 1)
	inv = strings.Replace(inv, "X-Keep: kept\r\n", "X-Keep: kept\r\nP-Preferred-Identity: <sip:+13105550199@caller.example.org>\r\n"+extra, 1)
	rg.recv(caller, inv)
	rg.take(caller)
	got := rg.take(carrierA)
	if len(got) != 1 {
		t.Fatalf("carrier got %d messages", len(got))
	}
	m := new(parser.Message)
	if err := m.Parse([]byte(got[0])); err != nil {
		t.Fatal(err)
	}
	return rg, m
}

func TestShapingTechPrefixNeverReachesTo(t *testing.T) {
	_, m := shapedInvite(t, route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", TechPrefix: "1010288", NumberPolicy: "e164"}, nil)
	if !strings.HasPrefix(string(m.RequestURI()), "sip:1010288+12025550123@") {
		t.Errorf("R-URI %q", m.RequestURI())
	}
	if to := hdr(m, parser.HeaderTo); to != "<sip:+12025550123@198.51.100.20:5070>" {
		t.Errorf("To %q", to)
	}
	// Without a policy the number keeps the shape it arrived in.
	_, m = shapedInvite(t, route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", TechPrefix: "1010288"}, nil)
	if !strings.HasPrefix(string(m.RequestURI()), "sip:101028812025550123@") {
		t.Errorf("R-URI %q", m.RequestURI())
	}
}

func TestShapingPolicyAppliesToFromPAIAndRURIAlike(t *testing.T) {
	_, m := shapedInvite(t, route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", NumberPolicy: "national"}, nil)
	if !strings.HasPrefix(string(m.RequestURI()), "sip:12025550123@") {
		t.Errorf("R-URI %q", m.RequestURI())
	}
	var from parser.Address
	m.From(&from)
	if string(from.URI) != "sip:13105550199@203.0.113.1" {
		t.Errorf("From URI %q", from.URI)
	}
	if pai := hdr(m, parser.HeaderPAssertedIdentity); pai != "<sip:13105550199@203.0.113.1>" {
		t.Errorf("PAI %q", pai)
	}
}

func TestShapingCallerIDSubstitutedOnFromAndPAI(t *testing.T) {
	_, m := shapedInvite(t, route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", CallerID: "+13105550100"}, nil)
	var from parser.Address
	m.From(&from)
	if string(from.URI) != "sip:+13105550100@203.0.113.1" || from.Tag == nil {
		t.Errorf("From %q tag %q", from.URI, from.Tag)
	}
	if pai := hdr(m, parser.HeaderPAssertedIdentity); pai != "<sip:+13105550100@203.0.113.1>" {
		t.Errorf("PAI %q", pai)
	}
	if m.Get(parser.HeaderPPreferredIdentity) != nil {
		t.Error("the caller's P-Preferred-Identity was forwarded")
	}
}

// The four effects of caller_id_presentation: restricted, together
// (docs/design/lcr.md 4.6).
func TestShapingCLIRRestricted(t *testing.T) {
	f := func(presentation string) {
		t.Helper()
		_, m := shapedInviteWith(t, route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", CallerID: "+13105550100", CallerIDPresentation: presentation}, func(c *Config) {
			c.HeaderAllow = append(c.HeaderAllow, "Privacy")
		}, "Privacy: header\r\n")
		var from parser.Address
		m.From(&from)
		if string(from.Display) != "Anonymous" || string(from.URI) != "sip:anonymous@anonymous.invalid" || len(from.Tag) == 0 {
			t.Errorf("%s: From %q <%s> tag %q", presentation, from.Display, from.URI, from.Tag)
		}
		if p := hdr(m, parser.HeaderPrivacy); p != "header;id" {
			t.Errorf("%s: Privacy %q, want id appended to the caller's value", presentation, p)
		}
		if pai := hdr(m, parser.HeaderPAssertedIdentity); pai != "<sip:+13105550100@203.0.113.1>" {
			t.Errorf("%s: PAI %q must carry the real identity", presentation, pai)
		}
		if m.Get(parser.HeaderPPreferredIdentity) != nil {
			t.Errorf("%s: P-Preferred-Identity forwarded past the privacy boundary", presentation)
		}
	}
	f("restricted")
	f("withheld-please") // not understood: treated as restricted
}

func TestShapingRURIOverrideAndHeaders(t *testing.T) {
	r := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", RURI: "sip:000@gw.carrier.example.net:5080", NumberPolicy: "e164",
		Headers: map[string]string{"X-Account": "42", "Call-ID": "evil", "X-Bad": "a\r\nVia: evil"}}
	_, m := shapedInvite(t, r, nil)
	// docs/design/lcr.md 4.3: the number in a ruri override is still
	// shaped by the route's policy: the number is the ruri's 000, a short code no policy reformats, not
	// the dialled number.
	if got := string(m.RequestURI()); got != "sip:000@gw.carrier.example.net:5080" {
		t.Errorf("R-URI %q", got)
	}
	if m.GetByName("X-Account") == nil || string(m.GetByName("X-Account")) != "42" {
		t.Error("route header not injected")
	}
	if hdr(m, parser.HeaderCallID) == "evil" || m.GetByName("X-Bad") != nil {
		t.Error("a dialog-forming or multi-line route header was injected")
	}
}

// A route's headers leave in the order of their names, whatever order the
// map gives them in: the same route gives the same INVITE, call after call.
func TestShapingRouteHeadersStableOrder(t *testing.T) {
	r := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", Headers: map[string]string{
		"X-Echo": "5", "X-Alpha": "1", "X-Delta": "4", "X-Bravo": "2", "X-Charlie": "3", "Call-ID": "refused"}}
	for range 20 {
		_, m := shapedInvite(t, r, nil)
		var names []string
		for i := 0; i < m.NumHeaders(); i++ {
			if h := m.HeaderAt(i); h.Kind == parser.HeaderOther && strings.HasPrefix(string(h.Name), "X-") && string(h.Name) != "X-Keep" {
				names = append(names, string(h.Name)+"="+string(h.Value))
			}
		}
		if got := strings.Join(names, " "); got != "X-Alpha=1 X-Bravo=2 X-Charlie=3 X-Delta=4 X-Echo=5" {
			t.Fatalf("route headers in the order %s", got)
		}
	}
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

// A route's header replaces the caller's copied header of the same name,
// in any case and in compact form, so the carrier reads the route's value
// (docs/design/lcr.md 4.4: applied after the header policy). A route
// header refused leaves the caller's in place.
func TestShapingRouteHeaderReplacesCallers(t *testing.T) {
	allow := func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Subject", "X-Tag") }
	r := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a",
		Headers: map[string]string{"x-keep": "route-token", "Subject": "route-subject"}}
	_, m := shapedInviteWith(t, r, allow, "s: caller-subject\r\nX-KEEP: caller-again\r\nX-Tag: t1\r\n")
	if got := headerValues(m, "X-Keep"); len(got) != 1 || got[0] != "route-token" {
		t.Errorf("X-Keep %q, want the route's value alone", got)
	}
	if got := headerValues(m, "Subject"); len(got) != 1 || got[0] != "route-subject" {
		t.Errorf("Subject %q, want the route's value alone (the caller's was compact)", got)
	}
	if got := headerValues(m, "X-Tag"); len(got) != 1 || got[0] != "t1" {
		t.Errorf("X-Tag %q: a header the route does not name is copied as it is", got)
	}

	r.Headers = map[string]string{"X-Keep": "a\r\nVia: evil"}
	_, m = shapedInviteWith(t, r, allow, "")
	if got := headerValues(m, "X-Keep"); len(got) != 1 || got[0] != "kept" {
		t.Errorf("X-Keep %q, want the caller's, the route's being refused", got)
	}
}

// Identity headers in a route's headers are refused with a warning: they
// go through caller_id and caller_id_presentation (docs/design/lcr.md 4.4,
// 4.5: the path that rewrites From with its tag intact). A second PAI, or a Privacy: none, would
// bypass CLIR.
func TestShapingRouteIdentityHeadersRefused(t *testing.T) {
	var logs bytes.Buffer
	r := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", CallerIDPresentation: "restricted",
		Headers: map[string]string{
			"P-Asserted-Identity":  "<sip:+13105550999@evil.example>",
			"p-preferred-identity": "<sip:+13105550999@evil.example>",
			"Privacy":              "none",
			"Remote-Party-ID":      "<sip:+13105550999@evil.example>;privacy=off",
			"X-Account":            "42",
		}}
	_, m := shapedInviteLogged(t, r, nil, "", &logs)
	for _, h := range []string{"P-Asserted-Identity", "p-preferred-identity", "Privacy", "Remote-Party-ID"} {
		if !strings.Contains(logs.String(), "level=WARN msg=\"route header refused: identity goes through caller_id and caller_id_presentation\" call_id=a-call-1 carrier=carrier-a header="+h+"\n") {
			t.Errorf("no warning for the route's %s:\n%s", h, logs.String())
		}
	}
	if got := headerValues(m, "P-Asserted-Identity"); len(got) != 1 || got[0] != "<sip:+13105550199@203.0.113.1>" {
		t.Errorf("PAI %q, want sipedge's own alone", got)
	}
	if got := headerValues(m, "Privacy"); len(got) != 1 || got[0] != "id" {
		t.Errorf("Privacy %q, want id alone (CLIR)", got)
	}
	if got := headerValues(m, "P-Preferred-Identity"); len(got) != 0 {
		t.Errorf("P-Preferred-Identity %q injected", got)
	}
	if got := headerValues(m, "Remote-Party-ID"); len(got) != 0 {
		t.Errorf("Remote-Party-ID %q injected", got)
	}
	if got := headerValues(m, "X-Account"); len(got) != 1 || got[0] != "42" {
		t.Errorf("X-Account %q, want the route's", got)
	}
}

// A ruri's user part is the number dialled at that carrier: shaped by the
// route's number policy, the tech prefix in front, its user parameters and
// the rest of the URI as given (docs/design/lcr.md 4.2, 4.3). To
// stays the dialled number, shaped. A ruri without a user dials the
// dialled number at its host.
func TestShapingRURINumberShaped(t *testing.T) {
	const ruri = "sip:2025550100;npdi@gw.carrier.example.net:5080;transport=tcp"
	cases := []struct {
		name     string
		r        route.Route
		ruri, to string
	}{
		{"e164+prefix", route.Route{RURI: ruri, NumberPolicy: "e164", TechPrefix: "1010288"},
			"sip:1010288+12025550100;npdi@gw.carrier.example.net:5080;transport=tcp", "+12025550123"},
		{"national", route.Route{RURI: "sip:+12025550100@gw.carrier.example.net", NumberPolicy: "national"},
			"sip:12025550100@gw.carrier.example.net", "12025550123"},
		{"no-policy", route.Route{RURI: ruri, TechPrefix: "#31#"},
			"sip:%2331%232025550100;npdi@gw.carrier.example.net:5080;transport=tcp", "12025550123"},
		{"default-policy", route.Route{RURI: ruri}, // b2bua.default_number_policy
			"sip:+12025550100;npdi@gw.carrier.example.net:5080;transport=tcp", "+12025550123"},
		{"no-user", route.Route{RURI: "sip:gw.carrier.example.net:5080", NumberPolicy: "e164", TechPrefix: "99"},
			"sip:99+12025550123@gw.carrier.example.net:5080", "+12025550123"},
	}
	for _, c := range cases {
		c.r.CarrierID, c.r.GatewayGroup = "carrier-a", "carrier-a"
		_, m := shapedInvite(t, c.r, func(cfg *Config) {
			if c.name == "default-policy" {
				cfg.DefaultNumberPolicy = "e164"
			}
		})
		if got := string(m.RequestURI()); got != c.ruri {
			t.Errorf("%s: R-URI %q, want %q", c.name, got, c.ruri)
		}
		var to parser.Address
		if err := m.To(&to); err != nil {
			t.Fatalf("%s: To: %v", c.name, err)
		}
		if got := string(to.URI); !strings.HasPrefix(got, "sip:"+c.to+"@") {
			t.Errorf("%s: To %q, want the dialled number %s (no tech prefix, not the ruri's)", c.name, got, c.to)
		}
	}
}

// The caller's Privacy (RFC 3323 4.2, RFC 3325 9.3) comes from an untrusted
// trunk: it is never copied as it is. A request to withhold the identity
// (id, user, header) is honoured as CLIR; none and unknown values are
// dropped, so the carrier never gets "none;id".
func TestShapingCallerPrivacy(t *testing.T) {
	plain := route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a"}
	cases := []struct {
		privacy, want string
		anon          bool
	}{
		{"", "", false},
		{"none", "", false},
		{"id", "id", true},
		{"user", "user;id", true},
		{"header;critical", "header;critical;id", true},
		{"none;id", "id", true},
		{"session", "session", false},
		{"bogus", "", false},
	}
	for _, c := range cases {
		extra := ""
		if c.privacy != "" {
			extra = "Privacy: " + c.privacy + "\r\n"
		}
		_, m := shapedInviteWith(t, plain, nil, extra)
		if got := hdr(m, parser.HeaderPrivacy); got != c.want {
			t.Errorf("caller Privacy %q: carrier's %q, want %q", c.privacy, got, c.want)
		}
		var from parser.Address
		m.From(&from)
		if anon := string(from.URI) == "sip:anonymous@anonymous.invalid"; anon != c.anon {
			t.Errorf("caller Privacy %q: From %s, anonymous %v", c.privacy, from.URI, c.anon)
		}
		if c.anon && m.Get(parser.HeaderPAssertedIdentity) == nil {
			t.Errorf("caller Privacy %q: withheld without a P-Asserted-Identity", c.privacy)
		}
	}
}

// Identity headers from a trunk reach the carrier in no request, in the
// dialog too, whatever the header policy allows (RFC 3325 5;
// docs/design/lcr.md 4.4).
func TestIdentityHeadersNeverRelayed(t *testing.T) {
	r := newRig(t, func(c *Config) {
		c.HeaderAllow = append(c.HeaderAllow, "P-Asserted-Identity", "Privacy", "Remote-Party-ID", "P-Preferred-Identity")
	})
	_, aTag := r.answerCall()
	info := strings.Replace(inDialogFromCaller("INFO", "info", 11, aTag, ""), "Content-Length",
		"P-Asserted-Identity: <sip:+12125550000@spoof.example>\r\nPrivacy: none\r\n"+
			"Remote-Party-ID: <sip:+12125550000@spoof.example>;party=calling\r\nContent-Length", 1)
	r.recv(caller, info)
	got := r.expect(carrierA, "INFO sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	for _, name := range []string{"P-Asserted-Identity", "Privacy", "Remote-Party-ID"} {
		if got.GetByName(name) != nil {
			t.Errorf("%s relayed to the carrier in the dialog:\n%s", name, got.Bytes())
		}
	}
	r.recv(carrierA, carrierResponse(got, 200, "OK", ""))
	r.expect(caller, "SIP/2.0 200 OK")
}

// A tech prefix with characters a SIP URI's user may not hold, as
// "#31#", is %-escaped in the Request-URI (RFC 3261 25.1): a
// strict carrier would answer 400.
func TestShapingTechPrefixEscaped(t *testing.T) {
	_, m := shapedInvite(t, route.Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", TechPrefix: "#31#"}, nil)
	if got := string(m.RequestURI()); !strings.HasPrefix(got, "sip:%2331%2312025550123@") {
		t.Errorf("R-URI %q", got)
	}
	var u parser.URI
	if err := parser.ParseURI(m.RequestURI(), &u); err != nil {
		t.Fatal(err)
	}
	if got := string(parser.Unescape(nil, u.User)); got != "#31#12025550123" {
		t.Errorf("user unescaped %q", got)
	}
	if b := appendUserEscaped(nil, "a%2Fb c"); string(b) != "a%2Fb%20c" {
		t.Errorf("appendUserEscaped kept %q", b)
	}
}
