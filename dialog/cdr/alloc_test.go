//go:build !race

package cdr

import "testing"

// The race runtime allocates, so this runs only without -race.

func TestAppendJSONAllocs(t *testing.T) {
	r := fullRecord()
	buf := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		buf = r.AppendJSON(buf[:0])
	})
	if n != 0 {
		t.Fatalf("AppendJSON allocates %v times per record, want 0", n)
	}
}

// A reused record's strings cost nothing once its storage has grown to
// them: a call's CDR is filled in without allocating.
func TestRecordTextAllocs(t *testing.T) {
	r := AcquireRecord()
	callID, callee := []byte("a-1@198.51.100.7"), []byte("+12025550123")
	fill := func() {
		r.ACallID, r.BCallID = r.Text(callID), r.Text(callID)
		r.Caller, r.Callee = r.Text(callee), r.Text(callee)
		r.Reset()
	}
	fill()
	if n := testing.AllocsPerRun(100, fill); n != 0 {
		t.Fatalf("filling a reused record allocates %v times, want 0", n)
	}
}
