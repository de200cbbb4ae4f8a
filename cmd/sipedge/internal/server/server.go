package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/metricdoc"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/journal"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/quality/redisstore"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
	"github.com/sipedge/sipedge/shard"
	"github.com/sipedge/sipedge/shard/timer"
	"github.com/sipedge/sipedge/transport"
)

// Server is a running sipedge.
type Server struct {
	cfg     *config.Config
	log     *slog.Logger
	policy  b2bua.Policy // the embedder's hooks
	rt      *shard.Server
	engines []*b2bua.Engine
	live    atomic.Pointer[[]*b2bua.Engine] // engines, once all are built: what LiveCalls reads from any goroutine
	cdr     *cdr.Writer
	lcr     *lcr.Resolver
	// static is the static rate table the shards route by, read once per
	// new call; nil in API mode. The admin API replaces it (staticRoutes).
	static       atomic.Pointer[lcr.StaticTable]
	staticRoutes *staticRoutes
	// carriers is the carrier plane: the gateway groups and their health,
	// the carriers' CPS accounts, channels and credentials.
	carriers *carrier.Plane
	groups   *groups // the admin API's gateway groups, in the shared layer
	trunks   *trunks // the YAML's and the admin API's
	apps     []*shardApp
	// fleet is this node's membership of the fleet (fleet:), or the node
	// alone, in process: the carrier plane's and trunks' channel limits,
	// the shared runtime state, decision drops and the call journal.
	fleet       *fleet.Fleet
	journal     *journal.Journal // the call journal (fleet.call_journal), nil without it
	layerFields                  // the file's and the shared layers of the runtime state (shared.go)

	// disables keeps quality routing's disables in the decision cache's
	// Redis without fleet.redis; nil without one (with fleet.redis they
	// are the fleet's shared state: qualityshared.go).
	disables *redisstore.Store

	runtimeSet, engineSet, cdrSet, lcrSet, healthSet, cpsSet, adminSet, fleetSet, qualitySet *metrics.Set

	// configFile is the file cfg came from, "" for the embedded example;
	// POST /v1/reload reads it again. cfg stays what sipedge started with:
	// what needs a restart is compared against it, and the reloadable parts
	// are compared against what the registries hold now.
	configFile string
	// changeMu serialises reloads and the admin API's changes.
	changeMu                  sync.Mutex
	reloadsOK, reloadsRefused *metrics.Counter

	admin     *http.Server
	adminAddr net.Addr
	adminDone chan struct{}
	trunkMu   sync.Mutex
	trunkStat map[string]*b2bua.TrunkStats // trunk name -> its live calls and metrics, shared by the shards
	memory    *memoryRelease               // returns the tables' memory to the OS after a peak
}

// New builds a server from a validated configuration; Start runs it.
func New(cfg *config.Config, log *slog.Logger) (*Server, error) {
	return NewWithPolicy(cfg, log, b2bua.Policy{})
}

// NewWithPolicy is New with a routing policy's hooks (see b2bua.Policy):
// OnAnswer and OnRouteFailure run after the carrier plane recorded the
// attempt in the per-carrier metrics. The hooks run on the shards'
// goroutines, several at once.
func NewWithPolicy(cfg *config.Config, log *slog.Logger, policy b2bua.Policy) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, policy: policy, runtimeSet: metrics.NewSet(), engineSet: metrics.NewSet(),
		cdrSet: metrics.NewSet(), lcrSet: metrics.NewSet(), healthSet: metrics.NewSet(), cpsSet: metrics.NewSet(),
		adminSet: metrics.NewSet(), fleetSet: metrics.NewSet(), qualitySet: metrics.NewSet()}
	s.shared = make(sharedDocs)
	s.reloadsOK = s.adminSet.NewCounter(`sipedge_config_reloads_total{result="ok"}`)
	s.reloadsRefused = s.adminSet.NewCounter(`sipedge_config_reloads_total{result="refused"}`)
	for _, name := range cfg.B2BUA.HeaderPolicy.Allow {
		if slices.ContainsFunc(identityHeaders, func(h string) bool { return strings.EqualFold(h, name) }) {
			log.Warn("b2bua.header_policy.allow lists an identity header, which is never copied: sipedge writes the B-leg's identity itself (RFC 3325)", "header", name)
		}
	}
	var err error
	var table *lcr.StaticTable
	if s.lcr, table, err = newResolver(cfg, s.lcrSet, log, s.qualityScores); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		s.closeParts(context.Background())
		return nil, err
	}
	maxSize := int64(cfg.CDR.MaxSizeMB) << 20
	if s.cdr, err = cdr.New(cdr.Options{Path: cfg.CDR.File, MaxSize: maxSize, MaxBackups: cfg.CDR.MaxBackups,
		Queue: cfg.CDR.Queue, Metrics: s.cdrSet, Log: log}); err != nil {
		return fail(fmt.Errorf("cdr.file: %w", err))
	}
	// The fleet before what it keeps (channels, shared state), after what
	// it calls back (the decision cache, the CDR writer).
	if s.fleet, err = s.newFleet(); err != nil {
		return fail(err)
	}
	s.staticRoutes = &staticRoutes{cfg: cfg, log: log, file: cfg.LCR.StaticRoutes, fileTable: table, fleet: s.fleet,
		known: func(g string) bool { _, ok := s.carriers.Group(g); return ok }}
	if cfg.LCR.APIURL == "" {
		s.static.Store(table)
		s.staticRoutes.table = &s.static
	}
	// Quality disables are the fleet's shared state with fleet.redis, else
	// kept in the decision cache's Redis, if any.
	qo := quality.Options{Shards: s.shardCount(), Metrics: s.qualitySet, Logger: log}
	if cfg.Fleet.Redis != "" {
		qo.Store = fleetDisables{s.fleet}
	} else if s.disables, err = disableStore(cfg, log); err != nil {
		return fail(err)
	} else if s.disables != nil {
		qo.Store = s.disables
	}
	if s.carriers, err = carrier.New(carrier.Options{Groups: cfg.Gateway.Groups, Prober: prober{s},
		Limiter: ratelimit.Options{Config: ratelimit.Config{Redis: cfg.RateLimit.Redis,
			DeadlineMS: int(cfg.RateLimit.Deadline / time.Millisecond), FailureMode: cfg.RateLimit.FailureMode,
			Nodes: cfg.RateLimit.Nodes}, Batch: cfg.RateLimit.Batch, BatchMinRate: cfg.RateLimit.BatchMinRate,
			Metrics: s.cpsSet, Logger: log},
		Fleet: s.fleet, HealthMetrics: s.healthSet, CarrierMetrics: s.engineSet, Log: log,
		Quality: &cfg.Quality, QualityOptions: qo}); err != nil {
		return fail(err)
	}
	// The trunks' ingress CPS: in process, no Redis on the way in.
	ingress, err := ratelimit.NewLocal(ratelimit.Options{})
	if err != nil {
		return fail(err)
	}
	var trunkChannels func(string, int) *fleet.Channel // without fleet.redis, each node counts its trunks' calls
	if cfg.Fleet.Redis != "" {
		trunkChannels = func(name string, limit int) *fleet.Channel { return s.fleet.Channel("trunk:"+name, limit) }
	}
	if s.trunks, err = newTrunks(cfg, ingress, s.trunkStats, trunkChannels, log); err != nil {
		return fail(err)
	}
	s.trunks.fleet = s.fleet
	s.groups = &groups{carriers: s.carriers, fleet: s.fleet, log: log}
	sc := shard.Config{Shards: cfg.Shards, Supported: b2bua.OptionTags(),
		Limits: parser.Limits{MaxMessageSize: cfg.SIP.MaxMessageSize, MaxHeaders: cfg.SIP.MaxHeaders,
			MaxHeaderLine: cfg.SIP.MaxHeaderLine, MaxVias: cfg.SIP.MaxVias, MaxURILength: cfg.SIP.MaxURILength},
		TCP: shard.TCPConfig{MaxConns: cfg.SIP.TCP.MaxConns, MaxConnsPerIP: cfg.SIP.TCP.MaxConnsPerIP,
			FirstDataTimeout: cfg.SIP.TCP.FirstDataTimeout, MessageTimeout: cfg.SIP.TCP.MessageTimeout,
			IdleTimeout: cfg.SIP.TCP.IdleTimeout},
		SocketRecvBuffer: cfg.SIP.SocketReceiveBufferKB << 10, SocketSendBuffer: cfg.SIP.SocketSendBufferKB << 10,
		BatchInterval: cfg.SIP.BatchInterval, BatchIntervalMax: cfg.SIP.BatchIntervalMax}
	sc.Listen = cfg.Listen
	// Flood protection for sources that are neither trunks nor carriers.
	sc.Flood = shard.FloodConfig{PerSecond: cfg.RateLimit.Flood.MessagesPerSec,
		Ban: cfg.RateLimit.Flood.Ban, Exempt: exemptFrom(cfg, s.carriers.Exempt, s.trunks.covers)}
	var appErr error // shard.New builds the shards one after another, here
	s.rt, err = shard.New(sc, func(sh *shard.Shard) shard.Handler {
		h, err := s.newShardApp(sh)
		appErr = errors.Join(appErr, err)
		return h
	}, log, s.runtimeSet)
	if err = errors.Join(err, appErr); err != nil {
		s.closeParts(context.Background())
		return nil, err
	}
	engines := slices.Clone(s.engines)
	s.live.Store(&engines)
	// The shared layer over the file's, before the listeners open.
	if err := s.fleet.Follow(s.applyShared); err != nil {
		log.Warn("fleet: cannot read the shared state yet: this node starts from its file and applies the shared state once Redis answers",
			"error", err)
	}
	return s, nil
}

// identityHeaders are never copied from one leg to the other, whatever the
// header policy lists (see dialog/b2bua).
var identityHeaders = []string{"P-Asserted-Identity", "P-Preferred-Identity", "Privacy", "Remote-Party-ID"}

// closeParts stops what New started besides the runtime: the fleet after
// the last call (it gives the channels back and writes the journal's last
// ends), the CDR writer after the fleet (whose lost calls it writes).
func (s *Server) closeParts(ctx context.Context) error {
	var err error
	if s.lcr != nil {
		s.lcr.Close()
	}
	if s.carriers != nil {
		s.carriers.Close() // the quality statistics' last disable written first
	}
	if s.disables != nil {
		s.disables.Close()
	}
	if s.journal != nil {
		s.journal.Close() // the last ends, into the fleet's journal
	}
	if s.fleet != nil {
		s.fleet.Close()
	}
	if s.cdr != nil {
		err = s.cdr.Close(ctx)
	}
	return err
}

// b2buaConfig maps the file's settings onto one shard's engine.
func (s *Server) b2buaConfig(shardIdx int) b2bua.Config {
	cfg := s.cfg
	bc := b2bua.Config{
		RejectUnknown: cfg.B2BUA.UnknownSource == "reject",
		HeaderAllow:   cfg.B2BUA.HeaderPolicy.Allow,
		MaxDuration:   cfg.B2BUA.MaxCallDuration,
		ReferCode:     cfg.B2BUA.ReferResponse,
		SessionTimer: b2bua.SessionTimer{Uphold: cfg.B2BUA.SessionTimer.Mode == config.SessionTimerUphold,
			Interval: cfg.B2BUA.SessionTimer.Interval, MinSE: time.Duration(cfg.B2BUA.SessionTimer.MinSE) * time.Second},
		Txn: txn.Config{T1: cfg.SIP.T1, T2: cfg.SIP.T2, T4: cfg.SIP.T4,
			MaxStoredBytes: cfg.SIP.MaxTxnMemoryMB << 20},
		Sequence: route.SequenceOptions{RingTimeout: ringBound(cfg.B2BUA.RingTimeout),
			GlobalCauses: cfg.LCR.RerouteCauses, GroupCauses: s.carriers.RerouteCauses},
		Metrics: s.engineSet,
		Shard:   shardIdx,

		DefaultNumberPolicy: cfg.B2BUA.DefaultNumberPolicy,
		AssertIdentity:      cfg.B2BUA.AssertIdentity,
		NumberPolicies:      make(map[string]b2bua.NumberPolicy),
	}
	for _, np := range cfg.NumberPolicies {
		bc.NumberPolicies[np.Name] = b2bua.NumberPolicy{National: np.Format == "national",
			CountryCode: np.CountryCode, NationalPrefix: np.NationalPrefix}
	}
	if n := cfg.B2BUA.MaxConcurrentCalls; n > 0 {
		// The limit is per node; each shard takes its share.
		bc.MaxCalls = (n + s.shardCount() - 1) / s.shardCount()
	}
	// Each transport's first listen address (a transport with none uses
	// the first one's: LocalAddrs.For).
	for _, l := range cfg.Listen {
		if bc.Local[l.Transport] == "" {
			bc.Local[l.Transport] = advertised(cfg, l).String()
		}
	}
	if s.trunks != nil {
		bc.TrunkSet = &s.trunks.set
	}
	return bc
}

// exemptFrom returns the addresses never banned for flooding: the trunks'
// sources (trunk: the YAML's and those added at run time, not those
// removed), the carriers' (carrier: the gateways as the carrier plane
// resolves them now, YAML groups and those added at run time, and the
// next hops calls were sent to), and the YAML's static routes' next hops
// and Request-URI hosts from the start.
func exemptFrom(cfg *config.Config, carrier, trunk func(netip.Addr) bool) func(netip.Addr) bool {
	hops := make(map[netip.Addr]bool)
	for _, p := range cfg.LCR.StaticRoutes {
		for _, r := range p.Routes {
			for _, dest := range []string{r.NextHop, r.RURI} {
				if a, ok := hopAddr(dest); ok {
					hops[a] = true
				}
			}
		}
	}
	return func(a netip.Addr) bool {
		return carrier(a) || hops[a] || trunk(a)
	}
}

// hopAddr is the address of a route's next hop, or of its ruri's host.
func hopAddr(dest string) (netip.Addr, bool) {
	if dest == "" {
		return netip.Addr{}, false
	}
	return carrier.HopAddr(dest)
}

// ringBound maps b2bua.ring_timeout_secs (0 = none) onto the sequence's.
func ringBound(d time.Duration) time.Duration {
	if d == 0 {
		return route.NoRingBound
	}
	return d
}

func (s *Server) shardCount() int {
	if s.cfg.Shards > 0 {
		return s.cfg.Shards
	}
	return shard.DefaultShards()
}

// shardApp connects one shard to its engine.
type shardApp struct {
	sh  *shard.Shard
	eng *b2bua.Engine
}

// advertised is the address sipedge writes into its Via and Contact for
// the socket l: config.Advertise, else l's own.
func advertised(cfg *config.Config, l transport.Listen) netip.AddrPort {
	if ap, err := cfg.AdvertiseAddr(l.Addr.Port()); err == nil {
		return ap
	}
	return l.Addr
}

// newShardApp builds a shard's engine, its carrier plane view and its
// routing decision, whose answers that come later (a CPS reservation in
// Redis, an LCR API lookup) are posted back to the shard.
func (s *Server) newShardApp(sh *shard.Shard) (shard.Handler, error) {
	a := &shardApp{sh: sh}
	suffix := "@" + advertised(s.cfg, s.cfg.Listen[0]).Addr().String()
	carriers := s.carriers.NewShard(carrier.ShardOptions{Now: sh.Now, Index: sh.Index(),
		Paced: func(ref uint64, p carrier.Pace) { sh.Post(func() { a.eng.Paced(ref, p, sh.Now()) }) }})
	router := lcr.NewRouter(s.lcr, &s.static,
		func(ref uint64, d route.Decision) { sh.Post(func() { a.eng.Decided(ref, d, sh.Now()) }) })
	env := b2bua.Env{
		Send:       sh.Send,
		Clock:      shardClock{sh: sh, w: sh.Timers()},
		MintCallID: func(dst []byte) []byte { return sh.MintCallID(dst, suffix) },
		Carriers:   carriers,
		Router:     router,
		CDR:        s.cdr,
		Policy:     s.policy,
		Draining:   sh.Draining,
		Log:        s.log,
	}
	if s.journal != nil {
		env.Journal = s.journal
	}
	eng, err := b2bua.New(s.b2buaConfig(sh.Index()), env)
	if err != nil {
		return shard.Handler{}, err
	}
	a.eng = eng
	s.engines = append(s.engines, eng)
	s.apps = append(s.apps, a)
	return shard.Handler{
		Message: func(sh *shard.Shard, m *parser.Message, from transport.Peer) {
			eng.Receive(m, from, sh.Now())
		},
		Timer: func(sh *shard.Shard, p timer.Payload) { eng.Timer(p.Kind, p.Arg, sh.Now()) },
		// The engine publishes its counts at most every millisecond of
		// traffic; each run of the loop brings those of a quiet one up to
		// date, and seals the quality statistics' sampling interval once
		// it has passed (at least once a second: shard.Server wakes an idle
		// loop that often).
		Tick: func(_ *shard.Shard, now time.Duration) {
			eng.Publish()
			carriers.Tick(now)
		},
		SendFailed: func(sh *shard.Shard, to transport.Peer) {
			eng.PeerFailed(to, sh.Now())
		},
	}, nil
}

// shardClock lets the engine arm timers on the shard's wheel and read its
// time as wall time.
type shardClock struct {
	sh *shard.Shard
	w  *timer.Wheel
}

func (c shardClock) StartAt(at time.Duration, kind uint8, arg uint64) uint64 {
	return uint64(c.w.StartAt(at, timer.Payload{Kind: kind, Arg: arg}))
}

func (c shardClock) Stop(h uint64) bool { return c.w.Stop(timer.Handle(h)) }

// Wall converts a time on the shard's clock to wall time.
func (c shardClock) Wall(at time.Duration) time.Time { return time.Now().Add(at - c.sh.Now()) }

// Start opens the SIP sockets and the admin API. On an error it releases
// what New built (a program embedding sipedge goes on running), and the
// Server is not to be used again.
func (s *Server) Start() error {
	if err := s.rt.Start(); err != nil {
		s.closeParts(context.Background())
		return err
	}
	s.carriers.Start()
	s.memory = newMemoryRelease(s.txnStoredBytes, s.log, s.runtimeSet)
	s.memory.start()
	if !s.cfg.Admin.Listen.IsZero() {
		if err := s.startAdmin(); err != nil {
			s.rt.Shutdown(context.Background(), nil)
			s.memory.stop()
			s.closeParts(context.Background())
			return err
		}
	}
	s.log.Info("sipedge started", "listen", fmt.Sprint(s.cfg.Listen), "advertise", s.cfg.Advertise, "shards", len(s.rt.Shards()), "admin", s.AdminAddr())
	return nil
}

// AdminAddr returns the admin API's address, "" when it is off.
func (s *Server) AdminAddr() string {
	if s.adminAddr == nil {
		return ""
	}
	return s.adminAddr.String()
}

// txnStoredBytes sums the bytes every shard's transaction table keeps.
func (s *Server) txnStoredBytes() int64 {
	var n int64
	for _, e := range s.engines {
		n += e.StoredBytes()
	}
	return n
}

// LiveCalls counts the calls of every shard; any goroutine may call it.
func (s *Server) LiveCalls() int {
	engines := s.live.Load()
	if engines == nil {
		return 0 // still building them
	}
	n := 0
	for _, e := range *engines {
		n += e.LiveCalls()
	}
	return n
}

// Shutdown drains: new calls get 503 and /readyz turns false, running
// calls continue (in-dialog requests are served) until they end or the
// drain timeout passes. Calls still up then are ended by sipedge (BYE, or
// CANCEL and 503, on both legs) with their CDRs, and sipedge lingers until
// the transactions that ended them complete (retransmitted until answered,
// a carrier's Digest challenge answered) or b2bua.drain_linger_secs pass.
// Then the runtime stops and the CDRs are flushed. When ctx ends (a second
// SIGTERM), Shutdown stops waiting at once: the calls still up are ended
// all the same, one BYE each, and every CDR is flushed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.log.Info("draining", "calls", s.LiveCalls(), "timeout", s.cfg.B2BUA.DrainTimeout)
	dctx, cancel := context.WithTimeout(ctx, s.cfg.B2BUA.DrainTimeout)
	defer cancel()
	s.rt.Drain()
	for s.LiveCalls() > 0 && dctx.Err() == nil {
		select {
		case <-dctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := s.LiveCalls(); n > 0 {
		s.log.Warn("drain timeout: ending the calls still up", "calls", n)
		s.endCalls()
	}
	s.linger(ctx)
	// What is left is local and quick, and loses nothing if done: the
	// CDRs queued are written whatever ctx says.
	ctx = context.WithoutCancel(ctx)
	err := s.rt.Shutdown(ctx, nil)
	s.memory.stop()
	err = errors.Join(err, s.closeParts(ctx))
	if s.admin != nil {
		s.admin.Close()
		<-s.adminDone
	}
	s.log.Info("stopped")
	return err
}

// endCalls ends every call on its own shard (Engine.EndAll) and waits for
// the shards, at most a second each: the BYEs and CANCELs leave, and the
// CDRs reach the writer before it is closed.
func (s *Server) endCalls() {
	for _, a := range s.apps {
		done := make(chan struct{})
		a.sh.Post(func() {
			a.eng.EndAll(a.sh.Now())
			close(done)
		})
		select {
		case <-done:
		case <-time.After(time.Second):
			s.log.Error("drain: a shard did not end its calls", "shard", a.sh.Index())
		}
	}
}

// linger keeps the runtime running until no engine has a transaction
// left unsettled (Engine.Unsettled: the BYEs and CANCELs that ended the
// calls, the BYEs answering a carrier's challenge to them, the 503s
// awaiting their ACKs), b2bua.drain_linger_secs pass or ctx ends. The
// shards are asked on their own goroutines, every 20 ms: the call path
// takes no lock for it.
func (s *Server) linger(ctx context.Context) {
	bound := s.cfg.B2BUA.DrainLinger
	if bound <= 0 {
		return
	}
	start := time.Now()
	for logged := false; ; logged = true {
		n, ok := s.unsettled(ctx)
		switch {
		case !ok:
			return
		case n == 0:
			if logged {
				s.log.Info("drain: every transaction settled", "waited", time.Since(start).Round(time.Millisecond))
			}
			return
		case time.Since(start) >= bound:
			s.log.Warn("drain: stopping with transactions unsettled", "transactions", n, "linger", bound)
			return
		case !logged:
			s.log.Info("drain: waiting for the transactions ending the calls", "transactions", n, "linger", bound)
		}
		select {
		case <-ctx.Done():
			s.log.Warn("drain: stopping at once, transactions unsettled", "transactions", n)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// unsettled sums Engine.Unsettled over the shards, each asked on its own
// goroutine; ok is false when ctx ended or a shard did not answer within
// a second.
func (s *Server) unsettled(ctx context.Context) (n int, ok bool) {
	counts := make(chan int, len(s.apps))
	for _, a := range s.apps {
		a.sh.Post(func() { counts <- a.eng.Unsettled() })
	}
	timeout := time.After(time.Second)
	for range s.apps {
		select {
		case k := <-counts:
			n += k
		case <-timeout:
			s.log.Error("drain: a shard did not count its transactions")
			return 0, false
		case <-ctx.Done():
			s.log.Warn("drain: stopping at once")
			return 0, false
		}
	}
	return n, true
}

// Reopen reopens the CDR file (SIGHUP after logrotate).
func (s *Server) Reopen() error { return s.cdr.Reopen() }

func (s *Server) startAdmin() error {
	mux := s.adminRoutes()
	ln, err := net.Listen("tcp", s.cfg.Admin.Listen.String())
	if err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	s.adminAddr = ln.Addr()
	h := newAdminGuard(s.cfg.Admin, ln.Addr().(*net.TCPAddr).AddrPort(), mux)
	s.admin = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: adminReadTimeout, IdleTimeout: adminIdleTimeout}
	s.adminDone = make(chan struct{})
	go func() {
		defer close(s.adminDone)
		if err := s.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin API stopped", "err", err)
		}
	}()
	return nil
}

// adminMux is the admin API's mux with the patterns registered on it,
// which docs/admin-api.md must document (adminapi_test.go).
type adminMux struct {
	*http.ServeMux
	patterns []string
}

func (m *adminMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *adminMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// adminRoutes returns the admin API's routes, without the guard (every
// endpoint is in docs/admin-api.md).
func (s *Server) adminRoutes() *adminMux {
	mux := &adminMux{ServeMux: http.NewServeMux()}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.WriteMetrics(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.rt.Draining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("/v1/gateway/", serialized(&s.changeMu, s.groups.handler()))
	trunks := serialized(&s.changeMu, s.trunks.handler())
	mux.Handle("/v1/trunks", trunks)
	mux.Handle("/v1/trunks/", trunks)
	mux.Handle("/v1/lcr/static_routes", serialized(&s.changeMu, s.staticRoutes.handler()))
	q := s.carriers.Quality().Handler()
	mux.Handle("/v1/quality", q)
	mux.Handle("/v1/quality/", q)
	mux.HandleFunc("POST /v1/reload", s.postReload)
	mux.HandleFunc("GET /v1/fleet", s.getFleet)
	mux.HandleFunc("DELETE /v1/lcr/cache", s.deleteLCRCache)
	mux.HandleFunc("GET /v1/lcr/cache", s.getLCRCache)
	mux.HandleFunc("POST /v1/route", s.postRoute)
	mux.HandleFunc("GET /v1/calls", s.getCalls)
	mux.HandleFunc("DELETE /v1/calls/{a_call_id}", s.deleteCall)
	return mux
}

// adminReadTimeout bounds reading a whole admin request, body included,
// and adminIdleTimeout a kept-alive connection between requests: without
// them a client that stalls holds a socket and a goroutine for ever.
var adminReadTimeout, adminIdleTimeout = 10 * time.Second, 60 * time.Second

// WriteMetrics writes every metric in Prometheus text format, each family
// with its # HELP and # TYPE lines from metricdoc (docs/metrics.md).
func (s *Server) WriteMetrics(w io.Writer) {
	var b bytes.Buffer
	s.runtimeSet.WritePrometheus(&b)
	s.engineSet.WritePrometheus(&b)
	s.cdrSet.WritePrometheus(&b)
	s.lcrSet.WritePrometheus(&b)
	s.healthSet.WritePrometheus(&b)
	s.cpsSet.WritePrometheus(&b)
	s.adminSet.WritePrometheus(&b)
	s.fleetSet.WritePrometheus(&b)
	s.qualitySet.WritePrometheus(&b)
	metrics.WriteProcessMetrics(&b)
	_ = metricdoc.Write(w, b.Bytes()) // a scraper gone away is no error of ours
}
