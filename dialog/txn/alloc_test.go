//go:build !race

package txn

import (
	"runtime"
	"testing"
)

// The race runtime allocates, so these run only without -race.

func TestTransactionAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*seq)
	}{
		{"non-INVITE server", (*seq).nonInviteServer},
		{"INVITE server 100/200/ACK", (*seq).inviteServer},
		{"non-INVITE client", (*seq).nonInviteClient},
		{"INVITE client built, 486/ACK", (*seq).inviteClientBuilt},
	} {
		s := newSeq(t)
		tc.run(s) // warm up: slab, buffers, timer slice
		if n := testing.AllocsPerRun(100, func() { tc.run(s) }); n != 0 {
			t.Errorf("%s: %v allocations per transaction, want 0", tc.name, n)
		}
	}
}

// A freed slot goes to a transaction of the kind that held it, whose
// buffers then fit at once. Here a non-INVITE server transaction and an
// INVITE client transaction end in an order that, with one free list for
// every kind, hands each the other's slot on the next round, whose
// buffers would grow: the second round must allocate nothing.
func TestSlotsReusedByKind(t *testing.T) {
	s := newSeq(t)
	built := describe(benchUACInvite, "INVITE")
	round := func() {
		h := s.expect(s.tab.ReceiveRequest(s.parse(benchOptions), benchPeer, s.now), 1, ActRequest)
		s.respond(h, 200, "OK") // Timer J armed, 64*T1
		_, err := s.tab.SendBuilt(built, benchPeer, s.now)
		s.expect(err, 1, ActSend)
		s.expect(s.tab.ReceiveResponse(s.parse(benchUACBusy), s.now), 2, ActResponse) // Timer D, as long
		s.fire(64 * DefaultT1)                                                        // J first: started first
		s.expect(nil, 1, ActTerminated)
		s.fire(0) // D
		s.expect(nil, 1, ActTerminated)
	}
	round()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	round()
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Fatalf("the second round allocated %d times, want 0", n)
	}
}
