package fuzz

import (
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// FuzzEngine drives one B2BUA engine with sequences of caller and carrier
// messages chosen by the input: requests and responses in any order, at any
// time, valid or not. It checks that nothing panics and that nothing leaks:
// once the clock has passed every timer (transactions, ring timeouts, the
// maximum call duration), no call and no transaction is left.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 10, 11, 12, 2, 4})                 // answered call, ACK, BYE
	f.Add([]byte{0, 10, 3, 13, 14})                    // CANCEL mid-ring
	f.Add([]byte{0, 15, 16, 12, 2, 20, 5, 4})          // failover, answer, re-INVITE, BYE
	f.Add([]byte{0, 0, 1, 11, 12, 12, 2, 2, 17, 4, 4}) // retransmissions everywhere
	f.Add([]byte{6, 7, 8, 9, 18, 19, 20, 21})          // out-of-dialog and stray messages
	f.Add([]byte{0, 10, 24, 25, 24, 11, 12, 2, 4})     // challenges answered, one refused
	f.Add([]byte{0, 24, 12, 2, 5, 24, 4})              // challenged INVITE answered, then a challenged re-INVITE
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 200 {
			return
		}
		r := newEngineRig(t)
		for _, op := range script {
			r.step(op)
			r.read()
		}
		r.Advance(3 * time.Hour) // past every timer, the maximum duration included
		r.read()
		if n := r.e.Calls(); n != 0 {
			t.Fatalf("%d calls left after every timer fired (script %v)", n, script)
		}
		if n := r.e.Transactions(); n != 0 {
			t.Fatalf("%d transactions left after every timer fired (script %v)", n, script)
		}
	})
}

// engineRig is an engine on the rig's network; the peers keep the last
// message sipedge sent them to answer it.
type engineRig struct {
	*enginerig.Rig
	t       *testing.T
	e       *b2bua.Engine
	cseq    int
	lastA   *parser.Message // the last request sipedge sent the caller
	lastB   *parser.Message // the last request sipedge sent a carrier
	lastBAt netip.AddrPort
	aTag    string // the To tag of sipedge's last response to the caller
}

func newEngineRig(t *testing.T) *engineRig {
	r := &engineRig{Rig: enginerig.New(t), t: t, cseq: 1}
	cfg := b2bua.Config{
		Trunks:      []b2bua.Trunk{{Name: "t", Group: "g", Sources: []b2bua.Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}},
		Local:       b2bua.LocalAddrs{transport.UDP: enginerig.Local},
		MaxDuration: time.Hour,
		HeaderAllow: []string{"Allow"},
	}
	env := b2bua.Env{
		Send:       r.Wire.Send,
		Clock:      &r.Clock,
		MintCallID: r.MintCallID,
		Router:     b2bua.Routes{{CarrierID: "a", GatewayGroup: "a", TimeoutSecs: 5}, {CarrierID: "b", GatewayGroup: "b"}},
		Carriers:   fzPlane(t).NewShard(carrier.ShardOptions{Now: func() time.Duration { return r.Clock.Now }}),
		Log:        slog.New(slog.DiscardHandler),
	}
	e, err := b2bua.New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	r.Attach(e)
	return r
}

// fzPlane is the carrier plane of the rig: carrier a's gateway group,
// whose account answers challenges, and carrier b's.
func fzPlane(t *testing.T) *carrier.Plane {
	group := func(name string, addr netip.AddrPort) health.GroupConfig {
		return health.GroupConfig{Name: name, Destinations: []health.DestConfig{{URI: "sip:" + addr.String(), Address: addr.String()}}}
	}
	a := group("a", enginerig.CarrierA)
	a.Auth = &health.AuthConfig{Username: "u", Password: "p"}
	p, err := carrier.New(carrier.Options{Groups: []health.GroupConfig{a, group("b", enginerig.CarrierB)},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// read takes what sipedge sent during a step, in order: requests are kept
// for the peer to answer; responses to the caller give the A-leg tag.
func (r *engineRig) read() {
	for _, sent := range r.Wire.Messages() {
		m := new(parser.Message)
		if err := m.Parse(append([]byte(nil), sent.Data...)); err != nil {
			r.t.Fatalf("sipedge sent a message that does not parse: %v\n%s", err, sent.Data)
		}
		if err := m.Validate(nil); err != nil {
			r.t.Fatalf("sipedge sent a message that does not validate: %v\n%s", err, sent.Data)
		}
		switch to := sent.To; {
		case to == enginerig.Caller && m.IsRequest():
			r.lastA = m
		case to == enginerig.Caller:
			var a parser.Address
			if m.To(&a) == nil && len(a.Tag) > 0 {
				r.aTag = string(a.Tag)
			}
		case m.IsRequest() && m.Method() != parser.MethodAck:
			r.lastB, r.lastBAt = m, to
		}
	}
	r.Wire.Reset()
}

// recv delivers msg from a peer if the shard would: when it parses and
// validates.
func (r *engineRig) recv(from netip.AddrPort, msg string) {
	r.Offer(transport.Peer{Addr: from, Transport: transport.UDP}, []byte(msg))
}

const fzSDP = "v=0\r\no=- 1 1 IN IP4 192.0.2.10\r\ns=-\r\nc=IN IP4 192.0.2.10\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"

// callerReq builds a request of the caller's one dialog.
func (r *engineRig) callerReq(method string, cseq int, toTag, branch string, body bool) string {
	s := method + " sip:15551234@203.0.113.1 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 192.0.2.10:5061;branch=z9hG4bK" + branch + "\r\nMax-Forwards: 70\r\n" +
		"From: <sip:alice@192.0.2.10>;tag=atag\r\nTo: <sip:15551234@203.0.113.1>"
	if toTag != "" {
		s += ";tag=" + toTag
	}
	s += "\r\nCall-ID: a-call\r\n" + fmt.Sprintf("CSeq: %d %s\r\n", cseq, method) + "Contact: <sip:alice@192.0.2.10:5061>\r\n"
	if body {
		return s + "Content-Type: application/sdp\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(fzSDP)) + fzSDP
	}
	return s + "Content-Length: 0\r\n\r\n"
}

// answer builds a peer's response to the last request sipedge sent it.
func answer(req *parser.Message, code int, tag string) string {
	if req == nil {
		return ""
	}
	b := parser.AppendResponse(nil, req, code, "Reason", []byte(tag))
	if code > 100 && code < 300 {
		b = append(b, "Contact: <sip:gw@198.51.100.20:5070>\r\n"...)
	}
	return string(parser.AppendBody(b, "", nil))
}

// step plays one action of the script.
func (r *engineRig) step(op byte) {
	switch op % 26 {
	case 0:
		r.recv(enginerig.Caller, r.callerReq("INVITE", 1, "", "inv1", true))
	case 1: // a second call attempt with the same Call-ID and another branch
		r.recv(enginerig.Caller, r.callerReq("INVITE", 1, "", "inv2", true))
	case 2:
		r.recv(enginerig.Caller, r.callerReq("ACK", 1, r.aTag, "ack1", false))
	case 3:
		r.recv(enginerig.Caller, r.callerReq("CANCEL", 1, "", "inv1", false))
	case 4:
		r.cseq++
		r.recv(enginerig.Caller, r.callerReq("BYE", r.cseq, r.aTag, fmt.Sprint("bye", r.cseq), false))
	case 5:
		r.cseq++
		r.recv(enginerig.Caller, r.callerReq("INVITE", r.cseq, r.aTag, fmt.Sprint("re", r.cseq), true))
	case 6:
		r.recv(enginerig.Caller, r.callerReq("OPTIONS", 1, "", "opt", false))
	case 7:
		r.cseq++
		r.recv(enginerig.Caller, r.callerReq("INFO", r.cseq, "nosuchtag", "info", false))
	case 8:
		r.recv(enginerig.CarrierA, "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 203.0.113.1:5060;branch=z9hG4bKstray\r\n"+
			"From: <sip:a@x>;tag=1\r\nTo: <sip:b@y>;tag=2\r\nCall-ID: stray\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n")
	case 9:
		r.recv(enginerig.Caller, r.callerReq("ACK", 7, "nosuchtag", "ack7", false))
	case 10:
		r.recv(r.lastBAt, answer(r.lastB, 100, ""))
	case 11:
		r.recv(r.lastBAt, answer(r.lastB, 180, "btag"))
	case 12:
		r.recv(r.lastBAt, answer(r.lastB, 200, "btag"))
	case 13:
		r.recv(r.lastBAt, answer(r.lastB, 487, "btag"))
	case 14:
		r.recv(r.lastBAt, answer(r.lastB, 200, "btag")) // a 200 to a CANCEL, or a late one
	case 15:
		r.recv(r.lastBAt, answer(r.lastB, 503, "btag"))
	case 16:
		r.recv(r.lastBAt, answer(r.lastB, 183, "btag2"))
	case 17:
		r.recv(r.lastBAt, answer(r.lastB, 486, "btag"))
	case 18:
		r.recv(r.lastBAt, answer(r.lastB, 603, "btag"))
	case 19: // the carrier hangs up in its dialog, if it has one
		if r.lastB != nil {
			var from parser.Address
			if r.lastB.From(&from) == nil {
				r.recv(r.lastBAt, "BYE sip:sipedge@203.0.113.1:5060 SIP/2.0\r\nVia: SIP/2.0/UDP "+r.lastBAt.String()+
					";branch=z9hG4bKcbye\r\nMax-Forwards: 70\r\nFrom: <sip:b@198.51.100.20>;tag=btag\r\nTo: <"+
					string(from.URI)+">;tag="+string(from.Tag)+"\r\nCall-ID: "+string(r.lastB.CallID())+
					"\r\nCSeq: 9 BYE\r\nContent-Length: 0\r\n\r\n")
			}
		}
	case 20:
		r.recv(enginerig.Caller, answer(r.lastA, 200, "")) // the caller answers sipedge's request
	case 21:
		r.Advance(700 * time.Millisecond)
	case 22:
		r.Advance(6 * time.Second)
	case 23:
		r.Advance(40 * time.Second)
	case 24: // the carrier challenges (carrier a's group has an account)
		r.recv(r.lastBAt, challenge(r.lastB, 407, `Digest realm="c", nonce="n1", qop="auth"`))
	case 25:
		r.recv(r.lastBAt, challenge(r.lastB, 401, `Digest realm="c", nonce="n2", stale=true`))
	}
}

// challenge builds a carrier's 401 or 407 to req with one challenge.
func challenge(req *parser.Message, code int, ch string) string {
	if req == nil {
		return ""
	}
	name := "WWW-Authenticate: "
	if code == 407 {
		name = "Proxy-Authenticate: "
	}
	b := parser.AppendResponse(nil, req, code, "Auth", []byte("btag"))
	b = append(b, name+ch+"\r\n"...)
	return string(parser.AppendBody(b, "", nil))
}
