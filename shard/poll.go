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
// stays up after a batch: it sleeps one interval (Config.BatchInterval),
// takes everything its UDP sockets received meanwhile (drainUDP), runs
// the shard (hand-overs, posted work, timers), sends what that produced,
// and sleeps again, for as long as each interval brings messages. One
// wake per interval, not per burst; a message waits at most an interval
// in the socket, which the buffer (Config.SocketRecvBuffer) holds.
//
// While the loop polls, other loops hand it messages without waking it
// (wake returns early): it runs its rings every interval. It clears the
// flag before its last run, so a push that saw the flag set is drained
// by that run, and a later push sees it clear and wakes the loop.
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

// yieldEvery is how often a loop sleeping in nanosleep goes through the
// scheduler (sleep).
const yieldEvery = 5 * time.Millisecond

// poll runs after a datagram woke the loop: it polls while datagrams keep
// coming (see above).
func (sh *Shard) poll() {
	every := sh.srv.cfg.BatchInterval
	now := sh.Now()
	busy := now-sh.lastUDP < 2*every
	sh.lastUDP = now
	if every <= 0 || !busy {
		return
	}
	spare := runtime.GOMAXPROCS(0) > len(sh.srv.shards)
	sh.polling.Store(true)
	for start := now; now-start < sh.pollLimit() && !sh.Draining(); {
		sh.sleep(every, spare, now)
		sh.m.batchIntervals.Inc()
		before := sh.received
		sh.run()
		for _, s := range sh.udpSockets {
			sh.drainUDP(s.fd, s.listener)
		}
		sh.flush()
		now = sh.Now()
		if sh.received == before {
			break
		}
	}
	sh.lastUDP = now
	sh.polling.Store(false)
	sh.run() // what other loops pushed without waking this one
	sh.flush()
}

// pollLimit is how long the loop may poll before it returns to gnet, read
// each interval: a dial started meanwhile brings it down.
func (sh *Shard) pollLimit() time.Duration {
	if len(sh.conns) == 0 {
		return maxPollUDP
	}
	return maxPoll
}

// sleep waits one interval. With a P to spare (GOMAXPROCS above the
// shards, spare), the thread sleeps in nanosleep holding its P: nothing
// else happens, where time.Sleep parks the goroutine, has the thread look
// for other work, sleep in the runtime's netpoll, and wake another thread
// to spin on the way back (about 40 % more CPU per call under SIPp at
// 1,000 calls/s, docs/design/wire.md). A goroutine the scheduler has not
// seen for 10 ms is preempted and its P taken back at its next system
// call, each time putting sysmon back to waking every 20 us, so the loop
// goes through the scheduler every yieldEvery. Without a spare P, every
// P could be held sleeping, and the runtime's other goroutines (GC
// workers, the CDR writer, health probes) would run only where sysmon
// took one back: then time.Sleep.
func (sh *Shard) sleep(d time.Duration, spare bool, now time.Duration) {
	if !spare {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
	if now-sh.yielded >= yieldEvery {
		sh.yielded = now
		runtime.Gosched()
	}
}
