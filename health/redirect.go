package health

import (
	"net/netip"
	"strings"
)

// Redirect returns the member of the group called name that a carrier's
// redirect names (a 3xx's Contact, RFC 3261 8.1.3.4): host (an IP
// address, or the DNS name of a member's address as configured) and port
// (0: SIP's 5060, RFC 3261 19.1.2), when the group follows redirects
// (GroupConfig.FollowRedirects) and that member can take the call as Pick
// would give it: resolved, not down, not cooling down, a half-open
// member's trial call taken. A redirect outside the group is never
// followed: its Contact names a host sipedge was not configured to send
// calls to. Lock-free; like Pick's, a member returned must be reported
// with ReportCall.
func (r *Registry) Redirect(name string, host []byte, port uint16) (Member, bool) {
	g := r.snap.Load().groups[name]
	if g == nil || !g.cfg.FollowRedirects || len(host) == 0 {
		return Member{}, false
	}
	if port == 0 {
		port = 5060
	}
	h := string(host)
	if h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	ip, err := netip.ParseAddr(h)
	c := pickCtx{r: r}
	for i := range g.members {
		m := &g.members[i]
		ap := m.st.addr.Load()
		if ap == nil || ap.Port() != port {
			continue
		}
		if err == nil && ap.Addr().Unmap() != ip.Unmap() || err != nil && !strings.EqualFold(m.st.host, h) {
			continue
		}
		if !m.st.usable(&c) {
			return Member{}, false
		}
		if _, ok := m.st.reserve(modeNormal); !ok {
			return Member{}, false
		}
		return Member{Group: g.name, URI: m.uri, Addr: *ap, Transport: g.transport, Index: m.index, st: m.st}, true
	}
	return Member{}, false
}
