package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// TestMain makes the test binary sipedge itself when SIPEDGE_TEST_MAIN is
// set, so that a test can run the command as a real child process and
// signal it, without building a second binary.
func TestMain(m *testing.M) {
	if os.Getenv("SIPEDGE_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A SIGHUP that arrives while sipedge starts (logrotate's postrotate does
// not know sipedge is still dialling Redis or binding) must not kill it:
// it is handled once sipedge runs, and SIGTERM then stops it cleanly. The
// child is held inside its start by a Redis that accepts the connection and
// never answers, so the signal lands there every time.
func TestSIGHUPDuringStartup(t *testing.T) {
	testtier.RequiresSockets(t)
	cmd, lines, exited := runStalledInStart(t)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, lines, exited, "sipedge started")
	waitLog(t, lines, exited, "SIGHUP: reopening")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, exited)
}

// A SIGTERM that arrives while sipedge starts, behind a few SIGHUPs (one
// logrotate run signals once per rotated file), stops it once it runs:
// os/signal drops what a full channel cannot take, so the signals must be
// read while sipedge starts, not left to fill the channel.
func TestSIGTERMBehindSIGHUPsDuringStartup(t *testing.T) {
	testtier.RequiresSockets(t)
	cmd, lines, exited := runStalledInStart(t)
	for range 6 {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // each one received on its own
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, lines, exited, "sipedge started")
	waitExit(t, exited)
}

// runStalledInStart runs sipedge as a child process and returns once it is
// inside its start: held there by a Redis that accepts the connection and
// never answers, so that a signal sent then lands while it starts.
func runStalledInStart(t *testing.T) (*exec.Cmd, <-chan string, <-chan error) {
	t.Helper()
	redis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.Close() })
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sipedge.yaml")
	text := fmt.Sprintf(`listen: ["udp://%s"]
admin: { listen: "" }
ratelimit: { redis: "redis://%s" }
cdr: { file: %q }
`, freeUDP(t), redis.Addr(), filepath.Join(dir, "cdr.jsonl"))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "run", "-config", cfg)
	cmd.Env = append(os.Environ(), "SIPEDGE_TEST_MAIN=1")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		exited <- err
	}()
	t.Cleanup(func() { cmd.Process.Kill() })

	redis.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	conn, err := redis.Accept()
	if err != nil {
		t.Fatalf("sipedge never dialled Redis: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return cmd, lines, exited
}

// waitExit waits for the child to exit cleanly.
func waitExit(t *testing.T, exited <-chan error) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop on SIGTERM")
	}
}

// freeUDP returns a loopback UDP address that was free a moment ago (the
// configuration refuses port 0).
func freeUDP(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// waitLog waits for a log line of the child containing want, failing if
// the child exits first.
func waitLog(t *testing.T, lines <-chan string, exited <-chan error, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sipedge exited before logging %q: %v", want, <-exited)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no %q in sipedge's log", want)
		}
	}
}

// A CDR file that cannot be opened stops the start with the field that
// names it, like every other configuration problem.
func TestCDRFileErrorNamesField(t *testing.T) {
	testtier.RequiresSockets(t)
	defer slog.SetDefault(slog.Default())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sipedge.yaml")
	text := fmt.Sprintf(`listen: ["udp://%s"]
admin: { listen: "" }
cdr: { file: %q }
`, freeUDP(t), filepath.Join(dir, "missing", "cdr.jsonl"))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if code := runCmd([]string{"-config", cfg}, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; log:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `err="cdr.file: `) {
		t.Fatalf("the error does not name cdr.file:\n%s", stderr.String())
	}
}

// check-config -redact prints the configuration with every secret masked,
// and without -redact as it loads back; the two differ only there.
func TestCheckConfigRedact(t *testing.T) {
	t.Setenv("CARRIER_PW", "pw-from-env-77")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sipedge.yaml")
	text := `admin: { token: "tok-secret-11" }
lcr: { api_url: "http://user:url-secret-22@127.0.0.1:8080/route", auth_header: "Bearer hdr-secret-33" }
cache: [{ name: lcr, url: "redis://:cache-secret-44@127.0.0.1:6379" }]
ratelimit: { redis: "redis://:rl-secret-55@127.0.0.1:6379" }
fleet: { redis: "redis://:fleet-secret-66@127.0.0.1:6379", node_id: edge-1 }
gateway:
  groups:
    - name: carrier-a
      auth: { username: acct-1, password: "${CARRIER_PW}" }
      destinations: [{ uri: "sip:127.0.0.1:5070", address: "127.0.0.1:5070" }]
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"tok-secret-11", "url-secret-22", "hdr-secret-33", "cache-secret-44", "rl-secret-55", "fleet-secret-66", "pw-from-env-77"}
	var plain, redacted, stderr strings.Builder
	if code := run([]string{"check-config", "-config", cfg}, &plain, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"check-config", "-config", cfg, "-redact"}, &redacted, &stderr); code != 0 {
		t.Fatalf("-redact: exit %d: %s", code, stderr.String())
	}
	for _, s := range secrets {
		if !strings.Contains(plain.String(), s) {
			t.Errorf("check-config lost %q", s)
		}
		if strings.Contains(redacted.String(), s) {
			t.Errorf("check-config -redact shows %q:\n%s", s, redacted.String())
		}
	}
	if !strings.Contains(redacted.String(), "username: acct-1") || !strings.Contains(redacted.String(), "password: REDACTED") {
		t.Errorf("-redact lost what is not secret:\n%s", redacted.String())
	}
}
