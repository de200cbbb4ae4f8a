package txn

import (
	"strings"
	"testing"
)

// Response gives a server transaction's last response, its own 100 Trying
// first, and nothing for a stale handle or a client transaction: what a TU
// reads the To tag of an INVITE's responses from, for the 200 to its
// CANCEL (RFC 3261 9.2).
func TestResponse(t *testing.T) {
	r := newBudgetRig(t)
	acts, err := r.receive(bigRequest("INVITE", "call"))
	if err != nil || len(acts) != 2 {
		t.Fatalf("INVITE: %v %v", acts, err)
	}
	inv := acts[1].Txn
	if got := string(r.tab.Response(inv)); !strings.HasPrefix(got, "SIP/2.0 100 Trying\r\n") {
		t.Fatalf("Response before the TU answered: %q", got)
	}
	r.answer(inv, 486, "Busy Here")
	if got := string(r.tab.Response(inv)); !strings.HasPrefix(got, "SIP/2.0 486 Busy Here\r\n") || !strings.Contains(got, "tag=a6c85cf") {
		t.Fatalf("Response after the 486: %q", got)
	}
	if r.tab.Response(inv+1<<32) != nil || r.tab.Response(0) != nil {
		t.Fatal("a stale handle has a response")
	}
}
