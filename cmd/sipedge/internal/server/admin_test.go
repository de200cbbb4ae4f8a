package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/internal/testtier"
)

// The admin guard, request by request (adminguard.go): the bearer token
// with admin.token (the probes, and /metrics unless metrics_auth, open);
// without it, changes from this host only, as JSON, and every request but
// the probes naming the listener in Host and coming from no other site.
func TestAdminGuards(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d bytes", len(b))
	})
	guard := func(listen, token string, metricsAuth bool) http.Handler {
		return newAdminGuard(config.Admin{Token: token, MetricsAuth: metricsAuth}, netip.MustParseAddrPort(listen), echo)
	}
	local, afar, wildcard := guard("127.0.0.1:9090", "", false), guard("192.0.2.5:9090", "", false), guard("0.0.0.0:9090", "", false)
	tok, tokMetrics := guard("127.0.0.1:9090", "s3cret", false), guard("127.0.0.1:9090", "s3cret", true)
	type req struct {
		method, path, host, remote, contentType, origin, auth string
	}
	f := func(h http.Handler, q req, want int, wantIn string) {
		t.Helper()
		r := httptest.NewRequest(q.method, q.path, strings.NewReader(`{"name":"x"}`))
		r.Host, r.RemoteAddr = q.host, q.remote
		for k, v := range map[string]string{"Content-Type": q.contentType, "Origin": q.origin, "Authorization": q.auth} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want || !strings.Contains(w.Body.String(), wantIn) {
			t.Errorf("%+v: %d %s, want %d with %q", q, w.Code, w.Body.String(), want, wantIn)
		}
	}
	const json, lo, lo6, far = "application/json", "127.0.0.1:40000", "[::1]:40000", "198.51.100.7:40000"
	const groups = "/v1/gateway/groups"

	// No token: reads from anywhere, changes from this host only.
	f(afar, req{"GET", groups, "192.0.2.5:9090", far, "", "", ""}, 200, "")
	f(afar, req{"POST", groups, "192.0.2.5:9090", far, json, "", ""}, 403, "changes are accepted from this host only")
	f(afar, req{"DELETE", groups + "/x", "192.0.2.5:9090", "[2001:db8::7]:40000", "", "", ""}, 403, "this host only")
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, json, "", ""}, 200, "12 bytes")
	f(local, req{"DELETE", groups + "/x", "127.0.0.1:9090", lo6, "", "", ""}, 200, "")
	// No token: a change is JSON (a form cannot send it across sites).
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, "text/plain", "", ""}, 403, "Content-Type: application/json")
	f(local, req{"POST", "/v1/reload", "127.0.0.1:9090", lo, "", "", ""}, 403, "Content-Type: application/json")
	f(local, req{"PUT", "/v1/lcr/static_routes", "127.0.0.1:9090", lo, "application/x-www-form-urlencoded", "", ""}, 403, "application/json")
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, "application/json; charset=utf-8", "", ""}, 200, "")
	// No token: Host names the listener (DNS rebinding sends another name).
	f(local, req{"GET", groups, "evil.example:9090", lo, "", "", ""}, 403, "is not this admin API's address")
	f(local, req{"POST", groups, "evil.example:9090", lo, json, "", ""}, 403, "127.0.0.1:9090")
	f(local, req{"GET", "/metrics", "127.0.0.1:9091", lo, "", "", ""}, 403, "Host")
	f(local, req{"GET", "/metrics", "127.0.0.1", lo, "", "", ""}, 403, "Host") // port 80
	for _, h := range []string{"127.0.0.1:9090", "localhost:9090", "LOCALHOST:9090", "[::1]:9090"} {
		f(local, req{"GET", "/metrics", h, lo, "", "", ""}, 200, "")
	}
	f(afar, req{"GET", groups, "localhost:9090", far, "", "", ""}, 403, "Host")
	f(wildcard, req{"GET", groups, "10.1.2.3:9090", far, "", "", ""}, 200, "")
	f(wildcard, req{"GET", groups, "[2001:db8::1]:9090", far, "", "", ""}, 200, "")
	f(wildcard, req{"GET", groups, "10.1.2.3:80", far, "", "", ""}, 403, "any IP address:9090")
	f(wildcard, req{"GET", groups, "sipedge.evil.example:9090", far, "", "", ""}, 403, "Host")
	// No token: an Origin, when present, is the listener's own.
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, json, "http://evil.example", ""}, 403, "is another site")
	f(local, req{"GET", groups, "127.0.0.1:9090", lo, "", "http://evil.example:9090", ""}, 403, "is another site")
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, json, "null", ""}, 403, "is another site")
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, json, "https://127.0.0.1:9090", ""}, 200, "")
	f(local, req{"POST", groups, "127.0.0.1:9090", lo, json, "http://localhost:9090", ""}, 200, "")
	// No token: the probes answer whatever the Host.
	f(local, req{"GET", "/healthz", "evil.example", far, "", "http://evil.example", ""}, 200, "")
	f(local, req{"GET", "/readyz", "evil.example", far, "", "", ""}, 200, "")

	// A token: every request carries it but the probes and /metrics.
	f(tok, req{"POST", groups, "evil.example", far, "text/plain", "http://evil.example", "Bearer s3cret"}, 200, "")
	f(tok, req{"GET", groups, "127.0.0.1:9090", lo, "", "", "Bearer s3cre"}, 401, "unauthorized")
	f(tok, req{"GET", groups, "127.0.0.1:9090", lo, "", "", ""}, 401, "unauthorized")
	f(tok, req{"GET", "/healthz", "127.0.0.1:9090", far, "", "", ""}, 200, "")
	f(tok, req{"GET", "/readyz", "127.0.0.1:9090", far, "", "", ""}, 200, "")
	f(tok, req{"POST", "/healthz", "127.0.0.1:9090", far, json, "", ""}, 401, "")
	f(tok, req{"GET", "/metrics", "127.0.0.1:9090", far, "", "", ""}, 200, "")
	f(tok, req{"GET", "/metrics/x", "127.0.0.1:9090", far, "", "", ""}, 401, "")
	f(tokMetrics, req{"GET", "/metrics", "127.0.0.1:9090", far, "", "", ""}, 401, "unauthorized")
	f(tokMetrics, req{"GET", "/metrics", "127.0.0.1:9090", far, "", "", "Bearer s3cret"}, 200, "")
	f(tokMetrics, req{"GET", "/healthz", "127.0.0.1:9090", far, "", "", ""}, 200, "")
}

// A change's body over its limit is 413 naming the limit, whatever the
// handler, with a token or without, told by Content-Length or found while
// reading; a body at the limit reaches the handler whole.
func TestAdminBodyLimit(t *testing.T) {
	var got int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = len(b)
	})
	f := func(token, path string, size int64, chunked bool, want int, wantIn string) {
		t.Helper()
		got = -1
		g := newAdminGuard(config.Admin{Token: token}, netip.MustParseAddrPort("127.0.0.1:9090"), h)
		r := httptest.NewRequest("POST", path, io.LimitReader(zeros{}, size))
		r.Host, r.RemoteAddr, r.ContentLength = "127.0.0.1:9090", "127.0.0.1:40000", size
		if chunked {
			r.ContentLength = -1
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != want || !strings.Contains(w.Body.String(), wantIn) {
			t.Errorf("%s %d bytes (chunked %v): %d %s, want %d with %q", path, size, chunked, w.Code, w.Body.String(), want, wantIn)
		}
		if want == 200 && got != int(size) {
			t.Errorf("%s %d bytes: the handler read %d", path, size, got)
		}
		if want != 200 && got != -1 {
			t.Errorf("%s %d bytes: the handler ran", path, size)
		}
	}
	const mib = 1 << 20
	f("", "/v1/gateway/groups", mib, false, 200, "")
	f("", "/v1/gateway/groups", mib+1, false, 413, "over the limit of 1048576 bytes (1 MiB)")
	f("", "/v1/gateway/groups", mib+1, true, 413, "over the limit of 1048576 bytes (1 MiB)")
	f("tok", "/v1/trunks", 22*mib, false, 413, "1 MiB")
	f("tok", "/v1/trunks", 22*mib, true, 413, "1 MiB")
	f("", "/v1/lcr/static_routes", 22*mib, false, 200, "")
	f("", "/v1/lcr/static_routes", 64*mib+1, false, 413, "(64 MiB)")
}

// zeros reads as an endless run of '0'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// A header policy that lists identity headers, never copied, is warned of
// at start: the operator would otherwise believe they pass.
func TestIdentityHeaderInPolicyWarned(t *testing.T) {
	testtier.RequiresSockets(t)
	e, logs := newE2EBase(t)
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
admin: { listen: "" }
b2bua: { header_policy: { allow: [Allow, p-asserted-identity, Privacy] } }
cdr: { file: %q }
`, e.port, e.cdrPath), logs)
	for _, name := range []string{"p-asserted-identity", "Privacy"} {
		if !strings.Contains(logs.String(), "header="+name) {
			t.Errorf("no warning for %s:\n%s", name, logs.String())
		}
	}
	if strings.Contains(logs.String(), "header=Allow") {
		t.Error("Allow, which is copied, was warned of")
	}
}

// A client that stops sending in the middle of a request body, or keeps an
// idle connection, does not hold the admin API's connection (a socket, a
// goroutine) for ever.
func TestAdminStalledClientClosed(t *testing.T) {
	testtier.RequiresSockets(t)
	defer func(r, i time.Duration) { adminReadTimeout, adminIdleTimeout = r, i }(adminReadTimeout, adminIdleTimeout)
	adminReadTimeout, adminIdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	e, logs := newE2EBase(t)
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
admin: { listen: "127.0.0.1:0" }
cdr: { file: %q }
`, e.port, e.cdrPath), logs)
	for _, req := range []string{
		"POST /v1/gateway/groups HTTP/1.1\r\nHost: " + e.admin + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
		"GET /healthz HTTP/1.1\r\nHost: " + e.admin + "\r\n\r\n",
	} {
		c, err := net.Dial("tcp", e.admin)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte(req))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("%q: the connection was not closed: %v", req, err)
		}
	}
}

// adminRequest sends one request to a started server's admin API over
// HTTP: Host, Content-Type, Origin and Authorization set when not "".
func adminRequest(t *testing.T, addr, method, path, host, contentType, origin, auth string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range map[string]string{"Content-Type": contentType, "Origin": origin, "Authorization": auth} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Without admin.token, what a web page can make a browser send to the admin
// API (a text/plain form post, a request with its Origin, one with its own
// name as Host after DNS rebinding) is refused 403 and changes nothing; the
// same change as JSON from this host is made. A 22 MB body is 413 naming
// the limit.
func TestAdminWithoutTokenRefusesWebPages(t *testing.T) {
	testtier.RequiresSockets(t)
	e, logs := newE2EBase(t)
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
admin: { listen: "127.0.0.1:0" }
cdr: { file: %q }
`, e.port, e.cdrPath), logs)
	_, port, _ := net.SplitHostPort(e.admin)
	const group = `{"name": "web", "destinations": [{"uri": "sip:192.0.2.10", "address": "192.0.2.10:5060"}]}`
	post := func(host, contentType, origin string) (int, string) {
		t.Helper()
		return adminRequest(t, e.admin, "POST", "/v1/gateway/groups", host, contentType, origin, "", strings.NewReader(group))
	}
	for _, c := range []struct{ what, host, contentType, origin, want string }{
		{"a text/plain form post", "", "text/plain", "", "Content-Type: application/json"},
		{"a form post", "", "application/x-www-form-urlencoded", "", "Content-Type: application/json"},
		{"another site's Origin", "", "application/json", "http://evil.example", "is another site"},
		{"a rebound name as Host", "evil.example:" + port, "application/json", "", "is not this admin API's address"},
	} {
		if code, body := post(c.host, c.contentType, c.origin); code != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 403 with %q", c.what, code, body, c.want)
		}
	}
	if code, body := adminRequest(t, e.admin, "GET", "/v1/gateway/groups/web", "", "", "", "", nil); code != http.StatusNotFound {
		t.Fatalf("after the refused posts: %d %s, want 404: a refused post created the group", code, body)
	}
	if code, body := adminRequest(t, e.admin, "GET", "/v1/gateway/groups", "evil.example:"+port, "", "", "", nil); code != http.StatusForbidden {
		t.Errorf("a read with a rebound Host: %d %s, want 403", code, body)
	}
	if code, body := post("localhost:"+port, "application/json", "http://127.0.0.1:"+port); code != http.StatusCreated {
		t.Fatalf("JSON from this host: %d %s, want 201", code, body)
	}

	big := io.LimitReader(zeros{}, 22<<20)
	code, body := adminRequest(t, e.admin, "POST", "/v1/gateway/groups", "", "application/json", "", "", big)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "1048576 bytes (1 MiB)") {
		t.Errorf("a 22 MB body: %d %s, want 413 naming the limit", code, body)
	}
	if code, _ := e.httpGet("/healthz"); code != http.StatusOK {
		t.Errorf("after the 22 MB body: /healthz %d", code)
	}
}

// With admin.token the probes answer without it, and so does /metrics
// unless admin.metrics_auth; everything else needs it.
func TestAdminTokenLeavesProbesOpen(t *testing.T) {
	testtier.RequiresSockets(t)
	for _, metricsAuth := range []bool{false, true} {
		t.Run(fmt.Sprintf("metrics_auth=%v", metricsAuth), func(t *testing.T) {
			e, logs := newE2EBase(t)
			e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%d"]
admin: { listen: "127.0.0.1:0", token: "s3cret", metrics_auth: %v }
cdr: { file: %q }
`, e.port, metricsAuth, e.cdrPath), logs)
			get := func(path, auth string) int {
				t.Helper()
				code, _ := adminRequest(t, e.admin, "GET", path, "", "", "", auth, nil)
				return code
			}
			wantMetrics := http.StatusOK
			if metricsAuth {
				wantMetrics = http.StatusUnauthorized
			}
			for _, c := range []struct {
				path, auth string
				want       int
			}{
				{"/healthz", "", http.StatusOK},
				{"/readyz", "", http.StatusOK},
				{"/metrics", "", wantMetrics},
				{"/metrics", "Bearer s3cret", http.StatusOK},
				{"/v1/gateway/groups", "", http.StatusUnauthorized},
				{"/v1/trunks", "", http.StatusUnauthorized},
				{"/v1/gateway/groups", "Bearer s3cret", http.StatusOK},
			} {
				if got := get(c.path, c.auth); got != c.want {
					t.Errorf("GET %s (Authorization %q): %d, want %d", c.path, c.auth, got, c.want)
				}
			}
		})
	}
}
