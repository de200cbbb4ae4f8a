package ratelimit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// logBuf collects a limiter's log lines; the limiter logs from its own
// goroutines.
type logBuf struct {
	mu    sync.Mutex
	lines strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines.String()
}

func (l *logBuf) count(s string) int { return strings.Count(l.String(), s) }

// node is one limiter instance, as one sipedge node would have.
type node struct {
	*Limiter
	set  *metrics.Set
	logs *logBuf
}

func newNode(tb testing.TB, url string, o Options) *node {
	tb.Helper()
	n := &node{set: metrics.NewSet(), logs: new(logBuf)}
	o.Redis = url
	if o.DeadlineMS == 0 {
		// Only the failure tests test the deadline: elsewhere, a slow run
		// (-race, a loaded machine) must not turn into fallbacks.
		o.DeadlineMS = 1000
	}
	o.Metrics = n.set
	o.Logger = slog.New(slog.NewTextHandler(n.logs, nil))
	l, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	n.Limiter = l
	return n
}

func (n *node) register(tb testing.TB, name string, lim Limit) Key {
	tb.Helper()
	k, err := n.Register(name, lim)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// metric returns the value of the sample called name.
func (n *node) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	var buf bytes.Buffer
	n.set.WritePrometheus(&buf)
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return f
		}
	}
	tb.Fatalf("no metric %s in\n%s", name, buf.String())
	return 0
}

// checkWindows fails when more than rate slots fall in any 1 s window, or
// when two slots are closer than minGap.
func checkWindows(t *testing.T, slots []time.Duration, rate int, minGap time.Duration) {
	t.Helper()
	slices.Sort(slots)
	for i, s := range slots {
		j, _ := slices.BinarySearch(slots, s+time.Second) // slots in [s, s+1s)
		if j-i > rate {
			t.Fatalf("%d slots in the 1 s window from %v, want at most %d: %v", j-i, s, rate, slots[i:j])
		}
		if i > 0 && s-slots[i-1] < minGap {
			t.Fatalf("slots %v and %v are %v apart, want at least %v", slots[i-1], s, s-slots[i-1], minGap)
		}
	}
}

// TestRedisSpacing: one node's reservations are one interval apart on
// Redis' clock, Over past MaxWait without taking a slot, under a hash-tagged
// key.
func TestRedisSpacing(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	k := n.register(t, "carrier-a", Limit{Rate: 10, MaxWait: time.Second})
	start := time.Now()
	var slots, before, after []time.Duration
	for range 9 { // 0, 115, ..., 920 ms
		t0 := time.Since(start)
		d, err := n.Reserve(context.Background(), k)
		t1 := time.Since(start)
		if err != nil || d.Over || d.Source != SourceRedis {
			t.Fatalf("%+v %v", d, err)
		}
		slots = append(slots, t1+d.Wait)
		before, after = append(before, t0+d.Wait), append(after, t1+d.Wait)
	}
	// Slots are 115 ms apart on Redis' clock. Read here, each lies between
	// the time before its call and the time after, plus its wait: a gap
	// between two must be possible within those bounds (a fixed ±10 ms
	// around slots read after the reply failed when a loaded machine
	// delayed one reply by 14 ms). 100 ms (the rate without its margin)
	// stays out over the eight gaps: 800 ms must not fit the span.
	within := func(want, lo, hi time.Duration) bool { return lo-ms <= want && want <= hi+ms }
	for i := 1; i < len(slots); i++ {
		if lo, hi := before[i]-after[i-1], after[i]-before[i-1]; !within(115*ms, lo, hi) {
			t.Fatalf("gap %d: %v to %v, want 115 ms: %v", i, lo, hi, slots)
		}
	}
	last := len(slots) - 1
	if lo, hi := before[last]-after[0], after[last]-before[0]; !within(920*ms, lo, hi) || within(800*ms, lo, hi) {
		t.Fatalf("first to last slot: %v to %v, want 920 ms (8 gaps of 115 ms), not 800 ms: %v", lo, hi, slots)
	}
	// The 10th slot is 1035 ms out: over, and known to be over for the
	// next 35 ms without asking Redis again.
	if d, _ := n.Reserve(context.Background(), k); !d.Over || d.Source != SourceRedis {
		t.Fatalf("past max wait: %+v", d)
	}
	calls := n.metric(t, "sipedge_ratelimit_redis_calls_total")
	for range 3 {
		if d, _ := n.Reserve(context.Background(), k); !d.Over || d.Source != SourceHeld {
			t.Fatalf("past max wait, again: %+v", d)
		}
	}
	if n.metric(t, "sipedge_ratelimit_redis_calls_total") != calls {
		t.Fatal("known-over reservations went to Redis")
	}
	time.Sleep(40 * ms)
	if d, _ := n.Reserve(context.Background(), k); d.Over || d.Source != SourceRedis {
		t.Fatalf("40 ms later: %+v, want the slot at 1035 ms", d)
	}
	if got := srv.MustDo("EXISTS {sipedge:cps}:carrier-a"); got != ":1" {
		t.Fatalf("hash-tagged key: EXISTS = %s", got)
	}
	if pttl, _ := strconv.Atoi(strings.TrimPrefix(srv.MustDo("PTTL {sipedge:cps}:carrier-a"), ":")); pttl < 1000 || pttl > 2150 {
		t.Fatalf("PTTL %d, want tat + 1 s", pttl)
	}
	if n.metric(t, "sipedge_ratelimit_redis_up") != 1 {
		t.Fatal("redis_up gauge is not 1")
	}
}

// TestRedisTwoNodes: two nodes sharing one Redis, reserving concurrently,
// never put more than the rate in any 1 s window, and fill every slot.
func TestRedisTwoNodes(t *testing.T) {
	testtier.RequiresSockets(t)
	f := func(t *testing.T, o Options, rate int, burst int, maxWait time.Duration, callers int) {
		srv := redistest.Start(t)
		nodes := []*node{newNode(t, srv.URL(), o), newNode(t, srv.URL(), o)}
		lim := Limit{Rate: float64(rate), Burst: burst, MaxWait: maxWait}
		iv := time.Duration(float64(time.Second) / float64(rate) * DefaultMargin)
		start := time.Now()
		var mu sync.Mutex
		var slots []time.Duration
		var over int
		var wg sync.WaitGroup
		for _, n := range nodes {
			k := n.register(t, "carrier-b", lim)
			for range callers {
				wg.Go(func() {
					for range 8 {
						d, err := n.Reserve(context.Background(), k)
						at := time.Since(start) + d.Wait
						mu.Lock()
						switch {
						case err != nil || (d.Source != SourceRedis && d.Source != SourceHeld):
							t.Errorf("%+v %v", d, err)
						case d.Over:
							over++
						default:
							slots = append(slots, at)
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		elapsed := time.Since(start)
		// Every slot within max wait of the first call is taken; calls
		// spread over elapsed take a few more.
		lo := int(maxWait/iv) + burst
		if o.Batch > 1 { // slots a node holds and does not use are lost
			lo -= 2 * 2 * maxBatch
		}
		hi := int((maxWait+elapsed)/iv) + burst
		if len(slots) < lo || len(slots) > hi || len(slots)+over != 2*callers*8 {
			t.Fatalf("%d slots and %d over in %v, want %d to %d slots", len(slots), over, elapsed, lo, hi)
		}
		// Slot times come from reply arrival times on two nodes, so they
		// jitter by the difference of two round trips; the window check has
		// room for it, the gap check (distinct slots) only at a low rate.
		minGap := iv / 2
		if burst > 1 || rate > 20 {
			minGap = 0
		}
		checkWindows(t, slots, rate, minGap)
		for i, n := range nodes {
			t.Logf("node %d: %v redis calls, %v batch slots, %v batch slots wasted", i,
				n.metric(t, "sipedge_ratelimit_redis_calls_total"), n.metric(t, "sipedge_ratelimit_batch_slots_total"),
				n.metric(t, "sipedge_ratelimit_batch_wasted_total"))
		}
	}
	t.Run("rate=4", func(t *testing.T) { f(t, Options{}, 4, 1, 2*time.Second, 4) })
	t.Run("rate=20", func(t *testing.T) { f(t, Options{}, 20, 1, 2*time.Second, 16) })
	t.Run("rate=20,burst=2", func(t *testing.T) { f(t, Options{}, 20, 2, 2*time.Second, 16) })
	t.Run("rate=200,batch=8", func(t *testing.T) {
		f(t, Options{Batch: 8}, 200, 1, time.Second, 16)
	})
}

// TestRedisBatch: at a high rate a node takes blocks of slots, and hands
// them out without a round trip.
func TestRedisBatch(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{Batch: 8})
	hi := n.register(t, "hi", Limit{Rate: 100, MaxWait: time.Second})
	lo := n.register(t, "lo", Limit{Rate: 10, MaxWait: time.Second})
	start := time.Now()
	// Each slot read here lies between the time before its call and the
	// time after, plus its wait: a loaded machine stalling this goroutine
	// must not pass for two slots handed out together.
	var slots, before, after []time.Duration
	sources := map[Source]int{}
	for range 40 {
		t0 := time.Since(start)
		d, err := n.Reserve(context.Background(), hi)
		if err != nil || d.Over {
			t.Fatalf("%+v %v", d, err)
		}
		t1 := time.Since(start)
		sources[d.Source]++
		slots, before, after = append(slots, t1+d.Wait), append(before, t0+d.Wait), append(after, t1+d.Wait)
	}
	// Blocks of 1, 2, 4, 8, 8, 8, 8, 1 (the last cut to 40).
	if calls := n.metric(t, "sipedge_ratelimit_redis_calls_total"); calls != 8 || sources[SourceHeld] != 32 {
		t.Fatalf("%v round trips, sources %v", calls, sources)
	}
	for i := 1; i < len(after); i++ {
		// At most this far apart; at least half an interval (11.5 ms).
		if gap := after[i] - before[i-1]; gap < 11500*time.Microsecond/2 {
			t.Fatalf("slots %d and %d are at most %v apart, want at least 5.75 ms", i-1, i, gap)
		}
	}
	checkWindows(t, slots, 100, 0)
	// Below BatchMinRate, one slot per round trip.
	for range 3 {
		if d, _ := n.Reserve(context.Background(), lo); d.Source != SourceRedis {
			t.Fatalf("low rate: %+v", d)
		}
	}
	// Slots left unused expire, and the block falls back to one slot.
	time.Sleep(50 * ms)
	for range 5 {
		n.Reserve(context.Background(), hi)
	}
	time.Sleep(time.Second + 100*ms)
	if d, _ := n.Reserve(context.Background(), hi); d.Source != SourceRedis || d.Wait != 0 {
		t.Fatalf("after idle: %+v", d)
	}
	if n.metric(t, "sipedge_ratelimit_batch_wasted_total") == 0 {
		t.Fatal("expired slots not counted")
	}
}

// TestRedisNoscript: the script is loaded again after SCRIPT FLUSH.
func TestRedisNoscript(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	k := n.register(t, "a", Limit{Rate: 1000, MaxWait: time.Second})
	sum := sha1.Sum([]byte(script))
	sha := hex.EncodeToString(sum[:])
	for i := range 3 {
		if d, err := n.Reserve(context.Background(), k); err != nil || d.Source != SourceRedis {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
		if got := srv.MustDo("SCRIPT EXISTS " + sha); got != "*1" {
			t.Fatalf("SCRIPT EXISTS: %s", got)
		}
		srv.MustDo("SCRIPT FLUSH")
	}
	if errs := n.metric(t, "sipedge_ratelimit_redis_errors_total"); errs != 0 {
		t.Fatalf("%v errors", errs)
	}
}

// TestRedisAsync: ReserveAsync returns at once and calls done once, from a
// worker.
func TestRedisAsync(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	k := n.register(t, "a", Limit{Rate: 10, MaxWait: time.Second})
	got := make(chan Decision, 4)
	start := time.Now()
	for range 2 {
		if d, ok := n.ReserveAsync(k, func(d Decision) { got <- d }); ok {
			t.Fatalf("decided without Redis: %+v", d)
		}
	}
	var waits []time.Duration
	for range 2 {
		d := <-got
		if d.Source != SourceRedis {
			t.Fatalf("%+v", d)
		}
		waits = append(waits, d.Wait)
	}
	// 10/s with the 1.15 margin: slots 115 ms apart. The second decision
	// may reach Redis up to the time both took after the first.
	el := time.Since(start)
	slices.Sort(waits)
	if waits[0] > 5*ms || waits[1] < 115*ms-el-ms || waits[1] > 115*ms {
		t.Fatalf("waits %v (both decided within %v)", waits, el)
	}
	select {
	case d := <-got:
		t.Fatalf("done called twice: %+v", d)
	case <-time.After(50 * ms):
	}
}

// TestRedisFailureModes: a silent Redis (SIGSTOP) makes every call return
// within about the deadline and the failure mode decide, logged once and
// counted; when Redis answers again Redis mode resumes, logged once.
func TestRedisFailureModes(t *testing.T) {
	testtier.RequiresSockets(t)
	// check gets each decision with the earliest and latest time its slot
	// can be at: the call's start and return, plus the wait.
	f := func(t *testing.T, mode FailureMode, check func(i int, d Decision, lo, hi time.Duration)) {
		srv := redistest.Start(t)
		// The breaker's cool-down is far longer than the test: it stays
		// open until the test moves the limiter's clock past it, after the
		// thaw, however long a loaded machine stalls the test in between
		// (a 300 ms one let the probe go while Redis was frozen, and
		// ReserveAsync queued the call whose done is nil: a worker panicked).
		const coolDown = time.Hour
		var skew atomic.Int64 // added to the limiter's clock
		clock0 := time.Now()
		o := Options{Config: Config{FailureMode: mode, Nodes: 2, DeadlineMS: 20}, BreakerCoolDown: coolDown,
			Now: func() time.Duration { return time.Since(clock0) + time.Duration(skew.Load()) }}
		n := newNode(t, srv.URL(), o)
		k := n.register(t, "a", Limit{Rate: 10, MaxWait: 10 * time.Second})
		// resume waits until Redis decides, moving the clock past the
		// cool-down before each try as the real clock passed the 300 ms
		// one: a probe that fails (a Redis slow to answer on a loaded
		// machine) opens the breaker for another cool-down.
		resume := func() {
			t.Helper()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * ms) {
				skew.Add(int64(coolDown))
				if d, _ := n.Reserve(context.Background(), k); d.Source == SourceRedis {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("redis mode did not resume in 5 s; logs:\n%s", n.logs)
				}
			}
			if !n.Redis().Up() {
				t.Fatal("decided by Redis but not up")
			}
		}
		// A slow call (-race, load) may fail, and be counted, after a later
		// one succeeded: count from when every call so far is accounted for
		// and no failure counts towards the breaker.
		for i := 0; ; i++ {
			resume()
			quiesce(t, n.Redis())
			if n.Redis().br.fails.Load() == 0 && n.Redis().Up() {
				break
			}
			if i == 50 {
				t.Fatalf("redis calls keep failing before the freeze; logs:\n%s", n.logs)
			}
		}
		fallbacks := n.metric(t, `sipedge_ratelimit_failure_mode_total{mode="`+string(mode)+`"}`)
		errs := n.metric(t, "sipedge_ratelimit_redis_errors_total")
		bound := callBound()

		srv.Freeze()
		start := time.Now()
		// The first call is asynchronous: done comes within the deadline.
		got := make(chan Decision, 1)
		if d, ok := n.ReserveAsync(k, func(d Decision) { got <- d }); ok {
			t.Fatalf("async decided at once: %+v", d)
		}
		d := <-got
		el := time.Since(start)
		if el > bound {
			t.Fatalf("async call took %v with a 20 ms deadline", el)
		}
		check(0, d, d.Wait, el+d.Wait)
		for i := 1; i < 10; i++ {
			// The caller gives up at 1.5 times the deadline, its call may
			// fail later: let each failure reach the breaker before the next
			// call, or a loaded machine has a fourth call sent before the
			// third failure opened it (4 errors, not the breaker's 3).
			quiesce(t, n.Redis())
			t0 := time.Since(start)
			d, err := n.Reserve(context.Background(), k)
			t1 := time.Since(start)
			if err != nil || t1-t0 > bound {
				t.Fatalf("call %d: %v after %v with a 20 ms deadline", i, err, t1-t0)
			}
			check(i, d, t0+d.Wait, t1+d.Wait)
		}
		// The breaker is open: the shard's call decides at once.
		t0 := time.Since(start)
		d, ok := n.ReserveAsync(k, func(Decision) {}) // not nil: were it queued, a worker would call it
		if !ok {
			t.Fatal("breaker open, yet ReserveAsync went to Redis")
		}
		check(10, d, t0+d.Wait, time.Since(start)+d.Wait)
		if n.Redis().Up() || n.metric(t, "sipedge_ratelimit_redis_up") != 0 {
			t.Fatal("redis still up")
		}
		if c := n.logs.count("redis unavailable"); c != 1 {
			t.Fatalf("%d down transitions logged, want 1:\n%s", c, n.logs)
		}
		if c := n.metric(t, `sipedge_ratelimit_failure_mode_total{mode="`+string(mode)+`"}`) - fallbacks; c != 11 {
			t.Fatalf("%v decisions counted in failure mode %s, want 11", c, mode)
		}
		if c := n.metric(t, "sipedge_ratelimit_redis_down_total"); c != 1 {
			t.Fatalf("%v down transitions counted", c)
		}
		if c := n.metric(t, "sipedge_ratelimit_redis_errors_total") - errs; c != 3 {
			t.Fatalf("%v redis errors, want the breaker's 3", c)
		}

		srv.Thaw()
		resume()
		if c := n.logs.count("redis available"); c != 1 {
			t.Fatalf("%d up transitions logged, want 1:\n%s", c, n.logs)
		}
		if c := n.logs.count("redis unavailable"); c != 1 {
			t.Fatalf("%d down transitions logged, want 1:\n%s", c, n.logs)
		}
		if n.metric(t, "sipedge_ratelimit_redis_up") != 1 {
			t.Fatal("redis_up gauge is not back to 1")
		}
	}
	t.Run("local", func(t *testing.T) {
		var prevLo, prevHi time.Duration
		f(t, FailLocal, func(i int, d Decision, lo, hi time.Duration) {
			t.Helper()
			if d.Source != SourceFallback || d.Over {
				t.Fatalf("decision %d: %+v", i, d)
			}
			// Rate 10 over 2 nodes: each paces at 5/s, 230 ms apart; a call
			// made after its slot (a stalled test) is granted at once.
			late := d.Wait == 0 && lo-prevLo >= 230*ms
			if i > 0 && !late && (hi-prevLo < 230*ms || lo-prevHi > 230*ms) {
				t.Fatalf("decision %d: %v to %v after the previous, want 230 ms", i, lo-prevHi, hi-prevLo)
			}
			prevLo, prevHi = lo, hi
		})
	})
	t.Run("open", func(t *testing.T) {
		f(t, FailOpen, func(i int, d Decision, _, _ time.Duration) {
			t.Helper()
			if d != (Decision{Source: SourceOpen}) {
				t.Fatalf("decision %d: %+v", i, d)
			}
		})
	})
	t.Run("closed", func(t *testing.T) {
		f(t, FailClosed, func(i int, d Decision, _, _ time.Duration) {
			t.Helper()
			if d != (Decision{Over: true, Source: SourceClosed}) {
				t.Fatalf("decision %d: %+v", i, d)
			}
		})
	})
}

// callBound is how long a call may take with a 20 ms deadline: the
// deadline plus scheduling on a loaded 2-core machine, more under the race
// detector. (Without a deadline a silent Redis holds a call for seconds.)
func callBound() time.Duration {
	if raceEnabled {
		return 250 * ms
	}
	return 100 * ms
}

// quiesce waits until every dispatcher is idle with nothing queued: each
// call sent so far has ended and been accounted for (errors counted, the
// breaker told).
func quiesce(t *testing.T, r *Redis) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		r.g.mu.Lock()
		idle := r.g.idle == cap(r.g.wake) && len(r.g.q) == 0
		r.g.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("redis calls still in flight after 5 s")
		}
	}
}

// waitRedisMode polls until a decision comes from Redis again.
func waitRedisMode(t *testing.T, n *node, k Key) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := n.Reserve(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if d.Source == SourceRedis {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis mode did not resume in 5 s; logs:\n%s", n.logs)
		}
		time.Sleep(20 * ms)
	}
	if !n.Redis().Up() {
		t.Fatal("decided by Redis but not up")
	}
}

// TestRedisRestart: Redis killed and started again on the same port.
func TestRedisRestart(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{Config: Config{DeadlineMS: 20}, BreakerCoolDown: 100 * ms})
	k := n.register(t, "a", Limit{Rate: 100, MaxWait: time.Second})
	waitRedisMode(t, n, k)
	srv.Stop()
	for i := range 10 {
		t0 := time.Now()
		d, _ := n.Reserve(context.Background(), k)
		if el := time.Since(t0); d.Source != SourceFallback || el > callBound() {
			t.Fatalf("call %d: %+v after %v", i, d, el)
		}
	}
	srv.Restart()
	waitRedisMode(t, n, k)
	if d, c := n.logs.count("redis unavailable"), n.logs.count("redis available"); d != 1 || c != 1 {
		t.Fatalf("%d down and %d up transitions logged, want 1 and 1:\n%s", d, c, n.logs)
	}
}

// TestRedisStartsDown: a node started while Redis is down starts in the
// failure mode (no error) and switches to Redis when it comes up.
func TestRedisStartsDown(t *testing.T) {
	testtier.RequiresSockets(t)
	redistest.SkipIfMissing(t)
	port := redistest.FreePort(t)
	n := newNode(t, "redis://127.0.0.1:"+strconv.Itoa(port), Options{Config: Config{DeadlineMS: 20}, BreakerCoolDown: 100 * ms})
	k := n.register(t, "a", Limit{Rate: 100, MaxWait: time.Second})
	if d, _ := n.Reserve(context.Background(), k); d.Source != SourceFallback {
		t.Fatalf("redis down: %+v", d)
	}
	if n.Redis().Up() || n.logs.count("redis unavailable") != 1 {
		t.Fatalf("not down, or not logged once:\n%s", n.logs)
	}
	redistest.StartOn(t, port)
	waitRedisMode(t, n, k)
	if n.logs.count("redis available") != 1 {
		t.Fatalf("up not logged once:\n%s", n.logs)
	}
}

// TestRedisDatabaseRefused: a database the Redis reached refuses fails New
// with the reason; one it accepts is used. Refused by a Redis that came up
// after New, it is logged as an error, once.
func TestRedisDatabaseRefused(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	_, err := New(Options{Config: Config{Redis: srv.URL() + "/99"}, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrRedisURL) || !strings.Contains(err.Error(), "database 99: Redis at "+srv.Addr()+" refuses it") {
		t.Fatalf("database 99: %v, want ErrRedisURL saying Redis refuses it", err)
	}
	n := newNode(t, srv.URL()+"/1", Options{})
	k := n.register(t, "a", Limit{Rate: 100, MaxWait: time.Second})
	if d, err := n.Reserve(context.Background(), k); err != nil || d.Source != SourceRedis {
		t.Fatalf("database 1: %+v %v", d, err)
	}

	port := redistest.FreePort(t)
	n = newNode(t, "redis://127.0.0.1:"+strconv.Itoa(port)+"/99", Options{BreakerCoolDown: 100 * ms})
	redistest.StartOn(t, port)
	deadline := time.Now().Add(3 * time.Second)
	for n.logs.count("level=ERROR") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("database 99 refused after New, not logged:\n%s", n.logs)
		}
		time.Sleep(20 * ms)
	}
	time.Sleep(300 * ms) // a few more attempts
	if n.logs.count("level=ERROR") != 1 || n.logs.count("database 99: Redis at 127.0.0.1:"+strconv.Itoa(port)+" refuses it") != 1 {
		t.Fatalf("want one error saying why:\n%s", n.logs)
	}
}

// Only the probe's outcome moves an open breaker. A call sent before the
// breaker opened may fail after the probe went: that failure must neither
// let a second probe go nor keep the probe's success from closing it (it
// did: Redis answered, yet stayed down for another cool-down).
func TestBreakerStaleFailureDuringProbe(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{BreakerCoolDown: time.Millisecond})
	r := n.Redis()
	boom := errors.New("boom")
	for range r.br.failures {
		r.failed(int64(r.now()), boom, false)
	}
	if r.Up() {
		t.Fatal("the breaker did not open")
	}
	time.Sleep(2 * time.Millisecond) // the cool-down
	ok, probe := r.br.allow(int64(r.now()))
	if !ok || !probe {
		t.Fatalf("allow after the cool-down = %v, %v; want the probe", ok, probe)
	}
	r.failed(int64(r.now()), boom, false) // a call sent before the breaker opened
	if ok, _ := r.br.allow(int64(r.now()) + int64(time.Second)); ok {
		t.Fatal("a second probe went while the first is in flight")
	}
	r.succeeded(true)
	if !r.Up() {
		t.Fatal("the probe succeeded but the breaker stayed open")
	}
}

// TestLargeBurstIdleKey: a limit Register accepts gives an idle key its
// slot at once, in process and in Redis. A burst so large that its
// tolerance, (burst-1) intervals, overflowed the nanoseconds of the local
// limiter or the exact integers of the script's reply made every call Over
// (cps_limited on a carrier that is idle): such a burst is refused instead.
func TestLargeBurstIdleKey(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	for i, lim := range []Limit{
		{Rate: 1, Burst: 3000, MaxWait: time.Second},
		{Rate: 1000, Burst: 3_000_000, MaxWait: time.Second},
		{Rate: 1, Burst: 300_000_000, MaxWait: time.Second},
		{Rate: 0.1, Burst: 30_000_000, MaxWait: time.Second},
		{Rate: 1, Burst: 10_000_000_000, MaxWait: time.Second},
	} {
		name := "carrier-" + strconv.Itoa(i)
		k, err := n.Register(name, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "burst") {
				t.Fatalf("%+v: error %v, want ErrInvalid about the burst", lim, err)
			}
			continue
		}
		if d, err := n.Reserve(context.Background(), k); err != nil || d.Over || d.Wait != 0 || d.Source != SourceRedis {
			t.Errorf("%+v: idle key in Redis: %+v %v, want its slot now", lim, d, err)
		}
		l, err := NewLocal(Options{})
		if err != nil {
			t.Fatal(err)
		}
		lk, err := l.Register(name, lim)
		if err != nil {
			t.Fatal(err)
		}
		if d := l.Reserve(lk, time.Hour); d.Over || d.Wait != 0 {
			t.Errorf("%+v: idle key in process: %+v, want its slot now", lim, d)
		}
	}
}
