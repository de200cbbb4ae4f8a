package txn

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/script"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// The scripts in testdata/*.txt drive a Table through event sequences
// (internal/script: a command line, "----", then the expected output up to
// a blank line). go test -run TestScripts -rewrite rewrites the expected
// outputs; each was checked by hand against the RFC.
//
// Commands (k=v options are optional):
//
//	config [t1=D] [t2=D] [t4=D]
//	recv-request TP METHOD [branch=B|none] [cseq=N] [to-tag=T] [from-tag=T]
//	             [call-id=C] [uri=U] [sent-by=H:P] [src=IP:PORT] [full]
//	recv-response CODE METHOD [branch=B] [cseq=N] [to-tag=T|none] [full]
//	send-request TP METHOD [branch=B] [route] [built] [full]
//	tu-respond NAME CODE [to-tag=T] [full]
//	cancel NAME [reason] [full]  reason: CancelWith a Reason (RFC 3326)
//	terminate NAME
//	transport-error NAME
//	peer-failed TP      Table.PeerFailed for the peer send-request sends to
//	advance D           fire due timers in deadline order, at their deadlines
//	fire NAME TIMER     deliver a timer argument as if it fired now (stale fires)
//	unsettled [except=METHOD]  Table.Unsettled
//
// Output: one line per action (send NAME TP ADDR first-line; request,
// ack, response CODE, timeout, transport-error, terminated), "@TIME timer X
// NAME" before the actions of each fired timer, "error: ..." for a returned
// error, then "= NAME KIND STATE [TIMER@DEADLINE ...]" for every live
// transaction. With "full", sent messages are shown whole. Transactions are
// named t1, t2, ... in the order their handles first appear.

func TestScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(t *testing.T) func(*script.Command) string {
		d := newDriver(t)
		return func(c *script.Command) string { return strings.Join(d.run(c.Line), "\n") }
	})
}

// fakeTimers is a Timers recording pending timers in a slice; it allocates
// nothing once the slice has grown.
type fakeTimers struct {
	seq     uint64
	pending []fakeTimer
}

type fakeTimer struct {
	h   uint64
	at  time.Duration
	arg uint64
}

func (f *fakeTimers) StartAt(at time.Duration, arg uint64) uint64 {
	f.seq++
	f.pending = append(f.pending, fakeTimer{f.seq, at, arg})
	return f.seq
}

func (f *fakeTimers) Stop(h uint64) bool {
	for i := range f.pending {
		if f.pending[i].h == h {
			f.pending = slices.Delete(f.pending, i, i+1)
			return true
		}
	}
	return false
}

// next removes and returns the earliest timer due at or before limit, the
// first started among equals.
func (f *fakeTimers) next(limit time.Duration) (fakeTimer, bool) {
	best := -1
	for i, p := range f.pending {
		if p.at <= limit && (best < 0 || p.at < f.pending[best].at) {
			best = i
		}
	}
	if best < 0 {
		return fakeTimer{}, false
	}
	p := f.pending[best]
	f.pending = slices.Delete(f.pending, best, best+1)
	return p, true
}

type driver struct {
	t      *testing.T
	tab    *Table
	clock  *fakeTimers
	now    time.Duration
	names  map[Handle]string
	byName map[string]Handle
	order  []Handle
	reqs   map[Handle][]byte // requests of server transactions, for tu-respond
	m      parser.Message
	buf    []byte
	out    []string
	full   bool
}

func newDriver(t *testing.T) *driver {
	d := &driver{t: t}
	d.reset(Config{})
	return d
}

func (d *driver) reset(cfg Config) {
	d.clock = &fakeTimers{}
	tab, err := New(cfg, d.clock)
	if err != nil {
		d.t.Fatal(err)
	}
	d.tab, d.now = tab, 0
	d.names, d.byName, d.order = map[Handle]string{}, map[string]Handle{}, nil
	d.reqs = map[Handle][]byte{}
}

func (d *driver) name(h Handle) string {
	if h == 0 {
		return "none"
	}
	if n, ok := d.names[h]; ok {
		return n
	}
	n := "t" + strconv.Itoa(len(d.names)+1)
	d.names[h], d.byName[n] = n, h
	d.order = append(d.order, h)
	return n
}

// handle returns the Handle named name; an unknown name yields the zero
// Handle, which every method refuses.
func (d *driver) handle(name string) Handle { return d.byName[name] }

func (d *driver) printf(format string, args ...any) {
	d.out = append(d.out, fmt.Sprintf(format, args...))
}

// run executes one command and returns its output lines.
func (d *driver) run(line string) []string {
	d.out = nil
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	opts := map[string]string{}
	var pos []string
	d.full = false
	for _, a := range args {
		switch k, v, ok := strings.Cut(a, "="); {
		case ok:
			opts[k] = v
		case a == "full":
			d.full = true
		case a == "route" || a == "built" || a == "reason":
			opts[a] = ""
		default:
			pos = append(pos, a)
		}
	}
	switch cmd {
	case "config":
		var cfg Config
		for k, v := range opts {
			dur, err := time.ParseDuration(v)
			if err != nil {
				d.t.Fatal(err)
			}
			switch k {
			case "t1":
				cfg.T1 = dur
			case "t2":
				cfg.T2 = dur
			case "t4":
				cfg.T4 = dur
			}
		}
		d.reset(cfg)
	case "recv-request":
		d.recvRequest(pos[0], pos[1], opts)
	case "recv-response":
		d.recvResponse(pos[0], pos[1], opts)
	case "send-request":
		d.sendRequest(pos[0], pos[1], opts)
	case "tu-respond":
		d.tuRespond(pos[0], pos[1], opts)
	case "cancel":
		if _, ok := opts["reason"]; ok {
			d.check(d.tab.CancelWith(d.handle(pos[0]), []byte("Reason: SIP;cause=200;text=\"Call completed elsewhere\"\r\n"), d.now))
		} else {
			d.check(d.tab.Cancel(d.handle(pos[0]), d.now))
		}
	case "terminate":
		d.check(d.tab.Terminate(d.handle(pos[0]), d.now))
	case "transport-error":
		d.check(d.tab.TransportError(d.handle(pos[0]), d.now))
	case "peer-failed":
		d.printf("told %d", d.tab.PeerFailed(transport.Peer{Addr: netip.MustParseAddrPort("203.0.113.5:5060"), Transport: transportOf(pos[0])}, d.now))
		d.actions()
	case "advance":
		dur, err := time.ParseDuration(pos[0])
		if err != nil {
			d.t.Fatal(err)
		}
		target := d.now + dur
		for {
			ft, ok := d.clock.next(target)
			if !ok {
				break
			}
			d.now = ft.at
			if ft.arg == trimArg { // the table's own
				d.printf("@%v trim", d.now)
				d.tab.Timeout(ft.arg, d.now)
				continue
			}
			d.printf("@%v timer %s %s", d.now, timerNames[input(ft.arg>>24)], d.name(Handle(ft.arg&^(0xff<<24))))
			d.tab.Timeout(ft.arg, d.now)
			d.actions()
		}
		d.now = target
	case "fire":
		id := input(0)
		for i, n := range timerNames {
			if n == pos[1] {
				id = input(i)
			}
		}
		d.printf("@%v fire %s %s", d.now, pos[1], pos[0])
		d.tab.Timeout(uint64(d.handle(pos[0]))|uint64(id)<<24, d.now)
		d.actions()
	case "unsettled":
		d.printf("unsettled %d", d.tab.Unsettled(opts["except"]))
	default:
		d.t.Fatalf("unknown command %q", cmd)
	}
	d.states()
	if len(d.out) == 0 {
		d.out = append(d.out, "(none)")
	}
	return d.out
}

func (d *driver) check(err error) {
	if err != nil {
		d.printf("error: %v", err)
	}
	d.actions()
}

func (d *driver) actions() {
	for _, a := range d.tab.Actions() {
		name := d.name(a.Txn)
		switch a.Kind {
		case ActSend:
			first, _, _ := strings.Cut(string(a.Data), "\r\n")
			peer := a.Peer.Transport.String() + " " + a.Peer.Addr.String()
			if a.Peer.Conn != 0 {
				peer += "#" + strconv.FormatUint(a.Peer.Conn, 10)
			}
			d.printf("send %s %s %s", name, peer, first)
			if d.full {
				for _, l := range strings.Split(strings.TrimSuffix(string(a.Data), "\r\n"), "\r\n") {
					d.printf("  | %s", l)
				}
			}
		case ActRequest:
			line := fmt.Sprintf("request %s %s", name, d.m.MethodBytes())
			if d.m.Method() == parser.MethodCancel {
				line += " cancels=" + d.name(a.Ref)
			}
			d.printf("%s", line)
			d.reqs[a.Txn] = slices.Clone(d.m.Bytes())
		case ActResponse:
			d.printf("response %s %d", name, d.m.StatusCode())
		default:
			d.printf("%v %s", a.Kind, name)
		}
	}
}

// states prints every live transaction with its pending timers.
func (d *driver) states() {
	for _, h := range d.order {
		k, s, ok := d.tab.State(h)
		if !ok {
			continue
		}
		line := fmt.Sprintf("= %s %v %v", d.names[h], k, s)
		var timers []fakeTimer
		for _, p := range d.clock.pending {
			if Handle(p.arg&^(0xff<<24)) == h {
				timers = append(timers, p)
			}
		}
		slices.SortStableFunc(timers, func(a, b fakeTimer) int { return int(a.at - b.at) })
		for _, p := range timers {
			line += fmt.Sprintf(" %s@%v", timerNames[input(p.arg>>24)], p.at)
		}
		d.printf("%s", line)
	}
}

func transportOf(s string) transport.Kind {
	if k, ok := transport.FromParam([]byte(s)); ok {
		return k
	}
	panic("unknown transport " + s)
}

func get(opts map[string]string, k, def string) string {
	if v, ok := opts[k]; ok {
		return v
	}
	return def
}

// recvRequest builds a request from a template, as received from a UAC at
// 192.0.2.1, and passes it to ReceiveRequest.
func (d *driver) recvRequest(tp, method string, opts map[string]string) {
	via := "SIP/2.0/" + strings.ToUpper(tp) + " " + get(opts, "sent-by", "192.0.2.1:5060")
	if b := get(opts, "branch", "z9hG4bK1"); b != "none" {
		via += ";branch=" + b
	}
	to := "<sip:bob@example.com>"
	if tag := get(opts, "to-tag", ""); tag != "" {
		to += ";tag=" + tag
	}
	msg := method + " " + get(opts, "uri", "sip:bob@example.com") + " SIP/2.0\r\n" +
		"Via: " + via + "\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: <sip:alice@example.com>;tag=" + get(opts, "from-tag", "a1") + "\r\n" +
		"To: " + to + "\r\n" +
		"Call-ID: " + get(opts, "call-id", "call1@192.0.2.1") + "\r\n" +
		"CSeq: " + get(opts, "cseq", "1") + " " + method + "\r\n" +
		"Content-Length: 0\r\n\r\n"
	d.parse(msg)
	src := transport.Peer{Addr: netip.MustParseAddrPort(get(opts, "src", "192.0.2.1:5060")), Transport: transportOf(tp)}
	if src.Transport.Reliable() {
		src.Conn = 1
	}
	d.check(d.tab.ReceiveRequest(&d.m, src, d.now))
}

// recvResponse builds a response to a request sent by sendRequest and
// passes it to ReceiveResponse.
func (d *driver) recvResponse(code, method string, opts map[string]string) {
	c, _ := strconv.Atoi(code)
	to := "<sip:carol@example.net>"
	def := "c1"
	if c == 100 {
		def = "none"
	}
	if tag := get(opts, "to-tag", def); tag != "none" {
		to += ";tag=" + tag
	}
	msg := "SIP/2.0 " + code + " " + reason(c) + "\r\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=" + get(opts, "branch", "z9hG4bKc1") + "\r\n" +
		"From: <sip:b2bua@example.org>;tag=b1\r\n" +
		"To: " + to + "\r\n" +
		"Call-ID: call2@198.51.100.1\r\n" +
		"CSeq: " + get(opts, "cseq", "1") + " " + method + "\r\n" +
		"Content-Length: 0\r\n\r\n"
	d.parse(msg)
	d.check(d.tab.ReceiveResponse(&d.m, d.now))
}

// sendRequest builds a request from a template, from the B2BUA at
// 198.51.100.1 to 203.0.113.5, and starts a client transaction for it.
func (d *driver) sendRequest(tp, method string, opts map[string]string) {
	msg := method + " sip:carol@example.net SIP/2.0\r\n" +
		"Via: SIP/2.0/" + strings.ToUpper(tp) + " 198.51.100.1:5060;branch=" + get(opts, "branch", "z9hG4bKc1") + "\r\n"
	if _, ok := opts["route"]; ok {
		msg += "Route: <sip:p1.example.net;lr>, <sip:p2.example.net;lr>\r\n"
	}
	msg += "Max-Forwards: 70\r\n" +
		"From: <sip:b2bua@example.org>;tag=b1\r\n" +
		"To: <sip:carol@example.net>\r\n" +
		"Call-ID: call2@198.51.100.1\r\n" +
		"CSeq: " + get(opts, "cseq", "1") + " " + method + "\r\n" +
		"Content-Length: 0\r\n\r\n"
	d.parse(msg)
	to := transport.Peer{Addr: netip.MustParseAddrPort("203.0.113.5:5060"), Transport: transportOf(tp)}
	if to.Transport.Reliable() {
		to.Conn = 2
	}
	var h Handle
	var err error
	if _, ok := opts["built"]; ok {
		h, err = d.tab.SendBuilt(describe(d.buf, method), to, d.now)
	} else {
		h, err = d.tab.SendRequest(&d.m, to, d.now)
	}
	if err == nil {
		d.printf("-> %s", d.name(h))
	}
	d.check(err)
}

// describe tells SendBuilt where sendRequest's template put each part.
func describe(b []byte, method string) *Built {
	s := string(b)
	span := func(from, to string) Span {
		i := strings.Index(s, from)
		if i < 0 {
			return Span{}
		}
		i += len(from)
		return Span{uint32(i), uint32(i + strings.Index(s[i:], to))}
	}
	r := &Built{Data: b, Method: Span{0, uint32(len(method))}, URI: span(" ", " "), Branch: span("branch=", "\r\n"),
		Via: span("Via: ", "\r\n"), From: span("From: ", "\r\n"), To: span("To: ", "\r\n"),
		CallID: span("Call-ID: ", "\r\n")}
	if i := strings.Index(s, "Route: "); i >= 0 {
		r.Route = Span{uint32(i), uint32(strings.Index(s, "Max-Forwards"))}
	}
	cseq, _ := strconv.Atoi(string(span("CSeq: ", " ").of(b)))
	r.CSeq = uint32(cseq)
	return r
}

// tuRespond builds the TU's response to server transaction name's request.
func (d *driver) tuRespond(name, code string, opts map[string]string) {
	h := d.handle(name)
	var req parser.Message
	if err := req.Parse(d.reqs[h]); err != nil {
		d.t.Fatalf("request of %s: %v", name, err)
	}
	c, _ := strconv.Atoi(code)
	tag := get(opts, "to-tag", "s1")
	if c == 100 {
		tag = ""
	}
	resp := parser.AppendResponse(nil, &req, c, reason(c), []byte(tag))
	resp = parser.AppendBody(resp, "", nil)
	d.check(d.tab.Respond(h, resp, d.now))
}

func (d *driver) parse(msg string) {
	d.buf = append(d.buf[:0], msg...)
	if err := d.m.Parse(d.buf); err != nil {
		d.t.Fatalf("template does not parse: %v\n%s", err, msg)
	}
}

func reason(code int) string {
	switch code {
	case 100:
		return "Trying"
	case 180:
		return "Ringing"
	case 183:
		return "Session Progress"
	case 200:
		return "OK"
	case 202:
		return "Accepted"
	case 404:
		return "Not Found"
	case 481:
		return "Call/Transaction Does Not Exist"
	case 486:
		return "Busy Here"
	case 487:
		return "Request Terminated"
	case 500:
		return "Server Internal Error"
	case 503:
		return "Service Unavailable"
	case 603:
		return "Decline"
	}
	return "Status"
}
