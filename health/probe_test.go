package health

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// UAS behaviours.
const (
	uasAnswer200 int32 = iota
	uasSilent
	uasAnswer503 // with Retry-After: retryAfter
)

// uas is a UDP SIP UAS on loopback that answers OPTIONS as told.
type uas struct {
	conn       *net.UDPConn
	behaviour  atomic.Int32
	retryAfter atomic.Int32 // seconds, for uasAnswer503
	received   atomic.Int32
}

func newUAS(t *testing.T) *uas {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	u := &uas{conn: c}
	t.Cleanup(func() { c.Close() })
	go u.serve()
	return u
}

func (u *uas) addr() string { return u.conn.LocalAddr().String() }

func (u *uas) serve() {
	buf := make([]byte, 65535)
	var msg parser.Message
	var out []byte
	for {
		n, from, err := u.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if msg.Parse(buf[:n]) != nil || !msg.IsRequest() || msg.Method() != parser.MethodOptions {
			continue
		}
		u.received.Add(1)
		switch u.behaviour.Load() {
		case uasSilent:
			continue
		case uasAnswer503:
			out = parser.AppendResponse(out[:0], &msg, 503, "Service Unavailable", []byte("uas"))
			out = parser.AppendHeaderUint(out, "Retry-After", uint64(u.retryAfter.Load()))
		default:
			out = parser.AppendResponse(out[:0], &msg, 200, "OK", []byte("uas"))
			out = parser.AppendHeaderString(out, "Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS")
		}
		out = parser.AppendBody(out, "", nil)
		u.conn.WriteToUDPAddrPort(out, from)
	}
}

// udpProber sends real OPTIONS over UDP and matches replies by Call-ID.
type udpProber struct {
	conn    *net.UDPConn
	seq     atomic.Uint64
	mu      sync.Mutex
	pending map[string]*pendingProbe
}

type pendingProbe struct {
	sent  time.Time
	done  func(ProbeResult)
	timer *time.Timer
}

func newUDPProber(t *testing.T) *udpProber {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &udpProber{conn: c, pending: map[string]*pendingProbe{}}
	t.Cleanup(func() { c.Close() })
	go p.read()
	return p
}

func (p *udpProber) Probe(m Member, timeout time.Duration, done func(ProbeResult)) {
	n := p.seq.Add(1)
	callID := fmt.Sprintf("probe-%d@127.0.0.1", n)
	local := p.conn.LocalAddr().String()
	var b []byte
	b = parser.AppendRequestLine(b, "OPTIONS", []byte(m.URI))
	b = parser.AppendHeaderString(b, "Via", fmt.Sprintf("SIP/2.0/UDP %s;branch=z9hG4bK-probe-%d", local, n))
	b = parser.AppendHeaderString(b, "Max-Forwards", "70")
	b = parser.AppendHeaderString(b, "From", fmt.Sprintf("<sip:health@%s>;tag=p%d", local, n))
	b = parser.AppendHeaderString(b, "To", "<"+m.URI+">")
	b = parser.AppendHeaderString(b, "Call-ID", callID)
	b = parser.AppendHeaderString(b, "CSeq", "1 OPTIONS")
	b = parser.AppendBody(b, "", nil)

	pp := &pendingProbe{sent: time.Now(), done: done}
	p.mu.Lock()
	p.pending[callID] = pp
	pp.timer = time.AfterFunc(timeout, func() {
		if p.take(callID) != nil {
			done(ProbeResult{Err: errors.New("timeout")})
		}
	})
	p.mu.Unlock()
	if _, err := p.conn.WriteToUDPAddrPort(b, m.Addr); err != nil {
		if p.take(callID) != nil {
			pp.timer.Stop()
			done(ProbeResult{Err: err})
		}
	}
}

func (p *udpProber) take(callID string) *pendingProbe {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.pending[callID]
	delete(p.pending, callID)
	return pp
}

func (p *udpProber) read() {
	buf := make([]byte, 65535)
	var msg parser.Message
	for {
		n, _, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if msg.Parse(buf[:n]) != nil || !msg.IsResponse() || msg.StatusCode() < 200 {
			continue
		}
		pp := p.take(string(msg.CallID()))
		if pp == nil {
			continue
		}
		pp.timer.Stop()
		res := ProbeResult{Code: msg.StatusCode(), RTT: time.Since(pp.sent)}
		if ra, ok, err := msg.RetryAfter(); ok && err == nil {
			res.RetryAfter = time.Duration(ra.Seconds) * time.Second
		}
		pp.done(res)
	}
}

// recordingProber wraps a Prober and records, for each probe, its result
// and the member's state right after the registry applied it.
type recordingProber struct {
	inner Prober
	mu    sync.Mutex
	log   []probeRecord
}

type probeRecord struct {
	at    time.Time // before the registry applied the result
	uri   string
	code  int
	state string
}

func (p *recordingProber) Probe(m Member, timeout time.Duration, done func(ProbeResult)) {
	p.inner.Probe(m, timeout, func(res ProbeResult) {
		at := time.Now()
		done(res)
		rec := probeRecord{at: at, uri: m.URI, code: res.Code, state: stateNames[m.st.health()]}
		p.mu.Lock()
		p.log = append(p.log, rec)
		p.mu.Unlock()
	})
}

// since returns the records from index i on for uri.
func (p *recordingProber) since(i int, uri string) []probeRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []probeRecord
	for _, rec := range p.log[i:] {
		if rec.uri == uri {
			out = append(out, rec)
		}
	}
	return out
}

// lastState is the member's state after the last of recs, "" if none.
func lastState(recs []probeRecord) string {
	if len(recs) == 0 {
		return ""
	}
	return recs[len(recs)-1].state
}

func (p *recordingProber) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.log)
}

func probedGroup(name string, addrs ...string) GroupConfig {
	g := GroupConfig{Name: name, Probe: ProbeConfig{
		Enabled: true, Interval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond,
		FailureThreshold: 3, SuccessThreshold: 2,
	}}
	for i, a := range addrs {
		g.Destinations = append(g.Destinations, DestConfig{URI: fmt.Sprintf("sip:gw%d@%s", i, a), Address: a})
	}
	return g
}

// A member that stops answering is marked down after exactly
// failure_threshold failed probes, and comes back (half-open, then up)
// after exactly success_threshold good ones; the other member is unaffected.
func TestProbeDownAndUp(t *testing.T) {
	testtier.RequiresSockets(t)
	a, b := newUAS(t), newUAS(t)
	prober := &recordingProber{inner: newUDPProber(t)}
	r, logs := newTestRegistry(t, Options{Prober: prober}, probedGroup("g", a.addr(), b.addr()))
	r.Start()
	uriA := "sip:gw0@" + a.addr()
	testtier.Eventually(t, 2*time.Second, "a good probe of each member", func() bool {
		return len(prober.since(0, uriA)) > 0 && len(prober.since(0, "sip:gw1@"+b.addr())) > 0
	})

	mark := prober.len()
	a.behaviour.Store(uasSilent)
	// The record of a probe is written after the registry applied it: wait
	// for the record, not only for the state, or the third one may be missing.
	testtier.Eventually(t, 3*time.Second, "a marked down", func() bool { return lastState(prober.since(mark, uriA)) == "down" })
	recs := prober.since(mark, uriA)
	// Probes in flight when the UAS went silent may still have been answered.
	for len(recs) > 0 && recs[0].code != 0 {
		recs = recs[1:]
	}
	if len(recs) != 3 || recs[0].state != "up" || recs[1].state != "up" || recs[2].state != "down" {
		t.Fatalf("probes since silence: %+v, want 3 failures, down after the third", recs)
	}
	counts := pickCounts(t, r, "g", 100)
	if counts[0] != 0 || counts[1] != 100 {
		t.Fatalf("picks with a down: %v", counts)
	}
	if got := logs.count(`msg="gateway member down"`); got != 1 {
		t.Fatalf("%d down lines logged, want 1:\n%s", got, logs)
	}

	mark = prober.len()
	a.behaviour.Store(uasAnswer200)
	testtier.Eventually(t, 3*time.Second, "a half-open", func() bool { return lastState(prober.since(mark, uriA)) == "half_open" })
	recs = prober.since(mark, uriA)
	for len(recs) > 0 && recs[0].code == 0 {
		recs = recs[1:]
	}
	if len(recs) != 2 || recs[0].state != "down" || recs[1].state != "half_open" {
		t.Fatalf("probes since answering again: %+v, want 2 successes, half-open after the second", recs)
	}
	// The breaker's trial calls, then full traffic.
	var sel Selector
	for range DefaultHalfOpenCalls {
		for {
			m, res := r.Pick("g", 0, &sel)
			if res != OK {
				t.Fatal(res)
			}
			if m.Index == 0 {
				r.ReportCall(m, OutcomeAnswered)
				break
			}
			r.ReportCall(m, OutcomeAnswered)
		}
	}
	if s := st(t, r, "g", 0).health(); s != stateUp {
		t.Fatalf("after %d good trial calls: %s", DefaultHalfOpenCalls, stateNames[s])
	}
	if counts := pickCounts(t, r, "g", 100); counts[0] != 50 {
		t.Fatalf("picks after recovery: %v", counts)
	}
}

// A 503 with Retry-After holds the member in cooldown for that long; it is
// not counted as a failure.
func TestProbe503RetryAfterCooldown(t *testing.T) {
	testtier.RequiresSockets(t)
	a := newUAS(t)
	prober := &recordingProber{inner: newUDPProber(t)}
	g := probedGroup("g", a.addr())
	g.Probe.FailureThreshold = 1
	r, _ := newTestRegistry(t, Options{Prober: prober}, g)
	a.retryAfter.Store(1)
	a.behaviour.Store(uasAnswer503)
	r.Start()
	var sel Selector
	testtier.Eventually(t, 2*time.Second, "cooldown", func() bool { _, res := r.Pick("g", 0, &sel); return res == GroupDown })
	time.Sleep(100 * time.Millisecond) // a few more 503s, each extending the cooldown
	mark := prober.len()
	a.behaviour.Store(uasAnswer200)
	// One probe at a time: once one answered 200 is recorded, every 503 is.
	// (A fixed sleep for the probes in flight missed a late one on a loaded
	// machine, and the cooldown seemed to last that much longer.)
	testtier.Eventually(t, 2*time.Second, "a probe answered 200", func() bool {
		return slices.ContainsFunc(prober.since(mark, g.Destinations[0].URI), func(rec probeRecord) bool { return rec.code == 200 })
	})
	var last503 time.Time
	for _, rec := range prober.since(0, g.Destinations[0].URI) {
		if rec.code == 503 {
			last503 = rec.at
		}
	}
	if s := st(t, r, "g", 0).health(); s != stateUp {
		t.Fatalf("state %s after 503s with Retry-After, want up (cooldown is not a failure)", stateNames[s])
	}
	if gs, _ := r.Group("g"); gs.Members[0].CooldownMs <= 0 {
		t.Fatalf("status shows no cooldown: %+v", gs.Members[0])
	}
	// Each bound is checked on the Pick's side of the clock that a stalled
	// test goroutine cannot move: usable no sooner than 1 s after the last
	// 503 (the time after a Pick that said OK), still skipped no later than
	// 1 s + 250 ms after it (the time before a Pick that said GroupDown).
	for {
		before := time.Now()
		_, res := r.Pick("g", 0, &sel)
		now := time.Now()
		if res == OK {
			if held := now.Sub(last503); held < time.Second {
				t.Fatalf("usable %v after the last 503 with Retry-After: 1, want 1 s", held)
			}
			break
		}
		if res != GroupDown {
			t.Fatal(res)
		}
		if held := before.Sub(last503); held > time.Second+250*time.Millisecond {
			t.Fatalf("still in cooldown %v after the last 503 with Retry-After: 1, want 1 s", held)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A probed group whose every member stops answering is skipped by Pick at
// once, without waiting on anything.
func TestProbeAllDownGroupDown(t *testing.T) {
	testtier.RequiresSockets(t)
	a, b := newUAS(t), newUAS(t)
	r, _ := newTestRegistry(t, Options{Prober: newUDPProber(t)}, probedGroup("g", a.addr(), b.addr()))
	r.Start()
	a.behaviour.Store(uasSilent)
	b.behaviour.Store(uasSilent)
	testtier.Eventually(t, 3*time.Second, "both down", func() bool {
		return st(t, r, "g", 0).health() == stateDown && st(t, r, "g", 1).health() == stateDown
	})
	var sel Selector
	start := time.Now()
	for range 1000 {
		if _, res := r.Pick("g", 0, &sel); res != GroupDown {
			t.Fatalf("Pick = %v, want GroupDown", res)
		}
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Fatalf("1000 Picks of a down group took %v, want no waiting", el)
	}
	if _, res := r.Pick("other", 0, &sel); res != UnknownGroup {
		t.Fatalf("unknown group: %v", res)
	}
}

// healthy_codes decide what counts as alive.
func TestProbeHealthyCodes(t *testing.T) {
	testtier.RequiresSockets(t)
	a := newUAS(t)
	g := probedGroup("g", a.addr())
	g.Probe.HealthyCodes = []int{404} // the UAS answers 200: not healthy here
	g.Probe.FailureThreshold = 2
	r, _ := newTestRegistry(t, Options{Prober: newUDPProber(t)}, g)
	r.Start()
	testtier.Eventually(t, 2*time.Second, "down on 200s", func() bool { return st(t, r, "g", 0).health() == stateDown })
	gs, _ := r.Group("g")
	if gs.Members[0].LastProbeCode != 200 || gs.Members[0].LastProbeRTTMs <= 0 {
		t.Fatalf("status %+v", gs.Members[0])
	}
}

// A Prober that never calls done does not wedge probing: the probe counts
// as failed after twice the timeout.
func TestProbeLost(t *testing.T) {
	testtier.RequiresWallClock(t)
	var calls atomic.Int32
	lost := proberFunc(func(m Member, timeout time.Duration, done func(ProbeResult)) { calls.Add(1) })
	g := probedGroup("g", "127.0.0.1:9")
	g.Probe.FailureThreshold = 2
	r, _ := newTestRegistry(t, Options{Prober: lost}, g)
	r.Start()
	testtier.Eventually(t, 3*time.Second, "down", func() bool { return st(t, r, "g", 0).health() == stateDown })
	if calls.Load() < 2 {
		t.Fatalf("%d probes", calls.Load())
	}
}

type proberFunc func(m Member, timeout time.Duration, done func(ProbeResult))

func (f proberFunc) Probe(m Member, timeout time.Duration, done func(ProbeResult)) {
	f(m, timeout, done)
}
