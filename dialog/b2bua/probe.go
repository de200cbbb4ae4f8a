package b2bua

import (
	"errors"
	"time"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// ErrProbeTimeout is a probe that got no final response in time.
var ErrProbeTimeout = errors.New("b2bua: probe timed out")

// ErrProbeTransport is a probe whose transaction failed (no response by
// Timer F, or a transport error).
var ErrProbeTransport = errors.New("b2bua: probe failed in transport")

// probe is an OPTIONS in flight for gateway health.
type probe struct {
	done  func(code int, retryAfter, rtt time.Duration, err error)
	start time.Duration
	timer uint64
}

// Probe sends an OPTIONS to a gateway as an ordinary non-INVITE client
// transaction (the health issue) and calls done on the shard with the
// final response's code, its Retry-After and the round trip time, or an
// error when no final response came within timeout.
func (e *Engine) Probe(to transport.Peer, uri string, timeout time.Duration, now time.Duration,
	done func(code int, retryAfter, rtt time.Duration, err error)) {
	e.now = now
	l := &e.tmp.leg
	l.reset()
	l.peer = to
	l.target = append(l.target, uri...)
	l.callID = e.env.MintCallID(l.callID)
	l.localTag = randomToken(l.localTag, 10)
	l.localURI = append(l.localURI, "<sip:"...)
	l.localURI = append(l.localURI, e.cfg.User...)
	l.localURI = append(l.localURI, '@')
	l.localURI = append(l.localURI, hostOnly(e.localHost(to.Transport))...)
	l.localURI = append(l.localURI, '>')
	l.remoteURI = append(append(append(l.remoteURI, '<'), uri...), '>')
	d := legDest(l)
	b := e.appendRequestHead(e.tmp.out[:0], "OPTIONS", l, &d, 1, 70)
	e.tmp.out = parser.AppendBody(b, "", nil)
	h, err := e.sendBuilt(to)
	if err != nil {
		done(0, 0, 0, err)
		return
	}
	p := &probe{done: done, start: now}
	p.timer = e.env.Clock.StartAt(now+timeout, timerProbe, uint64(h))
	e.probes[h] = p
	e.after()
}

// onProbeResponse finishes a probe on its final response.
func (e *Engine) onProbeResponse(h txn.Handle, p *probe, m *parser.Message) {
	if m.StatusCode() < 200 {
		return
	}
	var retry time.Duration
	if ra, ok, err := m.RetryAfter(); ok && err == nil {
		retry = time.Duration(ra.Seconds) * time.Second
	}
	e.finishProbe(h, p, m.StatusCode(), retry, nil)
}

func (e *Engine) finishProbe(h txn.Handle, p *probe, code int, retry time.Duration, err error) {
	delete(e.probes, h)
	if p.timer != 0 {
		e.env.Clock.Stop(p.timer)
	}
	p.done(code, retry, e.now-p.start, err)
}

// probeTimeout gives up on a probe.
func (e *Engine) probeTimeout(h txn.Handle) {
	p, ok := e.probes[h]
	if !ok {
		return
	}
	p.timer = 0
	if e.txns.Terminate(h, e.now) == nil {
		e.after()
	}
	e.finishProbe(h, p, 0, 0, ErrProbeTimeout)
}
