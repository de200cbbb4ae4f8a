package shard

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Polling under load. An idle loop sleeps in epoll_wait and each datagram
// wakes it: a trip through the kernel's and Go's schedulers that costs
// more than the SIP work on the message. At 1,000 calls/s a shard gets
// some 4,000 bursts of datagrams a second and was woken for each. Instead,
// when datagrams come faster than one every two batch intervals, the loop
// stays up after a batch: it sleeps one interval, takes everything its
// UDP sockets received meanwhile (drainUDP), runs the shard (hand-overs,
// posted work, timers), sends what that produced, and sleeps again, for
// as long as each interval brings messages. One wake per interval, not
// per burst; a message waits at most an interval in the socket, which the
// buffer (Config.SocketRecvBuffer) holds.
//
// The interval adapts to the load, between Config.BatchInterval and
// Config.BatchIntervalMax: a wake costs about as much as the SIP work on
// a few messages, so one that brought fewer than fewPerWake doubles the
// next interval, and one that brought more than manyPerWake halves it.
// At 1,000 calls/s a shard takes some 7 messages a millisecond: the
// interval settles at the longest, where a wake serves a few calls, not
// one (docs/design/wire.md 4). Under heavier load it comes back down, for
// the latency: the wakes are then few per call whatever the interval.
//
// While the loop polls, other loops hand it messages without waking it
// (wake returns early): it runs its rings every interval. It clears the
// flag before its last run, so a push that saw the flag set is drained
// by that run, and a later push sees it clear and wakes the loop. The
// ticker rests while every loop polls: the loop kicks it after clearing
// the flag (ticker.go).
//
// The loop goes back to gnet's epoll_wait when an interval brought
// nothing, when the server drains, or after maxPoll if it has TCP
// connections (open or being dialled: their bytes and gnet's work for
// them wait meanwhile), maxPollUDP if it has none. Each return costs a
// wake-up when the next datagram comes, and gnet's read of it four
// allocations: a loop serving only UDP polls for as long as the load
// lasts.
//
// How it sleeps is sleep's concern.

// maxPoll and maxPollUDP bound a stretch of polling before the loop
// returns to gnet.
const (
	maxPoll    = 10 * time.Millisecond
	maxPollUDP = time.Second
)

// fewPerWake and manyPerWake are the messages a wake should bring: fewer
// lengthen the interval, more shorten it. fewPerWake is a read batch.
const (
	fewPerWake  = udpBatch
	manyPerWake = 4 * udpBatch
)

// yieldWithin bounds how long a loop sleeping in nanosleep goes without
// passing through the scheduler (sleep): the runtime preempts a goroutine
// it has not seen for 10 ms.
const yieldWithin = 8 * time.Millisecond

// poll runs after a datagram woke the loop: it polls while datagrams keep
// coming (see above).
func (sh *Shard) poll() {
	base := sh.srv.cfg.BatchInterval
	now := sh.Now()
	busy := now-sh.lastUDP < 2*base
	sh.lastUDP = now
	if base <= 0 || !busy {
		return
	}
	spare := runtime.GOMAXPROCS(0) > len(sh.srv.shards)
	sh.polling.Store(true)
	for start := now; now-start < sh.pollLimit() && !sh.Draining(); {
		every := sh.interval()
		sh.sleep(every, spare)
		sh.m.batchIntervals.Inc()
		before := sh.received
		sh.run()
		for _, s := range sh.udpSockets {
			sh.drainUDP(s.fd, s.listener)
		}
		sh.flush()
		now = sh.Now()
		got := sh.received - before
		if got == 0 {
			break
		}
		sh.adapt(every, got)
	}
	sh.lastUDP = now
	sh.polling.Store(false)
	sh.run() // what other loops pushed without waking this one
	sh.flush()
	sh.srv.kickTicker() // it may rest while every loop polls (ticker.go)
}

// pollLimit is how long the loop may poll before it returns to gnet, read
// each interval: a dial started meanwhile brings it down.
func (sh *Shard) pollLimit() time.Duration {
	if len(sh.conns) == 0 {
		return maxPollUDP
	}
	return maxPoll
}

// interval is the next interval: the adapted one, within the bounds.
func (sh *Shard) interval() time.Duration {
	lo, hi := sh.srv.cfg.BatchInterval, max(sh.srv.cfg.BatchIntervalMax, sh.srv.cfg.BatchInterval)
	return min(max(sh.every, lo), hi)
}

// adapt sets the next interval from what the last one, every, brought.
func (sh *Shard) adapt(every time.Duration, got uint64) {
	switch {
	case got < fewPerWake:
		sh.every = 2 * every
	case got > manyPerWake:
		sh.every = every / 2
	default:
		sh.every = every
	}
}

// sleep waits one interval. With a P to spare (GOMAXPROCS above the
// shards, spare), the thread sleeps in nanosleep holding its P: nothing
// else happens, where time.Sleep parks the goroutine, has the thread look
// for other work, sleep in the runtime's netpoll, and wake another thread
// to spin on the way back (about 40 % more CPU per call under SIPp at
// 1,000 calls/s, docs/design/wire.md). A goroutine the scheduler has not
// seen for 10 ms is preempted and its P taken back at its next system
// call, each time putting sysmon back to waking every 20 us, so the loop
// goes through the scheduler before yieldWithin has passed. Runtime.Gosched
// starts a spinning thread when a P is idle, a wake of its own: not more
// often than that. Without a spare P, every
// P could be held sleeping, and the runtime's other goroutines (GC
// workers, the CDR writer, health probes) would run only where sysmon
// took one back: then time.Sleep.
func (sh *Shard) sleep(d time.Duration, spare bool) {
	if !spare {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
	if now := sh.Now(); now-sh.yielded+d > yieldWithin { // the next sleep would pass it
		sh.yielded = now
		runtime.Gosched()
	}
}
