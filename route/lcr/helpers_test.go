package lcr

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// apiServer is a routing API in a real HTTP server. It counts requests and
// keeps the last one; reply writes the answer (default: one carrier).
type apiServer struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	lastBody []byte
	lastHdr  http.Header
	reply    func(w http.ResponseWriter, body []byte)
}

const oneRoute = `{"routes":[{"carrier_id":"carrier-a","gateway_group":"carrier-a","rate":0.01}],"cache_ttl_secs":60}`

func newAPIServer(t testing.TB, reply func(w http.ResponseWriter, body []byte)) *apiServer {
	t.Helper()
	s := &apiServer{reply: reply}
	if s.reply == nil {
		s.reply = func(w http.ResponseWriter, _ []byte) { io.WriteString(w, oneRoute) }
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.requests.Add(1)
		s.mu.Lock()
		s.lastBody, s.lastHdr = body, r.Header.Clone()
		s.mu.Unlock()
		s.reply(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) last() ([]byte, http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastBody, s.lastHdr
}

// staticReply answers body with status.
func staticReply(status int, body string) func(http.ResponseWriter, []byte) {
	return func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// syncBuffer is a log sink safe for the resolver's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testResolver is a Resolver with its own metrics set and log.
type testResolver struct {
	*Resolver
	set *metrics.Set
	log *syncBuffer
}

func newTestResolver(t *testing.T, opts Options) *testResolver {
	t.Helper()
	tr := &testResolver{set: metrics.NewSet(), log: &syncBuffer{}}
	opts.Metrics = tr.set
	opts.Log = slog.New(slog.NewTextHandler(tr.log, nil))
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tr.Resolver = r
	t.Cleanup(r.Close)
	return tr
}

// metric returns the value of the metric line name (with its labels).
func (tr *testResolver) metric(t *testing.T, name string) float64 {
	t.Helper()
	var b bytes.Buffer
	tr.set.WritePrometheus(&b)
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in\n%s", name, b.String())
	return 0
}

func (tr *testResolver) failures(t *testing.T, kind string) float64 {
	t.Helper()
	return tr.metric(t, metricAPIFailures+`{kind="`+kind+`"}`)
}

// lookup runs Lookup and waits for its decision.
func (tr *testResolver) lookup(t *testing.T, req *Request) Decision {
	t.Helper()
	ch := make(chan Decision, 1)
	tr.Lookup(req, func(d Decision) { ch <- d })
	select {
	case d := <-ch:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("done was not called within 5 s")
		return Decision{}
	}
}

func testRequest(number string) *Request {
	return &Request{
		CallID:       "call-" + number,
		From:         "sip:+13105550100@10.0.0.1",
		To:           "sip:" + number + "@sipedge",
		DialedNumber: number,
		Source:       CallSource{IP: "10.0.0.1", Port: 5060, Transport: "udp", TrunkGroup: "cust-trunks"},
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// closedURL is an API URL on which nothing listens.
func closedURL(t *testing.T) string {
	return fmt.Sprintf("http://127.0.0.1:%d/route", freePort(t))
}

// redisServer is a redis-server started by the test.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts redis-server on a free port, without persistence, and
// waits until it answers PING. It is killed when the test ends. The test is
// skipped, loudly, when redis-server is not installed.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("SKIPPED: redis-server is not installed, so the Redis tier is NOT tested (apt-get install redis-server)")
	}
	return startRedisOn(t, path, freePort(t))
}

func startRedisOn(t *testing.T, path string, port int) *redisServer {
	t.Helper()
	s := &redisServer{addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	s.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s.ping() {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer PING within 5 s", s.addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *redisServer) ping() bool {
	c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// command sends one inline command and returns the reply's first line.
func (s *redisServer) command(t *testing.T, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(c, cmd+"\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

func (s *redisServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

func (s *redisServer) url() string { return "redis://" + s.addr }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
