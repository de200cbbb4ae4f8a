package quality

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// webhookQueue bounds the events waiting for the webhook: beyond it they
// are dropped (and counted), never queued without bound.
const webhookQueue = 64

// webhook POSTs each event as JSON to a URL, one at a time, off the
// shards and the reader. A POST that fails (transport error, timeout,
// non-2xx) is logged and counted, never retried: an endpoint that is down
// costs one request per event, not a storm.
type webhook struct {
	url     string
	timeout time.Duration
	client  *http.Client
	queue   chan Event
	ctx     context.Context // cancelled by close: aborts the POST in flight
	cancel  context.CancelFunc
	log     *slog.Logger

	ok, failed, dropped *metrics.Counter
}

// webhookBody is what the webhook receives.
type webhookBody struct {
	Type string `json:"type"` // "bad_destination"
	Event
}

func newWebhook(url string, timeout time.Duration, set *metrics.Set, log *slog.Logger) *webhook {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhook{
		url:     url,
		timeout: timeout,
		client:  &http.Client{Timeout: timeout},
		queue:   make(chan Event, webhookQueue),
		ctx:     ctx,
		cancel:  cancel,
		log:     log,
		ok:      set.NewCounter(metricWebhookPosts + `{result="ok"}`),
		failed:  set.NewCounter(metricWebhookPosts + `{result="failed"}`),
		dropped: set.NewCounter(metricWebhookPosts + `{result="dropped"}`),
	}
}

// send queues ev without blocking; a full queue drops it.
func (w *webhook) send(ev Event) {
	select {
	case w.queue <- ev:
	default:
		w.dropped.Inc()
		w.log.Warn("quality: webhook queue full, event dropped", "prefix", ev.Prefix, "carrier", ev.Carrier, "gateway", ev.Gateway)
	}
}

// run POSTs the queued events until close.
func (w *webhook) run() {
	for {
		select {
		case <-w.ctx.Done():
			return
		case ev := <-w.queue:
			if err := w.post(ev); err != nil {
				w.failed.Inc()
				w.log.Warn("quality: webhook failed", "url", w.url, "err", err)
				continue
			}
			w.ok.Inc()
		}
	}
}

func (w *webhook) post(ev Event) error {
	body, err := json.Marshal(webhookBody{Type: "bad_destination", Event: ev})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func (w *webhook) close() { w.cancel() }
