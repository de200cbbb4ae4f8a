package shard

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/shard/timer"
	"github.com/sipedge/sipedge/transport"
)

// txnResponder answers OPTIONS through a real transaction table per shard,
// as the B2BUA does: retransmitted requests are absorbed by their server
// transaction before the responder sees them.
type txnResponder struct {
	delivered atomic.Int32 // requests that reached the responder (the TU)
}

type wheelTimers struct{ w *timer.Wheel }

func (t wheelTimers) StartAt(at time.Duration, arg uint64) uint64 {
	return uint64(t.w.StartAt(at, timer.Payload{Kind: 1, Arg: arg}))
}
func (t wheelTimers) Stop(h uint64) bool { return t.w.Stop(timer.Handle(h)) }

func (r *txnResponder) handler(sh *Shard) Handler {
	tab, err := txn.New(txn.Config{}, wheelTimers{sh.Timers()})
	if err != nil {
		panic(err)
	}
	var out []byte
	apply := func(m *parser.Message) {
		for _, a := range tab.Actions() {
			switch a.Kind {
			case txn.ActSend:
				sh.Send(a.Peer, a.Data)
			case txn.ActRequest:
				r.delivered.Add(1)
				out = parser.AppendResponse(out[:0], m, 200, "OK", []byte("srv"))
				out = parser.AppendBody(out, "", nil)
				h := a.Txn
				defer func() { // after this loop: Respond replaces the actions
					if tab.Respond(h, out, sh.Now()) == nil {
						for _, a := range tab.Actions() {
							if a.Kind == txn.ActSend {
								sh.Send(a.Peer, a.Data)
							}
						}
					}
				}()
			}
		}
	}
	return Handler{
		Message: func(sh *Shard, m *parser.Message, from transport.Peer) {
			if tab.ReceiveRequest(m, from, sh.Now()) == nil {
				apply(m)
			}
		},
		Timer: func(sh *Shard, p timer.Payload) {
			tab.Timeout(p.Arg, sh.Now())
			apply(nil)
		},
	}
}

// TestOptionsRetransmissionAbsorbed: a Go UDP client and a TCP client send
// OPTIONS to a running runtime; a retransmitted request is answered again
// by its transaction without reaching the responder; a malformed request is
// answered 400.
func TestOptionsRetransmissionAbsorbed(t *testing.T) {
	testtier.RequiresSockets(t)
	port := freePort(t)
	r := &txnResponder{}
	runServer(t, Config{Shards: 2, Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port))},
		r.handler, nil)

	c := dialUDP(t, port)
	local := c.LocalAddr().(*net.UDPAddr).Port
	req := options("rtx@test", "rtx1", "UDP", local)
	for i := 0; i < 3; i++ { // the request and two retransmissions
		c.Write([]byte(req))
		if reply := readUDP(t, c); !strings.HasPrefix(reply, "SIP/2.0 200 OK") || !strings.Contains(reply, "tag=srv") {
			t.Fatalf("reply %d: %q", i, reply)
		}
	}
	if n := r.delivered.Load(); n != 1 {
		t.Fatalf("the responder saw %d requests, want 1: retransmissions must be absorbed", n)
	}
	c.Write([]byte(strings.Replace(req, "Call-ID: rtx@test\r\n", "", 1)))
	if reply := readUDP(t, c); !strings.HasPrefix(reply, "SIP/2.0 400 ") {
		t.Fatalf("malformed request: %q", reply)
	}

	tc, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.Write([]byte(options("tcp@test", "tcp1", "TCP", 5060)))
	tc.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 4096)
	n, err := tc.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "SIP/2.0 200 OK") {
		t.Fatalf("TCP reply %q, %v", buf[:n], err)
	}
}
