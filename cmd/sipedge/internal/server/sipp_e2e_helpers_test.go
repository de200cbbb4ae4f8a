package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/quality"
)

// SIPp rig: a Server whose carriers are SIPp UASs (one per gateway group
// member) and whose callers are a SIPp UAC placing a batch of calls; what
// became of them is read back from the CDR file, the admin API and
// /metrics, while the Server runs.

// requireSIPp skips t in the fast tier, and, loudly, when SIPp (Debian's
// sip-tester) is not installed.
func requireSIPp(t *testing.T) {
	t.Helper()
	testtier.RequiresSockets(t)
	if _, err := exec.LookPath("sipp"); err != nil {
		fmt.Fprintf(os.Stderr, "SKIP %s: sipp not installed (apt-get install sip-tester)\n", t.Name())
		t.Skip("sipp not installed (apt-get install sip-tester)")
	}
}

// sippProc is a SIPp process of the test's, stopped when the test ends.
type sippProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	dir  string
	done chan struct{}
	err  error
}

// startSIPp starts sipp with args, on loopback, with a control port and
// media ports of its own (two SIPps on the defaults would collide): SIPp
// binds its media port and the next three (audio and video RTP, RTCP), so
// all four are checked free.
func startSIPp(t *testing.T, name string, args ...string) *sippProc {
	t.Helper()
	p := &sippProc{t: t, name: name, out: &lockedBuffer{}, dir: t.TempDir(), done: make(chan struct{})}
	args = append(args, "-i", "127.0.0.1", "-cp", strconv.Itoa(e2eFreePort(t)), "-mi", "127.0.0.1",
		"-mp", strconv.Itoa(freeUDPPorts(t, 4)), "-nostdin", "-trace_err", "-error_file", filepath.Join(p.dir, "errors.log"))
	p.cmd = exec.Command("sipp", args...)
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("SIPp %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("SIPp %s:\n%s\n%s", name, p.out.String(), p.errors())
		}
	})
	return p
}

// errors returns SIPp's error log.
func (p *sippProc) errors() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "errors.log"))
	return string(b)
}

// stop ends the process (SIGTERM, then SIGKILL after 3 s) and waits for it.
func (p *sippProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// sippUAS starts a SIPp UAS on a free port, the built-in "uas" (180, then
// 200 with SDP; ACK; BYE) or a scenario of testdata/sipp, and waits until
// it listens.
func sippUAS(t *testing.T, name, scenario string) (*sippProc, int) {
	t.Helper()
	port := e2eFreePort(t)
	return sippUASOn(t, name, scenario, port), port
}

// sippUASOn is sippUAS on a given port: a carrier's gateway that changes
// its behaviour (the old one stopped first).
func sippUASOn(t *testing.T, name, scenario string, port int) *sippProc {
	t.Helper()
	sc := []string{"-sn", "uas"}
	if scenario != "uas" {
		path, err := filepath.Abs(filepath.Join("testdata", "sipp", scenario))
		if err != nil {
			t.Fatal(err)
		}
		sc = []string{"-sf", path}
	}
	p := startSIPp(t, name, append(sc, "-p", strconv.Itoa(port), "-t", "u1")...)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("SIPp %s exited: %v\n%s", name, p.err, p.out.String())
		default:
		}
		// Bound by SIPp: the port is taken.
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			return p
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("SIPp %s does not listen on %d", name, port)
		}
	}
}

// sippCalls has a SIPp UAC place calls calls to number through sipedge at
// rate a second, each answered, then hung up by the caller (the built-in
// "uac"), and fails t unless every one succeeded.
func sippCalls(t *testing.T, sipedge netip.AddrPort, number string, calls, rate int) {
	t.Helper()
	p := startSIPp(t, "uac", "-sn", "uac", sipedge.String(), "-s", number, "-p", strconv.Itoa(e2eFreePort(t)), "-t", "u1",
		"-r", strconv.Itoa(rate), "-m", strconv.Itoa(calls), "-l", "50", "-timeout", "60s", "-timeout_error")
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("the SIPp UAC did not finish its %d calls", calls)
	}
	if p.err != nil {
		t.Fatalf("the SIPp UAC failed calls (%v):\n%s\n%s", p.err, p.out.String(), p.errors())
	}
}

// cdrsNow reads the CDRs written so far, while the Server runs: whole
// lines only (the writer flushes every 100 ms and may cut one).
func (e *e2e) cdrsNow() []map[string]any {
	e.t.Helper()
	data, err := os.ReadFile(e.cdrPath)
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	} else {
		data = nil
	}
	var recs []map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			e.t.Fatalf("CDR line is not JSON: %v\n%s", err, line)
		}
		recs = append(recs, r)
	}
	return recs
}

// waitCDRs waits until n CDRs are written and returns them all.
func (e *e2e) waitCDRs(n int) []map[string]any {
	e.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		recs := e.cdrsNow()
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d CDRs, want %d", len(recs), n)
		}
	}
}

// routedBy is who answered a CDR's call, and the carriers it tried before.
func routedBy(r map[string]any) (carrier string, tried []string) {
	carrier, _ = r["carrier_id"].(string)
	for _, a := range r["lcr_attempts"].([]any) {
		tried = append(tried, a.(map[string]any)["carrier_id"].(string))
	}
	return carrier, tried
}

// qualityStatus is GET /v1/quality.
func (e *e2e) qualityStatus() quality.Status {
	e.t.Helper()
	code, body := e.httpGet("/v1/quality")
	if code != 200 {
		e.t.Fatalf("GET /v1/quality: %d %s", code, body)
	}
	var st quality.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		e.t.Fatalf("GET /v1/quality: %v\n%s", err, body)
	}
	return st
}

// carrierEntry returns the /v1/quality entry of (prefix, carrier), and
// whether there is one.
func carrierEntry(st quality.Status, prefix, carrier string) (quality.Entry, bool) {
	for _, c := range st.Carriers {
		if c.Prefix == prefix && c.Carrier == carrier {
			return c, true
		}
	}
	return quality.Entry{}, false
}

// waitQuality polls /v1/quality until cond holds, for at most timeout.
func (e *e2e) waitQuality(what string, timeout time.Duration, cond func(quality.Status) bool) quality.Status {
	e.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		st := e.qualityStatus()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %v: %+v", what, timeout, st)
		}
	}
}

// postJSON POSTs body to an admin path as JSON.
func (e *e2e) postJSON(path, body string) (int, string) {
	e.t.Helper()
	c := &http.Client{Timeout: waitMsg}
	resp, err := c.Post("http://"+e.admin+path, "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// qualityYAML is a configuration with sipedge on port, the gateway groups
// groups (YAML flow maps, one a line), the static routes (flow maps, one
// a line, under the prefix ""), lcr's other keys (lcrKeys, block lines
// under lcr:), the quality: section and more top-level YAML.
func qualityYAML(e *e2e, groups, routes []string, lcrKeys, qualitySection, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `listen: ["udp://127.0.0.1:%[1]d", "tcp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
log: { level: debug }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: local, trunk_group: cust-trunks, sources: ["127.0.0.1/32"] }
cdr: { file: %[2]q }
gateway:
  groups:
`, e.port, e.cdrPath)
	for _, g := range groups {
		b.WriteString("    - " + g + "\n")
	}
	b.WriteString("lcr:\n  reroute_causes: [408, 480, 500, 502, 503, 504]\n")
	b.WriteString(lcrKeys)
	if len(routes) > 0 {
		b.WriteString("  static_routes:\n    - prefix: \"\"\n      routes:\n")
		for _, r := range routes {
			b.WriteString("        - " + r + "\n")
		}
	}
	b.WriteString(qualitySection)
	b.WriteString(extra)
	return b.String()
}

// sippGroup is a gateway group (flow map) of one SIPp per port.
func sippGroup(name string, ports ...int) string {
	var dests []string
	for _, p := range ports {
		dests = append(dests, fmt.Sprintf(`{ uri: "sip:127.0.0.1:%[1]d", address: "127.0.0.1:%[1]d" }`, p))
	}
	return fmt.Sprintf("{ name: %s, algorithm: round_robin, destinations: [%s] }", name, strings.Join(dests, ", "))
}
