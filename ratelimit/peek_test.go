package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// Peek tells what Reserve would decide, taking nothing: however often a
// key is peeked, Reserve then gets the same decision, and Peek follows the
// slots Reserve takes.
func TestLocalPeek(t *testing.T) {
	l, k := newTestLocal(t, Limit{Rate: 10, Burst: 2, MaxWait: 200 * ms})
	f := func(now, want time.Duration) { // want -1: over
		t.Helper()
		for range 3 {
			if d := l.Peek(k, now); d.Over != (want < 0) || !d.Over && d.Wait != want || d.Source != SourceLocal {
				t.Fatalf("Peek at %v: %+v, want wait %v", now, d, want)
			}
		}
		if d := l.Reserve(k, now); d.Over != (want < 0) || !d.Over && d.Wait != want {
			t.Fatalf("Reserve at %v after Peek: %+v, want wait %v", now, d, want)
		}
	}
	f(0, 0)
	f(0, 0)          // the burst's second slot
	f(0, 115*ms)     // paced
	f(0, -1)         // 230 ms away: over max wait
	f(30*ms, 200*ms) // time frees it
}

// In Redis mode Peek reads the key in Redis: a fresh key is free, a key
// whose slots other reservations took (another node's, here the same
// limiter's) says its wait, then Over past max wait; no Peek takes a
// slot. With Redis gone the failure mode answers, peeked too.
func TestRedisPeek(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	k := n.register(t, "carrier-a", Limit{Rate: 10, MaxWait: 200 * ms})
	ctx := context.Background()
	peek := func() Decision {
		t.Helper()
		d, err := n.Peek(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 3 {
		if d := peek(); d.Over || d.Wait != 0 || d.Source != SourceRedis {
			t.Fatalf("a fresh key: %+v, want free now from Redis", d)
		}
	}
	if got := srv.MustDo("EXISTS {sipedge:cps}:carrier-a"); got != ":0" {
		t.Fatalf("Peek wrote the key: EXISTS = %s", got)
	}
	if d, err := n.Reserve(ctx, k); err != nil || d.Over || d.Wait != 0 {
		t.Fatalf("the first reservation: %+v %v", d, err)
	}
	// The next slot is 115 ms after the first: a wait of up to 115 ms.
	if d := peek(); d.Over || d.Wait <= 0 || d.Wait > 115*ms || d.Source != SourceRedis {
		t.Fatalf("after one slot: %+v, want a wait of up to 115 ms", d)
	}
	if d, _ := n.Reserve(ctx, k); d.Over {
		t.Fatalf("the second reservation: %+v", d)
	}
	if d := peek(); !d.Over {
		t.Fatalf("two slots taken, the next 230 ms out: %+v, want over", d)
	}
	srv.Stop()
	d, err := n.Peek(ctx, k)
	if err != nil || d.Source != SourceFallback {
		t.Fatalf("Redis stopped: %+v %v, want the failure mode's (local) decision", d, err)
	}
	if n.metric(t, "sipedge_ratelimit_failure_mode_total{mode=\"local\"}") != 0 {
		t.Error("a Peek counted a fallback")
	}
}
