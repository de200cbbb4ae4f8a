package enginerig

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// recorder is an Engine that logs its inputs; a fire may start timers.
type recorder struct {
	clk    *Clock
	log    []string
	onFire func(arg uint64)
}

func (e *recorder) Receive(m *parser.Message, from transport.Peer, now time.Duration) {
	e.log = append(e.log, fmt.Sprintf("%v %s from %v", now, FirstLine(m.Bytes()), from.Addr))
}

func (e *recorder) Timer(kind uint8, arg uint64, now time.Duration) {
	e.log = append(e.log, fmt.Sprintf("%v timer %d/%d", now, kind, arg))
	if e.onFire != nil {
		e.onFire(arg)
	}
}

// Timers fire in deadline order, those due at one time in the order they
// were started, each at its own time; a stopped one does not fire, and a
// timer a fire starts fires in the same advance when it is due by then.
func TestClockOrder(t *testing.T) {
	r := New(t)
	e := &recorder{clk: &r.Clock}
	r.Attach(e)
	r.Clock.StartAt(3*time.Second, 1, 1)
	r.Clock.StartAt(2*time.Second, 1, 2)
	h := r.Clock.StartAt(2*time.Second, 1, 3)
	r.Clock.StartAt(2*time.Second, 2, 4)
	r.Clock.StartAt(9*time.Second, 1, 5)
	if !r.Clock.Stop(h) || r.Clock.Stop(h) {
		t.Fatal("Stop of a pending timer is true once")
	}
	e.onFire = func(arg uint64) {
		if arg == 2 { // due at 2s: starts one at 2s and one at 2.5s
			r.Clock.StartAt(2*time.Second, 3, 6)
			r.Clock.StartAt(2500*time.Millisecond, 3, 7)
		}
	}
	r.Advance(4 * time.Second) // from 1s to 5s
	want := []string{"2s timer 1/2", "2s timer 2/4", "2s timer 3/6", "2.5s timer 3/7", "3s timer 1/1"}
	if strings.Join(e.log, "|") != strings.Join(want, "|") {
		t.Fatalf("fired:\n%s\nwant:\n%s", strings.Join(e.log, "\n"), strings.Join(want, "\n"))
	}
	if r.Clock.Now != 5*time.Second || r.Clock.Pending() != 1 || r.Clock.Fired != 5 {
		t.Fatalf("now %v, %d pending, %d fired", r.Clock.Now, r.Clock.Pending(), r.Clock.Fired)
	}
	// Handles stay valid as fired timers are dropped from the list.
	e.log = nil
	h = r.Clock.StartAt(7*time.Second, 4, 8)
	if !r.Clock.Stop(h) {
		t.Fatal("the new timer is not pending")
	}
	// Now moved by hand past two timers: they fire in deadline order.
	r.Clock.StartAt(8*time.Second, 4, 9)
	r.Clock.StartAt(6*time.Second, 4, 10)
	r.Clock.Now = 10 * time.Second
	r.Advance(0)
	want = []string{"10s timer 4/10", "10s timer 4/9", "10s timer 1/5"}
	if strings.Join(e.log, "|") != strings.Join(want, "|") {
		t.Fatalf("fired:\n%s\nwant:\n%s", strings.Join(e.log, "\n"), strings.Join(want, "\n"))
	}
	if got := r.Clock.Wall(90 * time.Second); !got.Equal(Epoch.Add(90 * time.Second)) {
		t.Fatalf("Wall %v", got)
	}
}

func TestWire(t *testing.T) {
	r := New(t)
	e := &recorder{}
	r.Attach(e)
	to := func(a, msg string) {
		r.Wire.Send(transport.Peer{Addr: map[string]netip.AddrPort{"a": Caller, "b": CarrierA}[a]}, []byte(msg))
	}
	to("a", "one")
	to("b", "two")
	to("a", "three")
	if b, ok := r.Wire.Next(Caller); !ok || string(b) != "one" {
		t.Fatalf("first to the caller %q", b)
	}
	if b, ok := r.Wire.Next(Caller); !ok || string(b) != "three" {
		t.Fatalf("second to the caller %q", b)
	}
	if _, ok := r.Wire.Next(Caller); ok {
		t.Fatal("a third message to the caller")
	}
	if m, ok := r.Wire.Unread(); !ok || m.To != CarrierA || string(m.Data) != "two" {
		t.Fatalf("unread %+v", m)
	}
	var order []string
	for _, m := range r.Wire.Messages() {
		order = append(order, string(m.Data))
	}
	if strings.Join(order, " ") != "one two three" {
		t.Fatalf("messages in order: %q", order)
	}
	r.Wire.Next(CarrierA)
	r.Clear()
	if len(r.Wire.Messages()) != 0 {
		t.Fatal("Clear left messages")
	}
	if got := string(r.MintCallID(nil)) + " " + string(r.MintCallID(nil)); got != "b1@sipedge b2@sipedge" {
		t.Fatalf("minted %s", got)
	}
}

// A peer's message reaches the engine parsed, at the clock's time; one the
// shard would drop is not offered.
func TestDeliver(t *testing.T) {
	r := New(t)
	e := &recorder{}
	r.Attach(e)
	const options = "OPTIONS sip:203.0.113.1 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.10:5061;branch=z9hG4bK1\r\n" +
		"From: <sip:a@192.0.2.10>;tag=1\r\nTo: <sip:203.0.113.1>\r\nCall-ID: c1\r\nCSeq: 1 OPTIONS\r\n" +
		"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
	p := r.NewPeer("caller", Caller)
	p.Out = append(p.Out[:0], options...)
	p.Send()
	if r.Offer(p.Addr, []byte("garbage\r\n\r\n")) {
		t.Fatal("garbage offered")
	}
	if !r.Offer(p.Addr, []byte(strings.Replace(options, "CSeq: 1", "CSeq: 2", 1))) {
		t.Fatal("a valid message not offered")
	}
	want := "1s OPTIONS sip:203.0.113.1 SIP/2.0 from 192.0.2.10:5061|1s OPTIONS sip:203.0.113.1 SIP/2.0 from 192.0.2.10:5061"
	if strings.Join(e.log, "|") != want {
		t.Fatalf("received %q", e.log)
	}
}
