package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// FailureMode is what a Redis limiter decides when Redis does not answer
// in time or its circuit breaker is open.
type FailureMode string

// Failure modes.
const (
	// FailLocal falls back to the in-process limiter at rate / nodes:
	// each node paces its own share.
	FailLocal FailureMode = "local"
	// FailOpen allows every call (no pacing).
	FailOpen FailureMode = "open"
	// FailClosed refuses every call (Decision.Over).
	FailClosed FailureMode = "closed"
)

// Config is the operators' `ratelimit:` YAML section:
//
//	ratelimit: {redis: "redis://host:port", deadline_ms: 20, failure_mode: local, nodes: 1}
type Config struct {
	// Redis is the redis:// (or rediss://) URL of the shared Redis; empty
	// means in-process limiting only.
	Redis string `yaml:"redis"`
	// DeadlineMS bounds every Redis call, in milliseconds; default 20.
	DeadlineMS int `yaml:"deadline_ms"`
	// FailureMode applies when Redis fails; default local.
	FailureMode FailureMode `yaml:"failure_mode"`
	// Nodes is the number of sipedge nodes sharing the keys; in
	// failure_mode local each paces at rate / Nodes. Default 1.
	Nodes int `yaml:"nodes"`
}

// Options configures a limiter. The zero value of every field but Config
// is replaced by its default.
type Options struct {
	Config

	// Metrics receives the package's metrics (see the package doc); nil
	// means a private set.
	Metrics *metrics.Set
	// Logger logs the Redis up/down transitions; nil means slog.Default().
	Logger *slog.Logger
	// Now is the monotonic clock of AIMD, the breaker and the batch
	// slots; nil means time.Since(the limiter's creation).
	Now func() time.Duration

	// BreakerFailures is the number of consecutive failed Redis calls that
	// opens the circuit breaker; default 3.
	BreakerFailures int
	// BreakerCoolDown is how long the breaker stays open before one probe
	// call is let through; default 1 s.
	BreakerCoolDown time.Duration
	// Workers is the number of goroutines that run ReserveAsync's Redis
	// decisions; default 64. Concurrent decisions go in group calls.
	Workers int
	// Queue is the capacity of ReserveAsync's queue; when it is full the
	// failure mode decides at once. Default 1024.
	Queue int

	// Batch, above 1, lets a node reserve up to Batch consecutive slots of
	// a key per Redis round trip when the key's effective rate is at least
	// BatchMinRate, and hand them out locally. Off by default; see the
	// package doc for the accuracy trade-off. At most 16.
	Batch int
	// BatchMinRate is the rate, calls per second, from which Batch applies;
	// default 50.
	BatchMinRate float64

	AIMD AIMD
}

const maxBatch = 16

func (o *Options) defaults() error {
	orDefault(&o.DeadlineMS, 20)
	orDefault(&o.FailureMode, FailLocal)
	orDefault(&o.Nodes, 1)
	orDefault(&o.BreakerFailures, 3)
	orDefault(&o.BreakerCoolDown, time.Second)
	orDefault(&o.Workers, 64)
	orDefault(&o.Queue, 1024)
	orDefault(&o.BatchMinRate, 50)
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		start := time.Now()
		o.Now = func() time.Duration { return time.Since(start) }
	}
	switch {
	case o.FailureMode != FailLocal && o.FailureMode != FailOpen && o.FailureMode != FailClosed:
		return fmt.Errorf("%w: failure_mode %q: want local, open or closed", ErrInvalid, o.FailureMode)
	case o.DeadlineMS < 0:
		return fmt.Errorf("%w: deadline_ms %d: want a positive number", ErrInvalid, o.DeadlineMS)
	case o.Nodes < 0:
		return fmt.Errorf("%w: nodes %d: want a positive number", ErrInvalid, o.Nodes)
	case o.BreakerFailures < 0 || o.BreakerCoolDown < 0 || o.Workers < 0 || o.Queue < 0:
		return fmt.Errorf("%w: negative breaker, worker or queue setting", ErrInvalid)
	case o.Batch < 0 || o.Batch > maxBatch:
		return fmt.Errorf("%w: batch %d: want 0 to %d", ErrInvalid, o.Batch, maxBatch)
	}
	return o.AIMD.defaults()
}

// Limiter is what the rest of sipedge holds: a Redis limiter when
// Config.Redis is set, else an in-process one.
type Limiter struct {
	local *Local
	redis *Redis // nil: in-process only
	now   func() time.Duration
}

// New returns a Redis limiter when o.Redis is set, else an in-process one.
// It does not fail when Redis is unreachable: the failure mode applies until
// Redis answers.
func New(o Options) (*Limiter, error) {
	if o.Redis == "" {
		l, err := NewLocal(o)
		if err != nil {
			return nil, err
		}
		return &Limiter{local: l, now: l.now}, nil
	}
	r, err := NewRedis(o)
	if err != nil {
		return nil, err
	}
	return &Limiter{local: r.local, redis: r, now: r.now}, nil
}

// Redis returns the Redis limiter, or nil when limiting is in-process only.
func (l *Limiter) Redis() *Redis { return l.redis }

// Register returns the Key of name with lim as its limit; see
// (*Local).Register.
func (l *Limiter) Register(name string, lim Limit) (Key, error) {
	return l.local.Register(name, lim)
}

// Lookup returns the Key registered for name.
func (l *Limiter) Lookup(name string) (Key, bool) { return l.local.Lookup(name) }

// ReserveAsync is the shard's call: it never blocks. When it can decide
// without I/O (in-process mode, a batched slot, a key known to be full,
// Redis' breaker open, the worker queue full) it returns the decision and
// true, and done is not called. Otherwise it returns false and done is
// called exactly once, later, on a worker goroutine: done should post the
// decision back to the shard.
func (l *Limiter) ReserveAsync(k Key, done func(Decision)) (Decision, bool) {
	if l.redis == nil {
		return l.local.Reserve(k, l.now()), true
	}
	return l.redis.ReserveAsync(k, done)
}

// Reserve decides for k, blocking on Redis (for at most the deadline) when
// Redis is configured. Never call it on a shard. The error is ctx's, when
// ctx ended first; Redis failures are not errors: the failure mode decides.
func (l *Limiter) Reserve(ctx context.Context, k Key) (Decision, error) {
	if l.redis == nil {
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		return l.local.Reserve(k, l.now()), nil
	}
	return l.redis.Reserve(ctx, k)
}

// Peek returns the decision a reservation for k would get now, taking
// nothing: a dry run's view of the key (Local.Peek, Redis.Peek). In Redis
// mode it blocks for up to the deadline: never call it on a shard. The
// error is ctx's, when ctx ended first.
func (l *Limiter) Peek(ctx context.Context, k Key) (Decision, error) {
	if l.redis == nil {
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		return l.local.Peek(k, l.now()), nil
	}
	return l.redis.Peek(ctx, k)
}

// Backoff records a CPS reject from the carrier behind k; see
// (*Local).Backoff. It never blocks.
func (l *Limiter) Backoff(k Key) bool { return l.local.Backoff(k, l.now()) }

// Rate returns k's effective fleet rate, calls per second.
func (l *Limiter) Rate(k Key) float64 { return l.local.Rate(k, l.now()) }

// Close stops the Redis limiter's workers and closes its connections.
func (l *Limiter) Close() {
	if l.redis != nil {
		l.redis.Close()
	}
}
