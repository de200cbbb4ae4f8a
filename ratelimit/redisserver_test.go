package ratelimit

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// redisServer is a real redis-server owned by one test, on a free port.
type redisServer struct {
	tb   testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts a redis-server for tb and kills it in tb.Cleanup. It
// skips tb, loudly, only when redis-server is not installed.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	return startRedisOn(tb, freePort(tb))
}

// startRedisOn is startRedis on a given port.
func startRedisOn(tb testing.TB, port int) *redisServer {
	tb.Helper()
	skipWithoutRedis(tb)
	s := &redisServer{tb: tb, port: port, dir: tb.TempDir()}
	s.start()
	tb.Cleanup(s.kill)
	return s
}

// skipWithoutRedis skips tb, loudly (on stderr even without -v), when
// redis-server is not installed.
func skipWithoutRedis(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := fmt.Sprintf("SKIPPING %s: redis-server is not installed (%v): the Redis limiter is NOT tested", tb.Name(), err)
		fmt.Fprintln(os.Stderr, msg)
		tb.Skip(msg)
	}
}

// freePort returns a TCP port nothing listens on right now, below the
// ephemeral range so that no client connection holds it.
func freePort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	tb.Fatal("cannot find a free port")
	return 0
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *redisServer) url() string  { return "redis://" + s.addr() }

// start runs redis-server on s.port and waits until it answers PING.
func (s *redisServer) start() {
	s.tb.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	out := new(lockedBuffer)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("cannot start redis-server: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if reply, err := s.do("PING"); err == nil && reply == "+PONG" {
			return
		}
		if time.Now().After(deadline) {
			s.kill()
			s.tb.Fatalf("redis-server on port %d did not answer PING within 5 s:\n%s", s.port, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill stops redis-server for good (SIGKILL works on a stopped process).
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// pause and resume freeze and thaw redis-server: its socket stays open and
// accepts connections, but nothing answers (the silent Redis).
func (s *redisServer) pause()  { s.signal(syscall.SIGSTOP) }
func (s *redisServer) resume() { s.signal(syscall.SIGCONT) }

func (s *redisServer) signal(sig syscall.Signal) {
	s.tb.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("cannot signal redis-server: %v", err)
	}
}

// do sends one inline command on a fresh connection and returns the first
// line of the reply.
func (s *redisServer) do(cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", s.addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func (s *redisServer) mustDo(cmd string) string {
	s.tb.Helper()
	reply, err := s.do(cmd)
	if err != nil || strings.HasPrefix(reply, "-") {
		s.tb.Fatalf("redis %s: %q, %v", cmd, reply, err)
	}
	return reply
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
