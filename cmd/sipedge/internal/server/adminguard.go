package server

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
)

// maxAdminBody bounds the body of an admin change (a gateway group, a
// trunk): one JSON object. The health and trunk handlers bound what they
// decode at the same size.
const maxAdminBody = 1 << 20

// adminGuard is what every admin request passes before its handler.
//
// With admin.token every request must carry "Authorization: Bearer TOKEN",
// except the probes (GET /healthz, /readyz) and, unless admin.metrics_auth,
// GET /metrics: load balancers, orchestrators and scrapers need no secret
// to learn that sipedge is up. A web page cannot make a browser send the
// header to another site (that needs a CORS preflight, which sipedge never
// answers), so the token alone defeats cross-site requests.
//
// Without a token the guard stands in for it. Every request but the probes
// must name the admin listener in Host (a page whose name an attacker
// re-points at this host, DNS rebinding, sends its own name) and, when it
// has an Origin, come from the listener's own (a cross-site request carries
// the page's). A change (any method but GET and HEAD) must come from this
// host (a loopback peer) and, but for DELETE, carry Content-Type
// application/json: an HTML form or a fetch without preflight can post
// text/plain, form and multipart bodies across sites, never JSON.
//
// A change's body is read whole, up to its limit, before the handler runs:
// a larger one is 413 naming the limit, for every handler alike.
type adminGuard struct {
	next        http.Handler
	token       []byte // "Bearer " + admin.token; nil without a token
	metricsAuth bool

	// hosts are the host:port forms (canonicalHost) of the listener that
	// Host and Origin may name; anyIP, for a listener on every address
	// (0.0.0.0, [::]), lets them name any IP address with its port.
	hosts map[string]bool
	port  uint16
	anyIP bool
}

// newAdminGuard guards next, the admin API listening on addr.
func newAdminGuard(cfg config.Admin, addr netip.AddrPort, next http.Handler) *adminGuard {
	g := &adminGuard{next: next, metricsAuth: cfg.MetricsAuth, port: addr.Port(), hosts: map[string]bool{}}
	if cfg.Token != "" {
		g.token = []byte("Bearer " + cfg.Token)
	}
	ip := addr.Addr().Unmap()
	g.hosts[netip.AddrPortFrom(ip, g.port).String()] = true
	if ip.IsLoopback() || ip.IsUnspecified() {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			g.hosts[h+":"+strconv.Itoa(int(g.port))] = true
		}
	}
	g.anyIP = ip.IsUnspecified()
	return g
}

func (g *adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	probe := read && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
	switch {
	case probe:
	case g.token != nil:
		if r.URL.Path == "/metrics" && read && !g.metricsAuth {
			break
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), g.token) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, errors.New("unauthorized: admin.token is set and this request does not carry it"))
			return
		}
	default:
		if err := g.sameSite(r, read); err != nil {
			writeError(w, http.StatusForbidden, fmt.Errorf("admin.token is not set: %w", err))
			return
		}
	}
	if !read && !g.readBody(w, r) {
		return
	}
	g.next.ServeHTTP(w, r)
}

// sameSite checks a request without a token: Host, Origin and, for a
// change, the peer and the Content-Type.
func (g *adminGuard) sameSite(r *http.Request, read bool) error {
	if h, ok := canonicalHost(r.Host, "80"); !ok || !g.listener(h) {
		return fmt.Errorf("the Host %q is not this admin API's address (%s); name it by that address, or set admin.token", r.Host, g.address())
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
		h, ok := "", false
		if err == nil && port != "" {
			h, ok = canonicalHost(u.Host, port)
		}
		if !ok || !g.listener(h) {
			return fmt.Errorf("the Origin %q is another site: requests from web pages are refused", o)
		}
	}
	if read {
		return nil
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err != nil || !ap.Addr().IsLoopback() {
		return errors.New("changes are accepted from this host only")
	}
	if r.Method != http.MethodDelete {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return fmt.Errorf("a change must be Content-Type: application/json, not %q", r.Header.Get("Content-Type"))
		}
	}
	return nil
}

// listener reports whether h, a canonicalHost, names the admin listener.
func (g *adminGuard) listener(h string) bool {
	if g.hosts[h] {
		return true
	}
	if !g.anyIP {
		return false
	}
	ap, err := netip.ParseAddrPort(h)
	return err == nil && ap.Port() == g.port
}

// address is the listener's address, for the refusal's text.
func (g *adminGuard) address() string {
	names := make([]string, 0, len(g.hosts))
	for h := range g.hosts {
		names = append(names, h)
	}
	if g.anyIP {
		names = append(names, "any IP address:"+strconv.Itoa(int(g.port)))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// canonicalHost returns hostport (a Host header, an Origin's host) as
// host:port, defaultPort when it names none, lower case; an IP address in
// netip's form ("[::1]:9090", an IPv4-mapped address unmapped).
func canonicalHost(hostport, defaultPort string) (string, bool) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defaultPort
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if host == "" || err != nil {
		return "", false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), uint16(p)).String(), true
	}
	return strings.ToLower(host) + ":" + strconv.FormatUint(p, 10), true
}

// adminBodyLimit is the largest body a change to path may carry: a static
// rate table may be a carrier's whole deck; anything else is one object.
func adminBodyLimit(path string) int64 {
	if path == "/v1/lcr/static_routes" {
		return maxStaticBody
	}
	return maxAdminBody
}

// readBody reads r's body whole, up to its limit, and puts it back for the
// handler. Over the limit it answers 413 naming the limit, and false.
func (g *adminGuard) readBody(w http.ResponseWriter, r *http.Request) bool {
	limit := adminBodyLimit(r.URL.Path)
	tooLarge := func() bool {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over the limit of %d bytes (%s) for %s", limit, mib(limit), r.URL.Path))
		return false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var over *http.MaxBytesError
	switch {
	case errors.As(err, &over):
		return tooLarge()
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Errorf("cannot read the request body: %w", err))
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// mib formats a byte count in MiB.
func mib(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }
