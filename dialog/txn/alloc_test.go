//go:build !race

package txn

import "testing"

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
