package enginerig

import (
	"net/netip"

	"github.com/sipedge/sipedge/transport"
)

// Wire is the in-memory network the engine sends on (its Env.Send): each
// message is copied into one buffer, in the order sent, until the test
// reads it, by destination (Next) or all in order (Messages). Reset
// empties it. A warm Wire allocates nothing.
type Wire struct {
	buf  []byte
	msgs []Sent
	read int // msgs[:read] are all read
}

// Sent is a message the engine sent.
type Sent struct {
	To   netip.AddrPort
	Data []byte // a view of the Wire's buffer, valid until Reset
	Read bool   // Next returned it
}

// Send queues a copy of b for to: Env.Send.
func (w *Wire) Send(to transport.Peer, b []byte) {
	at := len(w.buf)
	w.buf = append(w.buf, b...)
	w.msgs = append(w.msgs, Sent{To: to.Addr, Data: w.buf[at:len(w.buf):len(w.buf)]})
}

// Next returns the first message sent to addr that was not read yet, and
// marks it read.
func (w *Wire) Next(addr netip.AddrPort) ([]byte, bool) {
	for i := w.read; i < len(w.msgs); i++ {
		if m := &w.msgs[i]; !m.Read && m.To == addr {
			m.Read = true
			if i == w.read {
				w.read++
			}
			return m.Data, true
		}
	}
	return nil, false
}

// Unread returns the first message not read yet, to any address.
func (w *Wire) Unread() (*Sent, bool) {
	for ; w.read < len(w.msgs); w.read++ {
		if m := &w.msgs[w.read]; !m.Read {
			return m, true
		}
	}
	return nil, false
}

// Messages returns every message sent since the last Reset, in order.
func (w *Wire) Messages() []Sent { return w.msgs }

// Reset empties the wire, keeping its storage: the views of the messages
// sent so far are overwritten by the next ones.
func (w *Wire) Reset() {
	w.buf, w.msgs, w.read = w.buf[:0], w.msgs[:0], 0
}
