package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// Without admin.token the admin API may be read from anywhere but changed
// only from this host; with one, every request must carry it.
func TestAdminGuards(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	cases := []struct {
		name   string
		h      http.Handler
		method string
		remote string
		auth   string
		want   int
	}{
		{"no token, read from afar", loopbackWrites(ok), "GET", "198.51.100.7:40000", "", 200},
		{"no token, change from afar", loopbackWrites(ok), "POST", "198.51.100.7:40000", "", 403},
		{"no token, delete from afar", loopbackWrites(ok), "DELETE", "[2001:db8::7]:40000", "", 403},
		{"no token, change from loopback", loopbackWrites(ok), "POST", "127.0.0.1:40000", "", 200},
		{"no token, change from loopback v6", loopbackWrites(ok), "DELETE", "[::1]:40000", "", 200},
		{"token, right", bearer("s3cret", ok), "POST", "198.51.100.7:40000", "Bearer s3cret", 200},
		{"token, wrong", bearer("s3cret", ok), "GET", "127.0.0.1:40000", "Bearer s3cre", 401},
		{"token, none", bearer("s3cret", ok), "GET", "127.0.0.1:40000", "", 401},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "/v1/gateway/groups", nil)
		r.RemoteAddr = c.remote
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.want)
		}
	}
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
		"POST /v1/gateway/groups HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
		"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
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
