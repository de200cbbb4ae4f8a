package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Prober sends one OPTIONS probe to a member. The owner implements it (the
// shard runtime sends OPTIONS as an ordinary non-INVITE client transaction);
// this package does not know how.
//
// Probe is called from the registry's probe loop and must not block: start
// the transaction and return. done must be called exactly once, from any
// goroutine, within about timeout; a probe whose done has not come after
// twice the timeout counts as failed and a late done is ignored.
type Prober interface {
	Probe(m Member, timeout time.Duration, done func(ProbeResult))
}

// ProbeResult is the outcome of a probe.
type ProbeResult struct {
	// Code is the final response's status code, 0 when there was none.
	Code int
	// RetryAfter is the response's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// RTT is the time from sending the request to the final response.
	RTT time.Duration
	// Err says why there was no response (timeout, transport error) when
	// Code is 0.
	Err error
}

var errProbeLost = errors.New("health: the prober never reported the probe")

// probeCall is one probe in flight.
type probeCall struct {
	st      *state
	start   time.Duration
	timeout time.Duration
	fired   atomic.Bool
}

// probeLoop probes the members of probed groups, expires cooldowns, brings
// down members of unprobed groups back half-open after passive.down_secs
// and logs panics. It wakes when a probe is due, at least every second, and
// when the groups change.
func (r *Registry) probeLoop() {
	defer r.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(max(r.tick(r.now()), time.Millisecond))
		select {
		case <-timer.C:
		case <-r.wake:
		case <-r.ctx.Done():
			return
		}
	}
}

// tick is one round of the probe loop at now; it returns when the next is
// due. Only the probe loop calls it (or a test, the loop not started).
func (r *Registry) tick(now time.Duration) (wakeIn time.Duration) {
	wakeIn = time.Second
	for _, g := range r.snap.Load().order {
		set := g.settings
		probed := set.probe.Enabled && r.prober != nil
		for i := range g.members {
			st := g.members[i].st
			r.expireCooldown(st, now)
			if cd := st.cooldown.Load(); cd != 0 {
				wakeIn = min(wakeIn, time.Duration(cd)-now)
			}
			if !probed {
				if st.health() == stateDown {
					at := time.Duration(st.downAt.Load()) + set.passive.DownTime
					if at <= now {
						r.toHalfOpen(st, "passive.down_secs elapsed")
					} else {
						wakeIn = min(wakeIn, at-now)
					}
				}
				continue
			}
			if _, ok := r.tracked[st]; !ok || st.nextProbe > now+set.probe.Interval+set.probe.Jitter {
				r.tracked[st] = struct{}{}
				st.nextProbe = now // first probe at once; or the interval was shortened
			}
			if st.nextProbe <= now {
				r.startProbe(g, &g.members[i], now)
				st.nextProbe = now + set.probe.Interval + jitter(set.probe.Jitter)
			}
			wakeIn = min(wakeIn, st.nextProbe-now)
		}
		r.logPanic(g)
	}
	for st := range r.tracked {
		if st.removed.Load() {
			delete(r.tracked, st)
		}
	}
	return wakeIn
}

// logPanic logs a group's entering and leaving panic, as the probe loop
// sees it (at least every second).
func (r *Registry) logPanic(g *group) {
	p := g.panicking(&pickCtx{r: r})
	if g.gs.panicking.Swap(p) == p {
		return
	}
	if p {
		up := 0
		c := pickCtx{r: r}
		for i := range g.members {
			if g.members[i].st.up(&c) {
				up++
			}
		}
		r.log.Warn("gateway group in panic: choosing among members calls marked down too", "group", g.name,
			"up", up, "members", len(g.members), "panic_threshold_percent", g.panicPercent)
	} else {
		r.log.Info("gateway group out of panic", "group", g.name)
	}
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// startProbe hands a probe of m to the Prober unless one is still in flight.
func (r *Registry) startProbe(g *group, m *member, now time.Duration) {
	st := m.st
	if pc := st.inflight.Load(); pc != nil {
		if now-pc.start < 2*pc.timeout+100*time.Millisecond {
			return
		}
		r.finishProbe(pc, ProbeResult{Err: errProbeLost})
	}
	ap := st.addr.Load()
	if ap == nil {
		return // nothing to probe until the name resolves
	}
	pc := &probeCall{st: st, start: now, timeout: g.settings.probe.Timeout}
	st.inflight.Store(pc)
	mem := Member{Group: g.name, URI: m.uri, Addr: *ap, Transport: g.transport, Index: m.index, st: st}
	r.prober.Probe(mem, pc.timeout, func(res ProbeResult) { r.finishProbe(pc, res) })
}

// finishProbe accounts for a probe once.
func (r *Registry) finishProbe(pc *probeCall, res ProbeResult) {
	if !pc.fired.CompareAndSwap(false, true) {
		return
	}
	pc.st.inflight.CompareAndSwap(pc, nil)
	if !pc.st.removed.Load() {
		r.probeDone(pc.st, res)
	}
}

// probeDone applies a probe's result to the member's state.
func (r *Registry) probeDone(st *state, res ProbeResult) {
	p := st.settings.Load().probe
	st.lastCode.Store(int32(res.Code))
	if res.Code != 0 {
		st.lastRTT.Store(int64(res.RTT))
		st.rtt.Update(res.RTT.Seconds())
	}
	alive := res.Code != 0 && res.Code != 503
	if len(p.HealthyCodes) > 0 {
		alive = slices.Contains(p.HealthyCodes, res.Code)
	}
	switch {
	case alive:
		st.probeFails.Store(0)
		if st.health() == stateDown && int(st.probeOKs.Add(1)) >= p.SuccessThreshold {
			r.toHalfOpen(st, "probe")
		}
	case res.Code == 503 && res.RetryAfter > 0:
		// Overloaded, not dead: skip it for as long as it asks.
		r.setCooldown(st, res.RetryAfter, "probe")
	default:
		st.probeOKs.Store(0)
		n := int(st.probeFails.Add(1))
		if n < p.FailureThreshold {
			break
		}
		if w := st.word.Load(); w&healthMask == stateDown && w&flagProbeDown != 0 {
			break
		}
		var detail string
		if res.Code != 0 {
			detail = fmt.Sprintf("%d consecutive failed probes, last answered %d", n, res.Code)
		} else {
			detail = fmt.Sprintf("%d consecutive failed probes, last: %v", n, res.Err)
		}
		if st.health() == stateDown {
			r.confirmDown(st, detail) // calls took it down; probes agree
		} else {
			r.toDown(st, true, "probe", detail)
		}
	}
}

// resolverFailed reports whether err is a lookup that failed for the
// resolver's sake (a timeout, a server failure), not an answer that the
// name does not exist.
func resolverFailed(err error) bool {
	var de *net.DNSError
	if errors.As(err, &de) {
		return !de.IsNotFound && (de.IsTimeout || de.IsTemporary)
	}
	return errors.Is(err, context.DeadlineExceeded)
}

type resolution struct {
	addrs []netip.Addr
	err   error
}

// resolveLoop resolves the members' DNS names again every ResolveInterval.
func (r *Registry) resolveLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.resolveEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.resolveNow(r.ctx)
	}
}

// resolveNow resolves every member's DNS name once.
func (r *Registry) resolveNow(ctx context.Context) {
	byHost := map[string][]*state{}
	for _, g := range r.snap.Load().order {
		for i := range g.members {
			if st := g.members[i].st; st.host != "" {
				byHost[st.host] = append(byHost[st.host], st)
			}
		}
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	res := r.resolveAll(ctx, hosts)
	if ctx.Err() != nil {
		return // closing: a cancelled lookup says nothing about the name
	}
	for h, sts := range byHost {
		for _, st := range sts {
			r.applyResolved(st, res[h].addrs, res[h].err)
		}
	}
}

// resolveAll looks hosts up, 16 at a time, each within ResolveTimeout.
func (r *Registry) resolveAll(ctx context.Context, hosts []string) map[string]resolution {
	out := make(map[string]resolution, len(hosts))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, cancel := context.WithTimeout(ctx, r.resolveTimeout)
			addrs, err := r.resolve(c, h)
			cancel()
			mu.Lock()
			out[h] = resolution{addrs, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// applyResolved sets a member's address from a lookup. The current address
// is kept while the name still resolves to it; otherwise the first one is
// taken. Becoming unresolvable and resolving again are logged once each.
func (r *Registry) applyResolved(st *state, addrs []netip.Addr, err error) {
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil && st.addr.Load() != nil && resolverFailed(err) {
		// A timeout or a SERVFAIL is the resolver's, not the name's: keep
		// the address (its health is the probes' and the calls' to judge)
		// rather than skip the carrier until the next resolution.
		if st.stale.CompareAndSwap(false, true) && !st.removed.Load() {
			r.log.Warn("gateway member re-resolution failed, keeping its address", append(st.logAttrs(st.settings.Load()), "host", st.host, "error", err)...)
		}
		return
	}
	st.stale.Store(false)
	if err != nil {
		had := st.addr.Load() != nil
		st.setAddr(nil)
		if had {
			r.rebuildKnown()
		}
		if st.unresolvable.CompareAndSwap(false, true) && !st.removed.Load() {
			r.log.Warn("gateway member unresolvable", append(st.logAttrs(st.settings.Load()), "host", st.host, "error", err)...)
		}
		return
	}
	cur := st.addr.Load()
	if cur != nil && slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Unmap() == cur.Addr() }) {
		return
	}
	ap := netip.AddrPortFrom(addrs[0].Unmap(), st.port)
	st.setAddr(&ap)
	r.rebuildKnown()
	st.unresolvable.Store(false)
	if !st.removed.Load() {
		r.log.Info("gateway member resolved", append(st.logAttrs(st.settings.Load()), "host", st.host, "resolved", ap.String())...)
	}
}
