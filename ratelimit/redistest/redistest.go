// Package redistest runs a real redis-server for tests: Start runs one on a
// free loopback port, without persistence, and kills it when the test ends;
// the test can freeze it (SIGSTOP: the socket accepts connections but
// nothing answers), thaw it, stop it and restart it on the same port.
// StartCluster runs a Redis Cluster of such servers (see cluster.go). A
// test that needs Redis is skipped, loudly, only when redis-server is not
// installed.
//
// It imports only the standard library, so that any package's tests may
// use it.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server owned by one test.
type Server struct {
	tb   testing.TB
	port int
	dir  string
	args []string // more redis-server options, e.g. a cluster node's

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on a free port (see FreePort) and waits until
// it answers PING; it is killed in tb.Cleanup. It skips tb, loudly, when
// redis-server is not installed.
func Start(tb testing.TB) *Server {
	tb.Helper()
	SkipIfMissing(tb)
	return StartOn(tb, FreePort(tb))
}

// StartOn is Start on a given port, e.g. one a client was given before
// Redis came up.
func StartOn(tb testing.TB, port int) *Server {
	tb.Helper()
	SkipIfMissing(tb)
	s := &Server{tb: tb, port: port, dir: tb.TempDir()}
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

// SkipIfMissing skips tb, loudly (on stderr too, even without -v), when
// redis-server is not installed.
func SkipIfMissing(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := fmt.Sprintf("SKIPPING %s: redis-server is not installed (%v), so what needs Redis is NOT tested (apt-get install redis-server)", tb.Name(), err)
		fmt.Fprintln(os.Stderr, msg)
		tb.Skip(msg)
	}
}

// FreePort returns a TCP port nothing listens on right now, below the
// ephemeral range so that no client connection holds it when Redis
// restarts on it.
func FreePort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			ln.Close()
			return port
		}
	}
	tb.Fatal("no free port for redis-server")
	return 0
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// startTimeout bounds how long start waits for redis-server's first PONG.
const startTimeout = 15 * time.Second

// start runs redis-server on s.port and waits until it answers PING.
func (s *Server) start() {
	s.tb.Helper()
	logPath := filepath.Join(s.dir, "redis-server.log")
	out, err := os.Create(logPath)
	if err != nil {
		s.tb.Fatalf("redis-server log: %v", err)
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir}
	cmd := exec.Command("redis-server", append(args, s.args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	// A test binary that crashes runs no Cleanup: the kernel then kills the
	// server, which would otherwise outlive the run (a frozen one for good).
	// The signal follows the death of the thread that started the child, so
	// that thread is held, locked, until the child exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started, done := make(chan error), make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait()
		}
	}()
	err = <-started
	out.Close() // the child has its own copy
	if err != nil {
		s.tb.Fatalf("cannot start redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	// Generous: it takes milliseconds, but a CI machine under load has
	// been seen to take seconds.
	deadline := time.Now().Add(startTimeout)
	for {
		if reply, err := s.Do("PING"); err == nil && reply == "+PONG" {
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			log, _ := os.ReadFile(logPath)
			s.tb.Fatalf("redis-server on %s did not answer PING within %v:\n%s", s.Addr(), startTimeout, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills redis-server (SIGKILL works on a frozen one too) and waits for
// it to exit. It does nothing when the server is not running.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart stops redis-server if it runs and starts a new one, empty, on the
// same port.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

// Freeze stops redis-server with SIGSTOP: its socket stays open and accepts
// connections, but nothing answers (the silent Redis).
func (s *Server) Freeze() { s.tb.Helper(); s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen redis-server with SIGCONT.
func (s *Server) Thaw() { s.tb.Helper(); s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.tb.Fatalf("redis-server is not running")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("cannot signal redis-server: %v", err)
	}
}

// Do sends one inline command (e.g. "EXISTS key") on a fresh connection and
// returns the first line of the reply, without its CRLF.
func (s *Server) Do(cmd string) (string, error) {
	c, br, err := s.send(cmd)
	if err != nil {
		return "", err
	}
	defer c.Close()
	line, err := br.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// send sends one inline command on a fresh connection, which has a second
// to answer; the caller reads the reply from the reader and closes it.
func (s *Server) send(cmd string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, bufio.NewReader(c), nil
}

// MustDo is Do failing the test on an error or an error reply.
func (s *Server) MustDo(cmd string) string {
	s.tb.Helper()
	reply, err := s.Do(cmd)
	if err != nil || strings.HasPrefix(reply, "-") {
		s.tb.Fatalf("redis %s: %q, %v", cmd, reply, err)
	}
	return reply
}
