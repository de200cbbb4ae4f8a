package shard

import (
	"encoding/binary"
	"net"
	"net/netip"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/sipedge/sipedge/transport"
)

// UDP I/O in batches: a loop reads every datagram a socket holds with
// recvmmsg, up to udpBatch at a time, and the datagrams its handlers send
// wait in the shard's queue until the loop is done with what woke it, then
// leave with one sendmmsg per socket (flushUDP). On loopback a system call
// costs as much as the SIP work on a message; one per batch, not per
// datagram, is most of what a message costs on the wire.

// udpBatch is the most datagrams one recvmmsg or sendmmsg moves.
const udpBatch = 32

// sockaddrLen is the room for a raw IPv4 or IPv6 socket address
// (sockaddr_in6, the larger).
const sockaddrLen = unix.SizeofSockaddrInet6

// udpIO is a shard's datagram buffers; its loop alone uses them.
type udpIO struct {
	rxHdrs  [udpBatch]unix.Mmsghdr
	rxIov   [udpBatch]unix.Iovec
	rxNames [udpBatch][sockaddrLen]byte
	rxBuf   []byte // udpBatch slots of rxSlot bytes
	rxSlot  int

	txBuf  []byte   // the queued datagrams, back to back
	tx     []udpOut // one per queued datagram, in order
	txHdrs [udpBatch]unix.Mmsghdr
	txIov  [udpBatch]unix.Iovec
}

// udpOut is a queued datagram: the socket it leaves from, its end in
// txBuf and its destination as a raw socket address.
type udpOut struct {
	fd      int
	end     int
	name    [sockaddrLen]byte
	nameLen uint32
}

func (u *udpIO) init(maxMessage int) {
	u.rxSlot = maxMessage
	u.rxBuf = make([]byte, udpBatch*u.rxSlot)
	for i := range u.rxHdrs {
		u.rxIov[i].Base = &u.rxBuf[i*u.rxSlot]
		u.rxIov[i].SetLen(u.rxSlot)
		u.rxHdrs[i].Hdr.Iov = &u.rxIov[i]
		u.rxHdrs[i].Hdr.SetIovlen(1)
		u.rxHdrs[i].Hdr.Name = &u.rxNames[i][0]
	}
	u.txBuf = make([]byte, 0, 64<<10)
	u.tx = make([]udpOut, 0, 4*udpBatch)
}

// readUDP handles the datagram gnet read on a listening socket, then every
// other one the socket holds.
func (sh *Shard) readUDP(c gnet.Conn) {
	buf, _ := c.Next(-1)
	listener := sh.srv.listenerOf(c.LocalAddr())
	if len(buf) > sh.srv.cfg.Limits.MaxMessageSize {
		sh.m.oversize.Inc() // RFC 3261 18.1.1 wants such messages on TCP
	} else {
		sh.datagram(buf, addrPortOf(c.RemoteAddr()), listener)
	}
	sh.drainUDP(c.Fd(), listener)
	for _, s := range sh.udpSockets {
		if s.fd == c.Fd() {
			return
		}
	}
	sh.udpSockets = append(sh.udpSockets, udpSocket{fd: c.Fd(), listener: listener})
}

// udpSocket is one of a loop's UDP sockets (with SO_REUSEPORT each loop
// has its own per UDP listen address), which poll drains.
type udpSocket struct {
	fd       int
	listener uint8
}

// drainUDP reads fd until it would block, a batch at a time.
func (sh *Shard) drainUDP(fd int, listener uint8) {
	u := &sh.udp
	for {
		for i := range u.rxHdrs {
			u.rxHdrs[i].Hdr.Namelen = sockaddrLen
			u.rxHdrs[i].Hdr.Flags = 0
		}
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&u.rxHdrs[0])),
			udpBatch, unix.MSG_DONTWAIT, 0, 0)
		if errno != 0 {
			return // EAGAIN: drained; anything else: gnet's next read reports it
		}
		n := int(r)
		for i := 0; i < n; i++ {
			h := &u.rxHdrs[i]
			if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
				sh.m.oversize.Inc()
				continue
			}
			from, ok := decodeSockaddr(u.rxNames[i][:h.Hdr.Namelen])
			if !ok {
				continue
			}
			sh.datagram(u.rxBuf[i*u.rxSlot:i*u.rxSlot+int(h.Len)], from, listener)
		}
		if n < udpBatch {
			return
		}
	}
}

// datagram handles one datagram from a peer.
func (sh *Shard) datagram(buf []byte, from netip.AddrPort, listener uint8) {
	sh.received++
	if sh.floodDrop(from.Addr(), sh.Now()) {
		return
	}
	if IsKeepAlive(buf) {
		return // RFC 5626 over UDP is STUN, not CRLF; stray CRLFs are ignored
	}
	sh.receive(buf, transport.Peer{Addr: from, Transport: sh.srv.listen[listener].Transport, Conn: uint64(listener)})
}

// IsKeepAlive reports whether a datagram is a stray keep-alive, up to four
// CR and LF bytes, which readUDP ignores.
func IsKeepAlive(b []byte) bool {
	if len(b) > 4 {
		return false
	}
	for _, c := range b {
		if c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// sendUDP queues a datagram; flushUDP sends it.
func (sh *Shard) sendUDP(peer transport.Peer, b []byte) {
	a := peer.Addr.Addr()
	v4 := a.Is4() || a.Is4In6()
	fd := sh.srv.sendFD(uint8(peer.Conn), v4)
	if fd < 0 {
		sh.m.sendErrors.Inc()
		return
	}
	u := &sh.udp
	u.txBuf = append(u.txBuf, b...)
	u.tx = append(u.tx, udpOut{fd: fd, end: len(u.txBuf)})
	o := &u.tx[len(u.tx)-1]
	o.nameLen = encodeSockaddr(&o.name, peer.Addr, v4)
}

// flush sends what the loop's handlers sent since it woke: datagrams and
// stream bytes. Every gnet callback that ran the shard ends with it.
func (sh *Shard) flush() {
	sh.flushUDP()
	sh.flushTCP()
}

// flushUDP sends the queued datagrams, one sendmmsg per run of datagrams
// leaving from one socket. A datagram the kernel refuses is counted and
// dropped, as a lost one would be.
func (sh *Shard) flushUDP() {
	u := &sh.udp
	start, i := 0, 0
	for i < len(u.tx) {
		fd, k := u.tx[i].fd, 0
		for ; k < udpBatch && i+k < len(u.tx) && u.tx[i+k].fd == fd; k++ {
			o := &u.tx[i+k]
			u.txIov[k].Base = &u.txBuf[start]
			u.txIov[k].SetLen(o.end - start)
			h := &u.txHdrs[k].Hdr
			h.Iov, h.Name, h.Namelen = &u.txIov[k], &o.name[0], o.nameLen
			h.SetIovlen(1)
			start = o.end
		}
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&u.txHdrs[0])),
			uintptr(k), 0, 0, 0)
		sent := int(r)
		if errno != 0 {
			sent = 0
			if errno != unix.EINTR {
				sh.m.sendErrors.Inc() // the first datagram is lost; the rest go again
				sent = 1
			}
		}
		i += sent
		start = u.startOf(i)
	}
	u.txBuf, u.tx = u.txBuf[:0], u.tx[:0]
}

func (u *udpIO) startOf(i int) int {
	if i == 0 {
		return 0
	}
	return u.tx[i-1].end
}

// encodeSockaddr writes ap as a sockaddr_in (v4) or sockaddr_in6 and
// returns its length.
func encodeSockaddr(b *[sockaddrLen]byte, ap netip.AddrPort, v4 bool) uint32 {
	*b = [sockaddrLen]byte{}
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	if v4 {
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		a := ap.Addr().Unmap().As4()
		copy(b[4:8], a[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	a := ap.Addr().As16()
	copy(b[8:24], a[:])
	return unix.SizeofSockaddrInet6
}

// decodeSockaddr reads a sockaddr_in or sockaddr_in6 (a v4-mapped address
// unmapped, as addrPortOf does).
func decodeSockaddr(b []byte) (netip.AddrPort, bool) {
	if len(b) < 2 {
		return netip.AddrPort{}, false
	}
	port := func() uint16 { return binary.BigEndian.Uint16(b[2:4]) }
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port()), true
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port()), true
	}
	return netip.AddrPort{}, false
}

// sendFD returns the UDP socket a datagram to a peer of the family v4 says
// leaves from: the listener's the peer names when it is a UDP socket of
// that family, else one that is (a new B-leg names listener 0, whatever the
// carrier's family), else the named one (a dual-stack [::] socket sends to
// IPv4 too).
func (s *Server) sendFD(listener uint8, v4 bool) int {
	named := -1
	if int(listener) < len(s.udpFD) {
		named = s.udpFD[listener]
		if named >= 0 && s.listen[listener].Addr.Addr().Is4() == v4 {
			return named
		}
	}
	if fd := s.anyUDPFD(v4); fd >= 0 {
		return fd
	}
	if named >= 0 {
		return named
	}
	return s.anyUDPFD(!v4)
}

// anyUDPFD returns a UDP socket of the wanted family, or -1.
func (s *Server) anyUDPFD(v4 bool) int {
	for i, l := range s.listen {
		if s.udpFD[i] >= 0 && l.Addr.Addr().Is4() == v4 {
			return s.udpFD[i]
		}
	}
	return -1
}

// listenerOf finds the listener a socket's local address belongs to, among
// those of its network (a UDP and a TCP socket may share an address and
// port): the first of them when none matches.
func (s *Server) listenerOf(local net.Addr) uint8 {
	ap := addrPortOf(local)
	first := -1
	for i, l := range s.listen {
		if l.Transport.Network() != local.Network() {
			continue
		}
		if l.Addr.Port() == ap.Port() && (l.Addr.Addr() == ap.Addr() || l.Addr.Addr().IsUnspecified()) {
			return uint8(i)
		}
		if first < 0 {
			first = i
		}
	}
	return uint8(max(first, 0))
}
