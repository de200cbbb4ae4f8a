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

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
