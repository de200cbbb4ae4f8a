package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/internal/testtier"
)

// sipp is a SIPp process a test runs (testdata/sipp scenarios), in a
// directory of its own where its logs go.
type sipp struct {
	t    *testing.T
	name string
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// runSIPp runs SIPp with args plus its own ports (-p port, control and
// media ports picked free) on 127.0.0.1, logging its errors and messages;
// it is killed at the test's end if still running. The test is skipped,
// loudly, when sipp is not installed (Debian package sip-tester).
func runSIPp(t *testing.T, name string, port int, args ...string) *sipp {
	t.Helper()
	bin, err := exec.LookPath("sipp")
	if err != nil {
		msg := fmt.Sprintf("SKIPPING %s: sipp is not installed (%v), so what needs SIPp is NOT tested (apt-get install sip-tester)", t.Name(), err)
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	p := &sipp{t: t, name: name, dir: t.TempDir(), done: make(chan error, 1)}
	scen, err := filepath.Abs("testdata/sipp")
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "-i", "127.0.0.1", "-p", strconv.Itoa(port), "-mi", "127.0.0.1",
		"-mp", strconv.Itoa(e2eFreePort(t)), "-cp", strconv.Itoa(e2eFreePort(t)), "-nostdin",
		"-trace_err", "-error_file", filepath.Join(p.dir, "errors.log"),
		"-trace_msg", "-message_file", filepath.Join(p.dir, "messages.log"))
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "SCENARIOS", scen)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = p.dir
	out, err := os.Create(filepath.Join(p.dir, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("SIPp %s:\n%s", name, p.logs())
		}
	})
	return p
}

// logs returns what SIPp wrote: its output, errors and messages.
func (p *sipp) logs() string {
	var b strings.Builder
	for _, f := range []string{"out.log", "errors.log", "messages.log"} {
		data, _ := os.ReadFile(filepath.Join(p.dir, f))
		fmt.Fprintf(&b, "--- %s\n%s\n", f, data)
	}
	return b.String()
}

// listening waits until SIPp has bound UDP port.
func (p *sipp) listening(port int) {
	p.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			return // bound: by SIPp
		}
		u.Close()
	}
	p.t.Fatalf("SIPp %s does not listen on %d", p.name, port)
}

// succeeded waits for SIPp to exit and fails the test unless it exited 0:
// every call of its scenario went through.
func (p *sipp) succeeded(timeout time.Duration) {
	p.t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("SIPp %s: %v", p.name, err)
		}
	case <-time.After(timeout):
		p.t.Fatalf("SIPp %s still running after %v", p.name, timeout)
	}
}

// liveCalls fetches GET /v1/calls with query.
func (e *e2e) liveCalls(query string) callsJSON {
	e.t.Helper()
	code, body := e.httpGet("/v1/calls" + query)
	var out callsJSON
	if err := json.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil {
		e.t.Fatalf("GET /v1/calls%s: %d %s (%v)", query, code, body, err)
	}
	return out
}

// A long call between SIPp caller and carrier is listed by GET /v1/calls
// (answered, its trunk and carrier; the filters select it or not) and
// ended by DELETE /v1/calls/{a_call_id}: both SIPp legs get a BYE, which
// their scenarios wait for, and the CDR says hangup_side "admin".
func TestLiveCallsEndedByAdminE2E(t *testing.T) {
	testtier.RequiresSockets(t)
	e, logs := newE2EBase(t)
	uasPort, uacPort := e2eFreePort(t), e2eFreePort(t)
	uas := runSIPp(t, "carrier", uasPort, "-sf", "SCENARIOS/uas_held.xml", "-m", "1")
	uas.listening(uasPort)
	e.run(fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - { name: carrier-a, destinations: [{ uri: "sip:127.0.0.1:%[2]d", address: "127.0.0.1:%[2]d" }] }
lcr:
  static_routes:
    - { prefix: "", routes: [{ carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }] }
cdr: { file: %[3]q }
`, e.port, uasPort, e.cdrPath), logs)
	uac := runSIPp(t, "caller", uacPort, e.sip.String(), "-sf", "SCENARIOS/uac_held.xml", "-s", "15551234", "-m", "1")

	var call b2bua.CallInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if cs := e.liveCalls("").Calls; len(cs) == 1 && cs[0].State == b2bua.CallAnswered {
			call = cs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answered call listed: %+v", e.liveCalls(""))
		}
	}
	if call.Trunk != "local" || call.Carrier != "carrier-a" || call.Start.IsZero() || call.Answer.Before(call.Start) {
		t.Errorf("listed %+v, want trunk local, carrier carrier-a, started and answered", call)
	}
	for q, want := range map[string]int{"?trunk=local": 1, "?trunk=other": 0, "?carrier=carrier-a": 1,
		"?carrier=carrier-b": 0, "?trunk=local&carrier=carrier-a": 1} {
		if got := len(e.liveCalls(q).Calls); got != want {
			t.Errorf("GET /v1/calls%s lists %d calls, want %d", q, got, want)
		}
	}

	path := "/v1/calls/" + url.PathEscape(call.ACallID)
	if code, body := e.adminDo("DELETE", "/v1/calls/no-such-call", ""); code != http.StatusNotFound {
		t.Errorf("DELETE an unknown call: %d %s, want 404", code, body)
	}
	if code, body := e.adminDo("DELETE", path, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE %s: %d %s, want 204", path, code, body)
	}
	uac.succeeded(10 * time.Second) // it got its BYE
	uas.succeeded(10 * time.Second) // so did the carrier
	if cs := e.liveCalls("").Calls; len(cs) != 0 {
		t.Errorf("after DELETE, %d calls listed", len(cs))
	}
	if code, _ := e.adminDo("DELETE", path, ""); code != http.StatusNotFound {
		t.Errorf("DELETE the ended call again: %d, want 404", code)
	}
	checkCDR(t, e.cdrOf(call.ACallID), 200, "admin")
	if !strings.Contains(logs.String(), "call ended through the admin API") {
		t.Error("the end is not logged")
	}
}
