package b2bua

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// rig runs one Engine over an in-memory network with a fake clock: what the
// engine sends is queued per destination for the test to read, and the
// test's messages go through the parser's Parse and Validate like the
// shard's.
type rig struct {
	t       *testing.T
	e       *Engine
	c       *carriers // the engine's carrier plane
	now     time.Duration
	timers  []*fakeTimer
	nextID  uint64
	sent    map[netip.AddrPort][]string
	calls   []ended // the CDRs, read back (endedOf)
	callID  int
	routes  []route.Route // the Router's answer; nil: carrier-a alone
	pending bool          // the Router answers later: refs collects the calls
	refs    []uint64
	// creds are the accounts of gateway groups (Carriers.Credentials),
	// for realm when it is set.
	creds map[string]digest.Credentials
	realm string
}

// gateways are the gateway groups the rig's carrier plane knows, one
// member each; an invalid address is a group whose members are all down.
var gateways = map[string]netip.AddrPort{
	"carrier-a": carrierA,
	"carrier-b": carrierB,
	"down":      {},
}

type fakeTimer struct {
	id      uint64
	at      time.Duration
	kind    uint8
	arg     uint64
	stopped bool
}

var (
	caller   = netip.MustParseAddrPort("192.0.2.10:5061")
	carrierA = netip.MustParseAddrPort("198.51.100.20:5070")
	carrierB = netip.MustParseAddrPort("198.51.100.21:5070")
	stranger = netip.MustParseAddrPort("203.0.113.66:5060")
)

// epoch is the wall-clock time of the rig's clock at 0 (Clock.Wall).
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newRig(t *testing.T, mod func(*Config)) *rig {
	r := &rig{t: t, now: time.Second, sent: make(map[netip.AddrPort][]string)}
	r.c = &carriers{r: r}
	cfg := Config{
		Trunks:      []Trunk{{Name: "local", Group: "cust-trunks", Sources: []Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}},
		HeaderAllow: []string{"Allow", "Supported", "X-Keep"},
		LocalUDP:    "203.0.113.1:5060",
		MaxDuration: time.Hour,
	}
	if mod != nil {
		mod(&cfg)
	}
	env := Env{
		Send:  func(to transport.Peer, b []byte) { r.sent[to.Addr] = append(r.sent[to.Addr], string(b)) },
		Clock: r,
		MintCallID: func(dst []byte) []byte {
			r.callID++
			return fmt.Appendf(dst, "b%06d@sipedge", r.callID)
		},
		CDR:      cdrSink{r},
		Carriers: r.c,
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
	return r
}

// routerFunc makes a function a Router.
type routerFunc func(*route.Request) route.Decision

func (f routerFunc) Route(q *route.Request) route.Decision { return f(q) }

// carriers is the rig's carrier plane: each group of gateways is one
// member; the accounts of the rig's creds answer challenges. A test sets a
// hook to replace what a method does.
type carriers struct {
	r         *rig
	reserve   func(rt *route.Route, key uint64, d *carrier.Dial) string
	order     func(routes []route.Route, number []byte, buf *[]route.Route) []route.Route
	pace      func(d *carrier.Dial, ref uint64) carrier.Pace
	cpsReject func(d *carrier.Dial, code int, phrase, reason []byte) (time.Duration, bool)
	outcome   func(d *carrier.Dial, code int, retryAfter time.Duration)
	release   func(d *carrier.Dial)
	redirect  func(d *carrier.Dial, host []byte, port uint16) bool
	reports   []carrier.Report // what the engine reported, Number copied
	numbers   []string         // the numbers Reserve was given
}

func (c *carriers) Reserve(rt *route.Route, key uint64, number []byte, d *carrier.Dial) string {
	c.numbers = append(c.numbers, string(number))
	if c.reserve != nil {
		return c.reserve(rt, key, d)
	}
	return reserveGateway(rt, d)
}

func (c *carriers) Order(routes []route.Route, number []byte, buf *[]route.Route) []route.Route {
	if c.order != nil {
		return c.order(routes, number, buf)
	}
	return routes
}

// reserveGateway makes rt's group's one member the dial's carrier.
func reserveGateway(rt *route.Route, d *carrier.Dial) string {
	addr, ok := gateways[rt.GatewayGroup]
	if !ok {
		return route.ReasonUnknownGroup
	}
	if !addr.IsValid() {
		return route.ReasonGroupDown
	}
	*d = carrier.Dial{CarrierID: rt.CarrierID, Group: rt.GatewayGroup, URI: "sip:" + addr.String(),
		Peer: transport.Peer{Addr: addr, Transport: transport.UDP}}
	return ""
}

func (c *carriers) Pace(d *carrier.Dial, ref uint64) carrier.Pace {
	if c.pace != nil {
		return c.pace(d, ref)
	}
	return carrier.Pace{}
}

func (c *carriers) CPSReject(d *carrier.Dial, code int, phrase, reason []byte) (time.Duration, bool) {
	if c.cpsReject != nil {
		return c.cpsReject(d, code, phrase, reason)
	}
	return 0, false
}

func (c *carriers) Outcome(d *carrier.Dial, code int, retryAfter time.Duration) {
	if c.outcome != nil {
		c.outcome(d, code, retryAfter)
	}
}

func (c *carriers) Release(d *carrier.Dial) {
	if c.release != nil {
		c.release(d)
	}
}

func (c *carriers) Credentials(d *carrier.Dial) *health.AuthConfig {
	cr, ok := c.r.creds[d.Group]
	if !ok {
		return nil
	}
	return &health.AuthConfig{Username: cr.Username, Password: cr.Password, Realm: c.r.realm}
}

func (c *carriers) Redirect(d *carrier.Dial, host []byte, port uint16) bool {
	return c.redirect != nil && c.redirect(d, host, port)
}

func (c *carriers) Report(rep *carrier.Report) {
	kept := *rep
	kept.Number = bytes.Clone(rep.Number)
	c.reports = append(c.reports, kept)
}

// cdrSink keeps each CDR, read back (endedOf).
type cdrSink struct{ r *rig }

func (s cdrSink) Write(rec *cdr.Record) bool {
	s.r.calls = append(s.r.calls, endedOf(rec))
	cdr.ReleaseRecord(rec)
	return true
}

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
		return t.Sub(epoch)
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

func (r *rig) StartAt(at time.Duration, kind uint8, arg uint64) uint64 {
	r.nextID++
	r.timers = append(r.timers, &fakeTimer{id: r.nextID, at: at, kind: kind, arg: arg})
	return r.nextID
}

// Wall implements Clock: the rig's clock counts from epoch.
func (r *rig) Wall(at time.Duration) time.Time { return epoch.Add(at) }

func (r *rig) Stop(h uint64) bool {
	for _, t := range r.timers {
		if t.id == h && !t.stopped {
			t.stopped = true
			return true
		}
	}
	return false
}

// advance moves the clock, firing due timers in order.
func (r *rig) advance(d time.Duration) {
	end := r.now + d
	for {
		sort.SliceStable(r.timers, func(i, j int) bool { return r.timers[i].at < r.timers[j].at })
		var next *fakeTimer
		for _, t := range r.timers {
			if !t.stopped && t.at <= end {
				next = t
				break
			}
		}
		if next == nil {
			break
		}
		next.stopped = true
		if next.at > r.now {
			r.now = next.at
		}
		r.e.Timer(next.kind, next.arg, r.now)
	}
	r.now = end
}

// recv delivers a message from a peer.
func (r *rig) recv(from netip.AddrPort, msg string) {
	r.t.Helper()
	var m parser.Message
	buf := []byte(msg)
	if err := m.Parse(buf); err != nil {
		r.t.Fatalf("test message does not parse: %v\n%s", err, msg)
	}
	if err := m.Validate(nil); err != nil {
		r.t.Fatalf("test message does not validate: %v\n%s", err, msg)
	}
	r.e.Receive(&m, transport.Peer{Addr: from, Transport: transport.UDP}, r.now)
}

// take returns the messages sent to a peer since the last take.
func (r *rig) take(to netip.AddrPort) []string {
	got := r.sent[to]
	delete(r.sent, to)
	return got
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
			assertHidden(r.t, s, "carrier.example.net", "btag9", "z9hG4bKCARRIER", "b00000")
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

func firstLine(s string) string {
	if i := strings.Index(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

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
