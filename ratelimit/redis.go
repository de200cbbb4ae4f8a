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

	"github.com/sipedge/sipedge/internal/redisurl"
)

// script is the slot reservation of docs/design/cps.md 3.1 in
// microseconds, with burst, with
// batches of slots, and for a group of decisions at once (see group.go):
// one call carries the decisions queued while the previous calls were in
// flight. Each decision is atomic in Redis, on Redis' clock.
//
// GCRA with burst. T is the interval between slots, τ = (burst-1)·T the
// tolerance and tat the stored theoretical arrival time. A request at now
// first lifts a stale tat to now; it then gets the slot s = max(now, tat-τ)
// and tat advances by T. (burst 1: s = max(tat, now), cps.md 3.1 exactly.)
// A batch of k slots is k such grants at the same now: the i-th slot is
// max(now, tat+i·T-τ), and tat advances by k·T.
//
// Soundness: every grant advances tat by T and gives a slot no earlier
// than tat-τ, so for grants i < j (in grant order) s_j >= tat_i+(j-i)·T-τ
// while s_i <= tat_i (tat_i after the lift). m slots in any window of
// length W then satisfy (m-1)·T-τ <= W, i.e. m <= burst + W/T: at burst 1
// and margin >= 1, never more than Rate calls in any 1 s window. This
// holds whatever the order in which the nodes' calls arrive, and whatever
// now each grant sees: it uses only that tat never moves back.
//
// Groups: the decisions of a call are granted one after the other, in the
// order of KEYS, at one now (TIME is read once). Each starts from its
// key's tat as the previous decisions of the group left it (the stored one
// for the first), so a key twice in a group is granted twice, the second
// after the first. The keys are read with one MGET and each key changed
// is written once, at the end, with its last tat: nothing sees the tats in
// between, since the script is atomic. A group is thus exactly its
// decisions sent one by one with no time between them, each deciding as
// it did alone, and the argument above applies unchanged; a decision's
// wait counts from the reply, which arrives after the whole group ran
// (microseconds more one-way latency, absorbed by the margin like the
// rest). A decision that is Over writes nothing (the lift is not stored).
//
// Over: when the first slot is more than max wait away, nothing is taken
// (k = 0); a batch is cut to the slots within max wait.
//
// tat is written with %d: Lua would print a number with %.14g, which
// loses precision on microseconds since 1970 (16 digits). The key expires
// px ms after the write, px being the node's bound of max wait + τ + n·T,
// plus 1 s: at least 1 s after tat, when it is stale anyway. (Passing px
// ready-made spares Redis formatting a number per write.)
//
// The decisions of a group often have the same arguments (keys with the
// same limit, a key twice): ARGV has each distinct tuple once, and a tuple
// number per decision.
//
// Each result packs d and k in one integer, d·32 + k (k <= maxBatch < 32,
// exact in a Lua double): the reply is one flat array of integers.
//
// KEYS    {sipedge:cps}:<key> per decision; a key may repeat, and the
// shared hash tag puts them all in one Redis Cluster slot
// ARGV    per decision (as many as KEYS), its tuple's number, from 1; then
// the tuples, 5 strings each: T µs, τ µs, max wait µs, slots wanted n,
// px ms
// returns d·32 + k per decision: the i-th slot (0 <= i < k) is
// max(0, d+i·T) µs from now
const script = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local m = #KEYS
local got = redis.call('MGET', unpack(KEYS))
local args = {}
for b = m, #ARGV - 5, 5 do
  args[#args + 1] = {tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), ARGV[b + 5]}
end
local tats, px, changed, r = {}, {}, {}, {}
for i = 1, m do
  local a = args[tonumber(ARGV[i])]
  local iv, tau, maxw, n = a[1], a[2], a[3], a[4]
  local key = KEYS[i]
  local tat = tats[key] or tonumber(got[i] or now)
  if tat < now then tat = now end
  local d = tat - tau - now
  if d > maxw then
    r[i] = d * 32
  else
    local k = n
    if d + (n - 1) * iv > maxw then k = math.floor((maxw - d) / iv) + 1 end
    if not px[key] then changed[#changed + 1] = key end
    tats[key] = tat + k * iv
    px[key] = a[5]
    r[i] = d * 32 + k
  end
end
for j = 1, #changed do
  local key = changed[j]
  redis.call('SET', key, string.format('%d', tats[key]), 'PX', px[key])
end
return r
`

var errNotConnected = errors.New("ratelimit: redis not connected yet")

// Redis is the fleet limiter: a Lua script in a shared Redis decides, each
// atomically, the decisions queued while the previous calls were in flight
// (group commit, see group.go), through rueidis (EVALSHA, loaded again on
// NOSCRIPT). Every call has a deadline and goes through a circuit breaker;
// on failure the failure mode decides.
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
	wg           sync.WaitGroup // workers, connect
	g            grouper        // the queue of the group calls
	m            redisMetrics
}

// rclient is the connected clients, one per dispatcher, each with a single
// connection: a dispatcher's calls go one at a time on its own connection,
// which rueidis then writes and reads on the dispatcher's goroutine, with no
// hand-off to pipelining goroutines. Client is the first.
type rclient struct {
	rueidis.Client
	pipes []rueidis.Client
}

// newClients connects n clients of one connection each.
func newClients(opt rueidis.ClientOption, n int) (*rclient, error) {
	opt.PipelineMultiplex = -1 // 2^0 connections
	c := &rclient{}
	for range n {
		p, err := rueidis.NewClient(opt)
		if err != nil {
			c.close()
			return nil, err
		}
		c.pipes = append(c.pipes, p)
	}
	c.Client = c.pipes[0]
	return c, nil
}

func (c *rclient) close() {
	for _, p := range c.pipes {
		p.Close()
	}
}

type job struct {
	e    *entry
	done func(Decision)
}

type redisMetrics struct {
	calls, roundTrips, errors, downs, fallbacks, queueFull, batchSlots, batchWasted *metrics.Counter
	groupSize                                                                       *metrics.Histogram
}

// NewRedis connects to o.Redis and starts the ReserveAsync workers. An
// unreachable Redis is not an error: the limiter starts in the failure mode
// and keeps trying to connect. A malformed URL is (ErrRedisURL), and so is
// a database that the Redis reached refuses. New waits for at most 1 s for
// the first connection.
func NewRedis(o Options) (*Redis, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	opt, err := redisurl.Options(o.Redis)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse %w: %w", ErrInvalid, ErrRedisURL, err) // not the URL: its password
	}
	opt.Dialer.Timeout = time.Second // whatever the URL's dial_timeout: New waits no longer
	// A silent Redis would otherwise hold a pipelined connection for 10 s;
	// calls have their own deadline, this bounds the connection's.
	opt.ConnWriteTimeout = time.Second
	opt.MaxFlushDelay = 20 * time.Microsecond
	c, err := newClients(opt, defaultPipelines)
	if err != nil {
		if err := redisurl.DBRefused(opt, err); err != nil {
			return nil, fmt.Errorf("%w: %w: %w", ErrInvalid, ErrRedisURL, err)
		}
	}
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
		roundTrips:  set.GetOrCreateCounter("sipedge_ratelimit_redis_round_trips_total"),
		groupSize:   set.GetOrCreateHistogram("sipedge_ratelimit_redis_group_size"),
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
	if err == nil {
		r.client.Store(c)
	} else {
		r.br.retryAt.Store(int64(r.now()) + r.br.coolDown)
		r.br.down.Store(true)
		r.m.downs.Inc()
		r.log.Warn("ratelimit: redis unavailable", "failure_mode", string(r.mode), "error", err)
		r.wg.Add(1)
		go r.connect(opt)
	}
	r.startGroups(defaultPipelines)
	r.wg.Add(o.Workers)
	for range o.Workers {
		go r.work()
	}
	return r, nil
}

// connect retries the first connection every cool-down until it succeeds.
// The breaker's next probe then finds the client. A Redis that came up
// refusing the URL's database is logged, once, as an error.
func (r *Redis) connect(opt rueidis.ClientOption) {
	defer r.wg.Done()
	t := time.NewTicker(time.Duration(max(r.br.coolDown, int64(100*time.Millisecond))))
	defer t.Stop()
	logged := false
	for {
		select {
		case <-r.quit:
			return
		case <-t.C:
		}
		c, err := newClients(opt, defaultPipelines)
		if err == nil {
			r.client.Store(c)
			return
		}
		if !logged {
			if err := redisurl.DBRefused(opt, err); err != nil {
				r.log.Error("ratelimit: redis refuses the URL's database", "failure_mode", string(r.mode), "error", err)
				logged = true
			}
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
	r.wg.Wait() // the workers' decisions in flight end within the deadline
	r.stopGroups()
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
		c.close()
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

// Peek returns the decision a reservation for k would get now, taking
// nothing: a dry run's view of the key. It reads the key's theoretical
// arrival time and Redis' clock (GET and TIME, not the script, which
// writes) within the deadline, and decides as the script would; a key
// known to be full is Over without asking, and a Redis that is down or
// fails gives the failure mode's decision, peeked as well. Slots this
// node holds from a batch are not counted. It counts nothing in the
// metrics nor the breaker, and blocks: never call it on a shard. The
// error is ctx's, when ctx ended first.
func (r *Redis) Peek(ctx context.Context, k Key) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	e := r.local.entry(k)
	now := int64(r.now())
	if now < e.overUntil.Load() {
		return Decision{Over: true, Source: SourceHeld}, nil
	}
	c := r.client.Load()
	if c == nil || r.br.open(now) {
		return r.peekFallback(e, now), nil
	}
	rctx, cancel := context.WithTimeout(ctx, r.deadline)
	defer cancel()
	res := c.DoMulti(rctx, c.B().Time().Build(), c.B().Get().Key(e.rkey[0]).Build())
	t, err := res[0].AsStrSlice()
	if err != nil || len(t) != 2 {
		return r.peekFallback(e, now), ctx.Err()
	}
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	usec, err2 := strconv.ParseInt(t[1], 10, 64)
	if err1 != nil || err2 != nil {
		return r.peekFallback(e, now), nil
	}
	redisNow := sec*1_000_000 + usec
	tat, err := res[1].AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		tat = redisNow
	case err != nil:
		return r.peekFallback(e, now), ctx.Err()
	}
	// The script's arithmetic, in µs (see script).
	p := e.p.Load()
	iv := (r.local.interval(e, p, now) + 999) / 1000
	d := max(tat, redisNow) - (p.burst-1)*iv - redisNow
	if d > p.maxWait/1000 {
		return Decision{Over: true, Source: SourceRedis}, nil
	}
	return Decision{Wait: time.Duration(max(d, 0)) * time.Microsecond, Source: SourceRedis}, nil
}

// peekFallback is fallback's decision, taking nothing and counting
// nothing.
func (r *Redis) peekFallback(e *entry, now int64) Decision {
	switch r.mode {
	case FailOpen:
		return Decision{Source: SourceOpen}
	case FailClosed:
		return Decision{Over: true, Source: SourceClosed}
	}
	return r.local.peek(e, now, SourceFallback)
}

func (r *Redis) decide(ctx context.Context, e *entry) (Decision, error) {
	now := int64(r.now())
	if d, ok := r.held(e, now); ok {
		return d, nil
	}
	if r.br.open(now) { // the dispatcher takes the probe, if it is due
		return r.fallback(e, now), nil
	}
	return r.call(ctx, e, now)
}

// call runs the script for e, in the next group call.
func (r *Redis) call(ctx context.Context, e *entry, now int64) (Decision, error) {
	p := e.p.Load()
	iv := r.local.interval(e, p, now)
	ivus := (iv + 999) / 1000
	n, batching := 1, r.batching(e, now)
	if batching {
		if n = e.blk.want(now, iv, r.batch); n > 1 {
			defer e.blk.answered(n)
		}
	}
	var v int64
	var err error
	switch {
	case iv != p.interval: // lowered by AIMD
		v, err = r.exec(ctx, e, nil, newScriptArgs(ivus, p.burst, p.maxWait/1000, n))
	case batching:
		args := p.batchArgs
		args[3] = strconv.Itoa(n)
		v, err = r.exec(ctx, e, nil, args)
	default: // the arguments are ready, and shared with other keys
		v, err = r.exec(ctx, e, p.args, scriptArgs{})
	}
	if errors.Is(err, errAbandoned) {
		return Decision{}, ctx.Err()
	}
	d, k := v>>5, v&31 // d·32 + k
	if err == nil && k > int64(n) {
		err = fmt.Errorf("ratelimit: unexpected script reply %d", v)
		r.m.errors.Inc()
		r.failed(int64(r.now()), err, false)
	}
	if err != nil {
		// The dispatcher counts a failed call in the breaker and its
		// decisions in the errors; a decision that expired in the queue
		// or got no answer by its deadline, refused by the breaker or
		// made after Close, was not sent.
		now = int64(r.now()) // the call took time: the wait counts from here
		return r.fallback(e, now), nil
	}
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
func (r *Redis) failed(now int64, err error, probe bool) {
	b := &r.br
	if b.down.Load() {
		if probe { // the probe failed: stay open for another cool-down
			b.retryAt.Store(now + b.coolDown)
			b.probing.Store(false)
		}
		// Else a call sent before the breaker opened ended late: the probe
		// in flight, if any, still decides.
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
func (r *Redis) succeeded(probe bool) {
	b := &r.br
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if probe && b.down.CompareAndSwap(true, false) {
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

// allow reports whether a call may go to Redis, and whether it is the
// probe: when open it lets through one probe per cool-down. Only the
// probe's outcome closes or reopens an open breaker: a stale failure of a
// call sent before it opened must not let a second probe go, nor keep the
// probe's success from closing it.
func (b *breaker) allow(now int64) (ok, probe bool) {
	if !b.down.Load() {
		return true, false
	}
	if now >= b.retryAt.Load() && b.probing.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
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
	// ahead is the slots being asked for, beyond each asker's own: with
	// the held ones, no more than the block can hold. (Concurrent
	// decisions on a key, in one group call or not, each ask for a block:
	// without the cap they would reserve slots only to drop them.)
	ahead int
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
// It is cut to what the block has room for, counting the slots already
// being asked for. When it is more than 1, call answered(n) once the
// reply's slots are put (or the call failed).
func (b *block) want(now, interval int64, limit int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size == 0 || now > b.last+interval {
		b.size = 1
	} else {
		b.size = min(2*b.size, limit)
	}
	room := len(b.slots) - (b.n - b.head) - b.ahead
	n := max(min(b.size, room+1), 1)
	b.ahead += n - 1
	return n
}

// answered ends the asking for n slots that want started.
func (b *block) answered(n int) {
	b.mu.Lock()
	b.ahead -= n - 1
	b.mu.Unlock()
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
