package b2bua

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// carrierRedirect is the carrier's 3xx to its INVITE req, to contact.
func carrierRedirect(req *parser.Message, code int, reason, contact string) string {
	b := parser.AppendResponse(nil, req, code, reason, []byte("btag9"))
	b = append(b, "Contact: "+contact+"\r\n"...)
	return string(parser.AppendBody(b, "", nil))
}

// A carrier's 3xx is never relayed (RFC 3261 21.3: its Contact names the
// carrier's network, and sipedge would relay it without one): not a
// reroute cause, it reaches the caller as 480, and the CDR keeps the 302
// among the attempts.
func TestCarrier3xxReachesCallerAs480(t *testing.T) {
	for _, code := range []int{300, 301, 302, 305, 380} {
		r := newRig(t, nil)
		inv := r.startCall()
		r.recv(carrierA, carrierRedirect(inv, code, "Moved", "<sip:15551234@192.0.2.99:5060>"))
		r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
		got := r.expect(caller, "SIP/2.0 480 Temporarily Unavailable")[0]
		if got.Count(parser.HeaderContact) != 0 {
			t.Errorf("%d: the caller's 480 carries a Contact:\n%s", code, got.Bytes())
		}
		s := r.summary()
		if s.FinalCode != 480 || len(s.Attempts) != 1 || s.Attempts[0].Status != code {
			t.Errorf("%d: CDR final %d, attempts %+v", code, s.FinalCode, s.Attempts)
		}
	}
}

// A 3xx that is a reroute cause fails over to the next carrier, as any
// other reroute cause does; the caller sees no 3xx.
func TestCarrier3xxRerouteCause(t *testing.T) {
	a := routeA
	a.RerouteCauses = []int{302, 503}
	r := twoCarriers(t, a, routeB)
	inv := r.startCall()
	r.recv(carrierA, carrierRedirect(inv, 302, "Moved Temporarily", "<sip:15551234@192.0.2.99>"))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller)
	inv2 := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierResponse(inv2, 486, "Busy Here", ""))
	r.expect(carrierB, "ACK sip:15551234@198.51.100.21:5070 SIP/2.0")
	r.expect(caller, "SIP/2.0 486 Busy Here")
}

// A policy's 3xx for the caller is a 480 too: sipedge writes no Contact.
func TestPolicy3xxReachesCallerAs480(t *testing.T) {
	r := newRig(t, nil)
	r.e.env.Policy.OnFailure = func(*Call, int, string) FailureAction { return FailureAction{Code: 302} }
	inv := r.startCall()
	r.recv(carrierA, carrierResponse(inv, 404, "Not Found", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 480 Temporarily Unavailable")
}

// follows is a carrier plane whose carrier-a group follows redirects to
// its other member, carrierB's address.
func follows(r *rig) *[]string {
	var asked []string
	r.c.OnRedirect = func(d *carrier.Dial, host []byte, port uint16) bool {
		asked = append(asked, fmt.Sprintf("%s:%d", host, port))
		if d.Group != "carrier-a" || string(host) != "198.51.100.21" || port != 5070 {
			return false
		}
		d.Peer = transport.Peer{Addr: carrierB, Transport: transport.UDP}
		d.URI = "sip:198.51.100.21:5070"
		return true
	}
	return &asked
}

// With follow_redirects, a carrier's 302 to another member of its group is
// followed within the attempt (RFC 3261 8.1.3.4): the INVITE again in the
// same dialog with the next CSeq, its Request-URI the Contact, to that
// member; a Contact naming no member is skipped.
func TestFollowRedirect(t *testing.T) {
	r := newRig(t, nil)
	asked := follows(r)
	inv := r.startCall()
	r.recv(carrierA, carrierRedirect(inv, 302, "Moved Temporarily",
		"<sip:+15551234@192.0.2.99:5060>, <sip:+15551234@198.51.100.21:5070;user=phone?X-Drop=1>"))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller)
	inv2 := r.expect(carrierB, "INVITE sip:+15551234@198.51.100.21:5070;user=phone SIP/2.0")[0]
	if len(*asked) != 2 {
		t.Errorf("asked the plane about %q, want both Contacts", *asked)
	}
	c1, _ := inv.CSeq()
	c2, _ := inv2.CSeq()
	if hdr(inv, parser.HeaderCallID) != hdr(inv2, parser.HeaderCallID) || tagOf(t, inv, parser.HeaderFrom) != tagOf(t, inv2, parser.HeaderFrom) ||
		c2.Num != c1.Num+1 || strings.Contains(string(inv2.Bytes()), "X-Drop") {
		t.Fatalf("the redirected INVITE is not the next request of the dialog:\n%s", inv2.Bytes())
	}
	r.recv(carrierB, carrierResponse(inv2, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
	r.expect(carrierB, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	if n := r.e.m.redirectsFollowed.Get(); n != 1 {
		t.Errorf("sipedge_carrier_redirects_followed_total %d, want 1", n)
	}
}

// A redirect is followed once per attempt: the member it led to redirecting
// again is the attempt's failure.
func TestFollowRedirectOnce(t *testing.T) {
	r := newRig(t, nil)
	follows(r)
	inv := r.startCall()
	r.recv(carrierA, carrierRedirect(inv, 302, "Moved Temporarily", "<sip:+15551234@198.51.100.21:5070>"))
	r.take(carrierA)
	inv2 := r.expect(carrierB, "INVITE sip:+15551234@198.51.100.21:5070 SIP/2.0")[0]
	r.recv(carrierB, carrierRedirect(inv2, 302, "Moved Temporarily", "<sip:+15551234@198.51.100.21:5070>"))
	r.expect(carrierB, "ACK sip:+15551234@198.51.100.21:5070 SIP/2.0")
	r.expect(caller, "SIP/2.0 480 Temporarily Unavailable")
	if s := r.summary(); s.Attempts[0].Status != 302 {
		t.Errorf("attempts %+v", s.Attempts)
	}
}

// Without follow_redirects (the plane follows none), a 3xx is the attempt's
// failure, whatever its Contact; nor is a 305 or 380 followed, even to a
// member.
func TestRedirectNotFollowed(t *testing.T) {
	for _, code := range []int{305, 380} {
		r := newRig(t, nil)
		follows(r)
		inv := r.startCall()
		r.recv(carrierA, carrierRedirect(inv, code, "Use Proxy", "<sip:198.51.100.21:5070>"))
		r.take(carrierA)
		r.expect(carrierB)
		r.expect(caller, "SIP/2.0 480 Temporarily Unavailable")
	}
	r := newRig(t, nil)
	r.routes = []route.Route{routeA}
	inv := r.startCall()
	r.recv(carrierA, carrierRedirect(inv, 302, "Moved Temporarily", "<sip:+15551234@198.51.100.21:5070>"))
	r.take(carrierA)
	r.expect(carrierB)
	r.expect(caller, "SIP/2.0 480 Temporarily Unavailable")
}
