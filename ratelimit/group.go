package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit. A decision that needs Redis is queued; a few dispatcher
// goroutines (pipelines) take what is queued, up to maxGroup decisions, and
// send it as one script call. While the calls are in flight the next
// decisions queue up, and the next call carries them all: the group is what
// accumulated during the previous round trip, so Redis runs one script call
// per round trip instead of one per decision, and a lone decision on an idle
// limiter leaves at once (there is no timer).
//
// The caller blocks on its own pending (a pooled object with a buffered
// channel): no goroutine and, once the pool is warm, no allocation per
// decision; a call's allocations (its context, rueidis' command and reply)
// are shared by its group.
//
// Deadlines: each decision gets its own, the limiter's deadline from when it
// was queued. A call's deadline is the earliest of its members', so every
// member has its answer (or its failure) within its own deadline, also when
// it waited for an earlier call: the calls in flight when it was queued were
// sent earlier, so their deadlines are earlier. A member whose deadline
// passed while queued is failed without being sent. Only the dispatcher
// counts a failed call: in the breaker once per call, in the errors once
// per decision it carried, and before its members see their failure, so
// that a caller's next decision sees the breaker as the failure left it.
//
// The caller also keeps a deadline of its own, half the deadline later (a
// timer that comes with the pending), for when the client overruns the
// call's: rueidis can, reconnecting to a silent Redis (the clean-up of a
// failed handshake waits up to 1 s). The caller then gives up and the
// failure mode decides.

// maxGroup is the most decisions one script call carries.
const maxGroup = 64

// defaultPipelines is the number of dispatchers, hence of script calls in
// flight at once, each on its own connection. Measured with
// BenchmarkGCRARedis on 2 cores: 1 leaves Redis idle while the node handles
// a reply (a fifth fewer decisions/s); 3 is no better than 2, 4 worse
// (smaller groups).
const defaultPipelines = 2

var (
	errExpired  = errors.New("ratelimit: deadline passed before the call was sent")
	errDeadline = errors.New("ratelimit: no answer within the deadline")
	errClosed   = errors.New("ratelimit: limiter closed")
)

// errBreakerOpen is the dispatcher's answer when the breaker refused the
// call: the failure mode decides, and it is not a failure of Redis.
var errBreakerOpen = errors.New("ratelimit: circuit breaker open")

// States of a pending.
const (
	pendingQueued    uint32 = iota // queued or in a call
	pendingDone                    // the dispatcher answered: the caller owns it
	pendingAbandoned               // the caller gave up (ctx): the dispatcher owns it
)

// pending is one decision waiting for, or in, a group call.
type pending struct {
	e     *entry
	args  *scriptArgs // shared by keys with the same limit, or &own
	own   scriptArgs
	dl    time.Time // the limiter's deadline for this decision
	v     int64     // the script's reply for this decision, d·32 + k
	err   error
	state atomic.Uint32
	ch    chan struct{} // buffered 1: the answer is in v, err
	timer *time.Timer   // the caller's deadline, stopped when idle
}

var pendingPool = sync.Pool{New: func() any {
	p := &pending{ch: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	p.timer.Stop()
	return p
}}

func getPending() *pending { return pendingPool.Get().(*pending) }

func putPending(p *pending) {
	p.e, p.args, p.own, p.err = nil, nil, scriptArgs{}, nil
	p.state.Store(pendingQueued)
	pendingPool.Put(p)
}

// answer hands p its reply; the caller (or, if it gave up, the pool) owns
// p from here.
func (p *pending) answer(v int64, err error) {
	p.v, p.err = v, err
	if p.state.CompareAndSwap(pendingQueued, pendingDone) {
		p.ch <- struct{}{}
		return
	}
	putPending(p) // abandoned
}

// grouper is the queue of the dispatchers.
type grouper struct {
	mu     sync.Mutex
	q      []*pending // guarded by mu
	idle   int        // dispatchers waiting for wake; guarded by mu
	closed bool       // guarded by mu
	wake   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// startGroups starts the dispatchers.
func (r *Redis) startGroups(pipelines int) {
	g := &r.g
	g.q = make([]*pending, 0, maxGroup)
	g.wake = make(chan struct{}, pipelines) // at most one token per idle dispatcher
	g.stop = make(chan struct{})
	g.wg.Add(pipelines)
	for i := range pipelines {
		go r.dispatch(i)
	}
}

// stopGroups fails what is queued and stops the dispatchers, after the calls
// in flight ended (within the deadline). A decision queued after it fails at
// once.
func (r *Redis) stopGroups() {
	g := &r.g
	g.mu.Lock()
	g.closed = true
	q := g.q
	g.q = nil
	g.mu.Unlock()
	for _, p := range q {
		p.answer(0, errClosed)
	}
	close(g.stop)
	g.wg.Wait()
}

// enqueue queues p for the next group and wakes an idle dispatcher, if
// any; it reports false when the limiter is closed.
func (g *grouper) enqueue(p *pending) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.q = append(g.q, p)
	wake := g.idle > 0
	if wake {
		g.idle--
	}
	g.mu.Unlock()
	if wake {
		g.wake <- struct{}{} // never blocks: one slot per idle dispatcher
	}
	return true
}

// dispatch sends groups, on the i-th connection, until stopGroups.
func (r *Redis) dispatch(i int) {
	g := &r.g
	defer g.wg.Done()
	group := make([]*pending, 0, maxGroup)
	c := &groupCall{
		members: make([]*pending, 0, maxGroup),
		keys:    make([]string, 0, maxGroup),
		args:    make([]string, 0, (1+len(scriptArgs{}))*maxGroup),
		tuples:  make([]*scriptArgs, 0, maxGroup),
	}
	for {
		g.mu.Lock()
		if len(g.q) == 0 {
			g.idle++
			g.mu.Unlock()
			select {
			case <-g.wake:
				continue
			case <-g.stop:
				return
			}
		}
		if len(g.q) <= maxGroup { // take it all: swap the buffers
			group, g.q = g.q, group[:0]
		} else { // the oldest maxGroup; the rest waits for the next call
			group = append(group[:0], g.q[:maxGroup]...)
			n := copy(g.q, g.q[maxGroup:])
			clear(g.q[n:])
			g.q = g.q[:n]
		}
		g.mu.Unlock()
		if c.prepare(group, time.Now()) {
			r.send(c, i)
		}
		c.reset()
		clear(group)
	}
}

// groupCall is one script call's decisions and arguments, in buffers a
// dispatcher reuses. Members often share their arguments (keys with the
// same limit, a key twice): ARGV has each distinct tuple once, after an
// index per member into them.
type groupCall struct {
	members []*pending
	keys    []string      // KEYS, one per member
	args    []string      // ARGV: the members' tuple numbers (from 1), then the tuples
	tuples  []*scriptArgs // the distinct tuples
	dl      time.Time
}

// prepare takes the decisions of group still wanted at t: it drops those
// whose caller gave up and fails those whose deadline passed. It reports
// whether any is left. The call's deadline is the earliest of theirs.
func (c *groupCall) prepare(group []*pending, t time.Time) bool {
	for _, p := range group {
		switch {
		case p.state.Load() == pendingAbandoned:
			putPending(p) // take no slot for a caller that is gone
			continue
		case !t.Before(p.dl):
			p.answer(0, errExpired)
			continue
		}
		if len(c.members) == 0 || p.dl.Before(c.dl) {
			c.dl = p.dl
		}
		c.members = append(c.members, p)
		c.keys = append(c.keys, p.e.rkey[0])
		j := slices.Index(c.tuples, p.args) // same pointer: few, usually the first
		if j < 0 {
			j = len(c.tuples)
			c.tuples = append(c.tuples, p.args)
		}
		c.args = append(c.args, strconv.Itoa(j+1)) // < 100: no allocation
	}
	for _, a := range c.tuples {
		c.args = append(c.args, a[:]...)
	}
	return len(c.members) > 0
}

func (c *groupCall) reset() {
	clear(c.members)
	clear(c.keys)
	clear(c.args)
	clear(c.tuples)
	c.members, c.keys, c.args, c.tuples = c.members[:0], c.keys[:0], c.args[:0], c.tuples[:0]
}

// send runs the script once for c's decisions, in their order, on the i-th
// connection, through the breaker, and answers each.
func (r *Redis) send(c *groupCall, i int) {
	now := int64(r.now())
	ok, probe := r.br.allow(now)
	if !ok { // open: another call is the probe
		r.answerAll(c.members, errBreakerOpen)
		return
	}
	cl := r.client.Load()
	if cl == nil {
		r.failed(now, errNotConnected, probe)
		r.answerAll(c.members, errNotConnected)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), c.dl)
	res := r.script.Exec(ctx, cl.pipes[i%len(cl.pipes)], c.keys, c.args)
	cancel()
	// calls and errors count decisions, as when a call carried one.
	r.m.roundTrips.Inc()
	r.m.calls.Add(len(c.members))
	r.m.groupSize.Update(float64(len(c.members)))
	vs, err := res.ToArray()
	if err == nil && len(vs) != len(c.members) {
		err = fmt.Errorf("ratelimit: script replied %d results for %d decisions", len(vs), len(c.members))
	}
	if err != nil {
		r.m.errors.Add(len(c.members))
		r.failed(int64(r.now()), err, probe)
		r.answerAll(c.members, err)
		return
	}
	r.succeeded(probe)
	for i, p := range c.members {
		p.answer(vs[i].AsInt64())
	}
}

func (r *Redis) answerAll(ps []*pending, err error) {
	for _, p := range ps {
		p.answer(0, err)
	}
}

// errAbandoned is exec's error when ctx ended first.
var errAbandoned = errors.New("ratelimit: the caller gave up")

// exec queues one decision and waits for its reply, d·32 + k, or its
// failure, for at most the deadline. The script's arguments are shared, or
// else own. The error is errAbandoned when ctx ended first (the decision
// may still take its slot in Redis).
func (r *Redis) exec(ctx context.Context, e *entry, shared *scriptArgs, own scriptArgs) (int64, error) {
	p := getPending()
	p.e, p.args = e, shared
	if shared == nil {
		p.own = own
		p.args = &p.own
	}
	p.dl = time.Now().Add(r.deadline)
	if !r.g.enqueue(p) {
		putPending(p)
		return 0, errClosed
	}
	p.timer.Reset(r.deadline + r.deadline/2) // the call's ends by r.deadline
	var gaveUp error
	select {
	case <-p.ch:
	case <-p.timer.C:
		gaveUp = errDeadline
	case <-ctx.Done(): // nil, never ready, for context.Background()
		gaveUp = errAbandoned
	}
	p.timer.Stop()
	if gaveUp != nil {
		if p.state.CompareAndSwap(pendingQueued, pendingAbandoned) {
			return 0, gaveUp // the dispatcher recycles p
		}
		<-p.ch // answered meanwhile: use it
	}
	v, err := p.v, p.err
	putPending(p)
	return v, err
}
