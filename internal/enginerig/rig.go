package enginerig

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Engine is what the rig drives: the inputs of a b2bua.Engine.
type Engine interface {
	Receive(m *parser.Message, from transport.Peer, now time.Duration)
	Timer(kind uint8, arg uint64, now time.Duration)
}

// The rig's network, in the documentation ranges (RFC 5737): sipedge at
// Local, a caller on a trunk, two carriers' gateways and a host that is
// neither.
var (
	Caller   = netip.MustParseAddrPort("192.0.2.10:5061")
	CarrierA = netip.MustParseAddrPort("198.51.100.20:5070")
	CarrierB = netip.MustParseAddrPort("198.51.100.21:5070")
	Stranger = netip.MustParseAddrPort("203.0.113.66:5060")
)

// Local is sipedge's SIP address on the rig's network (b2bua.Config.Local, on UDP).
const Local = "203.0.113.1:5060"

// Rig runs one engine: what its peers send goes through the parser as the
// shard's messages do (Deliver), what it sends is queued on Wire, and its
// timers fire as Clock advances. Build the engine's Env from the rig's
// parts (Wire.Send, &Clock, MintCallID, a Carriers, a CDRFunc), then
// Attach it.
type Rig struct {
	TB    testing.TB
	Clock Clock
	Wire  Wire
	// Trusted skips Validate on what the peers send: the engine ends in
	// the same state, sooner. For runs that measure memory, not time; a
	// test validates the same messages.
	Trusted bool

	engine Engine
	in     parser.Message // what a peer sends, parsed: the shard's
	minted uint64
}

// New returns a rig at time 1s: a time of 0 reads as "did not happen" in
// a call's summary.
func New(tb testing.TB) *Rig {
	r := &Rig{TB: tb}
	r.Clock.Now = time.Second
	r.Wire.buf, r.Wire.msgs = make([]byte, 0, 16<<10), make([]Sent, 0, 16)
	return r
}

// Attach makes e the engine the rig delivers to and fires timers on.
func (r *Rig) Attach(e Engine) {
	r.engine = e
	r.Clock.Engine = e
}

// MintCallID is Env.MintCallID: b1@sipedge, b2@sipedge, ... With one
// shard, every Call-ID hashes to it.
func (r *Rig) MintCallID(dst []byte) []byte {
	r.minted++
	dst = append(dst, 'b')
	dst = strconv.AppendUint(dst, r.minted, 10)
	return append(dst, "@sipedge"...)
}

// Deliver hands b, a message from from, to the engine as the shard would:
// parsed and validated (unless Trusted), at the clock's time. A message
// the shard would not deliver fails the test: the test built it wrong.
func (r *Rig) Deliver(from transport.Peer, b []byte) {
	if err := r.in.Parse(b); err != nil {
		r.TB.Fatalf("a message from %v does not parse: %v\n%s", from.Addr, err, b)
	}
	if !r.Trusted {
		if err := r.in.Validate(nil); err != nil {
			r.TB.Fatalf("a message from %v does not validate: %v\n%s", from.Addr, err, b)
		}
	}
	r.engine.Receive(&r.in, from, r.Clock.Now)
}

// Offer hands b to the engine if the shard would: when it parses and
// validates. It reports whether it did.
func (r *Rig) Offer(from transport.Peer, b []byte) bool {
	if r.in.Parse(b) != nil || r.in.Validate(nil) != nil {
		return false
	}
	r.engine.Receive(&r.in, from, r.Clock.Now)
	return true
}

// Advance moves the clock d ahead, firing the engine's timers due.
func (r *Rig) Advance(d time.Duration) { r.Clock.Advance(d) }

// Done fails when the engine sent a message no one read.
func (r *Rig) Done() {
	if m, ok := r.Wire.Unread(); ok {
		r.TB.Fatalf("sipedge sent %v a message the test did not read:\n%s", m.To, m.Data)
	}
}

// Clear starts a step: Done, then the wire is emptied.
func (r *Rig) Clear() {
	r.Done()
	r.Wire.Reset()
}
