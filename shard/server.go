package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/panjf2000/gnet/v2"
	errorx "github.com/panjf2000/gnet/v2/pkg/errors"
	"golang.org/x/sys/unix"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/shard/timer"
	"github.com/sipedge/sipedge/transport"
)

// Handler is what the application runs on a shard. Each function is called
// on the shard's own loop only, never concurrently for one shard.
type Handler struct {
	// Message receives a parsed and validated message whose Call-ID hashes
	// to this shard. m and its views are valid only during the call.
	Message func(sh *Shard, m *parser.Message, from transport.Peer)
	// Timer receives the payload of a timer started on sh.Timers().
	Timer func(sh *Shard, p timer.Payload)
	// Tick runs after each timer advance, about every Config.Tick (optional).
	Tick func(sh *Shard, now time.Duration)
	// SendFailed reports that messages to peer were dropped because no
	// connection to it could be opened (optional): the dial failed or
	// never completed. It runs on the shard's loop, outside any other
	// handler call.
	SendFailed func(sh *Shard, peer transport.Peer)
}

// MaxShards and MaxListeners bound Config.Shards and Config.Listen.
const (
	MaxShards    = 256
	MaxListeners = 256
)

// Server is the sharded SIP runtime: a gnet engine with one shard per event
// loop. Create it with New, start it with Start, stop it with Shutdown.
type Server struct {
	cfg       Config
	listen    []transport.Listen
	newHander func(*Shard) Handler
	log       *slog.Logger
	metrics   *metrics.Set

	shards    []*Shard
	udpFD     []int // per listener, a dup of its datagram socket, to send from its port (-1 on a stream one)
	engine    gnet.Engine
	started   chan error
	wakerOpen chan gnet.Conn
	running   sync.WaitGroup
	origin    time.Time

	draining  atomic.Bool
	loopsUp   chan struct{}
	loopsOnce sync.Once
	tickKick  chan struct{} // buffered 1: a shard stopped polling (ticker.go)
	tickStop  chan struct{} // closed to end the ticker
	tickOnce  sync.Once
	ticks     *metrics.Counter
	ready     atomic.Bool // the shards know their loops; set once, before serving

	tcpMu    sync.Mutex // guards the connection counts, taken on open and close only
	tcpTotal int
	tcpPerIP map[netip.Addr]int

	gnet.BuiltinEventEngine
}

// New validates cfg and prepares a server. newHandler is called once per
// shard, before the shard receives anything.
func New(cfg Config, newHandler func(*Shard) Handler, log *slog.Logger, set *metrics.Set) (*Server, error) {
	cfg.setDefaults()
	if len(cfg.Listen) == 0 {
		return nil, errors.New("shard: listen: no address")
	}
	// A ConnID holds its shard in its top 8 bits, a Peer its listener in a
	// uint8: past these, bytes would be routed to the wrong loop or socket.
	if cfg.Shards > MaxShards {
		return nil, fmt.Errorf("shard: shards: %d: at most %d", cfg.Shards, MaxShards)
	}
	if len(cfg.Listen) > MaxListeners {
		return nil, fmt.Errorf("shard: listen: %d addresses: at most %d", len(cfg.Listen), MaxListeners)
	}
	s := &Server{cfg: cfg, newHander: newHandler, log: log, metrics: set,
		started: make(chan error, 1), wakerOpen: make(chan gnet.Conn, 1), loopsUp: make(chan struct{}),
		tickKick: make(chan struct{}, 1), tickStop: make(chan struct{}), tcpPerIP: make(map[netip.Addr]int)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.metrics == nil {
		s.metrics = metrics.NewSet()
	}
	for i, l := range cfg.Listen {
		// Port 0 is refused: every loop binds the port with SO_REUSEPORT.
		if !l.Transport.Served() || !l.Addr.Addr().IsValid() || l.Addr.Port() == 0 {
			return nil, fmt.Errorf("shard: listen[%d]: %q: want udp or tcp, an IP address and a port other than 0", i, l)
		}
	}
	s.ticks = s.metrics.NewCounter("sipedge_shard_ticks_total")
	s.listen = slices.Clone(cfg.Listen)
	s.origin = time.Now()
	s.udpFD = make([]int, len(s.listen))
	for i := range s.udpFD {
		s.udpFD[i] = -1
	}
	s.shards = make([]*Shard, cfg.Shards)
	for i := range s.shards {
		s.shards[i] = newShard(s, i)
	}
	return s, nil
}

// Shards returns the shards, indexed by shard number.
func (s *Server) Shards() []*Shard { return s.shards }

// Metrics returns the set holding the runtime's metrics.
func (s *Server) Metrics() *metrics.Set { return s.metrics }

// Start runs the engine and returns once every shard is ready.
func (s *Server) Start() error {
	if err := s.probeListen(); err != nil {
		return err
	}
	addrs := make([]string, len(s.listen))
	for i, l := range s.listen {
		addrs[i] = l.Transport.Network() + "://" + l.Addr.String() // gnet knows sockets, not transports
	}
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		err := gnet.Rotate(s, addrs,
			gnet.WithMulticore(true),
			gnet.WithNumEventLoop(len(s.shards)),
			gnet.WithReusePort(true),
			gnet.WithReuseAddr(true),
			gnet.WithLoadBalancing(gnet.RoundRobin),
			gnet.WithReadBufferCap(s.cfg.Limits.MaxMessageSize+1),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(gnetLogger{s.log}),
			gnet.WithTicker(true),
			gnet.WithSocketRecvBuffer(s.cfg.SocketRecvBuffer),
			gnet.WithSocketSendBuffer(s.cfg.SocketSendBuffer),
		)
		select {
		case s.started <- err:
		default:
			if err != nil {
				s.log.Error("engine stopped", "err", err)
			}
		}
	}()
	if err := <-s.started; err != nil {
		return fmt.Errorf("shard: start: %w", err)
	}
	<-s.loopsUp
	if err := s.registerWakers(); err != nil {
		_ = s.engine.Stop(context.Background())
		return err
	}
	s.ready.Store(true)
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		s.tick()
	}()
	s.checkBuffers()
	return nil
}

// checkBuffers warns when the kernel gave the UDP sockets smaller buffers
// than Config asks: it caps SO_RCVBUF and SO_SNDBUF at the sysctls
// net.core.rmem_max and wmem_max, and reports twice what it keeps (the
// rest is its bookkeeping, socket(7)).
func (s *Server) checkBuffers() {
	fd := s.anyUDPFD(true)
	if fd < 0 {
		fd = s.anyUDPFD(false)
	}
	if fd < 0 {
		return
	}
	for _, b := range [...]struct {
		opt, want   int
		key, sysctl string
	}{
		{unix.SO_RCVBUF, s.cfg.SocketRecvBuffer, "receive", "net.core.rmem_max"},
		{unix.SO_SNDBUF, s.cfg.SocketSendBuffer, "send", "net.core.wmem_max"},
	} {
		got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, b.opt)
		if b.want > 0 && err == nil && got < 2*b.want {
			s.log.Warn("the kernel capped a socket buffer: raise the sysctl", "buffer", b.key,
				"want_bytes", b.want, "got_bytes", got/2, "sysctl", b.sysctl)
		}
	}
}

// probeListen binds each listen address without SO_REUSEPORT and lets it
// go, reporting the first that fails. The loops bind with SO_REUSEPORT,
// which the kernel lets another process of the same user share: a second
// sipedge on the port would start and split its traffic, dialogs included,
// with the first. A plain bind fails if anything holds the address, and
// names it.
func (s *Server) probeListen() error {
	for i, l := range s.listen {
		var c io.Closer
		var err error
		if l.Transport.Stream() {
			c, err = net.Listen(l.Transport.Network(), l.Addr.String())
		} else {
			c, err = net.ListenPacket(l.Transport.Network(), l.Addr.String())
		}
		if err != nil {
			return fmt.Errorf("shard: listen[%d]: %q: %w", i, l.String(), err)
		}
		c.Close()
	}
	return nil
}

// OnBoot records the engine and the sockets datagram replies leave from.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.engine = eng
	for i, l := range s.listen {
		if l.Transport.Stream() {
			continue
		}
		fd, err := eng.DupListener(l.Transport.Network(), l.Addr.String())
		if err != nil {
			s.started <- fmt.Errorf("cannot dup %v listener %s: %w", l.Transport, l.String(), err)
			return gnet.Shutdown
		}
		s.udpFD[i] = fd
	}
	s.started <- nil
	return gnet.None
}

// registerWakers puts one private connection on every event loop. Waking it
// runs the loop's shard: it is how a shard learns of handed-over messages
// and timer ticks, and how the shard learns which loop is its own.
//
// gnet places registered connections round-robin, but OnBoot runs before
// the loops exist and they appear one by one, so a waker that lands on a
// loop already taken is closed and registered again.
func (s *Server) registerWakers() error {
	deadline := time.Now().Add(10 * time.Second)
	taken := make(map[gnet.EventLoop]bool)
	for _, sh := range s.shards {
		for {
			if time.Now().After(deadline) {
				return errors.New("shard: waker: event loops did not come up")
			}
			c, err := s.registerWaker(sh)
			if err != nil {
				if errors.Is(err, errorx.ErrEmptyEngine) {
					time.Sleep(time.Millisecond)
					continue
				}
				return err
			}
			if loop := c.EventLoop(); !taken[loop] {
				taken[loop] = true
				sh.loop, sh.waker = loop, c
				break
			}
			_ = c.Close()
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// registerWaker registers a connected UDP socket nobody sends on and
// returns its gnet connection once open.
func (s *Server) registerWaker(sh *Shard) (gnet.Conn, error) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("shard: waker: %w", err)
	}
	defer sink.Close()
	c, err := net.DialUDP("udp", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return nil, fmt.Errorf("shard: waker: %w", err)
	}
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), &waker{sh: sh}), c)
	ch, err := s.engine.Register(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	res := <-ch
	if res.Err != nil {
		return nil, fmt.Errorf("shard: waker: %w", res.Err)
	}
	return <-s.wakerOpen, nil
}

// OnTick tells Start that the event loops are up: gnet calls it first on
// a goroutine of its own right after it has created every loop and started
// them, the moment registerWakers may start (OnBoot is too early: it runs
// before the loops exist). gnet's ticker is not the shards' clock: it
// would wake its thread every Tick, and the server's own (ticker.go) rests
// while every shard polls. So OnTick asks not to be called again.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.loopsOnce.Do(func() { close(s.loopsUp) })
	return math.MaxInt64, gnet.None
}

// OnShutdown ends the ticker when the engine stops, whoever stops it.
func (s *Server) OnShutdown(gnet.Engine) { s.stopTicker() }

// Draining reports whether Shutdown has begun: applications stop taking new
// transactions and let running ones finish.
func (s *Server) Draining() bool { return s.draining.Load() }

// Drain marks the runtime draining (see Draining) without stopping it:
// Shutdown does it first; an owner that ends work of its own at a deadline
// calls it earlier.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops taking new work (Draining turns true), waits until busy
// reports false or ctx ends, then stops the engine.
func (s *Server) Shutdown(ctx context.Context, busy func() bool) error {
	s.Drain()
	for busy != nil && busy() {
		select {
		case <-ctx.Done():
			s.log.Warn("shutdown: drain deadline passed with work running")
			busy = nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	err := s.engine.Stop(context.Background())
	s.stopTicker() // OnShutdown did, unless the engine had stopped already
	s.running.Wait()
	for _, fd := range s.udpFD {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	return err
}

// now returns the runtime clock: time since Start, on the monotonic clock.
func (s *Server) now() time.Duration { return time.Since(s.origin) }

// shardOf returns the shard running on loop, nil before the server is ready.
func (s *Server) shardOf(loop gnet.EventLoop) *Shard {
	if !s.ready.Load() {
		return nil
	}
	for _, sh := range s.shards {
		if sh.loop == loop {
			return sh
		}
	}
	return nil
}

// waker marks a waker connection until OnOpen hands it over.
type waker struct{ sh *Shard }

// OnOpen registers wakers and admits TCP connections within the caps.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if w, ok := c.Context().(*waker); ok {
		c.SetContext(w.sh)
		s.wakerOpen <- c
		return nil, gnet.None
	}
	sh := s.shardOf(c.EventLoop())
	if sh == nil {
		return nil, gnet.Close
	}
	return sh.openTCP(c)
}

// OnClose releases a TCP connection.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	if tc, ok := c.Context().(*tcpConn); ok {
		tc.sh.closedTCP(tc, err)
	}
	return gnet.None
}

// OnTraffic runs the shard of the loop the bytes arrived on.
// Whatever the handlers sent meanwhile leaves when it returns (flush).
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	switch ctx := c.Context().(type) {
	case *Shard:
		ctx.run()
		ctx.flush()
		return gnet.None
	case *tcpConn:
		action := ctx.sh.readTCP(ctx)
		ctx.sh.flush()
		return action
	}
	sh := s.shardOf(c.EventLoop())
	if sh == nil {
		return gnet.None
	}
	sh.readUDP(c)
	sh.flush()
	sh.poll()
	return gnet.None
}
