package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
)

// script is seed 003's worker gate in microseconds, with burst and with
// batches of slots. One call is one decision, atomic in Redis, on Redis'
// clock.
//
// GCRA with burst. T is the interval between slots, τ = (burst-1)·T the
// tolerance and tat the stored theoretical arrival time. A request at now
// first lifts a stale tat to now; it then gets the slot s = max(now, tat-τ)
// and tat advances by T. (burst 1: s = max(tat, now), the seed exactly.)
// A batch of k slots is k such grants at the same now: the i-th slot is
// max(now, tat+i·T-τ), and tat advances by k·T.
//
// Soundness: every grant advances tat by T and gives a slot no earlier
// than tat-τ, so for grants i < j (in grant order) s_j >= tat_i+(j-i)·T-τ
// while s_i <= tat_i (tat_i after the lift). m slots in any window of
// length W then satisfy (m-1)·T-τ <= W, i.e. m <= burst + W/T: at burst 1
// and margin >= 1, never more than Rate calls in any 1 s window. This
// holds whatever the order in which the nodes' calls arrive.
//
// Over: when the first slot is more than max wait away, nothing is taken
// (k = 0); a batch is cut to the slots within max wait.
//
// tat is written with %d: Lua would print a number with %.14g, which
// loses precision on microseconds since 1970 (16 digits). The key
// expires 1 s after tat, when it is stale anyway.
//
// The reply packs d and k in one integer, d·32 + k (k <= maxBatch < 32,
// exact in a Lua double): a table reply costs Redis as much again as a
// GET.
//
// KEYS[1] {sipedge:cps}:<key>
// ARGV    T µs, τ µs, max wait µs, slots wanted
// returns d·32 + k: the i-th slot (0 <= i < k) is max(0, d+i·T) µs from now
const script = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local maxw = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local d = tat - tau - now
if d > maxw then return d * 32 end
local k = n
if d + (n - 1) * iv > maxw then k = math.floor((maxw - d) / iv) + 1 end
tat = tat + k * iv
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
return d * 32 + k
`

var errNotConnected = errors.New("ratelimit: redis not connected yet")

// Redis is the fleet limiter: one Lua script per decision in a shared
// Redis, through rueidis (EVALSHA, loaded again on NOSCRIPT; concurrent
// calls auto-pipelined on one connection). Every call has a deadline and
// goes through a circuit breaker; on failure the failure mode decides.
//
// Reserve blocks for up to the deadline: never call it on a shard.
// ReserveAsync never blocks. Both may be called from any goroutine.
type Redis struct {
	local        *Local // key registry, and the failure_mode local limiter
	now          func() time.Duration
	client       atomic.Pointer[rclient] // nil until connected
	script       *rueidis.Lua
	deadline     time.Duration
	mode         FailureMode
	log          *slog.Logger
	batch        int
	batchMinRate float64
	br           breaker
	jobs         chan job
	quit         chan struct{}
	wg           sync.WaitGroup
	m            redisMetrics
}

type rclient struct{ rueidis.Client }

type job struct {
	e    *entry
	done func(Decision)
}

type redisMetrics struct {
	calls, errors, downs, fallbacks, queueFull, batchSlots, batchWasted *metrics.Counter
}

// NewRedis connects to o.Redis and starts the ReserveAsync workers. An
// unreachable Redis is not an error (only a malformed URL is): the limiter
// starts in the failure mode and keeps trying to connect. New waits for at
// most 1 s for the first connection.
func NewRedis(o Options) (*Redis, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	opt, err := rueidis.ParseURL(o.Redis)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse redis URL %q: %w", ErrInvalid, o.Redis, err)
	}
	opt.DisableCache = true // no client-side caching: every decision writes
	opt.Dialer.Timeout = time.Second
	// A silent Redis would otherwise hold a pipelined connection for 10 s;
	// calls have their own deadline, this bounds the connection's.
	opt.ConnWriteTimeout = time.Second
	opt.MaxFlushDelay = 20 * time.Microsecond
	r := &Redis{
		local:        newLocal(&o, o.Nodes),
		now:          o.Now,
		script:       rueidis.NewLuaScript(script),
		deadline:     time.Duration(o.DeadlineMS) * time.Millisecond,
		mode:         o.FailureMode,
		log:          o.Logger,
		batch:        o.Batch,
		batchMinRate: o.BatchMinRate,
		br:           breaker{failures: int32(o.BreakerFailures), coolDown: int64(o.BreakerCoolDown)},
		jobs:         make(chan job, o.Queue),
		quit:         make(chan struct{}),
	}
	set := o.Metrics
	r.m = redisMetrics{
		calls:       set.GetOrCreateCounter("sipedge_ratelimit_redis_calls_total"),
		errors:      set.GetOrCreateCounter("sipedge_ratelimit_redis_errors_total"),
		downs:       set.GetOrCreateCounter("sipedge_ratelimit_redis_down_total"),
		fallbacks:   set.GetOrCreateCounter(`sipedge_ratelimit_failure_mode_total{mode="` + string(o.FailureMode) + `"}`),
		queueFull:   set.GetOrCreateCounter("sipedge_ratelimit_async_queue_full_total"),
		batchSlots:  set.GetOrCreateCounter("sipedge_ratelimit_batch_slots_total"),
		batchWasted: set.GetOrCreateCounter("sipedge_ratelimit_batch_wasted_total"),
	}
	set.GetOrCreateGauge("sipedge_ratelimit_redis_up", func() float64 {
		if r.br.down.Load() {
			return 0
		}
		return 1
	})
	if c, err := rueidis.NewClient(opt); err == nil {
		r.client.Store(&rclient{c})
	} else {
		r.br.retryAt.Store(int64(r.now()) + r.br.coolDown)
		r.br.down.Store(true)
		r.m.downs.Inc()
		r.log.Warn("ratelimit: redis unavailable", "failure_mode", string(r.mode), "error", err)
		r.wg.Add(1)
		go r.connect(opt)
	}
	r.wg.Add(o.Workers)
	for range o.Workers {
		go r.work()
	}
	return r, nil
}

// connect retries the first connection every cool-down until it succeeds.
// The breaker's next probe then finds the client.
func (r *Redis) connect(opt rueidis.ClientOption) {
	defer r.wg.Done()
	t := time.NewTicker(time.Duration(max(r.br.coolDown, int64(100*time.Millisecond))))
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-t.C:
		}
		if c, err := rueidis.NewClient(opt); err == nil {
			r.client.Store(&rclient{c})
			return
		}
	}
}

func (r *Redis) work() {
	defer r.wg.Done()
	for {
		select {
		case j := <-r.jobs:
			d, _ := r.decide(context.Background(), j.e)
			j.done(d)
		case <-r.quit:
			return
		}
	}
}

// Close stops the workers, decides the jobs still queued with the failure
// mode, and closes the connections. Do not call ReserveAsync concurrently
// with or after Close.
func (r *Redis) Close() {
	close(r.quit)
	r.wg.Wait()
	for {
		select {
		case j := <-r.jobs:
			j.done(r.fallback(j.e, int64(r.now())))
			continue
		default:
		}
		break
	}
	if c := r.client.Load(); c != nil {
		c.Close()
	}
}

// Register returns the Key of name with lim as its limit; see
// (*Local).Register. lim.Rate is the fleet's rate.
func (r *Redis) Register(name string, lim Limit) (Key, error) { return r.local.Register(name, lim) }

// Local returns the in-process limiter that holds the keys and decides in
// failure_mode local (at rate / nodes).
func (r *Redis) Local() *Local { return r.local }

// Up reports whether Redis mode is on (the breaker is closed).
func (r *Redis) Up() bool { return !r.br.down.Load() }

// Reserve decides for k, blocking for at most the deadline. Never call it
// on a shard. The error is ctx's, when ctx ended first; Redis failures are
// not errors: the failure mode decides, and Decision.Source tells.
func (r *Redis) Reserve(ctx context.Context, k Key) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return r.decide(ctx, r.local.entry(k))
}

// ReserveAsync never blocks. When it can decide without I/O (a batched
// slot, a key known to be full, the breaker open, the worker queue full)
// it returns the decision
// and true, and done is not called. Otherwise it returns false and done is
// called exactly once, later, on one of the limiter's worker goroutines:
// done should post the decision to the caller's shard and return; it holds
// a worker while it runs.
func (r *Redis) ReserveAsync(k Key, done func(Decision)) (Decision, bool) {
	e := r.local.entry(k)
	now := int64(r.now())
	if d, ok := r.held(e, now); ok {
		return d, true
	}
	if r.br.open(now) {
		return r.fallback(e, now), true
	}
	select {
	case r.jobs <- job{e: e, done: done}:
		return Decision{}, false
	default:
		r.m.queueFull.Inc()
		return r.fallback(e, now), true
	}
}

func (r *Redis) decide(ctx context.Context, e *entry) (Decision, error) {
	now := int64(r.now())
	if d, ok := r.held(e, now); ok {
		return d, nil
	}
	if !r.br.allow(now) {
		return r.fallback(e, now), nil
	}
	return r.call(ctx, e, now)
}

// call runs the script; the breaker let it through.
func (r *Redis) call(ctx context.Context, e *entry, now int64) (Decision, error) {
	c := r.client.Load()
	if c == nil {
		r.failed(now, errNotConnected)
		return r.fallback(e, now), nil
	}
	p := e.p.Load()
	iv := r.local.interval(e, p, now)
	ivus := (iv + 999) / 1000
	n, batching := 1, r.batching(e, now)
	if batching {
		n = e.blk.want(now, iv, r.batch)
	}
	var args []string
	if iv == p.interval { // not lowered by AIMD: the arguments are ready
		args = []string{p.args[0], p.args[1], p.args[2], strconv.Itoa(n)}
	} else {
		args = []string{
			strconv.FormatInt(ivus, 10),
			strconv.FormatInt((p.burst-1)*ivus, 10),
			p.args[2],
			strconv.Itoa(n),
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.deadline)
	v, err := r.script.Exec(cctx, c.Client, e.rkey, args).AsInt64()
	cancel()
	r.m.calls.Inc()
	d, k := v>>5, v&31 // d·32 + k
	if err == nil && k > int64(n) {
		err = fmt.Errorf("ratelimit: unexpected script reply %d", v)
	}
	if err != nil {
		if ctx.Err() != nil { // the caller gave up: says nothing about Redis
			r.br.probing.Store(false)
			return Decision{}, ctx.Err()
		}
		r.m.errors.Inc()
		now = int64(r.now()) // the call took time: the wait counts from here
		r.failed(now, err)
		return r.fallback(e, now), nil
	}
	r.succeeded()
	if k == 0 {
		// Redis' first free slot was d µs after the script ran, which
		// was after now; tat never moves back, so every reservation
		// before now + d - MaxWait would be over too: say so without
		// asking (a flood on a full key costs no round trips).
		e.overUntil.Store(now + (d-p.maxWait/1000)*1000)
		return Decision{Over: true, Source: SourceRedis}, nil
	}
	if batching {
		recv := int64(r.now())
		var slots [maxBatch]int64
		for i := range k {
			slots[i] = recv + max(d+i*ivus, 0)*1000
		}
		// The first slot is the caller's; the others are held.
		r.m.batchWasted.Add(e.blk.put(slots[1:k], slots[k-1]))
	}
	return Decision{Wait: time.Duration(max(d, 0) * 1000), Source: SourceRedis}, nil
}

// fallback is the failure mode's decision.
func (r *Redis) fallback(e *entry, now int64) Decision {
	r.m.fallbacks.Inc()
	switch r.mode {
	case FailOpen:
		return Decision{Source: SourceOpen}
	case FailClosed:
		return Decision{Over: true, Source: SourceClosed}
	}
	return r.local.reserve(e, now, SourceFallback)
}

// failed counts a failed call in the breaker, and opens it (logging once)
// at the threshold.
func (r *Redis) failed(now int64, err error) {
	b := &r.br
	if b.down.Load() { // the probe failed: stay open for another cool-down
		b.retryAt.Store(now + b.coolDown)
		b.probing.Store(false)
		return
	}
	if b.fails.Add(1) < b.failures {
		return
	}
	b.retryAt.Store(now + b.coolDown)
	if b.down.CompareAndSwap(false, true) {
		r.m.downs.Inc()
		r.log.Warn("ratelimit: redis unavailable", "failure_mode", string(r.mode), "error", err)
	}
}

// succeeded closes the breaker (logging once) when the probe succeeded. A
// late success of a call sent before the breaker opened does not: a Redis
// that answers some calls in time and not others would flap.
func (r *Redis) succeeded() {
	b := &r.br
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.down.Load() && b.probing.Load() && b.down.CompareAndSwap(true, false) {
		b.probing.Store(false)
		r.log.Info("ratelimit: redis available, redis mode resumed")
	}
}

// breaker is a circuit breaker: closed (down false) it lets every call
// through; failures consecutive failures open it (down true) for coolDown,
// after which one probe call goes through: success closes it, failure
// opens it for another coolDown.
type breaker struct {
	down     atomic.Bool
	fails    atomic.Int32 // consecutive failures while closed
	retryAt  atomic.Int64 // while open: when the next probe may go
	probing  atomic.Bool  // a probe is in flight
	failures int32
	coolDown int64
}

// allow reports whether a call may go to Redis; when open it lets through
// one probe per cool-down.
func (b *breaker) allow(now int64) bool {
	if !b.down.Load() {
		return true
	}
	return now >= b.retryAt.Load() && b.probing.CompareAndSwap(false, true)
}

// open reports, without taking the probe, whether allow would say no.
func (b *breaker) open(now int64) bool {
	return b.down.Load() && (now < b.retryAt.Load() || b.probing.Load())
}

// batching reports whether e reserves blocks of slots.
func (r *Redis) batching(e *entry, now int64) bool {
	return r.batch > 1 && r.local.rate(e, now) >= r.batchMinRate
}

// held decides from an earlier Redis reply: a slot reserved earlier by a
// batch, or Over while the key is known to be full.
func (r *Redis) held(e *entry, now int64) (Decision, bool) {
	if r.batch <= 1 {
		if now < e.overUntil.Load() {
			return Decision{Over: true, Source: SourceHeld}, true
		}
		return Decision{}, false
	}
	// A slot used late moves towards the next one; a tenth of the
	// interval is within the margin's slack.
	wait, ok, expired := e.blk.take(now, e.p.Load().interval/10)
	if expired > 0 {
		r.m.batchWasted.Add(expired)
	}
	if !ok {
		if now < e.overUntil.Load() {
			return Decision{Over: true, Source: SourceHeld}, true
		}
		return Decision{}, false
	}
	r.m.batchSlots.Inc()
	return Decision{Wait: time.Duration(wait), Source: SourceHeld}, true
}

// block holds the slots of one key that a batch reserved in Redis ahead of
// use, as times on the limiter's clock.
type block struct {
	mu    sync.Mutex
	slots [2 * maxBatch]int64 // slots[head:n] are unused, ascending
	head  int
	n     int
	last  int64 // the latest slot reserved
	size  int   // slots the next round trip asks for
}

// take hands out the next held slot, dropping those more than grace in
// the past (counted in expired).
func (b *block) take(now, grace int64) (wait int64, ok bool, expired int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.head < b.n && b.slots[b.head] < now-grace {
		b.head++
		expired++
	}
	if b.head == b.n {
		return 0, false, expired
	}
	s := b.slots[b.head]
	b.head++
	return max(s-now, 0), true, expired
}

// want returns how many slots the next round trip asks for: the block
// doubles, up to limit, while demand keeps up with it (the held slots ran
// out within an interval of the last one), and falls back to one slot
// otherwise, so a node with little traffic does not take slots it wastes.
func (b *block) want(now, interval int64, limit int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size == 0 || now > b.last+interval {
		b.size = 1
	} else {
		b.size = min(2*b.size, limit)
	}
	return b.size
}

// put stores reserved slots, last being the latest slot of the round
// trip; it returns how many did not fit.
func (b *block) put(slots []int64, last int64) (dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = max(b.last, last)
	b.n = copy(b.slots[:], b.slots[b.head:b.n])
	b.head = 0
	for _, s := range slots {
		if b.n == len(b.slots) {
			dropped++
			continue
		}
		// Concurrent round trips interleave: keep the slots sorted.
		i := b.n
		for i > 0 && b.slots[i-1] > s {
			b.slots[i] = b.slots[i-1]
			i--
		}
		b.slots[i] = s
		b.n++
	}
	return dropped
}
