package ratelimit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const ms = time.Millisecond

func newTestLocal(t *testing.T, lim Limit) (*Local, Key) {
	t.Helper()
	l, err := NewLocal(Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := l.Register("carrier-a", lim)
	if err != nil {
		t.Fatal(err)
	}
	return l, k
}

// TestLocalSpacing: reservations in a burst get waits one interval (1/rate
// × margin) apart, burst ones at once, and Over past MaxWait.
func TestLocalSpacing(t *testing.T) {
	f := func(lim Limit, want ...time.Duration) {
		t.Helper()
		l, k := newTestLocal(t, lim)
		var got []time.Duration
		for range want {
			d := l.Reserve(k, 5*time.Second)
			if d.Source != SourceLocal {
				t.Fatalf("source %v", d.Source)
			}
			if d.Over {
				got = append(got, -1)
				continue
			}
			got = append(got, d.Wait)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%+v: waits %v, want %v", lim, got, want)
		}
	}
	const over = -1
	// 2 CPS: 575 ms apart.
	f(Limit{Rate: 2, MaxWait: 2 * time.Second}, 0, 575*ms, 1150*ms, 1725*ms, over, over)
	// 4 CPS: 287.5 ms apart.
	f(Limit{Rate: 4, MaxWait: time.Second}, 0, 287500*time.Microsecond, 575*ms, 862500*time.Microsecond, over)
	// Margin 1: exactly 1/rate.
	f(Limit{Rate: 10, Margin: 1, MaxWait: 250 * ms}, 0, 100*ms, 200*ms, over)
	// Burst 3: three at once, then paced.
	f(Limit{Rate: 10, Burst: 3, MaxWait: time.Second}, 0, 0, 0, 115*ms, 230*ms)
	// MaxWait 0: only an immediate slot.
	f(Limit{Rate: 10}, 0, over, over)
}

// TestLocalOverTakesNothing: an Over reservation leaves the schedule as it
// was, and time frees slots again.
func TestLocalOverTakesNothing(t *testing.T) {
	l, k := newTestLocal(t, Limit{Rate: 10, MaxWait: 200 * ms})
	now := time.Duration(0)
	for i, want := range []time.Duration{0, 115 * ms} {
		if d := l.Reserve(k, now); d.Over || d.Wait != want {
			t.Fatalf("reservation %d: %+v, want wait %v", i, d, want)
		}
	}
	for range 5 {
		if d := l.Reserve(k, now); !d.Over {
			t.Fatalf("got %+v, want over", d)
		}
	}
	// The next slot is at 230 ms: 200 ms of wait from 30 ms on.
	if d := l.Reserve(k, 29*ms); !d.Over {
		t.Fatalf("at 29 ms: %+v, want over", d)
	}
	if d := l.Reserve(k, 30*ms); d.Over || d.Wait != 200*ms {
		t.Fatalf("at 30 ms: %+v, want wait 200ms", d)
	}
	// After a long idle period, strict pacing (burst 1) gives one slot now.
	if d := l.Reserve(k, 10*time.Second); d.Wait != 0 {
		t.Fatalf("after idle: %+v", d)
	}
	if d := l.Reserve(k, 10*time.Second); d.Wait != 115*ms {
		t.Fatalf("after idle, second: %+v", d)
	}
}

// TestLocalBurstRefills: the burst comes back after idling burst intervals.
func TestLocalBurstRefills(t *testing.T) {
	l, k := newTestLocal(t, Limit{Rate: 10, Burst: 2, MaxWait: time.Second})
	for _, c := range []struct {
		now, want time.Duration
	}{
		{0, 0}, {0, 0}, {0, 115 * ms},
		{1 * time.Second, 0}, {1 * time.Second, 0}, {1 * time.Second, 115 * ms},
		// 115 ms after the last slot (1.115 s) one burst slot is back.
		{1230 * ms, 0}, {1230 * ms, 115 * ms},
	} {
		if d := l.Reserve(k, c.now); d.Over || d.Wait != c.want {
			t.Fatalf("at %v: %+v, want wait %v", c.now, d, c.want)
		}
	}
}

// TestLocalConcurrent: many goroutines reserving at once each get their own
// slot, and the slots are exactly one interval apart with none skipped.
func TestLocalConcurrent(t *testing.T) {
	const goroutines, each = 16, 500
	l, k := newTestLocal(t, Limit{Rate: 1000, MaxWait: time.Hour})
	iv := l.entry(k).p.Load().interval
	waits := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				d := l.Reserve(k, 0)
				if d.Over {
					t.Error("over")
					return
				}
				waits[g] = append(waits[g], d.Wait)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(waits...)
	slices.Sort(all)
	for i, w := range all {
		if want := time.Duration(int64(i) * iv); w != want {
			t.Fatalf("slot %d at %v, want %v (duplicate or skipped slot)", i, w, want)
		}
	}
	if len(all) != goroutines*each {
		t.Fatalf("%d slots, want %d", len(all), goroutines*each)
	}
}

// TestLimitValidation: bad limits are refused with ErrInvalid.
func TestLimitValidation(t *testing.T) {
	f := func(lim Limit, wantErr string) {
		t.Helper()
		l, err := NewLocal(Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Register("k", lim)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%+v: %v", lim, err)
			}
			return
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%+v: error %v, want ErrInvalid with %q", lim, err, wantErr)
		}
	}
	f(Limit{Rate: 1}, "")
	f(Limit{Rate: 0.5, Burst: 2, Margin: 1, MaxWait: time.Second}, "")
	f(Limit{}, "rate 0")
	f(Limit{Rate: -1}, "rate -1")
	f(Limit{Rate: 1, Burst: -1}, "burst -1")
	f(Limit{Rate: 1, Margin: 0.9}, "margin 0.9")
	f(Limit{Rate: 1, MaxWait: -1}, "max wait")
	f(Limit{Rate: 1e-6}, "one call an hour")
}

// TestRegisterAgain: registering a name again keeps its Key and slots and
// updates its limit.
func TestRegisterAgain(t *testing.T) {
	l, k := newTestLocal(t, Limit{Rate: 10, MaxWait: time.Second})
	l.Reserve(k, 0) // tat = 115 ms
	k2, err := l.Register("carrier-a", Limit{Rate: 5, MaxWait: time.Second})
	if err != nil || k2 != k {
		t.Fatalf("re-register: %v, %v", k2, err)
	}
	if d := l.Reserve(k, 0); d.Wait != 115*ms {
		t.Fatalf("after re-register: %+v, want the slot at 115 ms", d)
	}
	if d := l.Reserve(k, 0); d.Wait != 345*ms {
		t.Fatalf("new interval: %+v, want 115+230 ms", d)
	}
	if k3, ok := l.Lookup("carrier-a"); !ok || k3 != k {
		t.Fatalf("lookup: %v %v", k3, ok)
	}
	if _, ok := l.Lookup("nope"); ok {
		t.Fatal("lookup of an unknown name")
	}
}

// TestLimiterInProcess: without redis, New gives an in-process limiter
// that decides synchronously and never calls done.
func TestLimiterInProcess(t *testing.T) {
	now := time.Duration(0)
	l, err := New(Options{Now: func() time.Duration { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Redis() != nil {
		t.Fatal("in-process limiter has a Redis")
	}
	k, err := l.Register("a", Limit{Rate: 10, MaxWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{0, 115 * ms} {
		d, ok := l.ReserveAsync(k, func(Decision) { t.Error("done called") })
		if !ok || d.Wait != want || d.Source != SourceLocal {
			t.Fatalf("async %d: %+v %v", i, d, ok)
		}
	}
	if d, err := l.Reserve(context.Background(), k); err != nil || d.Wait != 230*ms {
		t.Fatalf("blocking: %+v %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Reserve(ctx, k); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

// TestConfigYAML: Config decodes the operators' YAML.
func TestConfigYAML(t *testing.T) {
	var doc struct {
		RateLimit Config `yaml:"ratelimit"`
	}
	in := `ratelimit: {redis: "redis://10.0.0.5:6379", deadline_ms: 15, failure_mode: closed, nodes: 3}`
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	want := Config{Redis: "redis://10.0.0.5:6379", DeadlineMS: 15, FailureMode: FailClosed, Nodes: 3}
	if doc.RateLimit != want {
		t.Fatalf("got %+v, want %+v", doc.RateLimit, want)
	}
}

// TestOptionsValidation: bad options are refused with ErrInvalid.
func TestOptionsValidation(t *testing.T) {
	f := func(o Options, wantErr string) {
		t.Helper()
		_, err := New(o)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%+v: error %v, want ErrInvalid with %q", o.Config, err, wantErr)
		}
	}
	f(Options{Config: Config{FailureMode: "fail"}}, `failure_mode "fail"`)
	f(Options{Config: Config{Nodes: -1}}, "nodes -1")
	f(Options{Config: Config{DeadlineMS: -5}}, "deadline_ms -5")
	f(Options{Batch: 17}, "batch 17")
	f(Options{AIMD: AIMD{Decrease: 1.5}}, "aimd")
	f(Options{Config: Config{Redis: "http://x"}}, "redis URL")
}

// TestRegisterChangingLimitKeepsNoGarbage: the script arguments that keys
// with the same limit share are forgotten once no key has that limit. An
// API whose route cps changes (a rate it computes) re-registers its account
// with every change; each limit it ever sent was kept for the node's life.
func TestRegisterChangingLimitKeepsNoGarbage(t *testing.T) {
	l, err := NewLocal(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register("steady", Limit{Rate: 5}); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, err := l.Register("drifting", Limit{Rate: 10 + float64(i)/100}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Register("drifting", Limit{Rate: 5}); err != nil { // now shares steady's
		t.Fatal(err)
	}
	l.mu.Lock()
	n := len(l.args)
	l.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d shared argument tuples kept for 1 limit in use", n)
	}
	keys := *l.keys.Load()
	if keys[0].p.Load().args != keys[1].p.Load().args {
		t.Fatal("keys with the same limit do not share their arguments")
	}
}
