package b2bua

import (
	"testing"

	"github.com/sipedge/sipedge/transport"
)

// sipedge's own address per transport: a transport's own, else the first
// one set; the Contact names the transport unless it is a URI's default
// (RFC 3263 4.1).
func TestLocalAddrs(t *testing.T) {
	both := LocalAddrs{transport.UDP: "192.0.2.1:5060", transport.TCP: "192.0.2.1:5070"}
	tcpOnly := LocalAddrs{transport.TCP: "[2001:db8::1]:5070"}
	f := func(a LocalAddrs, k transport.Kind, want, wantContact string) {
		t.Helper()
		if got := a.For(k); got != want {
			t.Errorf("%v.For(%v) = %q, want %q", a, k, got, want)
		}
		e := &Engine{cfg: Config{User: "sipedge", Local: a}}
		if got := string(e.appendContact(nil, k)); got != wantContact {
			t.Errorf("%v: Contact on %v %q, want %q", a, k, got, wantContact)
		}
	}
	f(both, transport.UDP, "192.0.2.1:5060", "Contact: <sip:sipedge@192.0.2.1:5060>\r\n")
	f(both, transport.TCP, "192.0.2.1:5070", "Contact: <sip:sipedge@192.0.2.1:5070;transport=tcp>\r\n")
	f(tcpOnly, transport.UDP, "[2001:db8::1]:5070", "Contact: <sip:sipedge@[2001:db8::1]:5070>\r\n")
	f(tcpOnly, transport.TCP, "[2001:db8::1]:5070", "Contact: <sip:sipedge@[2001:db8::1]:5070;transport=tcp>\r\n")
	f(LocalAddrs{transport.UDP: "192.0.2.1:5060"}, transport.TCP, "192.0.2.1:5060", "Contact: <sip:sipedge@192.0.2.1:5060;transport=tcp>\r\n")
	f(LocalAddrs{}, transport.UDP, "", "Contact: <sip:sipedge@>\r\n")

	// Each address is a sent-by of sipedge's own Vias once.
	e := newRig(t, func(cfg *Config) {
		cfg.Local = LocalAddrs{transport.UDP: "192.0.2.1:5060", transport.TCP: "192.0.2.1:5060", transport.TLS: "192.0.2.1:5061"}
	}).e
	if len(e.sentBy) != 2 || string(e.sentBy[0].host) != "192.0.2.1" || e.sentBy[0].port != 5060 || e.sentBy[1].port != 5061 {
		t.Errorf("sent-by %+v, want 192.0.2.1 on 5060 and 5061", e.sentBy)
	}
}
