package txn

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// TestIndexClusters drives the index with hashes crowded around the end of
// the table, so that probe sequences wrap and backward-shift deletion must
// move entries across the wrap, and checks it against a map.
func TestIndexClusters(t *testing.T) {
	tab, err := New(Config{}, &fakeTimers{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]int32{} // key -> slot
	for step := range 20000 {
		// At most 25 keys stay below the load that grows the index; their
		// hashes are 61..66 mod 64, so probes wrap.
		key := "k" + strconv.Itoa(rng.IntN(25))
		h := uint64(len(tab.index)-3+rng.IntN(6)) % uint64(len(tab.index))
		tab.key = append(tab.key[:0], key...)
		if i, ok := want[key]; ok {
			if rng.IntN(2) == 0 {
				h = tab.slots.at(i).hash
				if got := tab.find(h, nil, false); got != i {
					t.Fatalf("step %d: find(%s) = %d, want %d", step, key, got, i)
				}
				continue
			}
			tab.begin(0)
			tab.terminate(i)
			delete(want, key)
		} else {
			i, err := tab.alloc(KindNonInviteServer, StateTrying, transport.Peer{Transport: transport.UDP})
			if err != nil {
				t.Fatal(err)
			}
			tab.insert(i, h)
			want[key] = i
		}
		if tab.indexed != len(want) {
			t.Fatalf("step %d: %d indexed, want %d", step, tab.indexed, len(want))
		}
		for k, i := range want {
			tab.key = append(tab.key[:0], k...)
			if got := tab.find(tab.slots.at(i).hash, nil, false); got != i {
				t.Fatalf("step %d: after update, find(%s) = %d, want %d", step, k, got, i)
			}
		}
	}
}

// TestChurn runs many concurrent server transactions through a table,
// retransmitting and terminating at random, and checks that every
// retransmission is absorbed by its own transaction and every new request
// creates one.
func TestChurn(t *testing.T) {
	clock := &fakeTimers{}
	tab, err := New(Config{}, clock)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	live := map[int]Handle{}
	from := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5060"), Transport: transport.UDP}
	var m parser.Message
	var buf []byte
	next := 0
	for step := range 20000 {
		var n int
		retransmit := len(live) > 0 && rng.IntN(3) > 0
		if retransmit {
			for n = range live {
				break
			}
		} else {
			n, next = next, next+1
		}
		buf = fmt.Appendf(buf[:0], "OPTIONS sip:bob@example.com SIP/2.0\r\n"+
			"Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK%d\r\n"+
			"From: <sip:alice@example.com>;tag=a\r\nTo: <sip:bob@example.com>\r\n"+
			"Call-ID: c%d\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", n, n)
		if err := m.Parse(buf); err != nil {
			t.Fatal(err)
		}
		if err := tab.ReceiveRequest(&m, from, 0); err != nil {
			t.Fatal(err)
		}
		acts := tab.Actions()
		if retransmit {
			if len(acts) != 0 {
				t.Fatalf("step %d: retransmission of %d gave %v", step, n, acts)
			}
		} else {
			if len(acts) != 1 || acts[0].Kind != ActRequest {
				t.Fatalf("step %d: new request %d gave %v", step, n, acts)
			}
			live[n] = acts[0].Txn
		}
		if rng.IntN(4) == 0 && len(live) > 0 { // live grows: the index grows too
			for k, h := range live {
				if err := tab.Terminate(h, 0); err != nil {
					t.Fatalf("step %d: Terminate: %v", step, err)
				}
				delete(live, k)
				break
			}
		}
		if tab.Len() != len(live) || tab.indexed != len(live) {
			t.Fatalf("step %d: Len %d, indexed %d, want %d", step, tab.Len(), tab.indexed, len(live))
		}
	}
	for _, p := range clock.pending {
		if p.arg != trimArg {
			t.Fatalf("%d timers pending with no transaction armed: %v", len(clock.pending), clock.pending)
		}
	}
}

func TestMaxTransactions(t *testing.T) {
	tab, err := New(Config{MaxTransactions: 2}, &fakeTimers{})
	if err != nil {
		t.Fatal(err)
	}
	var m parser.Message
	from := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5060"), Transport: transport.TCP}
	for i, want := range []error{nil, nil, ErrFull} {
		buf := fmt.Appendf(nil, "OPTIONS sip:b@example.com SIP/2.0\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK%d\r\n"+
			"From: <sip:a@example.com>;tag=a\r\nTo: <sip:b@example.com>\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n\r\n", i)
		if err := m.Parse(buf); err != nil {
			t.Fatal(err)
		}
		if err := tab.ReceiveRequest(&m, from, 0); err != want {
			t.Fatalf("request %d: %v, want %v", i, err, want)
		}
	}
}

func TestConfig(t *testing.T) {
	f := func(cfg Config, ok bool) {
		t.Helper()
		if _, err := New(cfg, &fakeTimers{}); (err == nil) != ok {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
	f(Config{}, true)
	f(Config{T1: 100e6, T2: 1e9, T4: 1e9}, true)
	f(Config{T1: 5e9, T2: 4e9}, false)
	f(Config{T1: -1}, false)
	f(Config{Capacity: -1}, false)
	if _, err := New(Config{}, nil); err == nil {
		t.Error("New with nil Timers succeeded")
	}
}

// TestInputErrors checks what the input methods refuse.
func TestInputErrors(t *testing.T) {
	tab, _ := New(Config{}, &fakeTimers{})
	udp := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5060"), Transport: transport.UDP}
	parse := func(s string) *parser.Message {
		var m parser.Message
		if err := m.Parse([]byte(s)); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	req := parse("OPTIONS sip:b@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n" +
		"From: <sip:a@example.com>;tag=a\r\nTo: <sip:b@example.com>\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n\r\n")
	resp := parse("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n" +
		"From: <sip:a@example.com>;tag=a\r\nTo: <sip:b@example.com>\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n\r\n")
	noVia := parse("OPTIONS sip:b@example.com SIP/2.0\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n\r\n")
	legacyNoFrom := parse("OPTIONS sip:b@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\nTo: <sip:b@example.com>\r\n\r\n")
	f := func(got, want error) {
		t.Helper()
		if got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	f(tab.ReceiveRequest(resp, udp, 0), ErrNotRequest)
	f(tab.ReceiveRequest(req, transport.Peer{}, 0), ErrTransport)
	f(tab.ReceiveRequest(noVia, udp, 0), parser.ErrMissingVia)
	f(tab.ReceiveRequest(legacyNoFrom, udp, 0), parser.ErrNoHeader)
	f(tab.ReceiveResponse(req, 0), ErrNotResponse)
	_, err := tab.SendRequest(resp, udp, 0)
	f(err, ErrNotRequest)
	_, err = tab.SendRequest(req, transport.Peer{Transport: 99}, 0)
	f(err, ErrTransport)
	_, err = tab.SendRequest(legacyNoFrom, udp, 0)
	f(err, ErrBranch)
	f(tab.ReceiveRequest(req, udp, 0), nil)
	h := tab.Actions()[0].Txn
	f(tab.Respond(h, []byte("SIP/2.0 99 Bad\r\n\r\n"), 0), ErrStatus)
	f(tab.Respond(h, []byte("SIP/2.0 700 Bad\r\n\r\n"), 0), ErrStatus)
	f(tab.Respond(h, []byte("HTTP/1.1 200 OK\r\n\r\n"), 0), ErrStatus)
	f(tab.Respond(0, resp.Bytes(), 0), ErrStale)
	f(tab.Respond(h+1<<32, resp.Bytes(), 0), ErrStale)
	f(tab.Respond(h, resp.Bytes(), 0), nil)
	f(tab.Cancel(h, 0), ErrState)
	if _, err := tab.AppendCancel(nil, h); err != ErrState {
		t.Errorf("AppendCancel of a server transaction: %v", err)
	}
	if got := tab.MatchCancel(noVia); got != 0 {
		t.Errorf("MatchCancel without Via = %v", got)
	}
}

// TestAppendLower checks the word-at-a-time lowering against a byte loop:
// every byte value at every position of every length up to 23.
func TestAppendLower(t *testing.T) {
	want := func(b []byte) []byte {
		out := []byte("k")
		for _, c := range b {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
		}
		return out
	}
	for n := 0; n <= 23; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte("z9hG4bK-Ab.Zz@[@`{~\x80\xc1\xdaQ"[:n])
				b[pos] = byte(c)
				if got := appendLower([]byte("k"), b); string(got) != string(want(b)) {
					t.Fatalf("appendLower(%q) = %q, want %q", b, got, want(b))
				}
			}
		}
	}
}

// TestLegacyFlood sends RFC 2543 requests (no branch) that differ only in
// their To tag, as anyone can: each is a transaction of its own (RFC 3261
// 17.2.3), and the To tag must be part of its key, or they would all share
// one hash and every lookup landing in their cluster would walk all of them.
func TestLegacyFlood(t *testing.T) {
	tab, err := New(Config{}, &fakeTimers{})
	if err != nil {
		t.Fatal(err)
	}
	from := transport.Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5060"), Transport: transport.UDP}
	var m parser.Message
	var buf []byte
	const n = 2000
	for k := range n {
		buf = fmt.Appendf(buf[:0], "OPTIONS sip:bob@example.com SIP/2.0\r\n"+
			"Via: SIP/2.0/UDP 192.0.2.1:5060\r\n"+
			"From: <sip:alice@example.com>;tag=a\r\nTo: <sip:bob@example.com>;tag=t%d\r\n"+
			"Call-ID: c\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", k)
		if err := m.Parse(buf); err != nil {
			t.Fatal(err)
		}
		if err := tab.ReceiveRequest(&m, from, 0); err != nil {
			t.Fatal(err)
		}
		if acts := tab.Actions(); len(acts) != 1 || acts[0].Kind != ActRequest {
			t.Fatalf("request %d gave %v, want a new transaction", k, acts)
		}
	}
	// The longest distance of an entry from its home slot: a few dozen at
	// most at load 1/2 with hashes spread, n-1 with one hash for all.
	mask := len(tab.index) - 1
	longest := 0
	for p, s := range tab.index {
		if s != 0 {
			longest = max(longest, (p-int(tab.slots.at(s-1).hash)&mask)&mask)
		}
	}
	if longest > 100 {
		t.Fatalf("an entry lies %d slots from its home: the To tags share a hash", longest)
	}
}

// A response reaches the TU with the request it answers, as sent, on a
// reliable transport too, where the final response terminates the
// transaction at once: a TU answering a challenge (RFC 3261 22.2) builds
// the request again from it.
func TestResponseCarriesRequest(t *testing.T) {
	for _, tr := range []transport.Kind{transport.UDP, transport.TCP} {
		s := newSeq(t)
		peer := benchPeer
		peer.Transport = tr
		h, err := s.tab.SendRequest(s.parse(benchUAC), peer, s.now)
		s.expect(err, 1, ActSend)
		err = s.tab.ReceiveResponse(s.parse(benchUACResponse), s.now)
		acts := s.tab.Actions()
		if err != nil || len(acts) == 0 || acts[0].Kind != ActResponse || acts[0].Txn != h {
			t.Fatalf("%v: actions %v, error %v", tr, acts, err)
		}
		if string(acts[0].Data) != string(benchUAC) {
			t.Fatalf("%v: the response came with\n%q\nwant the request\n%q", tr, acts[0].Data, benchUAC)
		}
	}
}

// TestSlabGrowsInPlace: the slab grows by chunks, so a slot never moves
// and growing copies nothing: the bytes allocated for new slots are their
// own size, not a doubling array's copies and leftovers (about three times
// as much).
func TestSlabGrowsInPlace(t *testing.T) {
	tab, err := New(Config{}, &fakeTimers{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := tab.alloc(KindNonInviteServer, StateTrying, transport.Peer{})
	if err != nil {
		t.Fatal(err)
	}
	x := tab.slots.at(first)
	const n = 64 * chunkSlots
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := tab.alloc(KindNonInviteServer, StateTrying, transport.Peer{}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if tab.slots.at(first) != x {
		t.Fatal("slot 0 moved when the slab grew")
	}
	slotBytes := uint64(unsafe.Sizeof(txn{}))
	if got := after.TotalAlloc - before.TotalAlloc; got > n*slotBytes*5/4 {
		t.Errorf("growing by %d slots allocated %d bytes: want about %d (their size)", n, got, n*slotBytes)
	}
}
