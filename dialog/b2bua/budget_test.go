package b2bua

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
)

// spoofedRequest is the flood of the security review: an out-of-dialog
// request of ~15 KB, 36 Vias of some 400 bytes, from a forged source.
func spoofedRequest(method, branch, toTag string, from netip.AddrPort) string {
	pad := strings.Repeat("x", 340)
	var b strings.Builder
	fmt.Fprintf(&b, "%s sip:sipedge@203.0.113.1 SIP/2.0\r\n", method)
	fmt.Fprintf(&b, "Via: SIP/2.0/UDP %s;branch=z9hG4bK%s;p=%s\r\n", from, branch, pad)
	for k := 1; k < 36; k++ {
		fmt.Fprintf(&b, "Via: SIP/2.0/UDP 198.51.100.%d:5060;branch=z9hG4bKhop%d;p=%s\r\n", k, k, pad)
	}
	to := "<sip:sipedge@203.0.113.1>"
	if toTag != "" {
		to += ";tag=" + toTag
	}
	fmt.Fprintf(&b, "Max-Forwards: 70\r\nTo: %s\r\nFrom: <sip:x@flood.example>;tag=f\r\n"+
		"Call-ID: %s@flood\r\nCSeq: 1 %s\r\nContent-Length: 0\r\n\r\n", to, branch, method)
	return b.String()
}

// TestTxnBudgetUnderFlood floods the engine with large out-of-dialog
// requests from spoofed sources (OPTIONS answered 200, INFO with a forged To
// tag answered 481, MESSAGE answered 405) while a call is being set up: the
// transaction table keeps no more than its budget, says so once in the log
// and in sipedge_txn_budget_shortcuts_total, a request answered before the
// flood still has its retransmissions absorbed (Timer J, RFC 3261 17.2.2),
// and the call's INVITE server transaction runs its course untouched.
func TestTxnBudgetUnderFlood(t *testing.T) {
	const budget = 1 << 20
	set := vm.NewSet()
	r := newRig(t, func(c *Config) { c.Txn.MaxStoredBytes = budget; c.Metrics = set })
	var logs bytes.Buffer
	r.e.env.Log = slog.New(slog.NewTextHandler(&logs, nil))
	const overBudget = "transaction table over its memory budget"

	binv := r.startCall()
	early := spoofedRequest("OPTIONS", "early", "", stranger)
	r.recv(stranger, early)
	r.expect(stranger, "SIP/2.0 200 OK")

	flood := func(n int, tag string) {
		kinds := []struct{ method, toTag, answer string }{
			{"OPTIONS", "", "SIP/2.0 200 OK"},
			{"INFO", "forged", "SIP/2.0 481 Call/Transaction Does Not Exist"},
			{"MESSAGE", "", "SIP/2.0 405 Method Not Allowed"},
		}
		for k := range n {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + k%100)}), uint16(1024+k))
			kd := kinds[k%len(kinds)]
			r.recv(src, spoofedRequest(kd.method, fmt.Sprint(tag, k), kd.toTag, src))
			r.expect(src, kd.answer)
			r.Clock.Now += 10 * time.Millisecond
			if st := r.e.txns.Stats(); st.StoredBytes > budget+64<<10 {
				t.Fatalf("after %d requests the table keeps %d bytes, budget %d", k+1, st.StoredBytes, budget)
			}
		}
	}
	flood(300, "flood")
	if r.e.published.shortcuts.Load() == 0 {
		t.Fatal("no transaction shortened: the flood put no pressure on the table")
	}
	if n := strings.Count(logs.String(), overBudget); n != 1 {
		t.Errorf("%d warnings about the budget in 3 s, want 1:\n%s", n, logs.String())
	}
	var metrics bytes.Buffer
	set.WritePrometheus(&metrics)
	if !strings.Contains(metrics.String(), `sipedge_txn_budget_shortcuts_total{shard="0"} `) ||
		!strings.Contains(metrics.String(), `sipedge_txn_stored_bytes{shard="0"} `) {
		t.Errorf("budget metrics missing:\n%s", metrics.String())
	}

	// Within Timer J, the request answered before the flood is still absorbed.
	absorbed := r.e.txns.Stats().Absorbed
	r.recv(stranger, early)
	r.expect(stranger, "SIP/2.0 200 OK")
	if r.e.txns.Stats().Absorbed != absorbed+1 {
		t.Error("a retransmission within Timer J was not absorbed by its transaction")
	}

	// The call goes on: 180, 200 relayed, the caller's ACK reaches the carrier.
	r.recv(carrierA, carrierResponse(binv, 180, "Ringing", ""))
	aTag := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
	flood(100, "more") // still over budget
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, ackFromCaller(aTag))
	r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")
	if st := r.e.txns.Stats(); st.StoredBytes > budget+64<<10 {
		t.Fatalf("the table keeps %d bytes, budget %d", st.StoredBytes, budget)
	}

	// A minute on, the flood goes on and is told of once more.
	r.advance(time.Minute)
	r.take(caller)
	r.take(carrierA)
	flood(100, "later")
	if n := strings.Count(logs.String(), overBudget); n != 2 {
		t.Errorf("%d warnings about the budget after a minute more, want 2:\n%s", n, logs.String())
	}
}

// TestPublishPaced checks the transaction counts metrics read: published
// after a message at most every publishEvery, and brought up to date by
// Publish, which the shard calls on every run of its loop, so that a burst
// of messages within a millisecond leaves no gauge behind for good.
func TestPublishPaced(t *testing.T) {
	r := newRig(t, nil)
	for k := range 3 { // three requests at one instant: the first publishes
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + k)}), 5060)
		r.recv(src, spoofedRequest("OPTIONS", fmt.Sprint("paced", k), "", src))
		r.expect(src, "SIP/2.0 200 OK")
	}
	if got := r.e.published.txns.Load(); got != 1 {
		t.Errorf("published %d transactions after three messages within publishEvery, want 1 (the first's)", got)
	}
	r.e.Publish()
	if got, want := r.e.published.txns.Load(), int64(r.e.txns.Len()); got != want || want != 3 {
		t.Errorf("after Publish: %d transactions published, %d live, want 3", got, want)
	}
	r.Clock.Now += publishEvery
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, 99}), 5060)
	r.recv(src, spoofedRequest("OPTIONS", "paced-later", "", src))
	r.expect(src, "SIP/2.0 200 OK")
	if got := r.e.published.txns.Load(); got != 4 {
		t.Errorf("a message publishEvery later published %d transactions, want 4", got)
	}
}

// The transaction tables' memory is exported split: what live transactions
// hold (sipedge_txn_inuse_bytes) and what free slots keep for reuse
// (sipedge_txn_pooled_bytes), which they give back after
// txn.Config.IdleRelease; sipedge_txn_stored_bytes is the sum.
func TestTxnMemoryGauges(t *testing.T) {
	set := vm.NewSet()
	r := newRig(t, func(c *Config) { c.Metrics = set })
	gauges := func() (stored, inUse, pooled string) {
		t.Helper()
		r.e.Publish()
		var b bytes.Buffer
		set.WritePrometheus(&b)
		for _, l := range strings.Split(b.String(), "\n") {
			name, v, _ := strings.Cut(l, `{shard="0"} `)
			switch name {
			case "sipedge_txn_stored_bytes":
				stored = v
			case "sipedge_txn_inuse_bytes":
				inUse = v
			case "sipedge_txn_pooled_bytes":
				pooled = v
			}
		}
		return stored, inUse, pooled
	}
	for k := range 50 { // small: a slot keeps up to 4 KiB for reuse
		r.recv(stranger, fmt.Sprintf("OPTIONS sip:sipedge.example.net SIP/2.0\r\n"+
			"Via: SIP/2.0/UDP %s;branch=z9hG4bKgauge%d\r\nMax-Forwards: 70\r\n"+
			"To: <sip:sipedge.example.net>\r\nFrom: <sip:probe@example.org>;tag=g%d\r\n"+
			"Call-ID: gauge%d@example.org\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", stranger, k, k, k))
		r.expect(stranger, "SIP/2.0 200 OK")
	}
	stored, inUse, pooled := gauges()
	if stored == "0" || inUse != stored || pooled != "0" {
		t.Fatalf("50 OPTIONS in Timer J: stored %s, in use %s, pooled %s; want all in use", stored, inUse, pooled)
	}
	r.advance(40 * time.Second) // Timer J ends them
	stored, inUse, pooled = gauges()
	if stored == "0" || inUse != "0" || pooled != stored {
		t.Fatalf("after Timer J: stored %s, in use %s, pooled %s; want all pooled", stored, inUse, pooled)
	}
	r.advance(2 * txn.DefaultIdleRelease)
	if stored, inUse, pooled = gauges(); stored != "0" || inUse != "0" || pooled != "0" {
		t.Fatalf("after txn.DefaultIdleRelease: stored %s, in use %s, pooled %s; want none", stored, inUse, pooled)
	}
}
