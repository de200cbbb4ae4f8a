package lcr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/sipedge/sipedge/internal/redisurl"
	"github.com/sipedge/sipedge/route"
)

// Defaults of Options.
const (
	DefaultTimeout          = 2 * time.Second
	DefaultRedisDeadline    = 50 * time.Millisecond
	DefaultMaxInFlight      = 256
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 5 * time.Second
	DefaultLocalMaxEntries  = 100_000
)

// NoLocalTier, as Options.LocalTTL, turns the in-process tier off (any
// negative value does).
const NoLocalTier time.Duration = -1

// MaxResponseSize bounds the API's response body; a larger one is invalid.
const MaxResponseSize = 1 << 20

// clockTick is the resolution of the in-process tier's clock: an entry
// may outlive its lifetime by up to this much. Reading the system clock
// costs more than the rest of a hit, so the hit path reads a clock that a
// resolver goroutine advances every clockTick.
const clockTick = 5 * time.Millisecond

// maxCacheTTL caps a decision's lifetime, a century: as good as forever,
// and far enough from time.Duration's range that an expiry cannot wrap.
const maxCacheTTL = 100 * 365 * 24 * time.Hour

// sweepInterval is how often expired in-process entries are removed.
const sweepInterval = 10 * time.Second

var (
	// ErrInvalidOption is wrapped by New's errors about Options.
	ErrInvalidOption = errors.New("lcr: invalid option")
	// ErrRedisURL is wrapped, with ErrInvalidOption, by New's errors about
	// Options.RedisURL: a URL that does not parse, or a database that
	// Redis refuses (a Redis Cluster has only database 0).
	//lint:ignore ST1005 Redis is a name, written as its project writes it
	ErrRedisURL = errors.New("Redis URL")
	// ErrMetricsInUse: Options.Metrics already holds a Resolver's metrics.
	ErrMetricsInUse = errors.New("lcr: the metrics set already holds an LCR resolver's metrics")

	errOverloaded  = errors.New("too many lookups in flight")
	errBreakerOpen = errors.New("circuit breaker open")
)

// Options configure a Resolver. cmd/sipedge builds them from the lcr: and
// cache: sections of the configuration (lcr.cache names the cache: entry
// whose url is RedisURL and whose local_ttl_secs is LocalTTL, its 0 "none"
// being NoLocalTier here). The zero value is a valid static resolver with
// an empty table (every number: no route).
type Options struct {
	// APIURL is the routing API's URL (http or https); requests are POSTed
	// to it. "" selects the static table.
	APIURL string
	// Timeout bounds one API request, from dialling to the end of the body
	// (lcr.timeout_ms). 0 means DefaultTimeout.
	Timeout time.Duration
	// AuthHeader, when set, is sent as the Authorization header's value
	// (lcr.auth_header, e.g. "Bearer s3cret").
	AuthHeader string
	// CacheTTL is the cache lifetime of an answer without cache_ttl_secs
	// (lcr.cache_ttl_secs). 0 means such answers are not cached.
	CacheTTL time.Duration
	// KeyAttributes are the Request.Attributes names that are part of the
	// cache key (lcr.attributes): up to MaxAttributes, each a
	// ValidAttributeName. They are sorted, so the order in which they are
	// listed does not matter; a name a request lacks is keyed empty.
	KeyAttributes []string
	// FallbackGatewayGroup, when set, is the one route of the decision
	// given when the API fails (lcr.fallback_gateway_group). "" means the
	// decision is NoDecision.
	FallbackGatewayGroup string
	// Static is the table used when APIURL is "" (lcr.static_routes); nil
	// is an empty table.
	Static *StaticTable

	// LocalTTL caps the lifetime of an in-process entry (cache[].local_ttl_secs):
	// an entry lives min(LocalTTL, the decision's TTL). 0 means no cap;
	// NoLocalTier (any negative value) turns the in-process tier off.
	LocalTTL time.Duration
	// LocalMaxEntries bounds the in-process tier (0 means
	// DefaultLocalMaxEntries); past it, entries are evicted.
	LocalMaxEntries int
	// RedisURL, when set, is the fleet-wide tier (cache[].url: redis:// or
	// rediss://; a Redis Cluster's seed nodes as ?addr=host:port&addr=...).
	// The Resolver owns the client. If Redis cannot be reached at New, the
	// tier starts down and New keeps dialling in the background; if it
	// refuses the URL's database (a Cluster has only database 0), New fails
	// with ErrRedisURL.
	RedisURL string
	// Redis is an alternative to RedisURL: a client owned by the caller
	// (not closed by Close). At most one of the two may be set.
	Redis rueidis.Client
	// RedisDeadline bounds every Redis call. 0 means DefaultRedisDeadline.
	RedisDeadline time.Duration

	// MaxInFlight bounds the lookups in progress (a Redis read then, on a
	// miss, an API request). A lookup that would exceed it fails at once,
	// as kind "overloaded". 0 means DefaultMaxInFlight.
	MaxInFlight int
	// BreakerThreshold is the number of consecutive API failures that
	// opens the circuit breaker. 0 means DefaultBreakerThreshold.
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker fails lookups fast before
	// one trial request. 0 means DefaultBreakerCooldown.
	BreakerCooldown time.Duration

	// Quality, when set, gives the quality scores of a dialled number's
	// prefix (lcr.send_quality): each request carries them (Request.Quality)
	// as it leaves, on the lookup's goroutine, never a shard's. nil for a
	// number without a quality prefix.
	Quality func(dialedNumber string) *Quality

	// Metrics receives the resolver's metrics; nil means a private set. A
	// set holds the metrics of one Resolver only (New fails with
	// ErrMetricsInUse).
	Metrics *metrics.Set
	// Log receives API failures (at most one line a second), breaker and
	// Redis transitions; nil means slog.Default().
	Log *slog.Logger
}

// Resolver makes routing decisions: from the static table, or from the
// routing API through the in-process and Redis tiers. See the package
// documentation for which goroutine calls what. All methods are safe for
// concurrent use.
type Resolver struct {
	static   *StaticTable
	url      string
	timeout  time.Duration
	auth     string
	cacheTTL time.Duration
	localTTL time.Duration
	attrs    []string
	failure  Decision // the decision given when the API fails
	quality  func(dialedNumber string) *Quality

	transport *http.Transport
	client    *http.Client
	sem       chan struct{}
	br        breaker
	local     *localCache // nil: no in-process tier
	redis     *redisTier  // nil: no Redis tier
	m         resolverMetrics
	log       *slog.Logger
	failLog   logLimiter
	epoch     time.Time
	clock     atomic.Int64  // coarse now(), advanced every clockTick
	drops     atomic.Uint64 // DropLocal calls: a flight that saw one does not cache

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup // janitor, Redis dialler

	mu      sync.Mutex
	closed  bool
	flights map[string]*flight
	wg      sync.WaitGroup // flights
}

// flight is one lookup in progress for a cache key; lookups of the same key
// meanwhile join it.
type flight struct {
	waiters []func(Decision) // guarded by Resolver.mu
}

// New validates opts and returns a Resolver. With a RedisURL it dials Redis
// (for at most a second; if that fails the tier starts down and is dialled
// again in the background). Call Close to release it.
func New(opts Options) (*Resolver, error) {
	if opts.Timeout < 0 || opts.CacheTTL < 0 || opts.RedisDeadline < 0 || opts.BreakerCooldown < 0 {
		return nil, fmt.Errorf("%w: negative duration", ErrInvalidOption)
	}
	if opts.MaxInFlight < 0 || opts.BreakerThreshold < 0 || opts.LocalMaxEntries < 0 {
		return nil, fmt.Errorf("%w: negative count", ErrInvalidOption)
	}
	if opts.RedisURL != "" && opts.Redis != nil {
		return nil, fmt.Errorf("%w: both RedisURL and Redis are set", ErrInvalidOption)
	}
	if len(opts.KeyAttributes) > MaxAttributes {
		return nil, fmt.Errorf("%w: %d key attributes: at most %d", ErrInvalidOption, len(opts.KeyAttributes), MaxAttributes)
	}
	for _, name := range opts.KeyAttributes {
		if !ValidAttributeName(name) {
			return nil, fmt.Errorf("%w: key attribute %q: want 1 to %d letters, digits, '_', '-' or '.'", ErrInvalidOption, name, MaxAttributeName)
		}
	}
	if opts.APIURL != "" {
		u, err := url.Parse(opts.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: api_url %q is not an http or https URL", ErrInvalidOption, opts.APIURL)
		}
	}
	opts.Timeout = cmp0(opts.Timeout, DefaultTimeout)
	opts.RedisDeadline = cmp0(opts.RedisDeadline, DefaultRedisDeadline)
	opts.MaxInFlight = cmp0(opts.MaxInFlight, DefaultMaxInFlight)
	opts.BreakerThreshold = cmp0(opts.BreakerThreshold, DefaultBreakerThreshold)
	opts.BreakerCooldown = cmp0(opts.BreakerCooldown, DefaultBreakerCooldown)
	opts.LocalMaxEntries = cmp0(opts.LocalMaxEntries, DefaultLocalMaxEntries)
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if slices.Contains(opts.Metrics.ListMetricNames(), metricCacheMisses) {
		return nil, ErrMetricsInUse
	}
	attrs := slices.Clone(opts.KeyAttributes)
	slices.Sort(attrs)
	attrs = slices.Compact(attrs)

	r := &Resolver{
		static:   opts.Static,
		url:      opts.APIURL,
		timeout:  opts.Timeout,
		auth:     opts.AuthHeader,
		cacheTTL: opts.CacheTTL,
		localTTL: opts.LocalTTL,
		attrs:    attrs,
		quality:  opts.Quality,
		sem:      make(chan struct{}, opts.MaxInFlight),
		log:      opts.Log,
		epoch:    time.Now(),
		flights:  make(map[string]*flight),
	}
	r.failure = Decision{Source: route.SourceNone, NoDecision: true}
	if g := opts.FallbackGatewayGroup; g != "" {
		r.failure = Decision{Source: route.SourceFallback, Routes: []route.Route{{CarrierID: FallbackCarrierID, GatewayGroup: g}}}
	}
	r.br = breaker{threshold: opts.BreakerThreshold, cooldown: opts.BreakerCooldown, log: opts.Log, now: r.now}
	r.ctx, r.cancel = context.WithCancel(context.Background())

	if r.url != "" {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = opts.MaxInFlight
		tr.MaxIdleConnsPerHost = opts.MaxInFlight
		tr.ResponseHeaderTimeout = opts.Timeout
		r.transport = tr
		// A 3xx is an answer like any other non-2xx (docs/lcr-api.md): following it
		// would re-send the call, and the Authorization, to its Location
		// (as a GET without the body for 301-303) and cache that answer
		// as this key's decision.
		r.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
		if opts.LocalTTL >= 0 {
			r.local = newLocalCache(opts.LocalMaxEntries)
			r.bg.Add(1)
			go r.tick()
		}
		if opts.Redis != nil || opts.RedisURL != "" {
			r.redis = &redisTier{r: r, deadline: opts.RedisDeadline, client: opts.Redis}
			r.redis.up.Store(true)
		}
	}
	r.m = newResolverMetrics(opts.Metrics, r)
	if r.redis != nil && opts.RedisURL != "" {
		if err := r.dialRedis(opts.RedisURL); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (r *Resolver) dialRedis(rawURL string) error {
	opt, err := redisurl.Options(rawURL)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %w: %w", ErrInvalidOption, ErrRedisURL, err)
	}
	r.redis.owned = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		if err := redisurl.DBRefused(opt, err); err != nil {
			return fmt.Errorf("%w: %w: %w", ErrInvalidOption, ErrRedisURL, err)
		}
		r.redis.failed(err)
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			r.redis.connectLater(r.ctx, opt)
		}()
		return nil
	}
	r.redis.mu.Lock()
	r.redis.client = c
	r.redis.mu.Unlock()
	return nil
}

// now is the resolver's monotonic clock: nanoseconds since New.
func (r *Resolver) now() int64 { return int64(time.Since(r.epoch)) }

// coarseNow is now() as of the last clockTick: the in-process tier's clock.
func (r *Resolver) coarseNow() int64 { return r.clock.Load() }

// tick advances the in-process tier's clock and sweeps its expired entries.
func (r *Resolver) tick() {
	defer r.bg.Done()
	t := time.NewTicker(clockTick)
	defer t.Stop()
	lastSweep := r.now()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			now := r.now()
			r.clock.Store(now)
			if now-lastSweep >= int64(sweepInterval) {
				r.local.sweep(now)
				lastSweep = now
			}
		}
	}
}

// AppendKey appends the cache key of a lookup to dst and returns it:
// "trunk_group:dialed_number", then, with KeyAttributes, ":name=value,..." in
// the names' sorted order (an absent attribute has an empty value). It does
// not allocate when dst has the room. Any goroutine may call it.
func (r *Resolver) AppendKey(dst []byte, trunkGroup, dialedNumber string, attributes map[string]string) []byte {
	dst = append(dst, trunkGroup...)
	dst = append(dst, ':')
	dst = append(dst, dialedNumber...)
	for i, name := range r.attrs {
		if i == 0 {
			dst = append(dst, ':')
		} else {
			dst = append(dst, ',')
		}
		dst = append(dst, name...)
		dst = append(dst, '=')
		dst = append(dst, attributes[name]...)
	}
	return dst
}

// LookupCached returns the in-process tier's decision under key (made by
// AppendKey) if there is an unexpired one. It never blocks on I/O and does
// not allocate: a shard calls it on its own goroutine and, on a miss, calls
// Lookup. It always misses in static mode and without the in-process tier.
func (r *Resolver) LookupCached(key []byte) (Decision, bool) {
	if r.local == nil {
		return Decision{}, false
	}
	e := r.local.getBytes(key, r.coarseNow())
	if e == nil {
		return Decision{}, false
	}
	r.m.localHits.Inc()
	return e.d, true
}

// Lookup makes the decision for req and passes it to done, exactly once.
// Lookup itself never blocks on I/O.
//
// done is called synchronously, before Lookup returns, when no I/O is
// needed: in static mode, on an in-process hit, and with the failure
// decision when MaxInFlight lookups are already in progress, when the
// circuit breaker is open and there is no Redis tier to try, and after
// Close.
// Otherwise it is called later from a resolver goroutine, and must not
// block: a shard posts the decision back to its own event loop.
//
// Lookups of a key whose lookup is in progress join it: one Redis read, one
// API request, and every done gets the same Decision (the request sent is
// the first lookup's). req is read during Lookup and, for the first
// lookup of a key, until done is called: the caller must not modify it
// meanwhile; the resolver never does. Version 0 is sent as APIVersion.
func (r *Resolver) Lookup(req *Request, done func(Decision)) {
	if r.url == "" {
		routes, _ := r.static.Lookup(req.DialedNumber)
		done(Decision{Routes: routes, Source: route.SourceStatic})
		return
	}
	var buf [128]byte
	kb := r.AppendKey(buf[:0], req.Source.TrunkGroup, req.DialedNumber, req.Attributes)
	if d, ok := r.LookupCached(kb); ok {
		done(d)
		return
	}
	key := string(kb)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.deliver(r.failure, done)
		return
	}
	if f := r.flights[key]; f != nil {
		f.waiters = append(f.waiters, done)
		r.mu.Unlock()
		r.m.coalesced.Inc()
		return
	}
	// A flight for the key may have ended since the cache missed above: it
	// caches its answer before it ends (fly), so look again, or a hot key
	// would send a second request.
	if d, ok := r.LookupCached(kb); ok {
		r.mu.Unlock()
		done(d)
		return
	}
	if r.redis == nil && r.br.failingFast() {
		r.mu.Unlock()
		r.m.misses.Inc()
		r.deliver(r.fail(failBreakerOpen, errBreakerOpen, req, 0, nil), done)
		return
	}
	select {
	case r.sem <- struct{}{}:
	default:
		r.mu.Unlock()
		r.deliver(r.fail(failOverloaded, errOverloaded, req, 0, nil), done)
		return
	}
	f := &flight{waiters: []func(Decision){done}}
	r.flights[key] = f
	r.wg.Add(1)
	r.mu.Unlock()
	go r.fly(key, req, f)
}

// fly resolves one key: Redis, then the API. It caches the answer in
// process before it ends the flight, so that no lookup in between finds
// neither, and stores it in Redis after the waiters have their decision.
func (r *Resolver) fly(key string, req *Request, f *flight) {
	defer r.wg.Done()
	drops := r.drops.Load()
	d, body := r.resolve(key, req)
	// A drop (DropLocal) while the flight ran: what it read may be what
	// was dropped, so it caches nothing.
	fresh := func() bool { return r.drops.Load() == drops }
	if r.local != nil && d.Source == route.SourceLCR && d.TTL > 0 && fresh() {
		life := d.TTL
		if r.localTTL > 0 && r.localTTL < life {
			life = r.localTTL
		}
		now := r.coarseNow()
		r.local.put(key, d, now+int64(life), now)
		if !fresh() {
			r.local.remove(key)
		}
	}
	<-r.sem
	r.mu.Lock()
	delete(r.flights, key)
	waiters := f.waiters
	f.waiters = nil
	r.mu.Unlock()
	for _, done := range waiters {
		r.deliver(d, done)
	}
	if body != nil && fresh() {
		r.redis.store(r.ctx, key, body, d.TTL)
	}
}

func (r *Resolver) deliver(d Decision, done func(Decision)) {
	switch {
	case d.Source == route.SourceFallback:
		r.m.fallbacks.Inc()
	case d.NoDecision:
		r.m.noDecisions.Inc()
	}
	done(d)
}

// resolve returns the decision for key and, when it is to be stored in
// Redis, the API's response body.
func (r *Resolver) resolve(key string, req *Request) (Decision, []byte) {
	if r.redis != nil {
		if body, ttl, ok := r.redis.lookup(r.ctx, key); ok {
			var resp Response
			err := unmarshalResponse(body, &resp)
			if err == nil {
				r.m.redisHits.Inc()
				return Decision{Routes: resp.Routes, Reject: resp.Reject, Source: route.SourceLCR, TTL: ttl}, nil
			}
			r.log.Warn("lcr: ignoring an invalid decision in Redis", "key", RedisKeyPrefix+key, "err", err)
		}
	}
	r.m.misses.Inc()
	ok, trial := r.br.allow()
	if !ok {
		return r.fail(failBreakerOpen, errBreakerOpen, req, 0, nil), nil
	}
	resp, body, status, kind, err := r.call(req)
	if kind == failClosed {
		return r.failure, nil
	}
	r.br.record(kind == failNone, trial)
	if kind != failNone {
		return r.fail(kind, err, req, status, body), nil
	}
	ttl := r.cacheTTL
	if resp.CacheTTLSecs != nil {
		ttl = time.Duration(min(int64(*resp.CacheTTLSecs), int64(maxCacheTTL/time.Second))) * time.Second
	}
	d := Decision{Routes: resp.Routes, Reject: resp.Reject, Source: route.SourceLCR, TTL: ttl}
	if ttl <= 0 || r.redis == nil {
		body = nil
	}
	return d, body
}

// unmarshalResponse reads an API answer kept in Redis, which must be
// valid still (a node of another version may have stored it).
func unmarshalResponse(body []byte, resp *Response) error {
	if err := json.Unmarshal(body, resp); err != nil {
		return err
	}
	return resp.Validate()
}

// fail counts and logs an API failure and returns the failure decision.
func (r *Resolver) fail(kind failKind, err error, req *Request, status int, body []byte) Decision {
	if c := r.m.failures[kind]; c != nil {
		c.Inc()
	}
	if kind != failBreakerOpen && kind != failClosed {
		if ok, suppressed := r.failLog.allow(r.now()); ok {
			msg := "lcr: routing API failed"
			if kind == failInvalid {
				msg = "lcr: invalid routing API response, treated as an API failure"
			}
			attrs := []any{"kind", failKindNames[kind], "err", err, "url", r.url, "call_id", req.CallID,
				"decision", r.failure.Source.String()}
			if status != 0 {
				attrs = append(attrs, "status", status)
			}
			if len(body) > 0 {
				attrs = append(attrs, "body", string(body[:min(len(body), 256)]))
			}
			if suppressed > 0 {
				attrs = append(attrs, "suppressed", suppressed)
			}
			r.log.Warn(msg, attrs...)
		}
	}
	return r.failure
}

// call POSTs req to the API and returns its validated response and body,
// or why it failed.
func (r *Resolver) call(req *Request) (*Response, []byte, int, failKind, error) {
	q := *req
	if q.Version == 0 {
		q.Version = APIVersion
	}
	if r.quality != nil {
		// The scores as of now, not as of the call that began the flight.
		q.Quality = r.quality(q.DialedNumber)
	}
	payload, err := json.Marshal(&q)
	if err != nil {
		return nil, nil, 0, failTransport, fmt.Errorf("cannot encode the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(payload))
	if err != nil {
		return nil, nil, 0, failTransport, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "sipedge-lcr")
	if r.auth != "" {
		hreq.Header.Set("Authorization", r.auth)
	}
	start := time.Now()
	resp, err := r.client.Do(hreq)
	if err != nil {
		r.m.apiDuration.UpdateDuration(start)
		return nil, nil, 0, r.classify(ctx, err), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	r.m.apiDuration.UpdateDuration(start)
	if err != nil {
		return nil, nil, resp.StatusCode, r.classify(ctx, err), fmt.Errorf("cannot read the response: %w", err)
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, body, resp.StatusCode, fail5xx, fmt.Errorf("status %d", resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, body, resp.StatusCode, failStatus, fmt.Errorf("status %d", resp.StatusCode)
	case len(body) > MaxResponseSize:
		return nil, nil, resp.StatusCode, failInvalid, fmt.Errorf("%w: body larger than %d bytes", ErrInvalidResponse, MaxResponseSize)
	}
	var out Response
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, body, resp.StatusCode, failInvalid, fmt.Errorf("%w: %w", ErrInvalidResponse, err)
	}
	if err := out.Validate(); err != nil {
		return nil, body, resp.StatusCode, failInvalid, err
	}
	return &out, body, resp.StatusCode, failNone, nil
}

func (r *Resolver) classify(ctx context.Context, err error) failKind {
	if r.ctx.Err() != nil {
		return failClosed
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return failTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return failTimeout
	}
	return failTransport
}

// Close stops the resolver: the flights in progress are cancelled and their
// done called (with the failure decision) before Close returns; later
// lookups in API mode get the failure decision at once. Redis is closed if
// the Resolver dialled it. Close is idempotent.
func (r *Resolver) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.bg.Wait()
	if r.redis != nil {
		r.redis.close()
	}
	if r.transport != nil {
		r.transport.CloseIdleConnections()
	}
}

// logLimiter lets one log line a second through and counts the others.
type logLimiter struct {
	mu         sync.Mutex
	next       int64
	suppressed int
}

func (l *logLimiter) allow(now int64) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now < l.next {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed = l.suppressed, 0
	l.next = now + int64(time.Second)
	return true, suppressed
}
