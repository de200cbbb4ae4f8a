package b2bua

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Addresses of the caller's side that are not where its INVITE came from
// (caller): a proxy it record-routes through, its own Contact, another.
var (
	callerProxy   = netip.MustParseAddrPort("192.0.2.50:5080")
	callerContact = netip.MustParseAddrPort("192.0.2.77:5062")
	callerMoved   = netip.MustParseAddrPort("192.0.2.78:5064")
)

// inviteRouted is the caller's INVITE with Contact contact and the
// Record-Route lines rr ("" for none).
func inviteRouted(contact string, rr ...string) string {
	inv := strings.Replace(callerInvite("1", "a-call-1", "15551234"),
		"Contact: <sip:alice@caller.example.org:5061>\r\n", "Contact: "+contact+"\r\n", 1)
	rrs := ""
	for _, r := range rr {
		rrs += "Record-Route: " + r + "\r\n"
	}
	return strings.Replace(inv, "Record-Route: <sip:rr.caller.example.org;lr>\r\n", rrs, 1)
}

// answerRouted runs the call of INVITE inv, sent from src, to answered and
// ACKed, and returns the carrier's INVITE and the caller's To tag.
func (r *rig) answerRouted(src netip.AddrPort, inv string) (*parser.Message, string) {
	r.t.Helper()
	r.recv(src, inv)
	r.take(caller)
	r.take(src)
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	ok := r.take(caller)
	ok = append(ok, r.take(src)...)
	if len(ok) != 1 {
		r.t.Fatalf("the caller's 200: %q", ok)
	}
	var m parser.Message
	_ = m.Parse([]byte(ok[0]))
	aTag := tagOf(r.t, &m, parser.HeaderTo)
	r.recv(src, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	return binv, aTag
}

// carrierBye has the carrier hang up; it returns the BYE the caller's side
// got at to, and checks nothing else went anywhere else.
func (r *rig) carrierBye(binv *parser.Message, to netip.AddrPort, startLine string) *parser.Message {
	r.t.Helper()
	r.recv(carrierA, inDialogFromCarrier(r.t, binv, "BYE", 2))
	r.expect(carrierA, "SIP/2.0 200 OK")
	bye := r.expect(to, startLine)[0]
	if m, ok := r.Wire.Unread(); ok {
		r.t.Fatalf("a message to %v too: %q", m.To, m.Data)
	}
	return bye
}

func (r *rig) hops(kind hopKind) uint64 { return r.e.m.callerHops[kind].Get() }

// routes returns m's Route values joined with ", ".
func routes(m *parser.Message) string {
	var rs []string
	for i := 0; i < m.Count(parser.HeaderRoute); i++ {
		rs = append(rs, string(m.Nth(parser.HeaderRoute, i)))
	}
	return strings.Join(rs, ", ")
}

// Behind a loose router the request goes to the first route, its
// Request-URI the caller's Contact and its Route the route set, in the
// order of the INVITE's Record-Route (RFC 3261 12.1.1, 12.2.1.1, 16.12).
func TestCallerRequestLooseRoute(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerRouted(caller, inviteRouted("<sip:alice@192.0.2.77:5062>",
		"<sip:192.0.2.50:5080;lr>", "<sip:192.0.2.51;lr>"))
	bye := r.carrierBye(binv, callerProxy, "BYE sip:alice@192.0.2.77:5062 SIP/2.0")
	if got := routes(bye); got != "<sip:192.0.2.50:5080;lr>, <sip:192.0.2.51;lr>" {
		t.Errorf("Route %q", got)
	}
	if r.hops(hopRouteSet) != 1 || r.hops(hopFallback) != 0 {
		t.Errorf("route_set %d, fallback %d", r.hops(hopRouteSet), r.hops(hopFallback))
	}
}

// Behind a strict router (no lr) the first route is the Request-URI and
// the next hop, the rest of the route set and then the remote target the
// Route (RFC 3261 12.2.1.1).
func TestCallerRequestStrictRoute(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerRouted(caller, inviteRouted("<sip:alice@192.0.2.77:5062>",
		"<sip:192.0.2.50:5080;transport=udp>", "<sip:192.0.2.51;lr>"))
	bye := r.carrierBye(binv, callerProxy, "BYE sip:192.0.2.50:5080;transport=udp SIP/2.0")
	if got := routes(bye); got != "<sip:192.0.2.51;lr>, <sip:alice@192.0.2.77:5062>" {
		t.Errorf("Route %q", got)
	}
	r = newRig(t, nil)
	binv, _ = r.answerRouted(caller, inviteRouted("<sip:alice@192.0.2.77:5062>", "<sip:192.0.2.50:5080>"))
	bye = r.carrierBye(binv, callerProxy, "BYE sip:192.0.2.50:5080 SIP/2.0")
	if got := routes(bye); got != "<sip:alice@192.0.2.77:5062>" {
		t.Errorf("Route %q", got)
	}
}

// With no route set (a proxy that does not record-route) the request goes
// to the remote target, the caller's Contact, without Route (RFC 3261
// 12.2.1.1), not back to the proxy the INVITE came through.
func TestCallerRequestToContact(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerRouted(caller, inviteRouted("<sip:alice@192.0.2.77:5062>"))
	bye := r.carrierBye(binv, callerContact, "BYE sip:alice@192.0.2.77:5062 SIP/2.0")
	if bye.Count(parser.HeaderRoute) != 0 {
		t.Errorf("a BYE with no route set carries Route:\n%s", bye.Bytes())
	}
	if r.hops(hopContact) != 1 {
		t.Errorf("contact %d", r.hops(hopContact))
	}
}

// The next hop's address by RFC 3263 4 without DNS: maddr over the host,
// the port or 5060, the transport parameter or UDP; IPv6 in brackets.
func TestCallerNextHop(t *testing.T) {
	udpSrc := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.10:40000"), Transport: transport.UDP, Conn: 1}
	tcpSrc := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.10:40000"), Transport: transport.TCP, Conn: 77}
	f := func(uri string, src transport.Peer, want string, wantTCP bool, wantConn uint64) {
		t.Helper()
		p, ok := nextHop([]byte(uri), src)
		if want == "" {
			if ok {
				t.Errorf("%s: %+v, want none (fall back)", uri, p)
			}
			return
		}
		if !ok || p.Addr != netip.MustParseAddrPort(want) || (p.Transport == transport.TCP) != wantTCP || p.Conn != wantConn {
			t.Errorf("%s from %v: %+v %v, want %s tcp=%v conn %d", uri, src.Transport, p, ok, want, wantTCP, wantConn)
		}
	}
	f("sip:alice@192.0.2.77:5062", udpSrc, "192.0.2.77:5062", false, 1)
	f("sip:alice@192.0.2.77", udpSrc, "192.0.2.77:5060", false, 1)
	f("sip:alice@192.0.2.77;maddr=192.0.2.78", udpSrc, "192.0.2.78:5060", false, 1)
	f("sip:alice@host.example;maddr=192.0.2.78", udpSrc, "192.0.2.78:5060", false, 1)
	f("sip:alice@192.0.2.77:5062;transport=tcp", udpSrc, "192.0.2.77:5062", true, 0)
	f("sip:alice@192.0.2.77:5062;transport=TCP", udpSrc, "192.0.2.77:5062", true, 0)
	f("sip:alice@[2001:db8::7]:5062", udpSrc, "[2001:db8::7]:5062", false, 1)
	// A stream caller: its connection for a next hop on its address, the
	// address for a new one once it is gone.
	f("sip:alice@192.0.2.10:5062", tcpSrc, "192.0.2.10:5062", true, 77)
	f("sip:alice@192.0.2.10:5062;transport=tcp", tcpSrc, "192.0.2.10:5062", true, 77)
	f("sip:alice@192.0.2.77:5062;transport=tcp", tcpSrc, "192.0.2.77:5062", true, 0)
	f("sip:alice@192.0.2.77:5062", tcpSrc, "192.0.2.77:5062", false, 0)
	// What sipedge cannot send to.
	f("sip:alice@pbx.example.com", udpSrc, "", false, 0)
	f("sips:alice@192.0.2.77", udpSrc, "", false, 0)
	f("sip:alice@192.0.2.77;transport=tls", udpSrc, "", false, 0)
	f("sip:alice@192.0.2.77;transport=sctp", udpSrc, "", false, 0)
	f("tel:+15551234", udpSrc, "", false, 0)
}

// A Contact or route sipedge cannot resolve (a DNS name) falls back to
// where the INVITE's responses went, counted.
func TestCallerRequestFallback(t *testing.T) {
	r := newRig(t, nil)
	binv, _ := r.answerRouted(caller, inviteRouted("<sip:alice@pbx.example.com:5062>"))
	r.carrierBye(binv, caller, "BYE sip:alice@pbx.example.com:5062 SIP/2.0")
	if r.hops(hopFallback) != 1 {
		t.Errorf("fallback %d", r.hops(hopFallback))
	}
}

// A trunk with nat: requests go to the INVITE's source address and port,
// not its Contact (a private address) nor its Via's port, which responses
// use (RFC 3261 18.2.2); the Request-URI is still the Contact.
func TestCallerRequestNAT(t *testing.T) {
	natSrc := netip.MustParseAddrPort("192.0.2.10:40000") // the NAT's mapping of the PBX's 5061
	for _, nat := range []bool{false, true} {
		r := newRig(t, func(c *Config) { c.Trunks[0].NAT = nat })
		binv, _ := r.answerRouted(natSrc, inviteRouted("<sip:alice@10.1.2.3:5061>"))
		want := netip.MustParseAddrPort("10.1.2.3:5061")
		if nat {
			want = natSrc
		}
		r.carrierBye(binv, want, "BYE sip:alice@10.1.2.3:5061 SIP/2.0")
		if nat && r.hops(hopNAT) != 1 {
			t.Errorf("nat %d", r.hops(hopNAT))
		}
	}
}

// A target refresh moves the remote target (RFC 3261 12.2): the caller's
// accepted re-INVITE with a new Contact, then the caller's 2xx to the
// carrier's re-INVITE with another; each next request goes to the latest,
// the ACK too (RFC 3261 13.2.2.4: it follows the dialog's route).
func TestCallerTargetRefresh(t *testing.T) {
	r := newRig(t, nil)
	binv, aTag := r.answerRouted(caller, inviteRouted("<sip:alice@192.0.2.77:5062>"))
	re := strings.Replace(inDialogFromCaller("INVITE", "re1", 11, aTag, sdp),
		"Contact: <sip:alice@caller.example.org:5061>", "Contact: <sip:alice@192.0.2.78:5064>", 1)
	r.recv(caller, re)
	r.expect(caller, "SIP/2.0 100 Trying")
	bre := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(bre, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 11 ACK", 1))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")

	// The carrier's re-INVITE reaches the caller at its new Contact; the
	// caller's 2xx names yet another, where the ACK goes.
	r.recv(carrierA, strings.Replace(inDialogFromCarrier(t, binv, "INVITE", 2), "Content-Length: 0\r\n\r\n",
		"Contact: <sip:gw@carrier.example.net:5070>\r\nContent-Length: 0\r\n\r\n", 1))
	r.take(carrierA) // 100 Trying
	reA := r.expect(callerMoved, "INVITE sip:alice@192.0.2.78:5064 SIP/2.0")[0]
	resp := parser.AppendResponse(nil, reA, 200, "OK", nil)
	resp = append(resp, "Contact: <sip:alice@192.0.2.77:5062>\r\nContent-Type: application/sdp\r\n"...)
	r.recv(callerMoved, string(parser.AppendBody(resp, "", []byte(sdp))))
	r.expect(carrierA, "SIP/2.0 200 OK")
	r.recv(carrierA, inDialogFromCarrier(t, binv, "ACK", 2))
	r.expect(callerContact, "ACK sip:alice@192.0.2.77:5062 SIP/2.0")
	r.carrierBye(binv, callerContact, "BYE sip:alice@192.0.2.77:5062 SIP/2.0")
}
