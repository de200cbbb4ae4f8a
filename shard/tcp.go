package shard

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/sipedge/sipedge/parser"
)

// tcpConn is the shard's state of one stream connection; it lives on the
// loop of the shard that owns it.
type tcpConn struct {
	sh       *Shard
	c        gnet.Conn // nil until an outbound dial completes
	id       ConnID
	peer     Peer
	outbound bool
	failed   atomic.Bool // an outbound dial failed (set by the dialling goroutine)
	pending  [][]byte    // messages queued while dialling

	opened   time.Duration
	lastRead time.Duration
	partial  time.Duration // when the unfinished message in the buffer began; -1 if none
	gotData  bool
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
	over := s.tcpTotal >= s.cfg.TCP.MaxConns || s.tcpPerIP[ap.Addr()] >= s.cfg.TCP.MaxConnsPerIP
	if !over {
		s.tcpTotal++
		s.tcpPerIP[ap.Addr()]++
	}
	s.tcpMu.Unlock()
	if over {
		sh.m.tcpRejected.Inc()
		return nil, gnet.Close
	}
	sh.seq++
	tc := &tcpConn{sh: sh, c: c, id: newConnID(sh.idx, sh.seq), opened: now, lastRead: now, partial: -1}
	tc.peer = Peer{Addr: ap, Transport: TCP, Listener: s.listenerOf(c.LocalAddr()), Conn: tc.id}
	c.SetContext(tc)
	sh.conns[tc.id] = tc
	sh.m.tcpConns.Inc()
	return nil, gnet.None
}

// closedTCP forgets a connection.
func (sh *Shard) closedTCP(tc *tcpConn, _ error) {
	delete(sh.conns, tc.id)
	if tc.outbound {
		if sh.dials[tc.peer.Addr] == tc {
			delete(sh.dials, tc.peer.Addr)
		}
	} else {
		s := sh.srv
		s.tcpMu.Lock()
		s.tcpTotal--
		if s.tcpPerIP[tc.peer.Addr.Addr()]--; s.tcpPerIP[tc.peer.Addr.Addr()] <= 0 {
			delete(s.tcpPerIP, tc.peer.Addr.Addr())
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
	if !tc.outbound && sh.floodDrop(tc.peer.Addr.Addr(), now) {
		return gnet.Close
	}
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
			if tc.partial < 0 {
				tc.partial = now
			}
			return gnet.None
		case parser.FramePing:
			_, _ = c.Write(crlf) // RFC 5626 4.4.1: CRLFCRLF ping, CRLF pong
		case parser.FrameMessage:
			if err := sh.msg.ParseLimits(buf[:n], lim); err != nil {
				sh.reject(&sh.msg, err, tc.peer)
			} else {
				sh.receive(&sh.msg, tc.peer)
			}
		}
		_, _ = c.Discard(n)
		tc.partial = -1
	}
}

// writeTCP writes b on a connection of this loop.
func (sh *Shard) writeTCP(id ConnID, b []byte) {
	tc := sh.conns[id]
	if tc == nil || tc.c == nil {
		sh.m.sendErrors.Inc()
		return
	}
	if _, err := tc.c.Write(b); err != nil {
		sh.m.sendErrors.Inc()
	}
}

// sendTCP sends on the peer's connection, wherever it lives, or on an
// outbound connection to the peer's address, reused by address.
func (sh *Shard) sendTCP(peer Peer, b []byte) {
	if peer.Conn != 0 {
		if owner := peer.Conn.shard(); owner != sh.idx {
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
		if sh.conns[peer.Conn] != nil {
			sh.writeTCP(peer.Conn, b)
			return
		}
	}
	tc := sh.dials[peer.Addr]
	switch {
	case tc == nil:
		tc = sh.dial(peer)
		tc.pending = append(tc.pending, append([]byte(nil), b...))
	case tc.c == nil:
		tc.pending = append(tc.pending, append([]byte(nil), b...))
	default:
		sh.writeTCP(tc.id, b)
	}
}

// dial opens an outbound connection on this shard's loop. Responses on it
// arrive on this loop, where the Call-IDs this shard mints belong.
func (sh *Shard) dial(peer Peer) *tcpConn {
	sh.seq++
	tc := &tcpConn{sh: sh, id: newConnID(sh.idx, sh.seq), outbound: true, partial: -1, opened: sh.Now()}
	tc.peer = Peer{Addr: peer.Addr, Transport: TCP, Listener: peer.Listener, Conn: tc.id}
	sh.dials[peer.Addr] = tc
	sh.conns[tc.id] = tc
	ctx := gnet.NewNetAddrContext(gnet.NewContext(context.Background(), tc), net.TCPAddrFromAddrPort(peer.Addr))
	ch, err := sh.loop.Register(ctx, net.TCPAddrFromAddrPort(peer.Addr))
	if err != nil {
		tc.failed.Store(true)
		return tc
	}
	go func() {
		if res := <-ch; res.Err != nil {
			tc.failed.Store(true)
			sh.wake()
		}
	}()
	return tc
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
				sh.m.sendErrors.Add(len(tc.pending))
				delete(sh.conns, id)
				if sh.dials[tc.peer.Addr] == tc {
					delete(sh.dials, tc.peer.Addr)
				}
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
