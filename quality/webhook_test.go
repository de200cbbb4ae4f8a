package quality

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
)

// badCarrier makes carrier a bad under prefix "" at sampling interval i
// (5 s each) and runs the Update that raises its event.
func badCarrier(m *Monitor, carrier string, i int) {
	c := m.Collector(0)
	at := time.Duration(i) * 5 * time.Second
	for range 30 {
		c.Record(at, 0, &Outcome{Carrier: carrier, Status: 503, Dialed: true})
	}
	c.Tick(at + 5*time.Second)
	m.Update(at + 5*time.Second)
}

// TestWebhook: events reach a real HTTP server as JSON POSTs, off the
// reader; failures and timeouts are counted, not retried.
func TestWebhook(t *testing.T) {
	testtier.RequiresSockets(t)
	type post struct {
		body  map[string]any
		ctype string
	}
	posts := make(chan post, 10)
	status := make(chan int, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil || r.Method != http.MethodPost {
			t.Errorf("%s %s: %v", r.Method, b, err)
		}
		posts <- post{body, r.Header.Get("Content-Type")}
		select {
		case code := <-status:
			if code == 0 { // hang past the client's timeout
				<-r.Context().Done()
				return
			}
			w.WriteHeader(code)
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	newMonitor := func(timeout time.Duration) (*Monitor, func(string) uint64) {
		set := metrics.NewSet()
		m := newTestMonitor(t, Config{Mode: ModeDemote, WebhookURL: srv.URL + "/hook", AutoDisable: true},
			Options{Metrics: set, WebhookTimeout: timeout})
		return m, func(result string) uint64 {
			return set.GetOrCreateCounter(metricWebhookPosts + `{result="` + result + `"}`).Get()
		}
	}
	m, counter := newMonitor(300 * time.Millisecond)

	status <- 204
	badCarrier(m, "a", 0)
	p := <-posts
	if p.ctype != "application/json" || p.body["type"] != "bad_destination" || p.body["carrier"] != "a" ||
		p.body["prefix"] != "" || p.body["score"] != 20.0 || p.body["threshold"] != 10.0 || p.body["auto_disabled"] != true || p.body["disabled"] != true ||
		p.body["asr"].(map[string]any)["level"] != "critical" {
		t.Fatalf("posted %+v", p)
	}
	testtier.Eventually(t, 10*time.Second, "the ok count", func() bool { return counter("ok") == 1 })

	// A 500: counted as failed, not retried.
	status <- 500
	badCarrier(m, "b", 1)
	<-posts
	testtier.Eventually(t, 10*time.Second, "the failed count", func() bool { return counter("failed") == 1 })

	// A server that does not answer: the POST gives up at the timeout.
	status <- 0
	badCarrier(m, "c", 2)
	<-posts
	testtier.Eventually(t, 10*time.Second, "the timeout", func() bool { return counter("failed") == 2 })
	select {
	case p := <-posts:
		t.Fatalf("retried: %+v", p)
	case <-time.After(100 * time.Millisecond):
	}

	// A full queue drops events, and never blocks the reader: the server
	// holds the first POST while 64 more queue and the rest are dropped.
	m, counter = newMonitor(time.Minute)
	badCarrier(m, "d0", 0)
	<-posts // the one in flight: taken off the queue before the rest come
	for i := 1; i < 70; i++ {
		badCarrier(m, fmt.Sprint("d", i), i)
	}
	testtier.Eventually(t, 10*time.Second, "the drops", func() bool { return counter("dropped") == 70-1-webhookQueue })
	status <- 204 // the one in flight
	for range webhookQueue {
		<-posts
		status <- 204
	}
	testtier.Eventually(t, 10*time.Second, "the queue's posts", func() bool { return counter("ok") == 1+webhookQueue })
}
