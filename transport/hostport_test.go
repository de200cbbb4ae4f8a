package transport

import "testing"

// One reading of host:port: the configuration, gateway health and the
// listen addresses report its errors as they are here.
func TestSplitHostPort(t *testing.T) {
	f := func(s, host string, port uint16, wantErr string) {
		t.Helper()
		h, p, err := SplitHostPort(s)
		switch {
		case wantErr != "" && (err == nil || err.Error() != wantErr):
			t.Errorf("SplitHostPort(%q): %v, want error %q", s, err, wantErr)
		case wantErr == "" && (err != nil || h != host || p != port):
			t.Errorf("SplitHostPort(%q) = %q, %d, %v, want %q, %d", s, h, p, err, host, port)
		}
	}
	f("127.0.0.1:5060", "127.0.0.1", 5060, "")
	f("[2001:db8::1]:5061", "2001:db8::1", 5061, "")
	f("gw.example.com:5060", "gw.example.com", 5060, "")
	f("gw.example.com.:0", "gw.example.com.", 0, "") // port 0 is the caller's to refuse
	f("127.0.0.1", "", 0, `"127.0.0.1": missing port`)
	f("127.0.0.1:", "", 0, `"127.0.0.1:": missing port`)
	f(":5060", "", 0, `":5060": missing host`)
	f("x:y", "", 0, `"x:y": invalid port`)
	f("x:65536", "", 0, `"x:65536": invalid port`)
	f("[::1:5060", "", 0, `"[::1:5060": missing ']'`)
	f("::1:5060", "", 0, `"::1:5060": too many colons`)
	f("gw!:5060", "", 0, `"gw!:5060": host "gw!" is neither an IP address nor a DNS name`)
}

func TestValidDNSName(t *testing.T) {
	f := func(s string, want bool) {
		t.Helper()
		if ValidDNSName(s) != want {
			t.Errorf("ValidDNSName(%q) = %v, want %v", s, !want, want)
		}
	}
	f("gw.example.com", true)
	f("gw.example.com.", true)
	f("_sip._udp.example.com", true)
	f("a-b.example", true)
	f("", false)
	f(".", false)
	f("-a.example", false)
	f("a-.example", false)
	f("a..example", false)
	f("gw!", false)
	long := make([]byte, 64)
	for i := range long {
		long[i] = 'a'
	}
	f(string(long)+".example", false)
	f(string(long[:63])+".example", true)
}
