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
