package b2bua

import (
	"testing"
	"unsafe"
)

// TestCallFitsItsSizeClass guards BenchmarkConcurrentCalls' goal, under
// 2 KiB per confirmed call: each Call is a heap object of its own, and a
// Call one byte past 1400 (the 1408-byte size class less the 8-byte header
// Go puts before an object with pointers of this size) takes a 1536-byte
// slot, 128 bytes more per call: 1,927 bytes a call becomes 2,055. Pack a
// new field among the small ones (see Call) or make room elsewhere.
func TestCallFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Call{}); n > 1400 {
		t.Fatalf("Call is %d bytes, over 1400: it takes the 1536-byte size class", n)
	}
}
