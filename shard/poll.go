package shard

import "time"

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
// nothing, or after maxPoll, so that its TCP connections and gnet's own
// work (registrations, closes) wait no longer than that.

// maxPoll bounds a stretch of polling before the loop returns to gnet.
const maxPoll = 10 * time.Millisecond

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
	sh.polling.Store(true)
	for start := now; now-start < maxPoll; {
		time.Sleep(every)
		sh.m.batchIntervals.Inc()
		before := sh.received
		sh.run()
		for _, s := range sh.udpSockets {
			sh.drainUDP(s.fd, s.listener)
		}
		sh.flushUDP()
		now = sh.Now()
		if sh.received == before {
			break
		}
	}
	sh.lastUDP = now
	sh.polling.Store(false)
	sh.run() // what other loops pushed without waking this one
	sh.flushUDP()
}
