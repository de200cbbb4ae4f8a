package b2bua

import (
	"strings"
	"testing"

	"github.com/sipedge/sipedge/parser"
)

// A folded value (RFC 3261 7.3.1) is relayed unfolded: a continuation line
// of white space alone ("\r\n \r\n") reads as the end of the header section
// to a parser that trims lines, and what follows as a body: the header
// policy's output must not be read two ways. The fold is SP (RFC 3261
// 7.3.1), so unfolding changes no value.
func TestFoldedHeadersRelayedUnfolded(t *testing.T) {
	r := newRig(t, func(c *Config) { c.HeaderAllow = append(c.HeaderAllow, "Reason") })
	inv := callerInvite("1", "a-call-1", "15551234")
	inv = strings.Replace(inv, "X-Keep: kept\r\n", "X-Keep: kept\r\n \r\n more\r\nSupported: timer,\r\n\treplaces\r\n", 1)
	inv = strings.Replace(inv, "Content-Type: application/sdp\r\n", "Content-Type: application/sdp\r\n \r\n\t\r\n ;x=1\r\n", 1)
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	binv := r.take(carrierA)
	if len(binv) != 1 {
		t.Fatalf("%d messages to the carrier", len(binv))
	}
	assertClean(t, binv[0])
	var m parser.Message
	if err := m.Parse([]byte(binv[0])); err != nil {
		t.Fatal(err)
	}
	if got := string(m.GetByName("X-Keep")); !strings.HasPrefix(got, "kept") || !strings.HasSuffix(got, "more") {
		t.Errorf("X-Keep %q, want the caller's, unfolded", got)
	}
	if !m.HasOptionTag(parser.HeaderSupported, "replaces") || !m.HasOptionTag(parser.HeaderSupported, "timer") {
		t.Errorf("Supported %q, want timer and replaces", m.Get(parser.HeaderSupported))
	}
	if string(m.ContentType()) != "application/sdp" || len(m.Body()) != len(sdp) {
		t.Errorf("Content-Type %q, body %d bytes", m.Get(parser.HeaderContentType), len(m.Body()))
	}

	// The caller's CANCEL's Reason, folded, goes on the carrier's CANCEL unfolded.
	binvMsg := new(parser.Message)
	if err := binvMsg.Parse([]byte(binv[0])); err != nil {
		t.Fatal(err)
	}
	r.recv(carrierA, carrierResponse(binvMsg, 180, "Ringing", ""))
	r.take(caller)
	cancel := strings.Replace(strings.Replace(inv, "INVITE sip:", "CANCEL sip:", 1), "CSeq: 10 INVITE", "CSeq: 10 CANCEL", 1)
	r.recv(caller, cancel[:strings.Index(cancel, "Content-Type")]+"Reason: SIP;cause=200;\r\n \r\n text=\"Call completed elsewhere\"\r\nContent-Length: 0\r\n\r\n")
	got := r.take(carrierA)
	if len(got) != 1 || !strings.HasPrefix(got[0], "CANCEL ") {
		t.Fatalf("to the carrier: %q", got)
	}
	assertClean(t, got[0])
	if !strings.Contains(got[0], "cause=200;") || !strings.Contains(got[0], "Call completed elsewhere") {
		t.Errorf("the carrier's CANCEL lost the Reason:\n%s", got[0])
	}
}
