package b2bua_test

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/internal/script"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// TestCallFlows runs the golden call-flow scripts in testdata/: one SIP
// ladder per behaviour of the call core, read top to bottom as the
// messages on both legs. Each case is what a peer sends (or a clock
// advance), "----", and everything sipedge did in answer, in order: the
// messages it sent, the CDR it wrote. go test -run TestCallFlows -rewrite
// rewrites the answers; review every changed line against the RFC.
//
// The engine runs on internal/enginerig, with the binary's default header
// policy, a one-hour maximum duration and a carrier plane that makes each
// gateway group one gateway (carrier-a at 198.51.100.20:5070, carrier-b at
// 198.51.100.21:5070). The caller is at 192.0.2.10:5061 on the trunk
// 192.0.2.0/24; sipedge is at 203.0.113.1:5060.
//
// A peer's message (PEER is caller, carrier-a or carrier-b):
//
//	[@+D] PEER -> sipedge METHOD [URI] [sdp]
//	[@+D] PEER -> sipedge CODE REASON... [(METHOD)] [to=TAG] [sdp]
//
// followed by the extra header lines it carries, if any, before "----".
// @+D first advances the clock by D. The caller's INVITE with a URI starts
// a new call; its other requests (ACK, CANCEL, BYE, re-INVITE, INFO...)
// belong to that call's dialog, as RFC 3261 builds them: a CANCEL copies
// the INVITE (9.1), an ACK of a 2xx is a new transaction to the remote
// target (13.2.2.4), an ACK of a failure is the INVITE's transaction
// (17.1.1.3), a request in the dialog carries the next CSeq and the tag
// sipedge last gave in a response to the INVITE (12.2.1.1), early or not.
// A carrier's requests belong to the dialog of the last initial INVITE
// sipedge sent it. A response answers the last request of METHOD
// (INVITE by default) sipedge sent the peer, a carrier's with To tag TAG
// (c1 by default) and a Contact. sdp attaches the peer's own SDP.
//
// The other commands:
//
//	@+D [COMMAND]              advance the clock by D, firing sipedge's timers, then
//	                           run COMMAND
//	routes ROUTE...            the routes of the next calls: ID[:timeout=SECS]
//	cps-reject GROUP CODE TEXT the group's CODE whose phrase or Reason holds TEXT is a CPS
//	                           reject, retried after 1s
//	account GROUP USER PASS    the group's credentials, for Digest challenges
//	show HEADER...|outcomes    also print these headers of each message, or what each
//	                           attempt told its gateway's health (Carriers.Outcome)
//	drain                      new calls get 503 from now on (Env.Draining)
//	end-all                    Engine.EndAll: the end of a drain
//	calls                      the calls and transactions the engine holds
//
// What sipedge sends is printed one message a line:
//
//	sipedge -> PEER METHOD URI call=CALLID cseq=N from=TAG [to=TAG] branch=B [sdp=WHOSE]
//	sipedge -> PEER CODE REASON (N METHOD) call=CALLID [to=TAG] [sdp=WHOSE]
//
// with, below it, its headers named by show, and always Reason,
// Retry-After and the Digest headers (a credential's response is checked
// against the challenge and shown as verified, not printed). Call-IDs,
// tags and branches are symbols, so that the scripts are stable: A1, A2
// the caller's calls, B1, B2 the B-legs sipedge minted; a1 the caller's
// tags, c1 the carriers', s1, s2 sipedge's, in the order they appear; z1,
// z2 sipedge's branches; R, R+1 the RSeqs of sipedge's reliable
// provisionals to the caller (random, RFC 3262 3), shown by show RSeq and
// named by a caller's PRACK: "RAck: R 1 INVITE". sdp=caller says a body is the caller's SDP,
// unchanged. Output during an advance is prefixed with its time, counted
// from the script's start. A CDR prints with its key fields as it is
// written, times from the script's start.
//
// Every message sipedge sends must parse and validate, and none to the
// caller may carry anything of a carrier, nor the reverse (topology
// hiding): the test fails otherwise.
func TestCallFlows(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(t *testing.T) func(*script.Command) string {
		return newLadder(t).run
	})
}

// callerSDP and carrierSDP are the peers' bodies, which sipedge passes
// through unchanged.
const (
	callerSDP  = "v=0\r\no=- 1 1 IN IP4 192.0.2.10\r\ns=-\r\nc=IN IP4 192.0.2.10\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	carrierSDP = "v=0\r\no=- 2 2 IN IP4 198.51.100.200\r\ns=-\r\nc=IN IP4 198.51.100.200\r\nt=0 0\r\nm=audio 5000 RTP/AVP 0\r\n"
)

// defaultAllow is the binary's default b2bua.header_policy.allow.
var defaultAllow = []string{"Allow", "Supported", "Session-Expires", "Min-SE", "User-Agent", "Reason"}

// ladder runs one script.
type ladder struct {
	t     *testing.T
	rig   *enginerig.Rig
	e     *b2bua.Engine
	plane *enginerig.Carriers
	start time.Duration // the clock at the script's start

	routes    []route.Route
	draining  bool
	accounts  map[string]digest.Credentials
	rejects   []cpsReject
	challenge []byte // the value of the last challenge a carrier sent
	show      []string
	outcomes  bool

	names map[string]string // a raw Call-ID, tag or branch to its symbol
	count map[string]int    // symbols given, per prefix
	rseq  uint32            // the first RSeq sipedge gave the caller: R (RFC 3262 3)
	out   []string
	at    string // "@T " while a timer fires

	caller   *peer
	carriers map[string]*peer
	call     *callerCall // the caller's current call
	calls    int
}

type cpsReject struct {
	group string
	code  int
	text  string
}

// peer is one of the endpoints around sipedge.
type peer struct {
	name    string
	addr    netip.AddrPort
	host    string // of its Via and Contact
	secret  string // what of the other side must never reach it
	sdp     string
	got     map[parser.Method]*parser.Message // the last request of each method sipedge sent it
	dialog  *parser.Message                   // a carrier's: the initial INVITE of its dialog
	tag     string                            // a carrier's: the tag of its dialog, raw
	cseq    uint32                            // a carrier's: its CSeq in the dialog
	last    inviteTxn                         // a carrier's: its last re-INVITE
	branchN int
}

// callerCall is the caller's side of its current call.
type callerCall struct {
	callID, tag, uri string
	invite           []byte    // as sent, for the CANCEL
	cseq             uint32    // the last CSeq the caller used
	toTag            string    // the tag sipedge last gave in a response to the INVITE
	target           string    // the remote target: sipedge's Contact
	last             inviteTxn // the initial INVITE or the last re-INVITE
}

// inviteTxn is a peer's last INVITE transaction, for its ACK: of a failure
// in the transaction (RFC 3261 17.1.1.3), of a 2xx in one of its own
// (13.2.2.4).
type inviteTxn struct {
	cseq        uint32
	uri, branch string
	final       int // 0 while none
}

func newLadder(t *testing.T) *ladder {
	l := &ladder{t: t, names: map[string]string{}, count: map[string]int{}, accounts: map[string]digest.Credentials{}}
	l.caller = &peer{name: "caller", addr: enginerig.Caller, host: "caller.example.org:5061", secret: "carrier", sdp: callerSDP}
	l.carriers = map[string]*peer{}
	for name, addr := range map[string]netip.AddrPort{"carrier-a": enginerig.CarrierA, "carrier-b": enginerig.CarrierB} {
		l.carriers[name] = &peer{name: name, addr: addr, host: name + ".example.net:5070", secret: "caller", sdp: carrierSDP}
	}
	l.rig = enginerig.New(l.t)
	l.start = l.rig.Clock.Now
	l.plane = enginerig.NewCarriers()
	l.plane.OnCredentials = func(d *carrier.Dial) *health.AuthConfig {
		if cr, ok := l.accounts[d.Group]; ok {
			return &health.AuthConfig{Username: cr.Username, Password: cr.Password}
		}
		return nil
	}
	l.plane.OnCPSReject = func(d *carrier.Dial, code int, phrase, reason []byte) (time.Duration, bool) {
		for _, r := range l.rejects {
			text := strings.ToLower(r.text) // compared without regard to case, as the carrier plane does
			if r.group == d.Group && r.code == code &&
				(strings.Contains(strings.ToLower(string(phrase)), text) || strings.Contains(strings.ToLower(string(reason)), text)) {
				return time.Second, true
			}
		}
		return 0, false
	}
	l.plane.OnOutcome = func(d *carrier.Dial, code int, _ time.Duration) {
		if l.outcomes {
			l.flush()
			l.printf("outcome %s %s", d.Group, outcomeName(code))
		}
	}
	cfg := b2bua.Config{
		Trunks:      []b2bua.Trunk{{Name: "local", Group: "cust-trunks", Sources: []b2bua.Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}},
		HeaderAllow: defaultAllow,
		Local:       b2bua.LocalAddrs{transport.UDP: enginerig.Local},
		MaxDuration: time.Hour,
	}
	env := b2bua.Env{
		Send:  l.rig.Wire.Send,
		Clock: &l.rig.Clock,
		MintCallID: func(dst []byte) []byte {
			at := len(dst)
			dst = l.rig.MintCallID(dst)
			l.count["B"]++
			l.names[string(dst[at:])] = "B" + strconv.Itoa(l.count["B"])
			return dst
		},
		Carriers: l.plane,
		Router:   l,
		CDR:      enginerig.CDRFunc(l.cdr),
		Draining: func() bool { return l.draining },
		Log:      slog.New(slog.DiscardHandler),
	}
	e, err := b2bua.New(cfg, env)
	if err != nil {
		l.t.Fatal(err)
	}
	l.e = e
	l.rig.Attach(l)
	l.routes = []route.Route{{CarrierID: "carrier-a", GatewayGroup: "carrier-a", Rate: 0.004}}
	return l
}

// Route implements b2bua.Router: the script's routes.
func (l *ladder) Route(*route.Request) route.Decision {
	return route.Decision{Routes: l.routes, Source: route.SourceStatic}
}

// Receive and Timer make the ladder the rig's engine: a timer's messages
// print with its time.
func (l *ladder) Receive(m *parser.Message, from transport.Peer, now time.Duration) {
	l.e.Receive(m, from, now)
}

func (l *ladder) Timer(kind uint8, arg uint64, now time.Duration) {
	l.flush()
	l.at = "@" + (now - l.start).String() + " "
	l.e.Timer(kind, arg, now)
	l.flush()
}

// printf prints a line of output; a line that continues the one before
// it (indented) lines up under it, past the time of a timer's output.
func (l *ladder) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.HasPrefix(line, " ") {
		l.out = append(l.out, strings.Repeat(" ", len(l.at))+line)
		return
	}
	l.out = append(l.out, l.at+line)
}

// run runs one command and returns what sipedge did.
func (l *ladder) run(c *script.Command) string {
	l.out, l.at = nil, ""
	name, args := c.Name, c.Args
	if d, ok := strings.CutPrefix(name, "@+"); ok {
		l.rig.Advance(l.duration(d))
		l.flush()
		l.at = ""
		if len(args) == 0 {
			return strings.Join(l.out, "\n")
		}
		name, args = args[0], args[1:]
	}
	switch name {
	case "routes":
		l.routes = nil
		for _, spec := range args {
			id, opts, _ := strings.Cut(spec, ":")
			r := route.Route{CarrierID: id, GatewayGroup: id, Rate: 0.004}
			if secs, ok := strings.CutPrefix(opts, "timeout="); ok {
				r.TimeoutSecs = l.atoi(secs)
			}
			l.routes = append(l.routes, r)
		}
	case "cps-reject":
		l.rejects = append(l.rejects, cpsReject{group: args[0], code: l.atoi(args[1]), text: strings.Join(args[2:], " ")})
	case "account":
		l.accounts[args[0]] = digest.Credentials{Username: args[1], Password: args[2]}
	case "show":
		for _, h := range args {
			if h == "outcomes" {
				l.outcomes = true
			} else {
				l.show = append(l.show, h)
			}
		}
	case "drain":
		l.draining = true
	case "end-all":
		l.e.EndAll(l.rig.Clock.Now)
	case "calls":
		l.printf("calls=%d transactions=%d", l.e.Calls(), l.e.Transactions())
	default:
		if len(args) < 3 || args[0] != "->" || args[1] != "sipedge" {
			l.t.Fatalf("%s: unknown command %q", c.Pos, c.Line)
		}
		l.send(c, name, args[2:])
	}
	l.flush()
	return strings.Join(l.out, "\n")
}

// send builds and delivers what peer name sends.
func (l *ladder) send(c *script.Command, name string, words []string) {
	p := l.caller
	if name != "caller" {
		if p = l.carriers[name]; p == nil {
			l.t.Fatalf("%s: no peer %q", c.Pos, name)
		}
	}
	var msg []byte
	if code, err := strconv.Atoi(words[0]); err == nil {
		msg = l.response(c, p, code, words[1:])
	} else if p == l.caller {
		msg = l.callerRequest(c, words)
	} else {
		msg = l.carrierRequest(c, p, words)
	}
	l.rig.Deliver(transport.Peer{Addr: p.addr, Transport: transport.UDP}, msg)
}

// options reads a message's trailing words: sdp, to=TAG, (METHOD).
func options(words []string) (rest []string, sdp bool, tag, method string) {
	for _, w := range words {
		switch {
		case w == "sdp":
			sdp = true
		case strings.HasPrefix(w, "to="):
			tag = w[3:]
		case strings.HasPrefix(w, "(") && strings.HasSuffix(w, ")"):
			method = w[1 : len(w)-1]
		default:
			rest = append(rest, w)
		}
	}
	return rest, sdp, tag, method
}

// callerRequest builds the caller's request.
func (l *ladder) callerRequest(c *script.Command, words []string) []byte {
	rest, sdp, _, _ := options(words[1:])
	method := words[0]
	p := l.caller
	if method == "INVITE" {
		if len(rest) != 1 {
			l.t.Fatalf("%s: an INVITE starts a call: INVITE URI", c.Pos)
		}
		l.calls++
		n := strconv.Itoa(l.calls)
		k := &callerCall{callID: "A" + n + "-caller@caller.example.org", tag: "a" + n + "-caller", uri: rest[0], cseq: 1,
			target: rest[0]}
		l.names[k.callID], l.names[k.tag] = "A"+n, "a"+n
		l.call, l.rseq = k, 0
		k.last.cseq, k.last.uri, k.last.branch = 1, k.uri, l.branch(p)
		var b []byte
		b = fmt.Appendf(b, "INVITE %s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=%s\r\nMax-Forwards: 70\r\n", k.uri, p.host, k.last.branch)
		b = fmt.Appendf(b, "From: \"Alice\" <sip:alice@caller.example.org>;tag=%s\r\nTo: <%s>\r\n", k.tag, k.uri)
		b = fmt.Appendf(b, "Call-ID: %s\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@%s>\r\n", k.callID, p.host)
		k.invite = l.finish(b, c.Input, sdp, p.sdp)
		return k.invite
	}
	k := l.call
	if k == nil {
		l.t.Fatalf("%s: %s before the caller's INVITE", c.Pos, method)
	}
	var b []byte
	switch method {
	case "CANCEL": // RFC 3261 9.1: the INVITE's Request-URI, Call-ID, From, To, top Via and CSeq number
		var inv parser.Message
		if err := inv.Parse(k.invite); err != nil {
			l.t.Fatal(err)
		}
		b = fmt.Appendf(b, "CANCEL %s SIP/2.0\r\nVia: %s\r\nMax-Forwards: 70\r\nFrom: %s\r\nTo: %s\r\nCall-ID: %s\r\nCSeq: 1 CANCEL\r\n",
			k.uri, inv.Get(parser.HeaderVia), inv.Get(parser.HeaderFrom), inv.Get(parser.HeaderTo), k.callID)
		return l.finish(b, c.Input, false, "")
	case "ACK":
		if k.last.final >= 300 { // RFC 3261 17.1.1.3: the INVITE's transaction, its branch and Request-URI
			b = fmt.Appendf(b, "ACK %s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=%s\r\n", k.last.uri, p.host, k.last.branch)
		} else { // 13.2.2.4: a transaction of its own, to the remote target
			b = fmt.Appendf(b, "ACK %s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=%s\r\n", k.target, p.host, l.branch(p))
		}
		b = fmt.Appendf(b, "Max-Forwards: 70\r\nFrom: \"Alice\" <sip:alice@caller.example.org>;tag=%s\r\nTo: <%s>;tag=%s\r\n",
			k.tag, k.uri, k.toTag)
		b = fmt.Appendf(b, "Call-ID: %s\r\nCSeq: %d ACK\r\n", k.callID, k.last.cseq)
		return l.finish(b, c.Input, sdp, p.sdp)
	}
	if method == "re-INVITE" {
		method = "INVITE"
	}
	if method == "PRACK" {
		return l.prack(c, k)
	}
	k.cseq++
	branch := l.branch(p)
	if method == "INVITE" {
		k.last.cseq, k.last.uri, k.last.branch, k.last.final = k.cseq, k.target, branch, 0
	}
	b = fmt.Appendf(b, "%s %s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=%s\r\n", method, k.target, p.host, branch)
	b = fmt.Appendf(b, "Max-Forwards: 70\r\nFrom: \"Alice\" <sip:alice@caller.example.org>;tag=%s\r\nTo: <%s>;tag=%s\r\n",
		k.tag, k.uri, k.toTag)
	b = fmt.Appendf(b, "Call-ID: %s\r\nCSeq: %d %s\r\n", k.callID, k.cseq, method)
	if method == "INVITE" || method == "UPDATE" {
		b = fmt.Appendf(b, "Contact: <sip:alice@%s>\r\n", p.host)
	}
	return l.finish(b, c.Input, sdp, p.sdp)
}

// carrierRequest builds a carrier's request in its dialog.
func (l *ladder) carrierRequest(c *script.Command, p *peer, words []string) []byte {
	_, sdp, _, _ := options(words[1:])
	method := words[0]
	if method == "re-INVITE" {
		method = "INVITE"
	}
	inv := p.dialog
	if inv == nil {
		l.t.Fatalf("%s: %s has no dialog", c.Pos, p.name)
	}
	var from, to, contact parser.Address
	if inv.From(&from) != nil || inv.To(&to) != nil || inv.Contact(0, &contact) != nil {
		l.t.Fatalf("%s: the dialog's INVITE:\n%s", c.Pos, inv.Bytes())
	}
	cseq, branch := p.cseq+1, ""
	switch {
	case method == "ACK" && p.last.final >= 300: // RFC 3261 17.1.1.3
		cseq, branch = p.last.cseq, p.last.branch
	case method == "ACK": // 13.2.2.4
		cseq, branch = p.last.cseq, l.branch(p)
	default:
		p.cseq, branch = cseq, l.branch(p)
	}
	if method == "INVITE" {
		p.last = inviteTxn{cseq: cseq, uri: string(contact.URI), branch: branch}
	}
	var b []byte
	b = fmt.Appendf(b, "%s %s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=%s\r\nMax-Forwards: 70\r\n", method, contact.URI, p.host, branch)
	b = fmt.Appendf(b, "From: <%s>;tag=%s\r\nTo: <%s>;tag=%s\r\n", to.URI, p.tag, from.URI, from.Tag)
	b = fmt.Appendf(b, "Call-ID: %s\r\nCSeq: %d %s\r\n", inv.CallID(), cseq, method)
	if method == "INVITE" || method == "UPDATE" {
		b = fmt.Appendf(b, "Contact: <sip:gw@%s>\r\n", p.host)
	}
	return l.finish(b, c.Input, sdp, p.sdp)
}

// response builds a peer's response to the last request of its method
// sipedge sent it.
func (l *ladder) response(c *script.Command, p *peer, code int, words []string) []byte {
	rest, sdp, tag, method := options(words)
	reason := strings.Join(rest, " ")
	if method == "" {
		method = "INVITE"
	}
	req := p.got[parser.LookupMethod([]byte(method))]
	if req == nil {
		l.t.Fatalf("%s: sipedge sent %s no %s", c.Pos, p.name, method)
	}
	var to parser.Address
	if err := req.To(&to); err != nil {
		l.t.Fatal(err)
	}
	var raw []byte
	if p != l.caller && code > 100 && len(to.Tag) == 0 {
		if tag == "" {
			tag = "c1"
		}
		raw = []byte(tag + "-carrier")
		l.names[string(raw)] = tag
		if req == p.dialog {
			p.tag = string(raw)
		}
	}
	b := parser.AppendResponse(nil, req, code, reason, raw)
	if req.Method() == parser.MethodInvite && code > 100 && code < 300 && (len(raw) > 0 || len(to.Tag) > 0) {
		if p == l.caller {
			b = fmt.Appendf(b, "Contact: <sip:alice@%s>\r\n", p.host)
		} else {
			b = fmt.Appendf(b, "Contact: <sip:gw@%s>\r\n", p.host)
		}
	}
	for _, h := range c.Input {
		if name, value, _ := strings.Cut(h, ":"); name == "WWW-Authenticate" || name == "Proxy-Authenticate" {
			l.challenge = []byte(strings.TrimSpace(value))
		}
	}
	return l.finish(b, c.Input, sdp, p.sdp)
}

// finish appends the extra headers and the body.
func (l *ladder) finish(b []byte, headers []string, sdp bool, body string) []byte {
	for _, h := range headers {
		b = append(b, h+"\r\n"...)
	}
	if !sdp {
		return parser.AppendBody(b, "", nil)
	}
	return parser.AppendBody(b, "application/sdp", []byte(body))
}

// branch returns a new branch of the peer's.
func (l *ladder) branch(p *peer) string {
	p.branchN++
	return fmt.Sprintf("z9hG4bK-%s-%d", p.name, p.branchN)
}

// flush prints what sipedge sent since the last flush and checks it.
func (l *ladder) flush() {
	for _, s := range l.rig.Wire.Messages() {
		l.message(s.To, s.Data)
	}
	l.rig.Wire.Reset()
}

// message prints one message sipedge sent, and keeps it for its peer.
func (l *ladder) message(to netip.AddrPort, data []byte) {
	m := new(parser.Message)
	if err := m.Parse(slices.Clone(data)); err != nil {
		l.t.Fatalf("sipedge sent a message that does not parse: %v\n%s", err, data)
	}
	if err := m.Validate(nil); err != nil {
		l.t.Fatalf("sipedge sent a message that does not validate: %v\n%s", err, data)
	}
	p := l.caller
	for _, c := range l.carriers {
		if c.addr == to {
			p = c
		}
	}
	if p.addr != to {
		l.printf("sipedge -> %v %s", to, enginerig.FirstLine(data))
		return
	}
	if strings.Contains(string(data), p.secret) {
		l.t.Fatalf("topology leak: %q reached %s:\n%s", p.secret, p.name, data)
	}
	var from, toA parser.Address
	var via parser.Via
	cseq, err := m.CSeq()
	if err != nil || m.From(&from) != nil || m.To(&toA) != nil || m.TopVia(&via) != nil {
		l.t.Fatalf("sipedge sent %s:\n%s", p.name, data)
	}
	var line string
	if m.IsRequest() {
		line = fmt.Sprintf("%s %s call=%s cseq=%d from=%s", m.MethodBytes(), m.RequestURI(), l.sym(m.CallID(), "?"),
			cseq.Num, l.sym(from.Tag, "s"))
		if len(toA.Tag) > 0 {
			line += " to=" + l.sym(toA.Tag, "s")
		}
		line += " branch=" + l.sym(via.Branch, "z")
		if p.got == nil {
			p.got = map[parser.Method]*parser.Message{}
		}
		p.got[m.Method()] = m
		if m.Method() == parser.MethodInvite && len(toA.Tag) == 0 {
			p.dialog, p.cseq, p.last = m, 0, inviteTxn{}
		}
	} else {
		line = fmt.Sprintf("%d %s (%d %s) call=%s", m.StatusCode(), m.ReasonPhrase(), cseq.Num, cseq.MethodRaw, l.sym(m.CallID(), "?"))
		if len(toA.Tag) > 0 {
			line += " to=" + l.sym(toA.Tag, "s")
		}
		if p != l.caller && cseq.Method == parser.MethodInvite && cseq.Num == p.last.cseq && m.StatusCode() >= 200 {
			p.last.final = m.StatusCode()
		}
		if k := l.call; p == l.caller && k != nil && string(m.CallID()) == k.callID && cseq.Method == parser.MethodInvite {
			if cseq.Num == k.last.cseq && m.StatusCode() >= 200 {
				k.last.final = m.StatusCode()
			}
			var contact parser.Address
			if cseq.Num == 1 && len(toA.Tag) > 0 {
				k.toTag = string(toA.Tag)
				if m.StatusCode() < 300 && m.Contact(0, &contact) == nil {
					k.target = string(contact.URI)
				}
			}
		}
	}
	switch body := string(m.Body()); {
	case body == "":
	case body == callerSDP:
		line += " sdp=caller"
	case body == carrierSDP:
		line += " sdp=carrier"
	default:
		line += fmt.Sprintf(" body=%q", body)
	}
	l.printf("sipedge -> %s %s", p.name, line)
	for i := range m.NumHeaders() {
		h := m.HeaderAt(i)
		switch {
		case h.Kind == parser.HeaderAuthorization || h.Kind == parser.HeaderProxyAuthorization:
			l.printf("  %s: %s", h.Name, l.credentials(m, h.Value))
		case h.Kind == parser.HeaderRSeq && p == l.caller && slices.Contains(l.show, "RSeq"):
			l.printf("  %s: %s", h.Name, l.rseqSymbol(h.Value))
		case h.Kind == parser.HeaderReason || h.Kind == parser.HeaderRetryAfter || h.Kind == parser.HeaderWWWAuthenticate ||
			h.Kind == parser.HeaderProxyAuthenticate || slices.ContainsFunc(l.show, func(s string) bool { return strings.EqualFold(s, string(h.Name)) }):
			l.printf("  %s: %s", h.Name, l.symbolize(string(h.Value)))
		}
	}
}

// credentials shows a Digest answer without its cnonce and response,
// which are random: the response is checked against the challenge the
// carrier sent and the account's password (RFC 3261 22.4).
func (l *ladder) credentials(m *parser.Message, value []byte) string {
	params := digestParams(string(value))
	var ch digest.Challenge
	if err := digest.ParseChallenge(l.challenge, &ch); err != nil {
		return fmt.Sprintf("%s (no challenge to check it against: %v)", value, err)
	}
	method := m.MethodBytes()
	if m.Method() == parser.MethodAck {
		method = []byte("INVITE") // the ACK of a 2xx carries the INVITE's credentials (RFC 3261 13.2.2.4)
	}
	verdict := "NOT VERIFIED"
	for _, cr := range l.accounts {
		nc, _ := strconv.ParseUint(params["nc"], 16, 32)
		want := digest.AppendAuthorization(nil, &ch, cr, method, []byte(strings.Trim(params["uri"], `"`)),
			m.Body(), []byte(strings.Trim(params["cnonce"], `"`)), uint32(nc))
		if string(want) == string(value) {
			verdict = "response verified"
		}
	}
	var shown []string
	for _, k := range []string{"username", "realm", "nonce", "uri", "algorithm", "qop", "nc", "opaque"} {
		if v, ok := params[k]; ok {
			shown = append(shown, k+"="+v)
		}
	}
	return "Digest " + strings.Join(shown, ", ") + " (" + verdict + ")"
}

// digestParams reads the k=v parameters of a Digest credential.
func digestParams(v string) map[string]string {
	out := map[string]string{}
	v = strings.TrimPrefix(v, "Digest ")
	for v != "" {
		k, rest, _ := strings.Cut(v, "=")
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`) + 2
			val, rest = rest[:end], rest[end:]
		} else {
			val, rest, _ = strings.Cut(rest, ",")
			rest = "," + rest
		}
		out[strings.TrimSpace(k)] = val
		v = strings.TrimLeft(strings.TrimPrefix(rest, ","), " ")
	}
	return out
}

// prack builds the caller's PRACK in its early dialog (RFC 3262 7.1): the
// script writes its RAck with the RSeq as a symbol, "RAck: R+1 1 INVITE".
func (l *ladder) prack(c *script.Command, k *callerCall) []byte {
	var rack string
	for _, h := range c.Input {
		if v, ok := strings.CutPrefix(h, "RAck: "); ok {
			sym, rest, _ := strings.Cut(v, " ")
			rack = fmt.Sprintf("RAck: %d %s", l.rseqOf(c, sym), rest)
		}
	}
	if rack == "" {
		l.t.Fatalf("%s: a PRACK carries a RAck: R[+N] CSEQ INVITE", c.Pos)
	}
	k.cseq++
	var b []byte
	b = fmt.Appendf(b, "PRACK %s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=%s\r\n", k.target, l.caller.host, l.branch(l.caller))
	b = fmt.Appendf(b, "Max-Forwards: 70\r\nFrom: \"Alice\" <sip:alice@caller.example.org>;tag=%s\r\nTo: <%s>;tag=%s\r\n",
		k.tag, k.uri, k.toTag)
	b = fmt.Appendf(b, "Call-ID: %s\r\nCSeq: %d PRACK\r\n%s\r\n", k.callID, k.cseq, rack)
	return parser.AppendBody(b, "", nil)
}

// rseqSymbol shows an RSeq sipedge gave the caller relative to the first,
// R, which is random (RFC 3262 3): R+1 is the next reliable provisional.
func (l *ladder) rseqSymbol(v []byte) string {
	n, err := strconv.ParseUint(string(v), 10, 32)
	if err != nil {
		return fmt.Sprintf("%s (not a number)", v)
	}
	if l.rseq == 0 {
		l.rseq = uint32(n)
	}
	if d := int64(n) - int64(l.rseq); d != 0 {
		return fmt.Sprintf("R%+d", d)
	}
	return "R"
}

// rseqOf reads an RSeq symbol back.
func (l *ladder) rseqOf(c *script.Command, sym string) uint32 {
	rest, ok := strings.CutPrefix(sym, "R")
	if !ok || l.rseq == 0 {
		l.t.Fatalf("%s: %q is not an RSeq sipedge gave (R, R+1...)", c.Pos, sym)
	}
	if rest == "" {
		return l.rseq
	}
	d, err := strconv.Atoi(rest)
	if err != nil {
		l.t.Fatalf("%s: %q is not an RSeq sipedge gave (R, R+1...)", c.Pos, sym)
	}
	return l.rseq + uint32(d)
}

// symbolize replaces the raw tokens in s that have a symbol, the longest
// first.
func (l *ladder) symbolize(s string) string {
	raws := slices.SortedFunc(maps.Keys(l.names), func(a, b string) int { return len(b) - len(a) })
	for _, raw := range raws {
		s = strings.ReplaceAll(s, raw, l.names[raw])
	}
	return s
}

// sym returns the symbol of a raw token, giving unknown ones the next of
// prefix; an empty token prints as "".
func (l *ladder) sym(raw []byte, prefix string) string {
	if len(raw) == 0 {
		return `""`
	}
	if s, ok := l.names[string(raw)]; ok {
		return s
	}
	l.count[prefix]++
	s := prefix + strconv.Itoa(l.count[prefix])
	l.names[string(raw)] = s
	return s
}

// cdr prints a call's record as it is written.
func (l *ladder) cdr(rec *cdr.Record) {
	l.flush()
	at := func(t time.Time) string {
		return "@" + (t.Sub(enginerig.Epoch) - l.start).String()
	}
	hangup := orEmpty(rec.HangupSide.String())
	l.printf("cdr a_call_id=%s b_call_id=%s final_code=%d final_reason=%q hangup_side=%s", l.sym([]byte(rec.ACallID), "?"),
		l.sym([]byte(rec.BCallID), "?"), rec.FinalCode, rec.FinalReason, hangup)
	l.printf("  route=%s carrier_id=%s", orEmpty(rec.Route), orEmpty(rec.CarrierID))
	times := "  time_invite=" + at(rec.TimeInvite)
	if !rec.TimeFirstProvisional.IsZero() {
		times += " time_first_provisional=" + at(rec.TimeFirstProvisional)
	}
	if !rec.TimeAnswer.IsZero() {
		times += " time_answer=" + at(rec.TimeAnswer)
	}
	l.printf("%s time_end=%s", times, at(rec.TimeEnd))
	for i, a := range rec.Attempts {
		line := fmt.Sprintf("  lcr_attempts[%d] carrier_id=%s status=%d elapsed_ms=%d dialed=%v", i, a.CarrierID, a.Status,
			a.Elapsed.Milliseconds(), a.Dialed)
		if a.Reason != "" {
			line += " reason=" + a.Reason
		}
		l.printf("%s", line)
	}
}

// orEmpty is s, or "" when it is empty.
func orEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func outcomeName(code int) string {
	switch code {
	case carrier.OutcomeNoResponse:
		return "no-response"
	case carrier.OutcomeTransport:
		return "transport-error"
	case carrier.OutcomeAbandoned:
		return "abandoned"
	}
	return strconv.Itoa(code)
}

func (l *ladder) duration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		l.t.Fatal(err)
	}
	return d
}

func (l *ladder) atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}
