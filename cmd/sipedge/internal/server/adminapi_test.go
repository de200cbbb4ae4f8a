package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/internal/testtier"
)

// adminReference is the admin API's reference: each endpoint a heading
// "### `METHOD /path`".
const adminReference = "../../../../docs/admin-api.md"

type endpoint struct{ method, path string }

func (e endpoint) String() string { return e.method + " " + e.path }

// documentedEndpoints reads the endpoints of docs/admin-api.md.
func documentedEndpoints(t *testing.T) []endpoint {
	t.Helper()
	f, err := os.Open(adminReference)
	if err != nil {
		t.Fatalf("cannot open the admin API reference: %v", err)
	}
	defer f.Close()
	heading := regexp.MustCompile("^### `([A-Z]+) (/[^` ]*)`$")
	var eps []endpoint
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := heading.FindStringSubmatch(sc.Text()); m != nil {
			e := endpoint{m[1], m[2]}
			if slices.Contains(eps, e) {
				t.Errorf("%s: %s documented twice", adminReference, e)
			}
			eps = append(eps, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(eps) < 10 {
		t.Fatalf("%s: %d endpoints found: are they still headed ### `METHOD /path`?", adminReference, len(eps))
	}
	return eps
}

// requestTo is a request for e, its path parameters filled in.
func requestTo(e endpoint, body string) *http.Request {
	path := regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(e.path, "no-such-name")
	r := httptest.NewRequest(e.method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestAdminAPIDocumented fails when the server registers a route that
// docs/admin-api.md does not document (a pattern with a method, exactly;
// a subtree, by an endpoint under it), or the reference documents an
// endpoint no registered route serves. Endpoints within a subtree (a
// library's handler) are checked against a running server by
// TestAdminAPIAnswersAsDocumented.
func TestAdminAPIDocumented(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf("admin: { listen: \"127.0.0.1:9090\" }\ncdr: { file: %q }\n",
		filepath.Join(t.TempDir(), "cdr.jsonl"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.closeParts(t.Context()) })
	mux := s.adminRoutes()
	eps := documentedEndpoints(t)
	for _, p := range mux.patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "", p
		}
		if !slices.ContainsFunc(eps, func(e endpoint) bool {
			switch {
			case method != "":
				return e.method == method && e.path == path
			case strings.HasSuffix(path, "/"):
				return strings.HasPrefix(e.path, path)
			}
			return e.path == path
		}) {
			t.Errorf("the admin API registers %q, which %s does not document: add a section headed ### `METHOD /path` with a curl example", p, adminReference)
		}
	}
	for _, e := range eps {
		if _, pattern := mux.Handler(requestTo(e, "")); pattern == "" {
			t.Errorf("%s documents %s, which no route of the admin API serves", adminReference, e)
		}
	}
}

// TestAdminAPIAnswersAsDocumented: on a running server, every documented
// endpoint reaches a handler (not the mux's 404 or 405), and no other
// method on a documented path does, so that an endpoint a library's
// handler adds under a documented path (GET /v1/gateway/groups/{name} ->
// PATCH) fails until it is documented. The bodies are empty JSON objects:
// handlers refuse them (400) or act harmlessly on this test's server.
func TestAdminAPIAnswersAsDocumented(t *testing.T) {
	testtier.RequiresSockets(t)
	e := newE2E(t, e2eOpts{})
	eps := documentedEndpoints(t)
	paths := map[string]bool{}
	for _, ep := range eps {
		paths[ep.path] = true
	}
	for path := range paths {
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			ep := endpoint{method, path}
			documented := slices.Contains(eps, ep)
			if !documented && method == "GET" && slices.Contains(eps, endpoint{"HEAD", path}) {
				continue
			}
			req := requestTo(ep, "{}")
			req.Host = e.admin
			req.RemoteAddr = "127.0.0.1:40000"
			w := httptest.NewRecorder()
			e.srv.admin.Handler.ServeHTTP(w, req)
			body, _ := io.ReadAll(w.Result().Body)
			muxRefused := w.Code == http.StatusNotFound && string(body) == "404 page not found\n" ||
				w.Code == http.StatusMethodNotAllowed && string(body) == "Method Not Allowed\n"
			switch {
			case documented && muxRefused:
				t.Errorf("%s is documented, but the admin API answers %d %q", ep, w.Code, body)
			case !documented && !muxRefused:
				t.Errorf("%s answers %d %q but is not in %s", ep, w.Code, strings.TrimSpace(string(body)), adminReference)
			}
		}
	}
}
