package b2bua

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/sipedge/sipedge/parser"
)

// The owner swaps the trunk set at run time (trunks added and removed
// through the admin API): a new INVITE is matched against the set of its
// arrival, while a call in progress keeps the trunk it began with, to its
// CDR.
func TestTrunkSetSwap(t *testing.T) {
	set := new(atomic.Pointer[TrunkSet])
	set.Store(NewTrunkSet([]Trunk{{Name: "local", Group: "cust-trunks",
		Sources: []Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}}))
	r := newRig(t, func(c *Config) { c.TrunkSet = set })
	_, aTag := r.answerCall()

	// "local" removed, "other" added for a newcomer's address.
	set.Store(NewTrunkSet([]Trunk{{Name: "other", Group: "other-group",
		Sources: []Source{{Prefix: netip.MustParsePrefix("203.0.113.0/24")}}}}))
	newcomer := netip.MustParseAddrPort("203.0.113.66:5061") // the Via's port: where replies go
	r.recv(newcomer, callerInvite("2", "a-call-2", "15551234"))
	r.expect(newcomer, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 486, "Busy Here", ""))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(newcomer, "SIP/2.0 486 Busy Here")
	if len(r.calls) != 1 || r.calls[0].Trunk == nil || r.calls[0].Trunk.Name != "other" {
		t.Fatalf("the new call's summaries %+v, want one of trunk other", r.calls)
	}

	// The caller's trunk is gone: its new call is dropped...
	r.recv(caller, callerInvite("3", "a-call-3", "15551234"))
	r.expect(caller)
	r.expect(carrierA)
	// ...but its call in progress goes on, and ends as "local"'s.
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(caller, "SIP/2.0 200 OK")
	bye := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(bye, 200, "OK", ""))
	if len(r.calls) != 2 || r.calls[1].Trunk == nil || r.calls[1].Trunk.Name != "local" || r.calls[1].FinalCode != 200 {
		t.Fatalf("summaries %+v, want the answered call's, of trunk local", r.calls)
	}
}

// A call keeps its trunk's force_rport after the trunk is removed: the
// 200 to the caller's BYE still goes to the source port of its NAT.
func TestForceRPortOutlivesItsTrunk(t *testing.T) {
	set := new(atomic.Pointer[TrunkSet])
	set.Store(NewTrunkSet([]Trunk{{Name: "local", Group: "cust-trunks", ForceRPort: true,
		Sources: []Source{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}}))
	r := newRig(t, func(c *Config) { c.TrunkSet = set })
	nat := netip.MustParseAddrPort("192.0.2.10:40000") // the Via says :5061, no rport
	r.recv(nat, callerInvite("1", "a-call-1", "15551234"))
	r.expect(nat, "SIP/2.0 100 Trying")
	binv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(binv, 200, "OK", sdp))
	aTag := tagOf(t, r.expect(nat, "SIP/2.0 200 OK")[0], parser.HeaderTo)
	r.recv(nat, ackFromCaller(aTag))
	r.take(carrierA) // the ACK

	set.Store(NewTrunkSet(nil)) // the trunk removed through the admin API
	r.recv(nat, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	r.expect(nat, "SIP/2.0 200 OK")
	r.expect(caller) // nothing to the Via's port
	if r.e.trunks.forced != 0 {
		t.Fatalf("%d calls counted as forcing rport after the last ended", r.e.trunks.forced)
	}
}
