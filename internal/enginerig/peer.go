package enginerig

import (
	"bytes"
	"net/netip"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Peer is a scripted endpoint: it reads what the engine sent to its
// address from the rig's Wire, in order, and sends what it builds in Out
// (Send). A Strict peer parses and validates every message it reads and
// checks that none carries Secret, what of the other side must never
// reach it (topology hiding); a peer that is not strict parses only what
// it answers or reads from, as a load generator would.
type Peer struct {
	Name   string
	Addr   transport.Peer
	Strict bool
	Secret string

	M   parser.Message // the message read last by Expect or Response
	Out []byte         // the message the peer sends

	rig *Rig
}

// NewPeer returns the peer name at addr, over UDP.
func (r *Rig) NewPeer(name string, addr netip.AddrPort) *Peer {
	return &Peer{Name: name, Addr: transport.Peer{Addr: addr, Transport: transport.UDP}, rig: r,
		Out: make([]byte, 0, 2<<10)}
}

// Send delivers Out to the engine (Rig.Deliver).
func (p *Peer) Send() { p.rig.Deliver(p.Addr, p.Out) }

// fatalf fails the test or benchmark. testing.TB.Helper walks the stack,
// which costs more than a message: the hot path leaves it to failures.
func (p *Peer) fatalf(format string, args ...any) {
	p.rig.TB.Helper()
	p.rig.TB.Fatalf(format, args...)
}

// Pop returns the next message the engine sent the peer, a view valid
// until the rig's wire is reset.
func (p *Peer) Pop() []byte {
	b, ok := p.rig.Wire.Next(p.Addr.Addr)
	if !ok {
		p.fatalf("%s got no message", p.Name)
	}
	return b
}

// Expect reads the next message, which must begin with start: "SIP/2.0
// 180 " or "ACK ". It is for messages the peer neither answers nor reads
// anything from: only a strict peer parses them.
func (p *Peer) Expect(start string) {
	b := p.Pop()
	if !bytes.HasPrefix(b, []byte(start)) {
		p.fatalf("%s got %q, want %q", p.Name, FirstLine(b), start)
	}
	if p.Strict {
		p.Parse(&p.M, b)
	}
}

// Next parses the next message the engine sent the peer into m.
func (p *Peer) Next(m *parser.Message) *parser.Message { return p.Parse(m, p.Pop()) }

// Parse parses b, a message the engine sent the peer, into m; a strict
// peer validates it and checks it for Secret.
func (p *Peer) Parse(m *parser.Message, b []byte) *parser.Message {
	if err := m.Parse(b); err != nil {
		p.fatalf("sipedge sent %s a message that does not parse: %v\n%s", p.Name, err, b)
	}
	if p.Strict {
		if err := m.Validate(nil); err != nil {
			p.fatalf("sipedge sent %s a message that does not validate: %v\n%s", p.Name, err, b)
		}
		if bytes.Contains(b, []byte(p.Secret)) {
			p.fatalf("topology leak: %q reached the %s:\n%s", p.Secret, p.Name, b)
		}
	}
	return m
}

// Response reads the next message into M, which must be a response with
// code.
func (p *Peer) Response(code int) *parser.Message {
	m := p.Next(&p.M)
	if !m.IsResponse() || m.StatusCode() != code {
		p.fatalf("%s got %q, want a %d", p.Name, FirstLine(m.Bytes()), code)
	}
	return m
}

// Request reads the next message into m, which must be a method request.
func (p *Peer) Request(m *parser.Message, method parser.Method) *parser.Message {
	p.Next(m)
	if !m.IsRequest() || m.Method() != method {
		p.fatalf("%s got %q, want a %v", p.Name, FirstLine(m.Bytes()), method)
	}
	return m
}

// FirstLine returns the start line of a message.
func FirstLine(b []byte) []byte {
	if i := bytes.Index(b, []byte("\r\n")); i >= 0 {
		return b[:i]
	}
	return b
}
