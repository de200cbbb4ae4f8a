package ratelimit

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// TestAIMD: Backoff lowers the effective rate (at most once per hold, not
// below the floor), the interval between slots follows, and the rate
// recovers over time up to the configured rate; the gauge shows it.
func TestAIMD(t *testing.T) {
	var now time.Duration
	set := metrics.NewSet()
	l, err := New(Options{Metrics: set, Now: func() time.Duration { return now }})
	if err != nil {
		t.Fatal(err)
	}
	k, err := l.Register(`acct "7"`, Limit{Rate: 10, Margin: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rate := func(want float64) {
		t.Helper()
		if got := l.Rate(k); math.Abs(got-want) > 1e-9 {
			t.Fatalf("at %v: rate %v, want %v", now, got, want)
		}
		var buf bytes.Buffer
		set.WritePrometheus(&buf)
		if !strings.Contains(buf.String(), `sipedge_ratelimit_effective_rate{key="acct \"7\""} `) {
			t.Fatalf("no gauge in\n%s", buf.String())
		}
	}
	rate(10)
	if !l.Backoff(k) {
		t.Fatal("first backoff ignored")
	}
	rate(7)
	// Slots are now 1/7 s apart.
	d1, _ := l.ReserveAsync(k, nil)
	d2, _ := l.ReserveAsync(k, nil)
	if want := time.Duration(math.Ceil(float64(time.Second) / 0.7 / 10)); d2.Wait-d1.Wait != want {
		t.Fatalf("interval after backoff %v, want %v", d2.Wait-d1.Wait, want)
	}
	now = 500 * ms // within the hold: the rejects of calls already in flight
	if l.Backoff(k) {
		t.Fatal("backoff within the hold")
	}
	rate(7 + 0.25) // +5 % of 10 per second
	now = 1500 * ms
	if !l.Backoff(k) {
		t.Fatal("backoff after the hold ignored")
	}
	rate((7 + 0.75) * 0.7)
	// Recovery: +0.5/s from 5.425 reaches 10 after 9.15 s.
	now += 4 * time.Second
	rate(5.425 + 2)
	now += 5150 * ms
	rate(10)
	now += time.Hour
	rate(10)
	// Back on the fast path: the interval is the configured one.
	d1, _ = l.ReserveAsync(k, nil)
	d2, _ = l.ReserveAsync(k, nil)
	if d2.Wait-d1.Wait != 100*ms {
		t.Fatalf("interval after recovery %v", d2.Wait-d1.Wait)
	}
	// Floor: 10 % of the configured rate.
	for range 20 {
		now += time.Second
		l.Backoff(k)
	}
	if got := l.Rate(k); got < 1 || got > 1.5 {
		t.Fatalf("rate after many backoffs %v, want the floor 1 (plus < 1 s of recovery)", got)
	}
}

// TestAIMDFallbackDivides: in failure_mode local the interval is the AIMD
// one times the nodes.
func TestAIMDFallbackDivides(t *testing.T) {
	var now time.Duration
	o := Options{Config: Config{Nodes: 2}, Now: func() time.Duration { return now }}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	l := newLocal(&o, o.Nodes)
	k, err := l.Register("a", Limit{Rate: 10, Margin: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l.Backoff(k, 0)
	e := l.entry(k)
	l.reserve(e, 0, SourceFallback)
	d := l.reserve(e, 0, SourceFallback)
	if want := 2 * time.Duration(math.Ceil(float64(time.Second)/0.7/10)); d.Wait != want {
		t.Fatalf("fallback interval %v, want %v", d.Wait, want)
	}
	if l.Rate(k, 0) != 7 {
		t.Fatalf("rate %v: Rate is the fleet's, not divided", l.Rate(k, 0))
	}
}
