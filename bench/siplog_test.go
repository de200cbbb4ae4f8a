package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSiplogInterleavedBaresipTrace: the interop suite reads baresip's SIP
// trace with interop/siplog.awk. baresip's audio thread can print into the
// middle of a trace's "UDP from -> to" line (a real trace, kept in
// interop/testdata); the ACK after it must still count as a message sent.
func TestSiplogInterleavedBaresipTrace(t *testing.T) {
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Fatalf("awk: %v (the interop suite needs it too)", err)
	}
	run := func(args ...string) string {
		t.Helper()
		args = append([]string{"-f", "interop/siplog.awk",
			"-v", "self=127.0.0.1:28048", "-v", "peers=127.0.0.1:28409"}, args...)
		out, err := exec.Command(awk, append(args, "interop/testdata/baresip_interleaved.log")...).CombinedOutput()
		if err != nil {
			t.Fatalf("awk %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	sent := run("-v", "dir=sent", "-v", "start=^[A-Z]+ ")
	want := "INVITE sip:1000@127.0.0.1:28409;transport=udp SIP/2.0\n" +
		"ACK sip:sipedge@127.0.0.1:28409 SIP/2.0\n" +
		"BYE sip:sipedge@127.0.0.1:28409 SIP/2.0\n"
	if sent != want {
		t.Errorf("requests sent:\n%s\nwant:\n%s", sent, want)
	}
	got := run("-v", "dir=received")
	if n := strings.Count(got, "SIP/2.0 "); n != 4 {
		t.Errorf("messages received: %d, want 4 (100, 180, 200, 200):\n%s", n, got)
	}
}
