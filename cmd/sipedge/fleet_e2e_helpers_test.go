package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// The fleet's end-to-end rig: sipedge nodes as child processes (this test
// binary run as sipedge, see TestMain), SIPp for callers and carriers, and
// a real redis-server (redistest).

// freePort returns a port free for UDP and TCP on 127.0.0.1, at random in
// 10000-19999: below the kernel's ephemeral range and redistest's ports,
// so that nothing takes it between now and its bind (as e2eFreePort in
// internal/server), and never one this process picked before.
func freePort(t *testing.T) int {
	t.Helper()
	return freePorts(t, 1)
}

var picked struct {
	sync.Mutex
	ports map[int]bool
}

// freePorts returns the first of n consecutive free ports (freePort): a
// SIPp media port, whose RTP, RTCP and video ports follow it.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	picked.Lock()
	defer picked.Unlock()
	if picked.ports == nil {
		picked.ports = map[int]bool{}
	}
	free := func(port int) bool {
		if picked.ports[port] {
			return false
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		l.Close()
		if err != nil {
			return false
		}
		u.Close()
		return true
	}
next:
	for range 200 {
		first := 10000 + rand.IntN(10000-n)
		for p := first; p < first+n; p++ {
			if !free(p) {
				continue next
			}
		}
		for p := first; p < first+n; p++ {
			picked.ports[p] = true
		}
		return first
	}
	t.Fatal("no free port")
	return 0
}

// node is one sipedge process of the fleet.
type node struct {
	t      *testing.T
	id     string
	dir    string // its config, log and CDR file
	sip    int    // its SIP port (UDP)
	admin  int
	cfg    string // the YAML it runs on
	cmd    *exec.Cmd
	exited chan error
}

// nodeYAML is a node's configuration: SIP and admin on sip and admin, its
// log and CDRs in dir, then rest (gateway:, lcr:, fleet: ...).
func nodeYAML(dir string, sip, admin int, rest string) string {
	return fmt.Sprintf(`listen: ["udp://127.0.0.1:%d"]
shards: 2
admin: { listen: "127.0.0.1:%d" }
log: { level: info, file: %q }
b2bua: { drain_timeout_secs: 2 }
trunks: [{ name: sipp, trunk_group: sipp-trunks, sources: ["127.0.0.1/32"] }]
cdr: { file: %q }
%s`, sip, admin, filepath.Join(dir, "sipedge.log"), filepath.Join(dir, "cdr.jsonl"), rest)
}

// startNode runs a sipedge process on the configuration rest (see
// nodeYAML) and waits until it is ready; it is killed when the test ends.
func startNode(t *testing.T, id, rest string) *node {
	t.Helper()
	n := &node{t: t, id: id, dir: t.TempDir(), sip: freePort(t), admin: freePort(t)}
	n.cfg = nodeYAML(n.dir, n.sip, n.admin, rest)
	n.start()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(n.dir, "sipedge.log"))
			t.Logf("%s's log (last lines):\n%s", n.id, tail(string(b), 40))
		}
		n.kill()
	})
	return n
}

// start runs the process on n.cfg, n.sip and n.admin, and waits for /readyz.
func (n *node) start() {
	t := n.t
	t.Helper()
	path := filepath.Join(n.dir, "sipedge.yaml")
	if err := os.WriteFile(path, []byte(n.cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(os.Args[0], "run", "-config", path)
	n.cmd.Env = append(os.Environ(), "SIPEDGE_TEST_MAIN=1")
	out, err := os.Create(filepath.Join(n.dir, "sipedge.out"))
	if err != nil {
		t.Fatal(err)
	}
	n.cmd.Stdout, n.cmd.Stderr = out, out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.exited = make(chan error, 1)
	go func() {
		n.exited <- n.cmd.Wait()
		out.Close()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _ := n.get("/readyz"); code == 200 {
			return
		}
		select {
		case err := <-n.exited:
			b, _ := os.ReadFile(filepath.Join(n.dir, "sipedge.out"))
			t.Fatalf("%s exited at start: %v\n%s", n.id, err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 20 s", n.id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the process as an operator does (SIGTERM: drain, then exit).
func (n *node) stop() {
	n.t.Helper()
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.exited:
		if err != nil {
			n.t.Errorf("%s: exit after SIGTERM: %v", n.id, err)
		}
	case <-time.After(20 * time.Second):
		n.t.Errorf("%s did not stop on SIGTERM", n.id)
		n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd = nil
}

// kill kills the process as kill -9 does: nothing is given back.
func (n *node) kill() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// get fetches an admin path: status (0 when it does not answer) and body.
func (n *node) get(path string) (int, string) {
	return n.do("GET", path, "")
}

// do sends an admin request, a change's body as JSON.
func (n *node) do(method, path, body string) (int, string) {
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", n.admin, path), strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric is the value of a metric's line (name with its labels) in
// /metrics; -1 when absent.
func (n *node) metric(line string) float64 {
	_, body := n.get("/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, line+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// fleetNodes reads GET /v1/fleet's nodes.
func (n *node) fleetNodes() ([]struct {
	ID    string `json:"id"`
	Calls int64  `json:"calls"`
}, bool) {
	code, body := n.get("/v1/fleet")
	var fj struct {
		Nodes []struct {
			ID    string `json:"id"`
			Calls int64  `json:"calls"`
		} `json:"nodes"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &fj) != nil {
		return nil, false
	}
	return fj.Nodes, true
}

// cdrs reads the node's CDR file as it is now.
func (n *node) cdrs() []map[string]any {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, "cdr.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		n.t.Fatal(err)
	}
	var recs []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			n.t.Fatalf("%s: a CDR line is not JSON: %v\n%s", n.id, err, line)
		}
		recs = append(recs, r)
	}
	return recs
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// waitUntil polls cond every 50 ms, the pace of a condition that reads
// Redis or a node's admin API, until it holds, failing after d; it
// returns how long that took.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return testtier.Poll(t, d, 50*time.Millisecond, what, cond)
}

// ---- SIPp ----

// skipWithoutSIPp skips t, loudly, when SIPp is not installed.
func skipWithoutSIPp(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sipp"); err != nil {
		msg := fmt.Sprintf("SKIPPING %s: sipp is not installed (%v), so the fleet's calls are NOT tested (apt-get install sip-tester)", t.Name(), err)
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
}

// sipp is one SIPp process.
type sipp struct {
	t    *testing.T
	name string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan error
	mu   sync.Mutex
	err  error
	over bool
}

// startSIPp runs SIPp with args, on its own SIP, media and control ports,
// in its own directory; it is killed when the test ends.
func startSIPp(t *testing.T, name string, args ...string) *sipp {
	t.Helper()
	s := &sipp{t: t, name: name, dir: t.TempDir(), port: freePort(t), done: make(chan error, 1)}
	args = append(args, "-i", "127.0.0.1", "-p", strconv.Itoa(s.port), "-mi", "127.0.0.1",
		"-mp", strconv.Itoa(freePorts(t, 4)), "-cp", strconv.Itoa(freePort(t)), "-nostdin",
		"-trace_err", "-error_file", filepath.Join(s.dir, "errors.log"))
	s.cmd = exec.Command("sipp", args...)
	s.cmd.Dir = s.dir
	out, err := os.Create(filepath.Join(s.dir, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.done <- s.cmd.Wait()
		out.Close()
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(s.dir, "errors.log"))
			if len(b) > 0 {
				t.Logf("SIPp %s errors (first lines):\n%s", s.name, strings.Join(strings.SplitN(string(b), "\n", 20), "\n"))
			}
		}
	})
	return s
}

// startUAS runs a SIPp UAS (-sn uas: 180, 200, then it waits for the BYE)
// that writes every message it sends and receives to messages.log.
func startUAS(t *testing.T, name string) *sipp {
	t.Helper()
	s := startSIPp(t, name, "-sn", "uas", "-trace_shortmsg", "-shortmessage_file", "messages.log")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: s.port})
		if err != nil {
			return s // SIPp holds it
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("SIPp %s does not listen on %d", name, s.port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wait waits for SIPp to exit by itself, within d; its error (a SIPp UAC
// exits 1 when a call failed).
func (s *sipp) wait(d time.Duration) error {
	s.t.Helper()
	select {
	case err := <-s.done:
		s.mu.Lock()
		s.over, s.err = true, err
		s.mu.Unlock()
		return err
	case <-time.After(d):
		s.t.Fatalf("SIPp %s did not finish within %v", s.name, d)
		return nil
	}
}

// kill kills SIPp, if it still runs.
func (s *sipp) kill() {
	s.mu.Lock()
	over := s.over
	s.over = true
	s.mu.Unlock()
	if over {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
}

// message is one line of SIPp's -trace_shortmsg log.
type message struct {
	at        time.Time
	received  bool
	callID    string
	cseq      string
	firstLine string
}

// messages reads what SIPp sent and received so far.
func (s *sipp) messages() []message {
	s.t.Helper()
	f, err := os.Open(filepath.Join(s.dir, "messages.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	var out []message
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// date, time, epoch seconds, R|S, Call-ID, CSeq, first line
		p := strings.Split(sc.Text(), "\t")
		if len(p) < 7 {
			continue // a line being written
		}
		sec, _ := strconv.ParseFloat(p[2], 64)
		out = append(out, message{at: time.Unix(0, int64(sec*1e9)), received: p[3] == "R", callID: p[4], cseq: p[5], firstLine: p[6]})
	}
	return out
}

// calls counts what a carrier (a SIPp UAS) saw: calls is every call it
// was offered (a new Call-ID's INVITE), peak the most it had at once (from
// its INVITE to its BYE, CANCEL or a failure), up the calls up now.
func (s *sipp) calls() (calls, peak, up int) {
	seen, live := map[string]bool{}, map[string]bool{}
	for _, m := range s.messages() {
		switch {
		case m.received && strings.HasPrefix(m.firstLine, "INVITE ") && !seen[m.callID]:
			seen[m.callID], live[m.callID] = true, true
			calls++
			peak = max(peak, len(live))
		case m.received && (strings.HasPrefix(m.firstLine, "BYE ") || strings.HasPrefix(m.firstLine, "CANCEL ")):
			delete(live, m.callID)
		case !m.received && strings.HasSuffix(m.cseq, "INVITE") && finalFailure(m.firstLine):
			delete(live, m.callID)
		}
	}
	return calls, peak, len(live)
}

// answered counts the calls a caller (a SIPp UAC) got a 200 for, by
// Call-ID.
func (s *sipp) answered() map[string]bool {
	ok := map[string]bool{}
	for _, m := range s.messages() {
		if m.received && strings.HasSuffix(m.cseq, "INVITE") && strings.HasPrefix(m.firstLine, "SIP/2.0 200") {
			ok[m.callID] = true
		}
	}
	return ok
}

func finalFailure(status string) bool {
	code, err := strconv.Atoi(strings.Fields(status + " x x")[1])
	return err == nil && code >= 300
}
