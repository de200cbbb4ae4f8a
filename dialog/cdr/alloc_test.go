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

// A pooled record, once it has held as much, keeps the strings String
// makes without an allocation.
func TestStringAllocs(t *testing.T) {
	callID, number := []byte("a84b4c76e66710@pc33.example.com"), []byte("+12025550123")
	n := testing.AllocsPerRun(100, func() {
		r := AcquireRecord()
		r.ACallID, r.Callee = r.String(callID), r.String(number)
		ReleaseRecord(r)
	})
	if n != 0 {
		t.Fatalf("String allocates %v times per record, want 0", n)
	}
}
