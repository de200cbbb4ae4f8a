package b2bua

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// rig runs one Engine on internal/enginerig: what the engine sends is
// read per destination (take, expect), the test's messages go through the
// parser's Parse and Validate like the shard's (recv), and the clock
// advances with the engine's timers (advance).
type rig struct {
	*enginerig.Rig
	t       *testing.T
	e       *Engine
	c       *enginerig.Carriers // the engine's carrier plane
	calls   []ended             // the CDRs, read back (endedOf)
	routes  []route.Route       // the Router's answer; nil: carrier-a alone
	pending bool                // the Router answers later: refs collects the calls
	refs    []uint64
	// creds are the accounts of gateway groups (Carriers.Credentials),
	// for realm when it is set.
	creds map[string]digest.Credentials
	realm string
}

// The rig's network: the caller on the trunk, the gateways of the groups
// carrier-a and carrier-b (the group down has none up), and a host that
// is neither.
var (
	caller   = enginerig.Caller
	carrierA = enginerig.CarrierA
	carrierB = enginerig.CarrierB
	stranger = enginerig.Stranger
)

func newRig(t *testing.T, mod func(*Config)) *rig {
	r := &rig{Rig: enginerig.New(t), t: t, c: enginerig.NewCarriers()}
	r.c.OnCredentials = func(d *carrier.Dial) *health.AuthConfig {
		cr, ok := r.creds[d.Group]
		if !ok {
			return nil
		}
		return &health.AuthConfig{Username: cr.Username, Password: cr.Password, Realm: r.realm}
	}
	cfg := Config{
		Trunks:      []Trunk{{Name: "local", Group: "cust-trunks", Sources: []Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}},
		HeaderAllow: []string{"Allow", "Supported", "X-Keep"},
		Local:       LocalAddrs{transport.UDP: enginerig.Local},
		MaxDuration: time.Hour,
	}
	if mod != nil {
		mod(&cfg)
	}
	env := Env{
		Send:       r.Wire.Send,
		Clock:      &r.Clock,
		MintCallID: r.MintCallID,
		CDR:        enginerig.CDRFunc(func(rec *cdr.Record) { r.calls = append(r.calls, endedOf(rec)) }),
		Carriers:   r.c,
		Router: routerFunc(func(req *route.Request) route.Decision {
			if string(req.Dialed) == "404" {
				return route.Decision{Code: 404, Reason: "No Route"}
			}
			if r.pending {
				r.refs = append(r.refs, req.Ref)
				return route.Decision{Pending: true}
			}
			routes := r.routes
			if routes == nil {
				routes = []route.Route{{CarrierID: "carrier-a", GatewayGroup: "carrier-a", Rate: 0.004}}
			}
			return route.Decision{Routes: routes, Source: route.SourceStatic}
		}),
	}
	e, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	r.Attach(e)
	return r
}

// routerFunc makes a function a Router.
type routerFunc func(*route.Request) route.Decision

func (f routerFunc) Route(q *route.Request) route.Decision { return f(q) }

// ended is a call that ended as its CDR tells it: the Summary it was built
// from, its times on the rig's clock, and the winning route's cdr_fields.
type ended struct {
	Summary
	CDRFields map[string]string
	EndReason string
	// Legs are lcr_attempts' B-legs, by attempt.
	Legs []cdrLeg
}

// cdrLeg is an attempt's b_call_id and time_invite (on the rig's
// clock) as its CDR tells them.
type cdrLeg struct {
	BCallID string
	Invite  time.Duration
}

// endedOf reads a CDR back.
func endedOf(rec *cdr.Record) ended {
	at := func(t time.Time) time.Duration {
		if t.IsZero() {
			return 0
		}
		return t.Sub(enginerig.Epoch)
	}
	s := Summary{ACallID: []byte(rec.ACallID), BCallID: []byte(rec.BCallID), Trunk: &Trunk{Name: rec.Trunk, Group: rec.TrunkGroup},
		Caller: []byte(rec.Caller), Callee: []byte(rec.Callee), Source: netip.AddrPortFrom(rec.SourceIP, 0),
		Target:      carrier.Dial{CarrierID: rec.CarrierID, Group: rec.Route},
		RouteSource: rec.RouteSource, Invite: at(rec.TimeInvite), FirstProvisional: at(rec.TimeFirstProvisional),
		Answer: at(rec.TimeAnswer), End: at(rec.TimeEnd), FinalCode: rec.FinalCode, FinalReason: []byte(rec.FinalReason),
		HangupSide: rec.HangupSide}
	s.Attempts = []route.Attempt{}
	var legs []cdrLeg
	for _, a := range rec.Attempts {
		s.Attempts = append(s.Attempts, route.Attempt{CarrierID: a.CarrierID, Status: a.Status,
			ElapsedMs: a.Elapsed.Milliseconds(), Dialed: a.Dialed, Reason: a.Reason})
		legs = append(legs, cdrLeg{BCallID: strings.Clone(a.BCallID), Invite: at(a.TimeInvite)})
	}
	return ended{Summary: s, CDRFields: maps.Clone(rec.CDRFields), EndReason: rec.EndReason, Legs: legs}
}

// advance moves the clock, firing due timers in order.
func (r *rig) advance(d time.Duration) { r.Advance(d) }

// recv delivers a message from a peer.
func (r *rig) recv(from netip.AddrPort, msg string) {
	r.t.Helper()
	r.Deliver(transport.Peer{Addr: from, Transport: transport.UDP}, []byte(msg))
}

// take returns the messages sent to a peer since the last take.
func (r *rig) take(to netip.AddrPort) []string {
	var got []string
	for {
		b, ok := r.Wire.Next(to)
		if !ok {
			return got
		}
		got = append(got, string(b))
	}
}

// expect takes exactly the messages sent to a peer and checks each starts
// with the given start line.
func (r *rig) expect(to netip.AddrPort, startLines ...string) []*parser.Message {
	r.t.Helper()
	got := r.take(to)
	if len(got) != len(startLines) {
		r.t.Fatalf("to %v: got %d messages, want %d (%q):\n%s", to, len(got), len(startLines), startLines, strings.Join(got, "\n----\n"))
	}
	var ms []*parser.Message
	for i, s := range got {
		if !strings.HasPrefix(s, startLines[i]+"\r\n") {
			r.t.Fatalf("to %v: message %d starts %q, want %q:\n%s", to, i, firstLine(s), startLines[i], s)
		}
		m := new(parser.Message)
		if err := m.Parse([]byte(s)); err != nil {
			r.t.Fatalf("sipedge sent a message that does not parse: %v\n%s", err, s)
		}
		if err := m.Validate(nil); err != nil {
			r.t.Fatalf("sipedge sent a message that does not validate: %v\n%s", err, s)
		}
		if to == carrierA || to == carrierB {
			assertHidden(r.t, s, "caller.example.org", "a-call-1", "atag1", "z9hG4bKCALLER")
		} else {
			assertHidden(r.t, s, "carrier.example.net", "btag9", "z9hG4bKCARRIER", "@sipedge")
		}
		ms = append(ms, m)
	}
	return ms
}

// assertHidden fails when a message to one side carries anything of the other.
func assertHidden(t *testing.T, msg string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Fatalf("topology leak: %q in\n%s", s, msg)
		}
	}
}

func firstLine(s string) string { return string(enginerig.FirstLine([]byte(s))) }

func hdr(m *parser.Message, k parser.HeaderKind) string { return string(m.Get(k)) }

func tagOf(t *testing.T, m *parser.Message, k parser.HeaderKind) string {
	t.Helper()
	var a parser.Address
	if err := m.Address(k, 0, &a); err != nil {
		t.Fatal(err)
	}
	return string(a.Tag)
}

const sdp = "v=0\r\no=- 1 1 IN IP4 192.0.2.10\r\ns=-\r\nc=IN IP4 192.0.2.10\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"

// The caller's messages. The caller lives at caller.example.org; its
// identifiers (a-call-1, atag1, z9hG4bKa...) must never reach the carrier.
func callerInvite(branch, callID, dialed string) string {
	return "INVITE sip:" + dialed + "@203.0.113.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bKCALLER" + branch + "\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n" +
		"To: <sip:" + dialed + "@203.0.113.1>\r\n" +
		"Call-ID: " + callID + "\r\n" +
		"CSeq: 10 INVITE\r\n" +
		"Contact: <sip:alice@caller.example.org:5061>\r\n" +
		"Record-Route: <sip:rr.caller.example.org;lr>\r\n" +
		"X-Keep: kept\r\nX-Drop: dropped\r\n" +
		"Content-Type: application/sdp\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(sdp)) + sdp
}

// cancelOf is the caller's CANCEL of its INVITE inv (RFC 3261 9.1: its
// Request-URI, Call-ID, From, To, Via and CSeq number).
func cancelOf(inv string) string {
	cancel := strings.Replace(strings.Replace(inv, "INVITE sip:", "CANCEL sip:", 1), "CSeq: 10 INVITE", "CSeq: 10 CANCEL", 1)
	return cancel[:strings.Index(cancel, "Content-Type")] + "Content-Length: 0\r\n\r\n"
}

// inDialogFromCaller builds a request the caller sends in the dialog.
func inDialogFromCaller(method, branch string, cseq int, toTag, body string) string {
	s := method + " sip:alice-contact@203.0.113.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bKCALLER" + branch + "\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=" + toTag + "\r\n" +
		"Call-ID: a-call-1\r\n" +
		fmt.Sprintf("CSeq: %d %s\r\n", cseq, method) +
		"Contact: <sip:alice@caller.example.org:5061>\r\n"
	if body != "" {
		s += "Content-Type: application/sdp\r\n"
	}
	return s + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// carrierResponse answers a request the carrier received, as a UAS would.
func carrierResponse(req *parser.Message, code int, reason, body string) string {
	b := parser.AppendResponse(nil, req, code, reason, []byte("btag9"))
	if code > 100 {
		b = append(b, "Contact: <sip:gw@carrier.example.net:5070>\r\n"...)
	}
	if body != "" {
		b = append(b, "Content-Type: application/sdp\r\n"...)
	}
	return string(parser.AppendBody(b, "", []byte(body)))
}

// callerResponse answers a request the caller received.
func callerResponse(req *parser.Message, code int, reason string) string {
	return string(parser.AppendBody(parser.AppendResponse(nil, req, code, reason, nil), "", nil))
}

// inDialogFromCarrier builds a request the carrier sends in the B dialog.
func inDialogFromCarrier(t *testing.T, binv *parser.Message, method string, cseq int) string {
	var from parser.Address
	if err := binv.From(&from); err != nil {
		t.Fatal(err)
	}
	return method + " sip:sipedge@203.0.113.1:5060 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP carrier.example.net:5070;branch=z9hG4bKCARRIER" + method + "\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: <sip:15551234@carrier.example.net>;tag=btag9\r\n" +
		"To: <" + string(from.URI) + ">;tag=" + string(from.Tag) + "\r\n" +
		"Call-ID: " + hdr(binv, parser.HeaderCallID) + "\r\n" +
		fmt.Sprintf("CSeq: %d %s\r\n", cseq, method) +
		"Content-Length: 0\r\n\r\n"
}

// ackFromCaller is the caller's ACK for the 2xx.
func ackFromCaller(toTag string) string {
	return "ACK sip:sipedge@203.0.113.1:5060 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bKCALLERack\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=" + toTag + "\r\n" +
		"Call-ID: a-call-1\r\nCSeq: 10 ACK\r\nContent-Length: 0\r\n\r\n"
}

// ackOfFailure is the caller's ACK for a non-2xx final response, whose To
// tag is toTag, to callerInvite(branch, callID, "15551234"): in the
// INVITE's transaction, its branch and CSeq number (RFC 3261 17.1.1.3).
func ackOfFailure(branch, callID, toTag string) string {
	return "ACK sip:15551234@203.0.113.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP caller.example.org:5061;branch=z9hG4bKCALLER" + branch + "\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: \"Alice\" <sip:alice@caller.example.org>;tag=atag1\r\n" +
		"To: <sip:15551234@203.0.113.1>;tag=" + toTag + "\r\n" +
		"Call-ID: " + callID + "\r\nCSeq: 10 ACK\r\nContent-Length: 0\r\n\r\n"
}

// answerCall runs a call to the answered and ACKed state and returns the
// B-leg INVITE and the caller's To tag.
func (r *rig) answerCall() (binv *parser.Message, aTag string) {
	r.t.Helper()
	r.recv(caller, callerInvite("1", "a-call-1", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	binv = r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	ringing := r.expect(caller, "SIP/2.0 180 Ringing")[0]
	aTag = tagOf(r.t, ringing, parser.HeaderTo)
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	if tagOf(r.t, ok, parser.HeaderTo) != aTag {
		r.t.Fatalf("the 200's To tag differs from the 180's")
	}
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	return binv, aTag
}
