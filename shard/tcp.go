package shard

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// tcpConn is the shard's state of one stream connection; it lives on the
// loop of the shard that owns it.
type tcpConn struct {
	sh       *Shard
	c        gnet.Conn // nil until an outbound dial completes
	id       ConnID
	peer     transport.Peer
	outbound bool
	failed   atomic.Bool // an outbound dial failed (set by the dialling goroutine)
	pending  [][]byte    // messages queued while dialling

	opened   time.Duration
	lastRead time.Duration
	partial  time.Duration // when the unfinished message in the buffer began; -1 if none
	gotData  bool
	stalled  bool   // closed for not reading: gnet's Close is asynchronous, later writes are dropped
	out      []byte // what the loop wrote on it since it woke, sent by flushTCP
}

var (
	crlf       = []byte("\r\n")
	sweepEvery = time.Second
)

// openTCP admits an accepted connection within the caps, or completes an
// outbound dial.
func (sh *Shard) openTCP(c gnet.Conn) ([]byte, gnet.Action) {
	now := sh.Now()
	if tc, ok := c.Context().(*tcpConn); ok && tc.outbound {
		if sh.conns[tc.id] != tc {
			// The sweep gave the dial up (it failed its first-data
			// timeout): what it queued was counted lost, and a connection
			// nobody tracks would never be swept nor reused.
			return nil, gnet.Close
		}
		tc.c, tc.opened, tc.lastRead = c, now, now
		for _, b := range tc.pending {
			_, _ = c.Write(b)
		}
		tc.pending = nil
		sh.m.tcpConns.Inc()
		return nil, gnet.None
	}
	ap := addrPortOf(c.RemoteAddr())
	s := sh.srv
	s.tcpMu.Lock()
	src := sourceKey(ap.Addr())
	over := s.tcpTotal >= s.cfg.TCP.MaxConns || s.tcpPerIP[src] >= s.cfg.TCP.MaxConnsPerIP
	if !over {
		s.tcpTotal++
		s.tcpPerIP[src]++
	}
	s.tcpMu.Unlock()
	if over {
		sh.m.tcpRejected.Inc()
		return nil, gnet.Close
	}
	sh.seq++
	tc := &tcpConn{sh: sh, c: c, id: newConnID(sh.idx, sh.seq), opened: now, lastRead: now, partial: -1}
	tc.peer = transport.Peer{Addr: ap, Transport: s.listen[s.listenerOf(c.LocalAddr())].Transport, Conn: uint64(tc.id)}
	c.SetContext(tc)
	sh.conns[tc.id] = tc
	sh.m.tcpConns.Inc()
	return nil, gnet.None
}

// sourceKey is what the per-source connection cap counts by: the address,
// or for IPv6 its /64, which one host commonly holds whole.
func sourceKey(a netip.Addr) netip.Addr {
	if a.Is4() {
		return a
	}
	p, _ := a.Prefix(64)
	return p.Addr()
}

// closedTCP forgets a connection.
func (sh *Shard) closedTCP(tc *tcpConn, _ error) {
	if sh.conns[tc.id] != tc {
		return // a dial given up before it completed: never counted
	}
	delete(sh.conns, tc.id)
	if tc.outbound {
		if sh.dials[tc.peer.Addr] == tc {
			delete(sh.dials, tc.peer.Addr)
		}
	} else {
		s := sh.srv
		s.tcpMu.Lock()
		s.tcpTotal--
		src := sourceKey(tc.peer.Addr.Addr())
		if s.tcpPerIP[src]--; s.tcpPerIP[src] <= 0 {
			delete(s.tcpPerIP, src)
		}
		s.tcpMu.Unlock()
	}
	sh.m.tcpConns.Dec()
}

// readTCP frames and handles what a connection has buffered (RFC 3261 18.3).
// A framing error closes the connection: the stream cannot be resynchronised.
func (sh *Shard) readTCP(tc *tcpConn) gnet.Action {
	c := tc.c
	now := sh.Now()
	tc.lastRead, tc.gotData = now, true
	lim := &sh.srv.cfg.Limits
	for {
		buf, _ := c.Peek(-1)
		if len(buf) == 0 {
			tc.partial = -1
			return gnet.None
		}
		kind, n, err := parser.Frame(buf, lim.MaxMessageSize)
		if err != nil {
			sh.m.framingErrors.Inc()
			return gnet.Close
		}
		switch kind {
		case parser.FrameNeedMore:
			if len(buf) > sh.srv.cfg.TCP.MaxBuffered {
				sh.m.framingErrors.Inc()
				return gnet.Close
			}
			// A CRLF, or the start of a CRLFCRLF ping, begins no message:
			// CRLFs before a start line are ignored (RFC 3261 7.5), and
			// some peers send a lone CRLF as their keep-alive. The idle
			// timeout bounds them.
			if tc.partial < 0 && buf[0] != '\r' {
				tc.partial = now
			}
			return gnet.None
		}
		// The flood bound counts messages, as over UDP: one read may hold
		// many.
		if !tc.outbound && sh.floodDrop(tc.peer.Addr.Addr(), now) {
			return gnet.Close
		}
		switch kind {
		case parser.FramePing:
			sh.writeTCP(tc.id, crlf) // RFC 5626 4.4.1: CRLFCRLF ping, CRLF pong
		case parser.FrameMessage:
			sh.receive(buf[:n], tc.peer)
		}
		_, _ = c.Discard(n)
		tc.partial = -1
	}
}

// writeTCP writes b on a connection of this loop and reports whether the
// connection was there to take it. The bytes wait in tc.out until the loop
// is done with what woke it (flushTCP): one write per connection and wake,
// not per message. What the kernel does not take waits in gnet's buffer; a
// peer that lets more than MaxQueued bytes wait there does not read, and
// is closed (Kamailio's tcp_wq_max): one stalled reader must not grow
// memory without bound.
func (sh *Shard) writeTCP(id ConnID, b []byte) bool {
	tc := sh.conns[id]
	if tc == nil || tc.c == nil {
		return false
	}
	if tc.stalled {
		sh.m.sendErrors.Inc()
		return true
	}
	if tc.c.OutboundBuffered()+len(tc.out)+len(b) > sh.srv.cfg.TCP.MaxQueued {
		tc.stalled = true
		sh.m.sendErrors.Inc()
		sh.m.tcpStalled.Inc()
		_ = tc.c.Close()
		return true
	}
	if len(tc.out) == 0 {
		sh.tcpOut = append(sh.tcpOut, tc)
	}
	tc.out = append(tc.out, b...)
	return true
}

// maxKeptOut is the most a connection keeps of its write buffer between
// wakes: a busy trunk's or carrier's connection reuses its buffer (a
// window of 32 calls writes past 16 KiB at a time), and what one burst
// grew beyond this is let go.
const maxKeptOut = 256 << 10

// flushTCP writes what each connection queued since the loop woke.
func (sh *Shard) flushTCP() {
	for i, tc := range sh.tcpOut {
		if !tc.stalled && sh.conns[tc.id] == tc {
			if _, err := tc.c.Write(tc.out); err != nil {
				sh.m.sendErrors.Inc()
			}
		}
		tc.out = tc.out[:0]
		if cap(tc.out) > maxKeptOut {
			tc.out = nil
		}
		sh.tcpOut[i] = nil
	}
	sh.tcpOut = sh.tcpOut[:0]
}

// sendTCP sends on the peer's connection, wherever it lives, or on an
// outbound connection to the peer's address, reused by address.
func (sh *Shard) sendTCP(peer transport.Peer, b []byte) {
	if id := ConnID(peer.Conn); id != 0 {
		if owner := id.shard(); owner != sh.idx {
			p := packetPool.Get().(*packet)
			p.out, p.peer = true, peer
			p.buf = append(p.buf[:0], b...)
			dst := sh.srv.shards[owner]
			if !dst.inbox[sh.idx].push(p) {
				packetPool.Put(p)
				sh.m.handoffDrops.Inc()
				return
			}
			dst.wake()
			return
		}
		if sh.writeTCP(id, b) {
			return
		}
		// The connection is gone: a new one to the address (RFC 3261
		// 18.2.2 for responses: the sent-by port, see ResponseTarget).
	}
	tc := sh.dials[peer.Addr]
	switch {
	case tc == nil:
		tc = sh.dial(peer)
		tc.pending = append(tc.pending, append([]byte(nil), b...))
	case tc.c == nil:
		tc.pending = append(tc.pending, append([]byte(nil), b...))
	default:
		if !sh.writeTCP(tc.id, b) {
			sh.m.sendErrors.Inc()
		}
	}
}

// dial opens an outbound connection on this shard's loop. Responses on it
// arrive on this loop, where the Call-IDs this shard mints belong. It
// leaves from a listen address (dialFrom) and gives up after
// FirstDataTimeout; the connecting is done off the loop.
func (sh *Shard) dial(peer transport.Peer) *tcpConn {
	sh.seq++
	tc := &tcpConn{sh: sh, id: newConnID(sh.idx, sh.seq), outbound: true, partial: -1, opened: sh.Now()}
	tc.peer = transport.Peer{Addr: peer.Addr, Transport: peer.Transport, Conn: uint64(tc.id)}
	sh.dials[peer.Addr] = tc
	sh.conns[tc.id] = tc
	d := &net.Dialer{Timeout: sh.srv.cfg.TCP.FirstDataTimeout}
	if a := sh.srv.dialFrom(peer.Addr.Addr(), peer.Transport); a.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))
	}
	loop := sh.loop
	go func() {
		if err := enroll(loop, d, tc); err != nil {
			tc.failed.Store(true)
			sh.dialFailed.Store(true)
			sh.wake()
		}
	}()
	return tc
}

// enroll connects to tc's peer and hands the connection to loop, whose
// OnOpen completes tc (openTCP).
func enroll(loop gnet.EventLoop, d *net.Dialer, tc *tcpConn) error {
	c, err := d.Dial(tc.peer.Transport.Network(), tc.peer.Addr.String())
	if err != nil {
		return err
	}
	ch, err := loop.Enroll(gnet.NewContext(context.Background(), tc), c)
	if err != nil {
		c.Close()
		return err
	}
	return (<-ch).Err
}

// dialFrom returns the address outbound connections on transport k to
// peer leave from: the first listen address of k and of the peer's family,
// else the first of another transport, that can reach it (loopback for a
// loopback peer only); none (the kernel's choice) when there is none or it
// is unspecified. A datagram leaves from its listening socket already: the
// listen address is the one sipedge advertises (Via, Contact), and the one
// carriers allow-list.
func (s *Server) dialFrom(peer netip.Addr, k transport.Kind) netip.Addr {
	for _, own := range [...]bool{true, false} {
		for _, l := range s.listen {
			a := l.Addr.Addr()
			if (l.Transport == k) != own || a.Is4() != peer.Is4() || a.IsLoopback() != peer.IsLoopback() {
				continue
			}
			if a.IsUnspecified() {
				return netip.Addr{}
			}
			return a
		}
	}
	return netip.Addr{}
}

// dropFailedDials drops the dials that failed, as the sweep would, at once.
func (sh *Shard) dropFailedDials() {
	for id, tc := range sh.conns {
		if tc.c == nil && tc.failed.Load() {
			sh.dropDial(id, tc)
		}
	}
}

// dropDial forgets an outbound connection that never opened and reports
// the messages it had queued as lost (Handler.SendFailed), so that their
// transactions fail now rather than when their timers run out.
func (sh *Shard) dropDial(id ConnID, tc *tcpConn) {
	lost := len(tc.pending)
	sh.m.sendErrors.Add(lost)
	tc.pending = nil
	delete(sh.conns, id)
	if sh.dials[tc.peer.Addr] == tc {
		delete(sh.dials, tc.peer.Addr)
	}
	if lost > 0 && sh.handler.SendFailed != nil {
		sh.handler.SendFailed(sh, transport.Peer{Addr: tc.peer.Addr, Transport: tc.peer.Transport})
	}
}

// sweepTCP enforces the connection timeouts about once a second and drops
// failed dials: first data, a whole message, and idleness.
func (sh *Shard) sweepTCP(now time.Duration) {
	if now-sh.lastSweep < sweepEvery {
		return
	}
	sh.lastSweep = now
	sh.sweepFlood(now)
	cfg := &sh.srv.cfg.TCP
	for id, tc := range sh.conns {
		if tc.c == nil {
			if tc.failed.Load() || now-tc.opened > cfg.FirstDataTimeout {
				sh.dropDial(id, tc)
			}
			continue
		}
		switch {
		case !tc.outbound && !tc.gotData && now-tc.opened > cfg.FirstDataTimeout,
			tc.partial >= 0 && now-tc.partial > cfg.MessageTimeout,
			now-tc.lastRead > cfg.IdleTimeout:
			sh.m.tcpTimeouts.Inc()
			_ = tc.c.Close()
		}
	}
}

func addrPortOf(a net.Addr) (ap netip.AddrPort) {
	if x, ok := a.(interface{ AddrPort() netip.AddrPort }); ok {
		ap = x.AddrPort()
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
