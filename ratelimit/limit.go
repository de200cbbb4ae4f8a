package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// DefaultMargin stretches the interval between slots by 15 %
// (docs/design/cps.md 3.2): it
// absorbs the jitter between our dial and the carrier's meter.
const DefaultMargin = 1.15

// ErrInvalid is wrapped by every configuration error the package returns.
var ErrInvalid = errors.New("ratelimit: invalid configuration")

// ErrRedisURL is wrapped, with ErrInvalid, by New's errors about
// Config.Redis: a URL that does not parse, or a database that Redis
// refuses (a Redis Cluster has only database 0).
var ErrRedisURL = errors.New("redis URL")

// Limit is the pacing of one key (a carrier account, a trunk).
type Limit struct {
	// Rate is the calls per second the key allows across the whole fleet.
	Rate float64
	// Burst is the number of calls that may leave at the same instant
	// after an idle period; 0 means 1 (strict pacing, docs/design/cps.md
	// 3.3). At most an hour of calls at Rate: a larger burst is refused.
	Burst int
	// Margin stretches the interval between slots: interval =
	// 1/Rate × Margin. 0 means DefaultMargin; it must be at least 1.
	Margin float64
	// MaxWait is the longest wait a reservation may be given; a slot
	// further out is refused (Decision.Over) without being taken. 0 means
	// go now or not at all.
	MaxWait time.Duration
}

// params is a validated Limit, in the units the decision path uses.
// Immutable once published.
type params struct {
	rate     float64 // configured fleet rate, calls per second
	interval int64   // ns between slots at the fleet rate, margin applied
	burst    int64   // >= 1
	maxWait  int64   // ns

	// The Redis script's arguments at the configured rate: for one slot
	// (shared by the keys of a Local with the same, see Local.Register),
	// and for a block of up to maxBatch slots (the count to be set).
	args      *scriptArgs
	batchArgs scriptArgs
}

// scriptArgs is a decision's arguments for the Redis script: T, τ and max
// wait in µs, the slots wanted, and the key's expiry in ms.
type scriptArgs [5]string

// newScriptArgs returns the script's arguments for up to n slots. The
// expiry is 1 s more than the furthest a grant can move tat past the
// script's now (max wait + τ + n·T), so that the key outlives its tat by
// at least 1 s.
func newScriptArgs(ivus, burst, maxWaitUS int64, n int) scriptArgs {
	tau := (burst - 1) * ivus
	return scriptArgs{
		strconv.FormatInt(ivus, 10),
		strconv.FormatInt(tau, 10),
		strconv.FormatInt(maxWaitUS, 10),
		strconv.Itoa(n),
		strconv.FormatInt((maxWaitUS+tau+int64(n)*ivus+999)/1000+1000, 10),
	}
}

// Validate returns the error Register would return for lim, registering
// nothing: a configuration checks its limits with it before they are
// registered.
func (lim Limit) Validate() error {
	_, err := lim.params()
	return err
}

func (lim Limit) params() (*params, error) {
	if !(lim.Rate > 0) || math.IsInf(lim.Rate, 0) {
		return nil, fmt.Errorf("%w: rate %v: want a positive number of calls per second", ErrInvalid, lim.Rate)
	}
	if lim.Burst < 0 {
		return nil, fmt.Errorf("%w: burst %d: want 0 or more", ErrInvalid, lim.Burst)
	}
	margin := lim.Margin
	if margin == 0 {
		margin = DefaultMargin
	}
	if !(margin >= 1) || math.IsInf(margin, 0) {
		return nil, fmt.Errorf("%w: margin %v: want at least 1", ErrInvalid, lim.Margin)
	}
	if lim.MaxWait < 0 {
		return nil, fmt.Errorf("%w: max wait %v: want 0 or more", ErrInvalid, lim.MaxWait)
	}
	iv := math.Ceil(float64(time.Second) / lim.Rate * margin)
	if iv > float64(time.Hour) {
		return nil, fmt.Errorf("%w: rate %v: one call an hour or more", ErrInvalid, lim.Rate)
	}
	// The tolerance τ = (burst-1)·T must stay far from the limits of the
	// nanoseconds here (times the AIMD floor's 10 and the nodes) and of the
	// script's exact integers (d·32 + k with d down to -τ µs); past them
	// an idle key would be Over. An hour of calls at once is no burst.
	if float64(max(lim.Burst, 1)-1)*max(iv, 1000) > float64(time.Hour) {
		return nil, fmt.Errorf("%w: burst %d at rate %v: more than an hour of calls at once", ErrInvalid, lim.Burst, lim.Rate)
	}
	p := &params{
		rate:     lim.Rate,
		interval: max(int64(iv), 1000), // 1 µs: the Redis script's resolution
		burst:    int64(max(lim.Burst, 1)),
		maxWait:  int64(lim.MaxWait),
	}
	ivus := (p.interval + 999) / 1000
	args := newScriptArgs(ivus, p.burst, p.maxWait/1000, 1)
	p.args = &args
	p.batchArgs = newScriptArgs(ivus, p.burst, p.maxWait/1000, maxBatch)
	return p, nil
}

// Key identifies a registered key. Keys are small dense integers handed out
// by Register, so a decision indexes a slice instead of hashing a string.
type Key uint32

// Source says who made a Decision.
type Source uint8

// Sources of a Decision.
const (
	SourceLocal    Source = iota // the in-process limiter (no Redis configured)
	SourceRedis                  // the Redis script
	SourceHeld                   // from an earlier Redis reply: a batched slot, or Over while the key is known full
	SourceFallback               // Redis failed: the in-process limiter at rate / nodes
	SourceOpen                   // Redis failed, failure_mode open: allowed
	SourceClosed                 // Redis failed, failure_mode closed: refused
)

var sourceNames = [...]string{"local", "redis", "held", "fallback", "open", "closed"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("Source(%d)", s)
}

// Decision is the answer to a reservation.
type Decision struct {
	// Wait is how long to hold the call before dialing it; 0 means now.
	// For a Redis decision it counts from when the reply arrived.
	Wait time.Duration
	// Over reports that no slot was free within MaxWait (or that Redis
	// failed in failure_mode closed). No slot was taken: do not dial.
	Over bool
	// Source says who decided.
	Source Source
}

// AIMD tunes how a key's effective rate follows the carrier's real limit:
// Backoff multiplies the effective rate by Decrease (not below Floor ×
// the configured rate, and at most once per Hold, since the calls already
// in flight when the first reject arrives are rejected too); it then grows
// back by Increase × the configured rate per second until it reaches the
// configured rate again.
type AIMD struct {
	Decrease float64       // default 0.7
	Increase float64       // fraction of the configured rate per second; default 0.05
	Floor    float64       // fraction of the configured rate; default 0.1
	Hold     time.Duration // default 1 s
}

func (a *AIMD) defaults() error {
	orDefault(&a.Decrease, 0.7)
	orDefault(&a.Increase, 0.05)
	orDefault(&a.Floor, 0.1)
	orDefault(&a.Hold, time.Second)
	if !(a.Decrease > 0 && a.Decrease < 1) || !(a.Floor > 0 && a.Floor <= 1) || !(a.Increase > 0) || a.Hold < 0 {
		return fmt.Errorf("%w: aimd %+v: want 0 < decrease < 1, 0 < floor <= 1, increase > 0", ErrInvalid, *a)
	}
	return nil
}

// aimdState is a key's state after its last decrease. Immutable once
// published; a nil state means the key runs at its configured rate.
type aimdState struct {
	factor float64 // effective / configured rate, right after the decrease
	at     int64   // when the decrease happened, ns on the limiter clock
}

// factor returns the effective / configured rate at now.
func (a *AIMD) factor(s *aimdState, now int64) float64 {
	if s == nil {
		return 1
	}
	return min(1, s.factor+a.Increase*float64(now-s.at)/float64(time.Second))
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
