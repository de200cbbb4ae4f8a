package shard

import "time"

// The ticker. A shard's timers advance when its loop runs (Shard.run); a
// loop that does not poll runs only when woken, so a goroutine of the
// server's own wakes every shard with timers pending each Config.Tick, and
// one with none about once a second, for its housekeeping (TCP timeouts,
// Handler.Tick).
//
// A polling loop runs every batch interval (poll.go) and needs no tick:
// its wake returns early. When every shard polls, which is the steady state
// under load, the ticker rests: it does not re-arm its timer, so its
// thread is not woken 200 times a second for nothing (each such wake of an
// idle thread costs tens of µs on a small box, docs/design/wire.md 9). A
// shard that stops polling kicks it (kickTicker), and the ticker ticks
// again from there, so a loop that leaves polling with timers pending is
// woken within a Tick, as before it polled.

// tick is the ticker's goroutine, from Start until stopTicker.
func (s *Server) tick() {
	t := time.NewTimer(s.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-s.tickStop:
			return
		case <-t.C:
		}
		s.ticks.Inc()
		// A kick already waiting is older than the flags read below: drop
		// it, or the ticker would tick once more for nothing after resting.
		select {
		case <-s.tickKick:
		default:
		}
		if s.tickShards() {
			// Every shard polls. A shard clearing its flag after
			// tickShards read it set kicks after clearing it; the kick
			// waits in the channel (buffered, 1) if it comes before this
			// select, so the ticker cannot rest past it. A kick that
			// finds the channel full is dropped: one is as good as two.
			select {
			case <-s.tickStop:
				return
			case <-s.tickKick:
			}
		}
		t.Reset(s.cfg.Tick)
	}
}

// tickShards does one tick: it wakes each shard that does not poll and has
// timers pending, or has not run for about a second. It reports whether
// every shard polls, when none needs the ticker. On the ticker's goroutine.
func (s *Server) tickShards() (allPolling bool) {
	// A shard with no timer pending sleeps: waking every loop every tick
	// for nothing costs an idle node a sizeable share of a core.
	idleWake := int(time.Second / s.cfg.Tick)
	allPolling = true
	for _, sh := range s.shards {
		if sh.polling.Load() {
			sh.idle = 0 // it runs every batch interval
			continue
		}
		allPolling = false
		if sh.pending.Load() > 0 || sh.idle >= idleWake {
			sh.idle = 0
			sh.wake()
			continue
		}
		sh.idle++
	}
	return allPolling
}

// kickTicker tells a resting ticker that a shard has stopped polling; safe
// from any goroutine, and cheap: it never blocks.
func (s *Server) kickTicker() {
	select {
	case s.tickKick <- struct{}{}:
	default: // a kick waits already
	}
}

// stopTicker ends the ticker's goroutine; it may be called more than once.
func (s *Server) stopTicker() { s.tickOnce.Do(func() { close(s.tickStop) }) }
