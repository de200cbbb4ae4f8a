package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"

	"github.com/sipedge/sipedge/internal/enginerig"
	"github.com/sipedge/sipedge/parser"
)

// loadPeers is the caller and the carrier of BenchmarkWireCallFlow, written
// for load: one goroutine locked to its OS thread (so that its CPU time can
// be told apart from sipedge's, threadCPU) serves both over one epoll set.
// Every wake reads what each socket holds in one batch (recvmmsg, or
// read on a stream until it would block), answers, and sends what it
// queued for a socket in one system call (sendmmsg on a datagram socket
// connected to sipedge, one write on a stream). It keeps no state per call
// and allocates nothing once warm: what it needs of a call travels in the
// messages (the call number in the Call-ID, sipedge's To tag in its 200).
//
// The caller places calls (INVITE; ACK and BYE on sipedge's 200) either
// with a window of calls in flight, a new call as each one ends, or at a
// fixed rate. The carrier answers each INVITE 100, 180, 200 and each BYE
// 200. Every message either side gets is counted against the call flow: a
// lost message (calls stop ending) or an unexpected one fails the run;
// what sipedge retransmits is answered as a user agent would (the carrier
// answers a repeated INVITE alike, its To tag made from the Call-ID; the
// caller ACKs a repeated 200 without a second BYE) and counted as
// duplicates.
type loadPeers struct {
	tcp     bool
	sip     netip.AddrPort // sipedge's listen address
	ep      int            // epoll
	ctl     int            // eventfd: a command is waiting on cmds
	cmds    chan loadCmd
	tid     int // the thread the peers run on, once ready
	ready   chan struct{}
	stopped chan struct{}

	caller   endpoint
	carrier  endpoint          // UDP; over TCP, the listening socket's fd only
	accepted map[int]*endpoint // TCP: sipedge's connections to the carrier, by fd

	cmd     loadCmd         // the command running; cmd.calls == 0 when idle
	byeSent [1 << 14]uint64 // by call number modulo 1<<20: the caller sent the BYE
	placed  uint64          // calls placed by the command running
	next    uint64          // the next call number
	start   time.Time
	c       loadCounts
	target  loadCounts // what c must reach when the command ends
	err     error
	msg     parser.Message
	to      parser.Address
	tagBuf  []byte
	events  []unix.EpollEvent
	lastEnd time.Time // when a call last ended, to detect a stall
	late    uint64    // duplicates that came between two commands
	yielded time.Time // when the peers last went through the scheduler
}

// loadCmd asks the peers to place calls: calls at most window in flight
// (window 0: no bound), or rate a second when rate > 0. The result goes on
// done.
type loadCmd struct {
	calls  uint64
	window int
	rate   float64
	stop   bool
	done   chan loadResult
}

// loadResult is how a command went: err when calls were lost or a message
// was wrong; dups counts the messages sipedge retransmitted, or sent again
// because the peers were answering a retransmission.
type loadResult struct {
	err  error
	dups uint64
}

// loadCounts counts what the peers sent and got.
type loadCounts struct {
	invites                           uint64 // caller: INVITEs sent
	trying, ringing, answered, byeOKs uint64 // caller: 100, 180, 200 to INVITE, 200 to BYE
	bInvites, bAcks, bByes            uint64 // carrier: requests from sipedge
}

// endpoint is one socket of a peer: a UDP socket connected to sipedge, or a
// TCP connection. What the peer sends on it is queued in out (ends marks
// where each datagram stops) until flush.
type endpoint struct {
	fd        int
	tcp       bool
	isCarrier bool // the carrier's (else the caller's)

	out  []byte
	ends []int

	// UDP: the receive batch and the send batch's headers.
	rxBuf  []byte
	rxHdrs []unix.Mmsghdr
	rxIov  []unix.Iovec
	txHdrs []unix.Mmsghdr
	txIov  []unix.Iovec

	// TCP: bytes read and not yet framed.
	in []byte
}

const (
	peerBatch   = 64       // datagrams per recvmmsg and sendmmsg
	peerDgram   = 16 << 10 // the largest datagram a peer reads (sipedge's default limit)
	peerStall   = 10 * time.Second
	peerYield   = 5 * time.Millisecond
	peerStreamB = 256 << 10 // a stream's read buffer
)

func newLoadPeers(tcp bool, sip netip.AddrPort) (*loadPeers, error) {
	p := &loadPeers{tcp: tcp, sip: sip, cmds: make(chan loadCmd, 1), ready: make(chan struct{}),
		stopped: make(chan struct{}), accepted: make(map[int]*endpoint), events: make([]unix.EpollEvent, 64)}
	var err error
	if p.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	if p.ctl, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		p.close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err = p.watch(p.ctl); err != nil {
		p.close()
		return nil, err
	}
	p.caller.fd, p.carrier.fd = -1, -1
	if tcp {
		p.carrier.fd, err = listenTCP()
	} else {
		p.carrier.fd, err = dialUDP(sip)
	}
	if err == nil {
		err = p.watch(p.carrier.fd)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	p.caller.init(false, tcp)
	p.carrier.init(true, tcp)
	return p, nil
}

// connect opens the caller's socket to sipedge, once it listens.
func (p *loadPeers) connect() error {
	var err error
	if p.tcp {
		p.caller.fd, err = dialTCP(p.sip)
	} else {
		p.caller.fd, err = dialUDP(p.sip)
	}
	if err != nil {
		return err
	}
	return p.watch(p.caller.fd)
}

// carrierAddr is where sipedge reaches the carrier.
func (p *loadPeers) carrierAddr() netip.AddrPort { return localAddr(p.carrier.fd) }

func (p *loadPeers) watch(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

func (e *endpoint) init(carrier, tcp bool) {
	e.isCarrier, e.tcp = carrier, tcp
	e.out, e.ends = make([]byte, 0, 64<<10), make([]int, 0, 4*peerBatch)
	if tcp {
		e.in = make([]byte, 0, peerStreamB)
		return
	}
	e.rxBuf = make([]byte, peerBatch*peerDgram)
	e.rxHdrs, e.rxIov = make([]unix.Mmsghdr, peerBatch), make([]unix.Iovec, peerBatch)
	for i := range e.rxHdrs {
		e.rxIov[i].Base = &e.rxBuf[i*peerDgram]
		e.rxIov[i].SetLen(peerDgram)
		e.rxHdrs[i].Hdr.Iov = &e.rxIov[i]
		e.rxHdrs[i].Hdr.SetIovlen(1)
	}
	e.txHdrs, e.txIov = make([]unix.Mmsghdr, peerBatch), make([]unix.Iovec, peerBatch)
}

// run is the peers' goroutine. It returns when a stop command arrives.
func (p *loadPeers) run() {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	defer close(p.stopped)
	p.tid = unix.Gettid()
	close(p.ready)
	for {
		n, err := unix.EpollWait(p.ep, p.events, p.timeout())
		if err != nil && !errors.Is(err, unix.EINTR) {
			p.fail(fmt.Errorf("epoll_wait: %w", err))
		}
		for i := 0; i < n; i++ {
			fd := int(p.events[i].Fd)
			switch {
			case fd == p.ctl:
				if p.command() {
					return
				}
			case fd == p.caller.fd:
				p.read(&p.caller)
			case fd == p.carrier.fd && p.tcp:
				p.accept()
			case fd == p.carrier.fd:
				p.read(&p.carrier)
			default:
				if e := p.accepted[fd]; e != nil {
					p.read(e)
				}
			}
		}
		p.pace()
		p.flushAll()
		p.check()
		if time.Since(p.yielded) > peerYield {
			// Through the scheduler now and then: a goroutine it has not
			// seen for 10 ms is preempted and its P taken back whenever it
			// is in a system call, each time resetting sysmon to its 20 us
			// beat, thousands of wake-ups a second on sipedge's side.
			p.yielded = time.Now()
			runtime.Gosched()
		}
	}
}

// timeout is how long epoll may wait: until the next paced INVITE, else a
// second (to notice a stall).
func (p *loadPeers) timeout() int {
	if p.cmd.calls == 0 || p.cmd.rate <= 0 || p.placed >= p.cmd.calls {
		return 1000
	}
	due := p.start.Add(time.Duration(float64(p.placed) / p.cmd.rate * float64(time.Second)))
	// Rounded up: epoll counts milliseconds, and 0 would spin until due.
	return max(0, int((time.Until(due)+time.Millisecond-1)/time.Millisecond))
}

// command takes a command from the benchmark goroutine; it reports a stop.
func (p *loadPeers) command() bool {
	var b [8]byte
	_, _ = unix.Read(p.ctl, b[:])
	select {
	case cmd := <-p.cmds:
		if cmd.stop {
			return true
		}
		p.cmd, p.placed, p.err = cmd, 0, nil
		p.late = p.c.over(p.target) // what came after the last command ended
		p.start, p.lastEnd = time.Now(), time.Now()
		p.target = p.c
		p.target.add(cmd.calls)
		if cmd.rate <= 0 {
			w := uint64(cmd.window)
			if w == 0 || w > cmd.calls {
				w = cmd.calls
			}
			for range w {
				p.place()
			}
		}
	default:
	}
	return false
}

// over counts what c has beyond target, field by field: duplicates.
func (c loadCounts) over(target loadCounts) uint64 {
	a := [...]uint64{c.invites, c.trying, c.ringing, c.answered, c.byeOKs, c.bInvites, c.bAcks, c.bByes}
	b := [...]uint64{target.invites, target.trying, target.ringing, target.answered, target.byeOKs,
		target.bInvites, target.bAcks, target.bByes}
	var n uint64
	for i := range a {
		if a[i] > b[i] {
			n += a[i] - b[i]
		}
	}
	return n
}

// reached reports whether c has at least target of every message.
func (c loadCounts) reached(target loadCounts) bool {
	return c.invites >= target.invites && c.trying >= target.trying && c.ringing >= target.ringing &&
		c.answered >= target.answered && c.byeOKs >= target.byeOKs && c.bInvites >= target.bInvites &&
		c.bAcks >= target.bAcks && c.bByes >= target.bByes
}

func (c *loadCounts) add(n uint64) {
	c.invites += n
	c.trying += n
	c.ringing += n
	c.answered += n
	c.byeOKs += n
	c.bInvites += n
	c.bAcks += n
	c.bByes += n
}

// pace places the INVITEs due at the command's rate.
func (p *loadPeers) pace() {
	if p.cmd.calls == 0 || p.cmd.rate <= 0 {
		return
	}
	due := uint64(time.Since(p.start).Seconds()*p.cmd.rate) + 1
	for p.placed < min(due, p.cmd.calls) {
		p.place()
	}
}

// place sends the caller's INVITE for a new call.
func (p *loadPeers) place() {
	p.next++
	p.placed++
	p.c.invites++
	p.byeSent[p.next>>6&uint64(len(p.byeSent)-1)] &^= 1 << (p.next & 63)
	e := &p.caller
	e.out = wireInvite(p.tcp).Append(e.out, p.next, nil)
	e.ends = append(e.ends, len(e.out))
}

// check ends the command once every call ended with every message counted,
// or when calls stopped ending.
func (p *loadPeers) check() {
	if p.cmd.calls == 0 {
		return
	}
	switch {
	case p.err != nil:
	case p.c.reached(p.target):
	case time.Since(p.lastEnd) > peerStall:
		p.err = fmt.Errorf("no call ended for %v: got %+v, want %+v", peerStall, p.c, p.target)
	default:
		return
	}
	p.cmd.done <- loadResult{err: p.err, dups: p.late + p.c.over(p.target)}
	p.cmd = loadCmd{}
}

func (p *loadPeers) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// read takes what a socket holds and answers it.
func (p *loadPeers) read(e *endpoint) {
	if e.tcp {
		p.readStream(e)
		return
	}
	for {
		for i := range e.rxHdrs {
			e.rxHdrs[i].Hdr.Flags = 0
		}
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&e.rxHdrs[0])),
			uintptr(len(e.rxHdrs)), unix.MSG_DONTWAIT, 0, 0)
		if errno == unix.EAGAIN || errno == unix.EINTR {
			return
		}
		if errno != 0 {
			p.fail(fmt.Errorf("recvmmsg: %w", errno))
			return
		}
		n := int(r)
		for i := 0; i < n; i++ {
			h := &e.rxHdrs[i]
			if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
				p.fail(errors.New("a datagram from sipedge was truncated"))
				continue
			}
			p.handle(e, e.rxBuf[i*peerDgram:i*peerDgram+int(h.Len)])
		}
		if n < len(e.rxHdrs) {
			return
		}
	}
}

// readStream reads a stream until it would block and handles each whole
// message (RFC 3261 18.3 framing, parser.Frame).
func (p *loadPeers) readStream(e *endpoint) {
	for {
		if len(e.in) == cap(e.in) {
			p.fail(errors.New("a stream's read buffer is full"))
			return
		}
		n, err := unix.Read(e.fd, e.in[len(e.in):cap(e.in)])
		if err == unix.EAGAIN || err == unix.EINTR {
			return
		}
		if err != nil || n == 0 {
			if p.cmd.calls != 0 {
				p.fail(fmt.Errorf("sipedge closed a stream: %v", err))
			}
			p.drop(e)
			return
		}
		e.in = e.in[:len(e.in)+n]
		for {
			kind, size, err := parser.Frame(e.in, peerDgram)
			if err != nil {
				p.fail(fmt.Errorf("framing: %w", err))
				p.drop(e)
				return
			}
			if kind == parser.FrameNeedMore {
				break
			}
			if kind == parser.FrameMessage {
				p.handle(e, e.in[:size])
			}
			e.in = e.in[:copy(e.in, e.in[size:])]
		}
	}
}

// accept takes sipedge's connections to the carrier.
func (p *loadPeers) accept() {
	for {
		fd, _, err := unix.Accept4(p.carrier.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		e := &endpoint{fd: fd}
		e.init(true, true)
		p.accepted[fd] = e
		if err := p.watch(fd); err != nil {
			p.fail(err)
		}
	}
}

func (p *loadPeers) drop(e *endpoint) {
	_ = unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, e.fd, nil)
	delete(p.accepted, e.fd)
	_ = unix.Close(e.fd)
	if e == &p.caller {
		p.caller.fd = -1
	}
}

// handle takes one message sipedge sent on e.
func (p *loadPeers) handle(e *endpoint, b []byte) {
	if e.isCarrier {
		p.carrierGot(e, b)
	} else {
		p.callerGot(e, b)
	}
}

// callerGot takes a response to the caller: 100 and 180 are counted; the
// 200 to an INVITE is ACKed and the call hung up at once; the 200 to the
// BYE ends the call.
func (p *loadPeers) callerGot(e *endpoint, b []byte) {
	if len(b) < 12 || string(b[:8]) != "SIP/2.0 " {
		p.fail(fmt.Errorf("the caller got %q", enginerig.FirstLine(b)))
		return
	}
	switch string(b[8:12]) {
	case "100 ":
		p.c.trying++
		return
	case "180 ":
		p.c.ringing++
		return
	case "200 ":
	default:
		p.fail(fmt.Errorf("the caller got %q", enginerig.FirstLine(b)))
		return
	}
	m := &p.msg
	if err := m.Parse(b); err != nil {
		p.fail(fmt.Errorf("the caller's 200 does not parse: %w\n%s", err, b))
		return
	}
	cseq, err := m.CSeq()
	if err != nil {
		p.fail(err)
		return
	}
	switch cseq.Method {
	case parser.MethodInvite:
		p.c.answered++
		n, ok := callNumber(m.CallID())
		if err := m.To(&p.to); err != nil || !ok || len(p.to.Tag) == 0 {
			p.fail(fmt.Errorf("the caller's 200 has no To tag or call number:\n%s", b))
			return
		}
		e.out = wireAck(p.tcp).Append(e.out, n, p.to.Tag) // every 2xx is ACKed (RFC 3261 13.2.2.4)
		e.ends = append(e.ends, len(e.out))
		word, bit := &p.byeSent[n>>6&uint64(len(p.byeSent)-1)], uint64(1)<<(n&63)
		if *word&bit != 0 {
			return // a retransmitted 200: hung up already
		}
		*word |= bit
		e.out = wireBye(p.tcp).Append(e.out, n, p.to.Tag)
		e.ends = append(e.ends, len(e.out))
	case parser.MethodBye:
		p.c.byeOKs++
		p.lastEnd = time.Now()
		if p.cmd.calls != 0 && p.cmd.rate <= 0 && p.placed < p.cmd.calls {
			p.place()
		}
	default:
		p.fail(fmt.Errorf("the caller got a 200 to %s", cseq.MethodRaw))
	}
}

// callNumber reads n from the caller's Call-ID "caller-n@...".
func callNumber(callID []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(callID, []byte("caller-"))
	if !ok {
		return 0, false
	}
	end := bytes.IndexByte(rest, '@')
	if end < 0 {
		return 0, false
	}
	var n uint64
	for _, c := range rest[:end] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// carrierGot takes a request from sipedge to the carrier.
func (p *loadPeers) carrierGot(e *endpoint, b []byte) {
	m := &p.msg
	if err := m.Parse(b); err != nil {
		p.fail(fmt.Errorf("the carrier's message does not parse: %w\n%s", err, b))
		return
	}
	if m.IsResponse() {
		p.fail(fmt.Errorf("the carrier got %q", enginerig.FirstLine(b)))
		return
	}
	switch m.Method() {
	case parser.MethodInvite:
		p.c.bInvites++
		// The same tag for a retransmitted INVITE, so that its responses
		// repeat; 16 hex digits, so that every call's are of one length.
		p.tagBuf = append(p.tagBuf[:0], "carrier-"...)
		for h, i := xxhash.Sum64(m.CallID()), 60; i >= 0; i -= 4 {
			p.tagBuf = append(p.tagBuf, "0123456789abcdef"[h>>i&15])
		}
		t := p.tagBuf
		e.out = parser.AppendBody(parser.AppendResponse(e.out, m, 100, "Trying", nil), "", nil)
		e.ends = append(e.ends, len(e.out))
		e.out = parser.AppendResponse(e.out, m, 180, "Ringing", t)
		e.out = parser.AppendBody(append(e.out, carrierContact...), "", nil)
		e.ends = append(e.ends, len(e.out))
		e.out = parser.AppendResponse(e.out, m, 200, "OK", t)
		e.out = parser.AppendBody(append(e.out, carrierAnswer...), "", answerBody)
		e.ends = append(e.ends, len(e.out))
	case parser.MethodAck:
		p.c.bAcks++
	case parser.MethodBye:
		p.c.bByes++
		e.out = parser.AppendBody(parser.AppendResponse(e.out, m, 200, "OK", nil), "", nil)
		e.ends = append(e.ends, len(e.out))
	case parser.MethodOptions:
		e.out = parser.AppendBody(parser.AppendResponse(e.out, m, 200, "OK", nil), "", nil)
		e.ends = append(e.ends, len(e.out))
	default:
		p.fail(fmt.Errorf("the carrier got %q", enginerig.FirstLine(b)))
	}
}

func (p *loadPeers) flushAll() {
	p.flush(&p.caller)
	p.flush(&p.carrier)
	for _, e := range p.accepted {
		p.flush(e)
	}
}

// flush sends what is queued on e: one sendmmsg per batch of datagrams, or
// the stream's bytes.
func (p *loadPeers) flush(e *endpoint) {
	if len(e.ends) == 0 {
		return
	}
	defer func() { e.out, e.ends = e.out[:0], e.ends[:0] }()
	if e.fd < 0 {
		p.fail(errors.New("a message to send on a closed socket"))
		return
	}
	if e.tcp {
		p.writeStream(e)
		return
	}
	start, sent := 0, 0
	for sent < len(e.ends) {
		k := 0
		for ; k < len(e.txHdrs) && sent+k < len(e.ends); k++ {
			end := e.ends[sent+k]
			e.txIov[k].Base = &e.out[start]
			e.txIov[k].SetLen(end - start)
			e.txHdrs[k].Hdr.Iov = &e.txIov[k]
			e.txHdrs[k].Hdr.SetIovlen(1)
			start = end
		}
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&e.txHdrs[0])),
			uintptr(k), 0, 0, 0)
		if errno == unix.EINTR {
			start = e.startOf(sent)
			continue
		}
		if errno != 0 {
			p.fail(fmt.Errorf("sendmmsg: %w", errno))
			return
		}
		sent += int(r)
		start = e.startOf(sent)
	}
	runtime.KeepAlive(e.out)
}

func (e *endpoint) startOf(i int) int {
	if i == 0 {
		return 0
	}
	return e.ends[i-1]
}

// writeStream writes the queued bytes, waiting while the socket is full.
func (p *loadPeers) writeStream(e *endpoint) {
	b := e.out
	for len(b) > 0 {
		n, err := unix.Write(e.fd, b)
		if err == unix.EAGAIN {
			fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLOUT}}
			_, _ = unix.Poll(fds, 1000)
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			p.fail(fmt.Errorf("write: %w", err))
			return
		}
		b = b[n:]
	}
}

// do runs a command and waits for it.
func (p *loadPeers) do(cmd loadCmd) loadResult {
	cmd.done = make(chan loadResult, 1)
	p.cmds <- cmd
	p.kick()
	return <-cmd.done
}

func (p *loadPeers) kick() {
	one := [8]byte{1}
	_, _ = unix.Write(p.ctl, one[:])
}

// stop ends the peers' goroutine and closes their sockets.
func (p *loadPeers) stop() {
	select {
	case <-p.ready:
		p.cmds <- loadCmd{stop: true}
		p.kick()
		<-p.stopped
	default:
	}
	p.close()
}

func (p *loadPeers) close() {
	for _, e := range p.accepted {
		unix.Close(e.fd)
	}
	for _, fd := range []int{p.caller.fd, p.carrier.fd, p.ctl, p.ep} {
		if fd > 0 {
			unix.Close(fd)
		}
	}
}

// ---- sockets ----

var loopback = [4]byte{127, 0, 0, 1}

// dialUDP opens a UDP socket on 127.0.0.1 connected to sipedge: it sends
// with no address and takes datagrams from sipedge's port only.
func dialUDP(to netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	// Room for a window of calls' datagrams.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: loopback}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// dialTCP connects to sipedge and returns a non-blocking socket.
func dialTCP(to netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// listenTCP opens the carrier's listening socket on 127.0.0.1.
func listenTCP() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: loopback}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 64); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func localAddr(fd int) netip.AddrPort {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}
	}
	a, _ := sa.(*unix.SockaddrInet4)
	if a == nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
}

// ---- CPU clocks and sleeps ----

// processCPU is the CPU time of the whole process, every thread's.
func processCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// threadCPU is the CPU time thread tid of this process has used, read from
// any thread: Linux numbers a thread's CPU-time clock (^tid<<3)|6
// (CPUCLOCK_SCHED of one thread), as glibc's pthread_getcpuclockid does.
func threadCPU(tid int) time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(^int32(tid)<<3|6, &ts)
	return time.Duration(ts.Nano())
}

// processSleeps counts the voluntary context switches of every thread of
// the process, those that ended included (getrusage): each is a thread
// that blocked and had to be woken.
func processSleeps() int64 {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Nvcsw
}

// threadSleeps counts the voluntary context switches of thread tid of
// this process (/proc/self/task/TID/status).
func threadSleeps(tid int) int64 {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("voluntary_ctxt_switches:")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
