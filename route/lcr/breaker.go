package lcr

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Circuit breaker states, as the sipedge_lcr_breaker_state gauge shows them.
const (
	breakerClosed   = 0 // requests go to the API
	breakerOpen     = 1 // requests fail fast until the cool-down ends
	breakerHalfOpen = 2 // one trial request is in flight; the others fail fast
)

// breaker stops asking a dead API: after threshold consecutive failures it
// opens, and for cooldown every lookup fails at once (a dead API costs one
// timeout, not one per call). Then one trial request goes through: a
// success closes the breaker, a failure opens it for another cooldown.
type breaker struct {
	threshold int
	cooldown  time.Duration
	log       *slog.Logger
	now       func() int64

	mu        sync.Mutex
	state     atomic.Int32 // read lock-free by the gauge
	failures  int          // consecutive, while closed
	openUntil int64        // resolver clock
}

// allow reports whether a request may go to the API, and whether it is the
// half-open trial (whose outcome must be passed to record).
func (b *breaker) allow() (ok, trial bool) {
	if b.state.Load() == breakerClosed {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerClosed:
		return true, false
	case breakerOpen:
		if b.now() >= b.openUntil {
			b.state.Store(breakerHalfOpen)
			return true, true
		}
	}
	return false, false
}

// failingFast reports whether a request would be refused now, without
// taking the trial: open before the end of the cool-down, or half-open.
func (b *breaker) failingFast() bool {
	switch b.state.Load() {
	case breakerClosed:
		return false
	case breakerHalfOpen:
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state.Load() == breakerOpen && b.now() < b.openUntil
}

// record takes the outcome of a request that allow let through.
func (b *breaker) record(success, trial bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state := b.state.Load()
	if success {
		b.failures = 0
		if state != breakerClosed {
			b.state.Store(breakerClosed)
			b.log.Info("lcr: API circuit breaker closed, the API answers again")
		}
		return
	}
	switch {
	case state == breakerHalfOpen && trial:
		b.open("the trial request failed")
	case state == breakerClosed:
		b.failures++
		if b.failures >= b.threshold {
			b.open("consecutive failures")
		}
	}
	// A late failure of a request sent before the breaker opened changes
	// nothing.
}

func (b *breaker) open(why string) {
	b.failures = 0
	b.openUntil = b.now() + int64(b.cooldown)
	b.state.Store(breakerOpen)
	b.log.Warn("lcr: API circuit breaker open, failing lookups fast", "why", why,
		"threshold", b.threshold, "cooldown", b.cooldown)
}
