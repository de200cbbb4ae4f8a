package b2bua

import "testing"

// phrase keeps a reason phrase past the message: the sequence holds it for
// the CDR after the buffer is reused. (Its zero allocations for the usual
// phrases are asserted by bench/alloc_test.go, which runs without -race.)
func TestPhrase(t *testing.T) {
	f := func(code int, in string) {
		t.Helper()
		buf := []byte(in)
		got := phrase(code, buf)
		for i := range buf {
			buf[i] = 'x' // the buffer is reused for the next message
		}
		if got != in {
			t.Errorf("phrase(%d, %q) = %q once the buffer changed", code, in, got)
		}
	}
	f(503, "Service Unavailable")
	f(503, "Overloaded")
	f(486, "Busy Here")
	f(486, "busy here")
	f(699, "Whatever")
	f(503, "")
}
