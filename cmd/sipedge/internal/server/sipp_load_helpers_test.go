package server

import (
	"fmt"
	"math/rand/v2"
	"net"
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
)

// SIPp load rig (beside sipp_e2e_helpers_test.go's, for runs of thousands
// of calls whose figures are read from SIPp's statistics): real SIPp
// processes as callers and carriers around an in-process Server, with the scenarios of testdata/sipp (uac.xml, a
// caller dialling its injection file's numbers that takes a 503 as well
// as an answer; uas.xml, a carrier that answers every call but those to
// numbers beginning 999). Every SIPp gets free loopback ports of its own
// and a directory for its files; t.Cleanup kills what is still running.
// SIPP_TRACE=DIR keeps every message each SIPp sent and received in
// DIR/NAME_msg.log (it slows SIPp down: for a failure's post-mortem).

// loadTest skips t in the fast tier and, saying so, under the race
// detector: a load test holds sipedge to rates and deadlines (hundreds of
// calls a second, a member down within 2 s) that the race detector,
// slowing sipedge several-fold, makes it miss, which would say nothing of
// sipedge. The functional e2e tests, which take the same paths at a few
// calls a second, run under -race.
func loadTest(t *testing.T) {
	t.Helper()
	testtier.RequiresSockets(t)
	if raceEnabled {
		const why = "a load test, skipped under -race: the race detector slows sipedge below the rates it holds it to (go test without -race runs it)"
		fmt.Fprintf(os.Stderr, "SKIP %s: %s\n", t.Name(), why)
		t.Skip(why)
	}
}

// sipp is one SIPp process.
type sipp struct {
	t      *testing.T
	name   string
	dir    string
	port   int // its SIP port, UDP
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// sippBinary returns SIPp's path; the tests need it (Debian package
// sip-tester, which make test installs): without it they fail, not skip.
func sippBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sipp")
	if err != nil {
		t.Fatalf("sipp not found (Debian package sip-tester): %v", err)
	}
	return p
}

// sippScenario is the path of a scenario of testdata/sipp.
func sippScenario(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "sipp", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// freeUDPPorts returns the first of n consecutive loopback ports free for
// UDP and TCP now, picked at random below the redis-servers' ports and the
// kernel's ephemeral range, as e2eFreePort does.
func freeUDPPorts(t *testing.T, n int) int {
	t.Helper()
	for range 200 {
		first := 10000 + rand.IntN(10000-n)
		ok := true
		for p := first; p < first+n && ok; p++ {
			u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
			if err != nil {
				ok = false
				break
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			u.Close()
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return first
		}
	}
	t.Fatalf("no %d free consecutive ports", n)
	return 0
}

// runSIPp runs SIPp with args, on free ports of its own (SIP, control,
// media), with statistics every second in its directory (sippStats); the
// process is killed when the test ends.
func runSIPp(t *testing.T, name string, args ...string) *sipp {
	t.Helper()
	bin := sippBinary(t)
	s := &sipp{t: t, name: name, dir: t.TempDir(), port: freeUDPPorts(t, 1), exited: make(chan struct{})}
	cp, mp := freeUDPPorts(t, 1), freeUDPPorts(t, 4)
	args = append(args, "-t", "u1", "-i", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-mi", "127.0.0.1", "-mp", strconv.Itoa(mp), "-cp", strconv.Itoa(cp), "-nostdin",
		"-trace_stat", "-stf", filepath.Join(s.dir, "stat.csv"), "-fd", "1",
		"-trace_err", "-error_file", filepath.Join(s.dir, "errors.log"))
	if os.Getenv("SIPP_TRACE") != "" {
		args = append(args, "-trace_msg", "-message_file", filepath.Join(os.Getenv("SIPP_TRACE"), name+"_msg.log"))
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = s.dir
	out, err := os.Create(filepath.Join(s.dir, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("SIPp %s: %v", name, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		out.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			s.dump()
		}
	})
	return s
}

// sippCarrier starts a SIPp carrier on scenario and waits until it listens.
func sippCarrier(t *testing.T, name, scenario string, args ...string) *sipp {
	t.Helper()
	s := runSIPp(t, name, append([]string{"-sf", sippScenario(t, scenario)}, args...)...)
	deadline := time.Now().Add(5 * time.Second)
	for !s.listening() {
		select {
		case <-s.exited:
			s.dump()
			t.Fatalf("SIPp %s exited: %v", name, s.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("SIPp %s does not listen on %d", name, s.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// listening reports whether a UDP socket is bound to s's port: SIPp's,
// since nothing else takes a port in its range without asking for it by
// number. /proc/net/udp lists it in hexadecimal, after the address.
func (s *sipp) listening() bool {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Contains(string(b), fmt.Sprintf("0100007F:%04X ", s.port))
}

// addr is where s takes SIP.
func (s *sipp) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.port))
}

// signal sends sig to SIPp: SIGSTOP freezes it, a carrier that goes
// silent (what reaches it waits in its socket's buffer, and what does not
// fit is lost), and SIGCONT brings it back.
func (s *sipp) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("SIPp %s: %v", s.name, err)
	}
}

// kill ends SIPp if it still runs.
func (s *sipp) kill() {
	select {
	case <-s.exited:
	default:
		s.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once continued
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// wait waits for SIPp to exit by itself, failing the test after timeout.
func (s *sipp) wait(timeout time.Duration) {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(timeout):
		s.kill()
		s.t.Fatalf("SIPp %s still running after %v", s.name, timeout)
	}
}

// dump logs the ends of SIPp's output and error log.
func (s *sipp) dump() {
	for _, f := range []string{"out.log", "errors.log"} {
		b, _ := os.ReadFile(filepath.Join(s.dir, f))
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		if len(b) > 0 {
			s.t.Logf("SIPp %s %s:\n%s", s.name, f, b)
		}
	}
}

// sippStats are the cumulative figures of SIPp's last statistics line.
type sippStats struct {
	created, succeeded, failed int
	retransmissions            int
}

// stats reads SIPp's statistics file (-trace_stat), written every second
// and as SIPp exits.
func (s *sipp) stats() sippStats {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "stat.csv"))
	if err != nil {
		s.t.Fatalf("SIPp %s statistics: %v", s.name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 {
		s.t.Fatalf("SIPp %s statistics: no line yet", s.name)
	}
	head, last := strings.Split(lines[0], ";"), strings.Split(lines[len(lines)-1], ";")
	col := func(name string) int {
		for i, h := range head {
			if h == name && i < len(last) {
				n, err := strconv.Atoi(strings.TrimSpace(last[i]))
				if err != nil {
					s.t.Fatalf("SIPp %s statistics: %s = %q", s.name, name, last[i])
				}
				return n
			}
		}
		s.t.Fatalf("SIPp %s statistics: no column %s", s.name, name)
		return 0
	}
	return sippStats{created: col("TotalCallCreated"), succeeded: col("SuccessfulCall(C)"),
		failed: col("FailedCall(C)"), retransmissions: col("Retransmissions(C)")}
}

// sippCaller runs the caller of uac.xml against target: calls calls at
// rate a second, dialling numbers[i%len(numbers)] in turn, each answered
// call up for hold (0: hung up at once), at most limit at once. It
// returns as the calls start; wait for it to end (wait, then stats).
func sippCaller(t *testing.T, name string, target netip.AddrPort, numbers []string, rate, calls int, hold time.Duration) *sipp {
	t.Helper()
	var inf strings.Builder
	inf.WriteString("SEQUENTIAL\n")
	for _, n := range numbers {
		inf.WriteString(n + ";\n")
	}
	file := filepath.Join(t.TempDir(), "numbers.csv")
	if err := os.WriteFile(file, []byte(inf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	limit := max(200, 4*rate)
	timeout := time.Duration(calls/rate)*time.Second + hold + 40*time.Second
	return runSIPp(t, name, target.String(), "-sf", sippScenario(t, "uac.xml"), "-inf", file,
		"-r", strconv.Itoa(rate), "-m", strconv.Itoa(calls), "-l", strconv.Itoa(limit),
		"-d", strconv.Itoa(int(hold/time.Millisecond)),
		"-timeout", strconv.Itoa(int(timeout/time.Second))+"s", "-timeout_error")
}

// newSIPpRig starts a Server for SIPp callers from 127.0.0.1 with the
// gateway: and lcr: sections given.
func newSIPpRig(t *testing.T, gateway, lcr string) *lcrRig {
	t.Helper()
	e, logs := newE2EBase(t)
	yaml := fmt.Sprintf(`
listen: ["udp://127.0.0.1:%[1]d", "tcp://127.0.0.1:%[1]d"]
shards: 2
admin: { listen: "127.0.0.1:0" }
log: { level: info }
b2bua: { drain_timeout_secs: 1 }
trunks:
  - { name: sipp, trunk_group: sipp-trunks, sources: ["127.0.0.1/32"] }
%[2]s
%[3]s
cdr: { file: %[4]q }
`, e.port, gateway, lcr, e.cdrPath)
	e.run(yaml, logs)
	return &lcrRig{e2e: e, logs: logs}
}

// gatewayGroup is a gateway group entry of the gateway: section, its
// members the carriers given, with more keys (YAML flow-map entries).
func gatewayGroup(name, keys string, members ...*sipp) string {
	s := "    - name: " + name + "\n"
	if keys != "" {
		s += "      " + strings.ReplaceAll(keys, "\n", "\n      ") + "\n"
	}
	s += "      destinations:\n"
	for _, m := range members {
		s += fmt.Sprintf("        - { uri: \"sip:%[1]s\", address: \"%[1]s\" }\n", m.addr())
	}
	return s
}
