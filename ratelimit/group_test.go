package ratelimit

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// TestRedisGroupScript: one script call deciding for several keys, some
// repeated, gives each decision exactly what it would get alone at the
// call's now: keys are independent, a repeated key is granted in order, an
// Over takes nothing, a batch is cut at max wait, and each key is written
// once with its last tat.
func TestRedisGroupScript(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	c := n.Redis().client.Load().Client
	ctx := context.Background()

	// A key whose next slot is 10 s away: Over, and left as it was.
	redisNow := func() int64 {
		tm, err := c.Do(ctx, c.B().Time().Build()).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		return tm[0]*1e6 + tm[1]
	}
	full := strconv.FormatInt(redisNow()+10e6, 10)
	srv.MustDo("SET {sipedge:cps}:full " + full + " PX 60000")

	type dec struct {
		key             string
		iv, burst, maxw int64 // µs
		n               int
		wantD, wantK    int64
		wantOverAtLeast int64 // the full key: d is only known to be past this
	}
	decs := []dec{
		{key: "a", iv: 100000, burst: 1, maxw: 1e6, n: 1, wantD: 0, wantK: 1},
		{key: "b", iv: 50000, burst: 2, maxw: 1e6, n: 1, wantD: -50000, wantK: 1}, // burst: τ before now
		{key: "a", iv: 100000, burst: 1, maxw: 1e6, n: 1, wantD: 100000, wantK: 1},
		{key: "c", iv: 1000, burst: 1, maxw: 2500, n: 4, wantD: 0, wantK: 3}, // batch cut at max wait
		{key: "full", iv: 1000, burst: 1, maxw: 1e6, n: 1, wantOverAtLeast: 9e6},
		{key: "b", iv: 50000, burst: 2, maxw: 1e6, n: 1, wantD: 0, wantK: 1},
		{key: "a", iv: 100000, burst: 1, maxw: 150000, n: 1, wantD: 200000, wantK: 0}, // Over: takes nothing
		{key: "c", iv: 1000, burst: 1, maxw: 2500, n: 1, wantD: 3000, wantK: 0},
		{key: "a", iv: 100000, burst: 1, maxw: 1e6, n: 1, wantD: 200000, wantK: 1}, // the slot the Over left
		{key: "b", iv: 50000, burst: 2, maxw: 1e6, n: 1, wantD: 50000, wantK: 1},
	}
	// ARGV: a tuple number per decision, then the distinct tuples.
	var keys, args, tuples []string
	index := map[scriptArgs]int{}
	for _, d := range decs {
		keys = append(keys, keyPrefix+d.key)
		a := newScriptArgs(d.iv, d.burst, d.maxw, d.n)
		if _, ok := index[a]; !ok {
			index[a] = len(index) + 1
			tuples = append(tuples, a[:]...)
		}
		args = append(args, strconv.Itoa(index[a]))
	}
	args = append(args, tuples...)
	sent := time.Now()
	vs, err := n.Redis().script.Exec(ctx, c, keys, args).AsIntSlice()
	rtt := time.Since(sent) // the script ran within it
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(decs) {
		t.Fatalf("%d results for %d decisions: %v", len(vs), len(decs), vs)
	}
	for i, d := range decs {
		gotD, gotK := vs[i]>>5, vs[i]&31
		if d.wantOverAtLeast != 0 {
			if gotK != 0 || gotD < d.wantOverAtLeast {
				t.Errorf("decision %d (%s): d %d k %d, want Over more than %d µs out", i, d.key, gotD, gotK, d.wantOverAtLeast)
			}
			continue
		}
		if gotD != d.wantD || gotK != d.wantK {
			t.Errorf("decision %d (%s): d %d k %d, want d %d k %d", i, d.key, gotD, gotK, d.wantD, d.wantK)
		}
	}

	// The stored tats, relative to each other (the call's now is not
	// known here): a at now+300 ms, b at now+150 ms, c at now+3 ms.
	tat := func(key string) int64 {
		v, err := c.Do(ctx, c.B().Get().Key(keyPrefix+key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b, cc := tat("a"), tat("b"), tat("c")
	if a-b != 150000 || a-cc != 297000 {
		t.Errorf("stored tats a %d, b %d, c %d: want b = a-150 ms, c = a-297 ms", a, b, cc)
	}
	if v := tat("full"); strconv.FormatInt(v, 10) != full {
		t.Errorf("the full key was written: %d, want %s", v, full)
	}
	// Each key outlives its tat by at least 1 s: the expiry is the bound
	// for the arguments of the key's last grant, max wait + τ + n·T + 1 s
	// from the call's now (2.1 s for a, 1.0075 s for c), which is 1.8 s
	// after a's tat and 1.0045 s after c's.
	//
	// The tats count from the script's TIME, the expiry (SET PX) from
	// Redis' clock when the SET runs: a script slowed down between the two
	// (a loaded machine preempting redis-server) moves the expiry later by
	// as much. It cannot be by more than the script's round trip: past the
	// 5 ms allowed for that, the bound grows by what the round trip took.
	slow := max(0, (rtt-5*time.Millisecond+time.Millisecond-1)/time.Millisecond)
	for _, x := range []struct {
		key    string
		tat    int64 // µs
		lo, hi int64 // ms from tat to the expiry
	}{{"a", a, 1799, 1805}, {"c", cc, 1003, 1009}} { // a few ms for a slow script
		at, err := c.Do(ctx, c.B().Pexpiretime().Key(keyPrefix+x.key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if d := at - x.tat/1000; d < x.lo || d > x.hi+int64(slow) {
			t.Errorf("%s expires %d ms after its tat, want %d to %d (the script's round trip took %v)", x.key, d, x.lo, x.hi+int64(slow), rtt)
		}
	}
}

// settle waits until the goroutines the test started to decide have called
// ready.Done, just before their call, and then until the limiter's queue
// has not changed for 100 ms: they are then all waiting, those queued for
// the next group call.
func settle(t *testing.T, r *Redis, ready *sync.WaitGroup) {
	t.Helper()
	ready.Wait()
	deadline := time.Now().Add(5 * time.Second)
	last, since := -1, time.Now()
	for {
		r.g.mu.Lock()
		got := len(r.g.q)
		r.g.mu.Unlock()
		switch {
		case got != last:
			last, since = got, time.Now()
		case time.Since(since) >= 100*ms:
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not settled after 5 s: %d decisions queued", got)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRedisGroupMixedKeys: decisions on three keys queued while Redis does
// not answer go in one group call, and each key gets its own exact slots,
// one interval apart from 0, and Over past its max wait.
func TestRedisGroupMixedKeys(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	type key struct {
		k        Key
		rate     float64
		calls    int
		wantOver int
	}
	// MaxWait 1 s: 9 slots at 10/s (115 ms apart), 18 at 20/s (57.5 ms).
	keys := []*key{{rate: 10, calls: 12, wantOver: 3}, {rate: 20, calls: 20, wantOver: 2}, {rate: 50, calls: 32}}
	for i, k := range keys {
		k.k = n.register(t, "mixed-"+strconv.Itoa(i), Limit{Rate: k.rate, MaxWait: time.Second})
	}
	warm := n.register(t, "warm", Limit{Rate: 1000})
	waitRedisMode(t, n, warm)
	trips := n.metric(t, "sipedge_ratelimit_redis_round_trips_total")

	srv.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	var mu sync.Mutex
	waits := make([][]time.Duration, len(keys))
	over := make([]int, len(keys))
	var wg, ready sync.WaitGroup
	total := 0
	// Interleave the keys in the queue.
	for round := 0; ; round++ {
		started := false
		for i, k := range keys {
			if round >= k.calls {
				continue
			}
			started = true
			total++
			ready.Add(1)
			wg.Go(func() {
				ready.Done()
				d, err := n.Reserve(context.Background(), k.k)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil || (d.Source != SourceRedis && !(d.Over && d.Source == SourceHeld)):
					t.Errorf("key %d: %+v %v", i, d, err)
				case d.Over:
					over[i]++
				default:
					waits[i] = append(waits[i], d.Wait)
				}
			})
		}
		if !started {
			break
		}
	}
	// The first decisions left at once (a call per dispatcher); the
	// others queue behind them.
	settle(t, n.Redis(), &ready)
	srv.Thaw()
	thawed = true
	wg.Wait()

	for i, k := range keys {
		ivus := (n.Redis().local.entry(k.k).p.Load().interval + 999) / 1000
		iv := time.Duration(ivus) * time.Microsecond // the script's T
		w := waits[i]
		slices.Sort(w)
		if over[i] != k.wantOver || len(w) != k.calls-k.wantOver {
			t.Errorf("key %d: %d slots and %d over, want %d over", i, len(w), over[i], k.wantOver)
		}
		// The first slot is now; then, within a call, slots are exactly
		// one interval apart (Redis' microseconds). Between the calls
		// (one per dispatcher while Redis was silent, then the group),
		// Redis' now moved on by a round trip: the slots too, but the
		// waits, which count from each reply, are shorter by as much.
		if len(w) == 0 || w[0] != 0 {
			t.Errorf("key %d: waits %v, want the first at 0", i, w)
			continue
		}
		between := 0
		for j := 1; j < len(w); j++ {
			switch gap := w[j] - w[j-1]; {
			case gap == iv:
			case gap < iv && gap > iv-50*ms && between < defaultPipelines:
				between++
			default:
				t.Errorf("key %d: waits %v, want them %v apart", i, w, iv)
			}
		}
	}
	got := n.metric(t, "sipedge_ratelimit_redis_round_trips_total") - trips
	if got > defaultPipelines+1 { // a call per dispatcher, then the rest
		t.Errorf("%v script calls for %d decisions queued together, want at most %d", got, total, defaultPipelines+1)
	}
}

// TestRedisGroupOneKey: many concurrent decisions on one key, grouped,
// never exceed the rate over any window, and every slot is distinct; the
// metrics show that the calls carried several decisions each.
func TestRedisGroupOneKey(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	const callers, rounds = 64, 3
	rate := 20
	maxWait := 2 * time.Second
	k := n.register(t, "one", Limit{Rate: float64(rate), MaxWait: maxWait})
	waitRedisMode(t, n, k)
	trips0 := n.metric(t, "sipedge_ratelimit_redis_round_trips_total")
	decisions0 := n.metric(t, "sipedge_ratelimit_redis_calls_total")
	iv := time.Duration(float64(time.Second) / float64(rate) * DefaultMargin)

	// Freeze Redis while the callers start, so that most of the first
	// round queues and goes in one call; the next rounds group as the
	// callers come back.
	srv.Freeze()
	start := time.Now()
	var mu sync.Mutex
	var slots []time.Duration
	over := 0
	var wg, ready sync.WaitGroup
	ready.Add(callers)
	for range callers {
		wg.Go(func() {
			ready.Done()
			for range rounds {
				d, err := n.Reserve(context.Background(), k)
				at := time.Since(start) + d.Wait
				mu.Lock()
				switch {
				case err != nil || (d.Source != SourceRedis && !(d.Over && d.Source == SourceHeld)):
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
	settle(t, n.Redis(), &ready)
	srv.Thaw()
	wg.Wait()
	elapsed := time.Since(start)

	// The first slot is at most max wait after the thaw, then every slot
	// up to max wait after the last call.
	lo := int(maxWait/iv) + 1
	hi := int((maxWait+elapsed)/iv) + 1
	if len(slots) < lo || len(slots) > hi || len(slots)+over != callers*rounds {
		t.Fatalf("%d slots and %d over in %v, want %d to %d slots", len(slots), over, elapsed, lo, hi)
	}
	checkWindows(t, slots, rate, iv/2)
	trips := n.metric(t, "sipedge_ratelimit_redis_round_trips_total") - trips0
	decisions := n.metric(t, "sipedge_ratelimit_redis_calls_total") - decisions0
	if trips == 0 || decisions/trips < 4 {
		t.Fatalf("%v decisions in %v script calls: not grouped", decisions, trips)
	}
	if got, want := n.metric(t, "sipedge_ratelimit_redis_group_size_count"), n.metric(t, "sipedge_ratelimit_redis_round_trips_total"); got != want {
		t.Errorf("group size histogram counts %v calls, want %v", got, want)
	}
	if got, want := n.metric(t, "sipedge_ratelimit_redis_group_size_sum"), n.metric(t, "sipedge_ratelimit_redis_calls_total"); got != want {
		t.Errorf("group size histogram sums %v decisions, want %v", got, want)
	}
	t.Logf("%v decisions in %v script calls; %d slots, %d over in %v", decisions, trips, len(slots), over, elapsed)
}

// TestRedisGroupDeadline: with Redis silent, many concurrent decisions
// (more than a group holds), blocking and asynchronous, each get their
// failure mode's decision within about the deadline, also those that
// queued behind the calls in flight.
func TestRedisGroupDeadline(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	o := Options{Config: Config{DeadlineMS: 20}, BreakerCoolDown: 300 * ms}
	n := newNode(t, srv.URL(), o)
	k := n.register(t, "a", Limit{Rate: 1000, MaxWait: 10 * time.Second})
	waitRedisMode(t, n, k)
	bound := callBound()

	srv.Freeze()
	const blocking, async = 3 * maxGroup, 48
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	record := func(el time.Duration, d Decision) {
		mu.Lock()
		defer mu.Unlock()
		worst = max(worst, el)
		if d.Source != SourceFallback || d.Over {
			t.Errorf("%+v, want the fallback's decision", d)
		}
	}
	for range blocking {
		wg.Go(func() {
			t0 := time.Now()
			d, err := n.Reserve(context.Background(), k)
			if err != nil {
				t.Error(err)
			}
			record(time.Since(t0), d)
		})
	}
	var dones sync.WaitGroup
	for range async {
		dones.Add(1)
		t0 := time.Now()
		once := false
		d, ok := n.ReserveAsync(k, func(d Decision) {
			mu.Lock()
			called := once
			once = true
			mu.Unlock()
			if called {
				t.Error("done called twice")
				return
			}
			record(time.Since(t0), d)
			dones.Done()
		})
		if ok {
			record(time.Since(t0), d)
			dones.Done()
		}
	}
	wg.Wait()
	dones.Wait()
	if worst > bound {
		t.Errorf("a decision took %v with a 20 ms deadline, want at most %v", worst, bound)
	}
	srv.Thaw()
	waitRedisMode(t, n, k)
	if c := n.logs.count("redis unavailable"); c > 1 {
		t.Errorf("%d down transitions logged, want at most 1:\n%s", c, n.logs)
	}
}

// TestRedisGroupCancel: a caller whose context ends while its decision is
// queued or in flight returns at once with the context's error; the others
// of its group get Redis' decision, and no Redis error is counted.
func TestRedisGroupCancel(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	n := newNode(t, srv.URL(), Options{})
	k := n.register(t, "a", Limit{Rate: 1000, MaxWait: time.Second})
	waitRedisMode(t, n, k)

	srv.Freeze()
	patient := make(chan Decision, 8)
	var ready sync.WaitGroup
	ready.Add(cap(patient))
	for range cap(patient) {
		go func() {
			ready.Done()
			d, _ := n.Reserve(context.Background(), k)
			patient <- d
		}()
	}
	settle(t, n.Redis(), &ready)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*ms)
			defer cancel()
			t0 := time.Now()
			d, err := n.Reserve(ctx, k)
			if el := time.Since(t0); !errors.Is(err, context.DeadlineExceeded) || el > callBound() {
				t.Errorf("impatient caller: %+v %v after %v, want the context's error at 20 ms", d, err, el)
			}
		})
	}
	wg.Wait()
	time.Sleep(50 * ms)
	srv.Thaw()
	for range cap(patient) {
		if d := <-patient; d.Source != SourceRedis {
			t.Errorf("patient caller: %+v, want Redis' decision", d)
		}
	}
	if errs := n.metric(t, "sipedge_ratelimit_redis_errors_total"); errs != 0 {
		t.Errorf("%v redis errors", errs)
	}
	// The limiter goes on deciding.
	if d, err := n.Reserve(context.Background(), k); err != nil || d.Source != SourceRedis {
		t.Errorf("after: %+v %v", d, err)
	}
}

// TestRedisGroupClose: decisions still queued when the limiter closes get
// the failure mode's decision; decisions after Close too.
func TestRedisGroupClose(t *testing.T) {
	testtier.RequiresSockets(t)
	srv := redistest.Start(t)
	r, err := NewRedis(Options{Config: Config{Redis: srv.URL(), DeadlineMS: 300}})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := r.Register("a", Limit{Rate: 1000, MaxWait: time.Second})
	if d, _ := r.Reserve(context.Background(), k); d.Source != SourceRedis {
		t.Fatalf("%+v", d)
	}
	srv.Freeze()
	defer srv.Thaw()
	got := make(chan Decision, 16)
	var ready sync.WaitGroup
	ready.Add(cap(got))
	for range cap(got) {
		go func() {
			ready.Done()
			d, _ := r.Reserve(context.Background(), k)
			got <- d
		}()
	}
	settle(t, r, &ready)
	t0 := time.Now()
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	// The queued decisions are answered at once, those in flight by their
	// deadline (the callers' own at the latest, 1.5 times it).
	for range cap(got) {
		if d := <-got; d.Source != SourceFallback {
			t.Errorf("%+v, want the fallback's decision", d)
		}
	}
	if el := time.Since(t0); el > 450*ms+callBound() {
		t.Errorf("decisions answered %v after Close began", el)
	}
	<-closed
	if d, _ := r.Reserve(context.Background(), k); d.Source != SourceFallback {
		t.Errorf("after Close: %+v", d)
	}
}

// TestBlockAhead: concurrent decisions on a batching key (in one group
// call, say) each ask for a block, but no more slots in all than the block
// can hold: the others would be reserved in Redis only to be dropped.
func TestBlockAhead(t *testing.T) {
	var b block
	var got []int
	for range 8 { // demand keeps up (now within an interval of last): the size doubles
		got = append(got, b.want(0, 10, maxBatch))
	}
	// 1, 2, 4, 8, 16, then what is left of the 32 slots: 15+7+3+1 = 26
	// beyond the askers' own, 6 more, then none.
	if want := []int{1, 2, 4, 8, 16, 7, 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("blocks asked %v, want %v", got, want)
	}
	b.answered(16) // its 15 extra slots came back...
	if n := b.put(make([]int64, 15), 0); n != 0 {
		t.Fatalf("%d slots dropped", n)
	}
	if n := b.want(0, 10, maxBatch); n != 1 { // ...and are held: still no room
		t.Fatalf("asked %d with the block full", n)
	}
	b.answered(8)
	if n := b.want(0, 10, maxBatch); n != 8 { // 7 slots of room
		t.Fatalf("asked %d with room for 7 more, want 8", n)
	}
}
