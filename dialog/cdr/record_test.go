package cdr

import (
	"strconv"
	"testing"
)

// Text copies: the strings keep their bytes when the caller's buffer
// changes, when the record's storage grows under them, and until Reset.
func TestRecordText(t *testing.T) {
	r := AcquireRecord()
	defer ReleaseRecord(r)
	if r.Text(nil) != "" {
		t.Fatal("empty bytes: want the empty string")
	}
	buf := []byte("a-1@198.51.100.7")
	r.ACallID = r.Text(buf)
	copy(buf, "XXXXXXXX")
	var many []string
	for i := range 1000 { // past any first capacity: the storage grows
		many = append(many, r.Text([]byte("caller-"+strconv.Itoa(i))))
	}
	if r.ACallID != "a-1@198.51.100.7" {
		t.Fatalf("ACallID %q after its source changed and the storage grew", r.ACallID)
	}
	for i, s := range many {
		if want := "caller-" + strconv.Itoa(i); s != want {
			t.Fatalf("string %d: %q, want %q", i, s, want)
		}
	}
	r.Reset()
	if r.ACallID != "" || len(r.text) != 0 || cap(r.text) == 0 {
		t.Fatalf("after Reset: ACallID %q, text %d bytes of %d", r.ACallID, len(r.text), cap(r.text))
	}
}
