package txn

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// The spoofed flood of the security review: out-of-dialog requests of about
// 15 KB (36 Vias of some 400 bytes, within the parser's default limits),
// each answered by the TU with a response echoing every Via (RFC 3261 8.2.6.2).

const budgetTestBytes = 1 << 20 // 1 MiB: room for some 60 such responses

var floodPeer = transport.Peer{Addr: netip.MustParseAddrPort("203.0.113.9:5060"), Transport: transport.UDP}

// bigRequest returns a request of method with 36 Vias of ~400 bytes; the
// top Via's branch is z9hG4bK + branch.
func bigRequest(method, branch string) []byte {
	pad := strings.Repeat("x", 340)
	var b strings.Builder
	fmt.Fprintf(&b, "%s sip:bob@biloxi.example.com SIP/2.0\r\n", method)
	fmt.Fprintf(&b, "Via: SIP/2.0/UDP 203.0.113.9:5060;branch=z9hG4bK%s;p=%s\r\n", branch, pad)
	for k := 1; k < 36; k++ {
		fmt.Fprintf(&b, "Via: SIP/2.0/UDP 198.51.100.%d:5060;branch=z9hG4bKhop%d;p=%s\r\n", k, k, pad)
	}
	fmt.Fprintf(&b, "Max-Forwards: 70\r\nTo: <sip:bob@biloxi.example.com>\r\n"+
		"From: <sip:alice@atlanta.example.com>;tag=1928301774\r\nCall-ID: %s@flood\r\n"+
		"CSeq: 1 %s\r\nContent-Length: 0\r\n\r\n", branch, method)
	return []byte(b.String())
}

// heldByScan sums the capacity of every slot's buffers: what the table
// really keeps, counted without its own bookkeeping.
func heldByScan(tab *Table) int {
	n := 0
	for i := range tab.slots.n {
		x := tab.slots.at(i)
		n += cap(x.key) + cap(x.msg) + cap(x.ack) + cap(x.cancelHdrs) + cap(x.respTag)
	}
	for _, s := range tab.spares {
		for _, b := range s {
			n += cap(b)
		}
	}
	for _, s := range tab.shedding {
		n += cap(s.buf)
	}
	return n
}

type budgetRig struct {
	t     *testing.T
	tab   *Table
	clock *fakeTimers
	m     parser.Message
	resp  []byte
	now   time.Duration
}

func newBudgetRig(t *testing.T) *budgetRig {
	r := &budgetRig{t: t, clock: &fakeTimers{}}
	var err error
	if r.tab, err = New(Config{MaxStoredBytes: budgetTestBytes}, r.clock); err != nil {
		t.Fatal(err)
	}
	return r
}

// receive passes req to the table and returns its actions.
func (r *budgetRig) receive(req []byte) ([]Action, error) {
	r.t.Helper()
	if err := r.m.Parse(req); err != nil {
		r.t.Fatal(err)
	}
	err := r.tab.ReceiveRequest(&r.m, floodPeer, r.now)
	return r.tab.Actions(), err
}

// answer has the TU answer the request last received, code reason.
func (r *budgetRig) answer(h Handle, code int, reason string) {
	r.t.Helper()
	r.resp = parser.AppendResponse(r.resp[:0], &r.m, code, reason, []byte("a6c85cf"))
	r.resp = parser.AppendBody(r.resp, "", nil)
	if err := r.tab.Respond(h, r.resp, r.now); err != nil {
		r.t.Fatalf("respond %d: %v", code, err)
	}
}

// nonInvite runs one out-of-dialog non-INVITE request through the table,
// answered code by the TU, and returns its transaction.
func (r *budgetRig) nonInvite(method, branch string, code int, reason string) Handle {
	r.t.Helper()
	acts, err := r.receive(bigRequest(method, branch))
	if err != nil || len(acts) != 1 || acts[0].Kind != ActRequest {
		r.t.Fatalf("%s %s: %v %v, want a new transaction", method, branch, acts, err)
	}
	r.answer(acts[0].Txn, code, reason)
	return acts[0].Txn
}

// TestBudgetFlood floods a table with large out-of-dialog non-INVITE
// requests, answered at once by the TU, and checks that what the table
// keeps stays near its budget while the transactions that came before the
// flood keep their Timer J (RFC 3261 17.2.2): a retransmission within 64*T1
// is still answered from the transaction, never reaching the TU.
func TestBudgetFlood(t *testing.T) {
	r := newBudgetRig(t)
	if len(bigRequest("OPTIONS", "x")) < 14<<10 {
		t.Fatal("the flood's requests are not large")
	}

	// Under budget: a few transactions, all of them kept in Completed.
	const early = 10
	var kept [early]Handle
	for k := range early {
		kept[k] = r.nonInvite("OPTIONS", fmt.Sprint("early", k), 200, "OK")
		if _, s, _ := r.tab.State(kept[k]); s != StateCompleted {
			t.Fatalf("under budget, transaction %d is %v, want Completed (Timer J)", k, s)
		}
	}

	// The flood: 36 MB of responses in 10 s, three methods' worth of answers.
	const flood = 2400
	answers := []struct {
		method string
		code   int
		reason string
	}{{"OPTIONS", 200, "OK"}, {"INFO", 481, "Call/Transaction Does Not Exist"}, {"PUBLISH", 405, "Method Not Allowed"}}
	for k := range flood {
		r.now += 10 * time.Second / flood
		a := answers[k%len(answers)]
		r.nonInvite(a.method, fmt.Sprint("flood", k), a.code, a.reason)
		if got := heldByScan(r.tab); got > budgetTestBytes+64<<10 {
			t.Fatalf("after %d flood requests the table keeps %d bytes, budget %d", k+1, got, budgetTestBytes)
		}
	}
	st := r.tab.Stats()
	if st.StoredBytes != heldByScan(r.tab) {
		t.Errorf("StoredBytes %d, but the buffers hold %d", st.StoredBytes, heldByScan(r.tab))
	}
	if st.BudgetShortcuts == 0 || st.BudgetShortcuts > flood {
		t.Errorf("%d shortcuts, want some and at most %d", st.BudgetShortcuts, flood)
	}
	if n := r.tab.Len(); n > early+budgetTestBytes/(14<<10) {
		t.Errorf("%d transactions live after the flood, want those the budget holds", n)
	}

	// 10 s on, within Timer J: the early transactions still answer a
	// retransmission with their stored response; the TU sees nothing.
	for k := range early {
		acts, err := r.receive(bigRequest("OPTIONS", fmt.Sprint("early", k)))
		if err != nil || len(acts) != 1 || acts[0].Kind != ActSend || acts[0].Txn != kept[k] ||
			!strings.HasPrefix(string(acts[0].Data), "SIP/2.0 200 OK\r\n") {
			t.Fatalf("retransmission %d during the flood: %v %v, want the stored 200 re-sent", k, acts, err)
		}
	}

	// A shortened transaction's retransmission is a new request to the TU,
	// which answers it again: the degradation, never a wrong answer.
	acts, err := r.receive(bigRequest("OPTIONS", fmt.Sprint("flood", flood-3)))
	if err != nil || len(acts) != 1 || acts[0].Kind != ActRequest {
		t.Fatalf("retransmission of a shortened transaction: %v %v, want a new transaction", acts, err)
	}
	r.answer(acts[0].Txn, 200, "OK")

	// The flood over, Timer J ends the early ones and the table shrinks
	// back: what it keeps is again below the budget, and new transactions
	// get their Timer J.
	r.now += 64 * DefaultT1
	for {
		ft, ok := r.clock.next(r.now)
		if !ok {
			break
		}
		r.tab.Timeout(ft.arg, r.now)
	}
	if got := heldByScan(r.tab); got > budgetTestBytes {
		t.Fatalf("after the flood the table keeps %d bytes, budget %d", got, budgetTestBytes)
	}
	h := r.nonInvite("OPTIONS", "after", 200, "OK")
	if _, s, _ := r.tab.State(h); s != StateCompleted {
		t.Fatalf("after the flood a transaction is %v, want Completed (Timer J)", s)
	}
}

// TestBudgetSparesInvite: under the same pressure an INVITE server
// transaction runs its whole RFC 3261 17.2.1 course (100 Trying, a 486
// retransmitted on Timer G and for a retransmitted INVITE, ACK, Confirmed),
// and one answered 2xx waits in Accepted (RFC 6026 7.1); only new
// transactions are refused, with ErrFull, once the table keeps twice its
// budget, which INVITE transactions alone can bring about.
func TestBudgetSparesInvite(t *testing.T) {
	r := newBudgetRig(t)
	acts, err := r.receive(bigRequest("INVITE", "call"))
	if err != nil || len(acts) != 2 || acts[1].Kind != ActRequest {
		t.Fatalf("INVITE: %v %v", acts, err)
	}
	inv := acts[1].Txn
	invite := bigRequest("INVITE", "call")
	acts, err = r.receive(bigRequest("INVITE", "ok"))
	if err != nil || len(acts) != 2 {
		t.Fatalf("INVITE: %v %v", acts, err)
	}
	ok := acts[1].Txn
	r.answer(ok, 200, "OK")

	for k := range 400 { // far over budget
		r.nonInvite("OPTIONS", fmt.Sprint("flood", k), 200, "OK")
	}
	if r.tab.Stats().BudgetShortcuts == 0 {
		t.Fatal("the flood put the table under no pressure")
	}

	if err := r.m.Parse(invite); err != nil {
		t.Fatal(err)
	}
	r.answer(inv, 486, "Busy Here")
	if _, s, _ := r.tab.State(inv); s != StateCompleted {
		t.Fatalf("INVITE answered 486 under pressure is %v, want Completed", s)
	}
	acts, err = r.receive(invite)
	if err != nil || len(acts) != 1 || acts[0].Kind != ActSend || !strings.HasPrefix(string(acts[0].Data), "SIP/2.0 486") {
		t.Fatalf("retransmitted INVITE: %v %v, want the 486 again", acts, err)
	}
	r.now += DefaultT1
	ft, _ := r.clock.next(r.now) // Timer G
	r.tab.Timeout(ft.arg, r.now)
	if acts := r.tab.Actions(); len(acts) != 1 || acts[0].Kind != ActSend || acts[0].Txn != inv {
		t.Fatalf("Timer G: %v, want the 486 retransmitted", acts)
	}
	ack := strings.Replace(strings.Replace(string(invite), "INVITE sip:", "ACK sip:", 1), "CSeq: 1 INVITE", "CSeq: 1 ACK", 1)
	ack = strings.Replace(ack, "To: <sip:bob@biloxi.example.com>", "To: <sip:bob@biloxi.example.com>;tag=a6c85cf", 1)
	if acts, err := r.receive([]byte(ack)); err != nil || len(acts) != 0 {
		t.Fatalf("ACK: %v %v, want it absorbed", acts, err)
	}
	if _, s, _ := r.tab.State(inv); s != StateConfirmed {
		t.Fatalf("INVITE after its ACK is %v, want Confirmed", s)
	}
	if _, s, live := r.tab.State(ok); !live || s != StateAccepted {
		t.Fatalf("INVITE answered 2xx is %v, want Accepted (Timer L)", s)
	}

	// INVITE transactions pile up, never shortened, until the hard limit
	// refuses new ones: long before the count limit.
	var refused bool
	for k := range 400 {
		acts, err := r.receive(bigRequest("INVITE", fmt.Sprint("pile", k)))
		if err == ErrFull {
			refused = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r.answer(acts[1].Txn, 486, "Busy Here")
	}
	if !refused {
		t.Fatal("400 INVITE transactions of 15 KB kept, none refused")
	}
	if got := heldByScan(r.tab); got > 2*budgetTestBytes+64<<10 {
		t.Fatalf("the table keeps %d bytes, hard limit %d", got, 2*budgetTestBytes)
	}
	if r.tab.Stats().BudgetRefused == 0 {
		t.Error("refusal not counted")
	}
	// The TU's own requests still go out: a client transaction is no new
	// work from the network, and may be what ends a call.
	if err := r.m.Parse(benchUAC); err != nil {
		t.Fatal(err)
	}
	if _, err := r.tab.SendRequest(&r.m, benchPeer, r.now); err != nil {
		t.Errorf("a client transaction at the hard limit: %v, want it sent", err)
	}
}

// TestBudgetRareLargeRequests: a steady load of small out-of-dialog
// requests, one in a hundred a large one (the 15 KB of bigRequest), at
// random times, for an hour. The table must keep what its live
// transactions need, not let every slot grow to the large size as slots
// take turns: before maxKeptSlotBytes, the 640 or so slots of this load
// grew to the 1 MiB budget within 10 minutes and Timer J was shortened
// hundreds of times (BudgetShortcuts), with no flood.
func TestBudgetRareLargeRequests(t *testing.T) {
	r := newBudgetRig(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const rate = 20 // requests a second: with Timer J, some 640 live
	for k := range rate * 3600 {
		r.now += time.Duration(rng.ExpFloat64() * float64(time.Second) / rate)
		for {
			ft, ok := r.clock.next(r.now)
			if !ok {
				break
			}
			r.tab.Timeout(ft.arg, r.now)
		}
		req := smallRequest("OPTIONS", fmt.Sprint("steady", k))
		if rng.IntN(100) == 0 {
			req = bigRequest("OPTIONS", fmt.Sprint("steady", k))
		}
		acts, err := r.receive(req)
		if err != nil || len(acts) != 1 || acts[0].Kind != ActRequest {
			t.Fatalf("request %d: %v %v, want a new transaction", k, acts, err)
		}
		r.answer(acts[0].Txn, 200, "OK")
	}
	st := r.tab.Stats()
	if st.StoredBytes != heldByScan(r.tab) {
		t.Errorf("StoredBytes %d, but the buffers hold %d", st.StoredBytes, heldByScan(r.tab))
	}
	if st.BudgetShortcuts != 0 {
		t.Errorf("%d Timer J shortcuts without a flood", st.BudgetShortcuts)
	}
	if st.StoredBytes > budgetTestBytes/2 {
		t.Errorf("the table keeps %d bytes for %d live transactions, one in a hundred large", st.StoredBytes, r.tab.Len())
	}
}

// smallRequest returns a request of method with one Via, whose branch is
// z9hG4bK + branch: some 250 bytes.
func smallRequest(method, branch string) []byte {
	return fmt.Appendf(nil, "%s sip:bob@biloxi.example.com SIP/2.0\r\n"+
		"Via: SIP/2.0/UDP 203.0.113.9:5060;branch=z9hG4bK%s\r\n"+
		"Max-Forwards: 70\r\nTo: <sip:bob@biloxi.example.com>\r\n"+
		"From: <sip:alice@atlanta.example.com>;tag=1928301774\r\nCall-ID: %s@steady\r\n"+
		"CSeq: 1 %s\r\nContent-Length: 0\r\n\r\n", method, branch, branch, method)
}
