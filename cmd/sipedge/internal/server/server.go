package server

import (
	"context"
	"crypto/subtle"
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

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
	"github.com/sipedge/sipedge/shard"
	"github.com/sipedge/sipedge/shard/timer"
)

// Server is a running sipedge.
type Server struct {
	cfg     *config.Config
	log     *slog.Logger
	policy  b2bua.Policy // the embedder's hooks, chained after the server's own
	rt      *shard.Server
	engines []*b2bua.Engine
	cdr     *cdr.Writer
	lcr     *lcr.Resolver
	// static is the static rate table the shards route by, read once per
	// new call; nil in API mode. The admin API replaces it (staticRoutes).
	static       atomic.Pointer[lcr.StaticTable]
	staticRoutes *staticRoutes
	health       *health.Registry
	// channels counts gateway groups' calls against their limits.
	channels *channels
	cps      *cps
	trunks   *trunks // the YAML's and the admin API's
	apps     []*shardApp

	runtimeSet, engineSet, cdrSet, lcrSet, healthSet, cpsSet, adminSet *metrics.Set

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
	trunkStat map[string]*trunkStats // trunk name -> its live calls and metrics, shared by the shards
	hops      dialledHops            // next hops of routes without a known group, once dialled
}

// New builds a server from a validated configuration; Start runs it.
func New(cfg *config.Config, log *slog.Logger) (*Server, error) {
	return NewWithPolicy(cfg, log, b2bua.Policy{})
}

// NewWithPolicy is New with a routing policy's hooks (see b2bua.Policy),
// which run besides the server's own: OnAnswer and OnRouteFailure after
// its per-carrier metrics (carriers.go), OnInvite and OnFailure alone.
// The hooks run on the shards' goroutines, several at once.
func NewWithPolicy(cfg *config.Config, log *slog.Logger, policy b2bua.Policy) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, policy: policy, runtimeSet: metrics.NewSet(), engineSet: metrics.NewSet(),
		cdrSet: metrics.NewSet(), lcrSet: metrics.NewSet(), healthSet: metrics.NewSet(), cpsSet: metrics.NewSet(),
		adminSet: metrics.NewSet()}
	s.reloadsOK = s.adminSet.NewCounter(`sipedge_config_reloads_total{result="ok"}`)
	s.reloadsRefused = s.adminSet.NewCounter(`sipedge_config_reloads_total{result="refused"}`)
	for _, name := range cfg.B2BUA.HeaderPolicy.Allow {
		if slices.ContainsFunc(identityHeaders, func(h string) bool { return strings.EqualFold(h, name) }) {
			log.Warn("b2bua.header_policy.allow lists an identity header, which is never copied: sipedge writes the B-leg's identity itself (RFC 3325)", "header", name)
		}
	}
	var err error
	var table *lcr.StaticTable
	if s.lcr, table, err = newResolver(cfg, s.lcrSet, log); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		s.closeParts(context.Background())
		return nil, err
	}
	s.staticRoutes = &staticRoutes{cfg: cfg, log: log, routes: cfg.LCR.StaticRoutes,
		known: func(g string) bool { _, ok := s.health.Group(g); return ok }}
	if cfg.LCR.APIURL == "" {
		s.static.Store(table)
		s.staticRoutes.table = &s.static
	}
	// Groups added at run time (the admin API, once started) pace their
	// dials as the YAML's do.
	s.channels = newChannels(cfg.RateLimit.Nodes, s.healthSet, healthGroups(cfg))
	if s.health, err = health.New(health.Options{Groups: healthGroups(cfg), Prober: prober{s},
		Logger: log, Metrics: s.healthSet,
		OnAdd: func(g health.GroupConfig) error {
			if err := s.cps.addGroup(g); err != nil {
				return err
			}
			s.channels.setGroup(g.Name, g.MaxConcurrentCalls)
			return nil
		},
		OnRemove: func(name string) { s.cps.removeGroup(name); s.channels.setGroup(name, 0) }}); err != nil {
		return fail(fmt.Errorf("gateway.groups: %w", err))
	}
	if s.cps, err = newCPS(cfg, s); err != nil {
		return fail(err)
	}
	if s.trunks, err = newTrunks(cfg, s.cps.ingress, s.trunkStats, log); err != nil {
		return fail(err)
	}
	maxSize := int64(cfg.CDR.MaxSizeMB) << 20
	if s.cdr, err = cdr.New(cdr.Options{Path: cfg.CDR.File, MaxSize: maxSize, MaxBackups: cfg.CDR.MaxBackups,
		Queue: cfg.CDR.Queue, Metrics: s.cdrSet, Log: log}); err != nil {
		return fail(fmt.Errorf("cdr.file: %w", err))
	}
	sc := shard.Config{Shards: cfg.Shards, Supported: nil,
		Limits: parser.Limits{MaxMessageSize: cfg.SIP.MaxMessageSize, MaxHeaders: cfg.SIP.MaxHeaders,
			MaxHeaderLine: cfg.SIP.MaxHeaderLine, MaxVias: cfg.SIP.MaxVias, MaxURILength: cfg.SIP.MaxURILength},
		TCP: shard.TCPConfig{MaxConns: cfg.SIP.TCP.MaxConns, MaxConnsPerIP: cfg.SIP.TCP.MaxConnsPerIP,
			FirstDataTimeout: cfg.SIP.TCP.FirstDataTimeout, MessageTimeout: cfg.SIP.TCP.MessageTimeout,
			IdleTimeout: cfg.SIP.TCP.IdleTimeout},
		SocketRecvBuffer: cfg.SIP.SocketReceiveBufferKB << 10, SocketSendBuffer: cfg.SIP.SocketSendBufferKB << 10,
		BatchInterval: cfg.SIP.BatchInterval}
	for _, l := range cfg.Listen {
		sc.Listen = append(sc.Listen, l.String())
	}
	// Flood protection for sources that are neither trunks nor carriers.
	sc.Flood = shard.FloodConfig{PerSecond: cfg.RateLimit.Flood.MessagesPerSec,
		Ban: cfg.RateLimit.Flood.Ban, Exempt: exemptFrom(cfg, s.health, s.hops.has, s.trunks.covers)}
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
	return s, nil
}

// identityHeaders are never copied from one leg to the other, whatever the
// header policy lists (see dialog/b2bua).
var identityHeaders = []string{"P-Asserted-Identity", "P-Preferred-Identity", "Privacy", "Remote-Party-ID"}

// closeParts stops what New started besides the runtime.
func (s *Server) closeParts(ctx context.Context) error {
	var err error
	if s.lcr != nil {
		s.lcr.Close()
	}
	if s.health != nil {
		s.health.Close()
	}
	if s.cps != nil {
		s.cps.limiter.Close()
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
		Txn: txn.Config{T1: cfg.SIP.T1, T2: cfg.SIP.T2, T4: cfg.SIP.T4,
			MaxStoredBytes: cfg.SIP.MaxTxnMemoryMB << 20},
		Sequence: route.SequenceOptions{RingTimeout: ringBound(cfg.B2BUA.RingTimeout),
			GlobalCauses: cfg.LCR.RerouteCauses, GroupCauses: s.groupCauses},
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
	for _, l := range cfg.Listen {
		switch {
		case l.Transport == "udp" && bc.LocalUDP == "":
			bc.LocalUDP = advertised(cfg, l).String()
		case l.Transport == "tcp" && bc.LocalTCP == "":
			bc.LocalTCP = advertised(cfg, l).String()
		}
	}
	if bc.LocalUDP == "" {
		bc.LocalUDP = bc.LocalTCP
	}
	if s.trunks != nil {
		bc.TrunkSet = &s.trunks.set
	}
	return bc
}

// exemptFrom returns the addresses never banned for flooding (issue 7):
// the trunks' sources (trunk: the YAML's and those added at run time, not
// those removed), the carriers' gateways as the health registry
// resolves them now (YAML groups, names resolved, groups added at run
// time), the YAML's static routes' next hops and Request-URI hosts, and
// those of the API's routes and of a static table put at run time once a
// call went there (dialled).
func exemptFrom(cfg *config.Config, gateways *health.Registry, dialled, trunk func(netip.Addr) bool) func(netip.Addr) bool {
	hops := make(map[netip.Addr]bool)
	for _, p := range cfg.LCR.StaticRoutes {
		for _, r := range p.Routes {
			for _, dest := range []string{r.NextHop, r.RURI} {
				if p, ok := hopOf(dest); ok {
					hops[p.Addr.Addr()] = true
				}
			}
		}
	}
	return func(a netip.Addr) bool {
		return gateways.Known(a) || hops[a] || dialled(a) || trunk(a)
	}
}

// ringBound maps b2bua.ring_timeout_secs (0 = none) onto the sequence's.
func ringBound(d time.Duration) time.Duration {
	if d == 0 {
		return route.NoRingBound
	}
	return d
}

// groupCauses returns a gateway group's reroute causes, nil when unset:
// the health registry holds the YAML groups and those added at run time.
func (s *Server) groupCauses(group string) []int {
	if c := s.health.RerouteCauses(group); len(c) > 0 {
		return c
	}
	return nil
}

func (s *Server) shardCount() int {
	if s.cfg.Shards > 0 {
		return s.cfg.Shards
	}
	return shard.DefaultShards()
}

// shardApp connects one shard to its engine.
type shardApp struct {
	s      *Server
	sh     *shard.Shard
	eng    *b2bua.Engine
	keyBuf []byte
	sel    health.Selector // this shard's gateway selection state

	carriers *carrierPolicy // per-carrier attempts and times (the Policy hooks)

	// warnUnknownGroup's pacing.
	unknownLogged     bool
	unknownLogAt      time.Duration
	unknownSuppressed int
}

// route is the engine's Router: a cached or static decision at once, else
// an LCR API lookup off the shard whose result is posted back (Decided).
func (a *shardApp) route(r *b2bua.RouteRequest) b2bua.Decision {
	group := ""
	if r.Trunk != nil {
		group = r.Trunk.Group
	}
	if t := a.s.static.Load(); t != nil {
		routes, ok := t.Lookup(string(r.Dialed))
		if !ok || len(routes) == 0 {
			return b2bua.Decision{Code: 404, Reason: "No Route"}
		}
		return b2bua.Decision{Routes: routes, Source: "static"}
	}
	attrs := a.trunkAttributes(r.Trunk)
	a.keyBuf = a.s.lcr.AppendKey(a.keyBuf[:0], group, string(r.Dialed), attrs)
	if d, ok := a.s.lcr.LookupCached(a.keyBuf); ok {
		return decisionOf(d)
	}
	// attrs is the configuration's, shared read-only with the resolver.
	req := &lcr.Request{CallID: string(r.CallID), From: string(r.From), DialedNumber: string(r.Dialed),
		To: string(r.To), Source: lcr.CallSource{IP: r.Source.Addr.Addr().String(), Port: int(r.Source.Addr.Port()),
			Transport: strings.ToLower(r.Source.Transport.String()), TrunkGroup: group}, Attributes: attrs}
	ref, sh, eng := r.Ref, a.sh, a.eng
	a.s.lcr.Lookup(req, func(d lcr.Decision) {
		sh.Post(func() { eng.Decided(ref, decisionOf(d), sh.Now()) })
	})
	return b2bua.Decision{Pending: true}
}

// trunkAttributes returns the attributes of the trunk a call came from
// (trunks[].attributes), nil for none: the LCR request's attributes and,
// for the names in lcr.attributes, part of the cache key.
func (a *shardApp) trunkAttributes(t *b2bua.Trunk) map[string]string {
	if d := a.s.trunks.dataOf(t); d != nil {
		return d.attributes
	}
	return nil
}

// advertised is the address sipedge writes into its Via and Contact for
// the socket l: config.Advertise, else l's own.
func advertised(cfg *config.Config, l config.Listen) netip.AddrPort {
	if ap, err := cfg.AdvertiseAddr(l.Addr.Port()); err == nil {
		return ap
	}
	return l.Addr
}

func (s *Server) newShardApp(sh *shard.Shard) (shard.Handler, error) {
	a := &shardApp{s: s, sh: sh, carriers: newCarrierPolicy(s.engineSet)}
	suffix := "@" + advertised(s.cfg, s.cfg.Listen[0]).Addr().String()
	eng, err := b2bua.New(s.b2buaConfig(sh.Index()), b2bua.Env{
		Send:           a.send,
		Clock:          wheelClock{sh.Timers()},
		MintCallID:     func(dst []byte) []byte { return sh.MintCallID(dst, suffix) },
		Finished:       a.finished,
		Router:         a.route,
		Resolve:        a.resolve,
		Outcome:        a.outcome,
		Pace:           a.pace,
		Policy:         chainPolicy(a.carriers.hooks(), s.policy),
		Admit:          a.admit,
		CPSReject:      a.cpsReject,
		TakeChannel:    s.channels.take,
		ReleaseChannel: s.channels.release,
		Credentials: func(t *b2bua.Target) (digest.Credentials, string, bool) {
			au := s.health.Auth(t.Group)
			if au == nil {
				return digest.Credentials{}, "", false
			}
			return digest.Credentials{Username: au.Username, Password: au.Password}, au.Realm, true
		},
		Draining: sh.Draining,
		Log:      s.log,
	})
	if err != nil {
		return shard.Handler{}, err
	}
	a.eng = eng
	s.engines = append(s.engines, eng)
	s.apps = append(s.apps, a)
	return shard.Handler{
		Message: func(sh *shard.Shard, m *parser.Message, from shard.Peer) {
			eng.Receive(m, txnPeer(from), sh.Now())
		},
		Timer: func(sh *shard.Shard, p timer.Payload) { eng.Timer(p.Kind, p.Arg, sh.Now()) },
		// The engine publishes its counts at most every millisecond of
		// traffic; each run of the loop brings those of a quiet one up to date.
		Tick: func(*shard.Shard, time.Duration) { eng.Publish() },
		SendFailed: func(sh *shard.Shard, to shard.Peer) {
			eng.PeerFailed(txnPeer(to), sh.Now())
		},
	}, nil
}

// txnPeer and shardPeer translate between the runtime's and the
// transaction layer's address of a peer. The transaction layer's opaque
// Conn carries the runtime's connection id on streams and the listener
// index on UDP, so replies leave from the socket the request came in on.
func txnPeer(p shard.Peer) txn.Peer {
	tp := txn.Peer{Addr: p.Addr, Transport: txn.TransportUDP, Conn: uint64(p.Listener)}
	if p.Transport == shard.TCP {
		tp.Transport, tp.Conn = txn.TransportTCP, uint64(p.Conn)
	}
	return tp
}

func shardPeer(p txn.Peer) shard.Peer {
	if p.Transport == txn.TransportTCP {
		return shard.Peer{Addr: p.Addr, Transport: shard.TCP, Conn: shard.ConnID(p.Conn)}
	}
	return shard.Peer{Addr: p.Addr, Transport: shard.UDP, Listener: uint8(p.Conn)}
}

func (a *shardApp) send(to txn.Peer, b []byte) { a.sh.Send(shardPeer(to), b) }

// wheelClock lets the engine arm timers on the shard's wheel.
type wheelClock struct{ w *timer.Wheel }

func (c wheelClock) StartAt(at time.Duration, kind uint8, arg uint64) uint64 {
	return uint64(c.w.StartAt(at, timer.Payload{Kind: kind, Arg: arg}))
}

func (c wheelClock) Stop(h uint64) bool { return c.w.Stop(timer.Handle(h)) }

// finished writes a call's CDR and counts it for its trunk.
func (a *shardApp) finished(c *b2bua.Call) {
	sum := c.Summary()
	a.carriers.ended(&sum)
	if td := a.s.trunks.dataOf(sum.Trunk); td != nil {
		td.stats.ended(&sum)
	}
	r := cdr.AcquireRecord()
	r.ACallID, r.BCallID = r.Text(sum.ACallID), r.Text(sum.BCallID)
	if sum.Trunk != nil {
		r.Trunk, r.TrunkGroup = sum.Trunk.Name, sum.Trunk.Group
	}
	r.Caller, r.Callee = r.Text(sum.Caller), r.Text(sum.Callee)
	r.DialedNumber = r.Callee
	r.SourceIP = sum.Source.Addr()
	r.TimeInvite = a.s.wall(a.sh, sum.Invite)
	r.TimeFirstProvisional = a.s.wall(a.sh, sum.FirstProvisional)
	r.TimeAnswer = a.s.wall(a.sh, sum.Answer)
	r.TimeEnd = a.s.wall(a.sh, sum.End)
	r.FinalCode, r.FinalReason = sum.FinalCode, r.Text(sum.FinalReason)
	switch sum.HangupSide {
	case "caller":
		r.HangupSide = cdr.HangupCaller
	case "callee":
		r.HangupSide = cdr.HangupCallee
	case "system":
		r.HangupSide = cdr.HangupSystem
	}
	r.Route, r.CarrierID = sum.Target.Group, sum.Target.CarrierID
	r.Rate, r.Currency = sum.Target.Rate, sum.Target.Currency
	if sum.Route != nil && sum.Answer != 0 {
		r.CDRFields = sum.Route.CDRFields // the seed: "when this carrier wins"
	}
	switch sum.RouteSource {
	case "static":
		r.RouteSource = cdr.RouteSourceStatic
	case "lcr":
		r.RouteSource = cdr.RouteSourceLCR
	case "fallback":
		r.RouteSource = cdr.RouteSourceFallback
	}
	for _, a := range sum.Attempts {
		r.Attempts = append(r.Attempts, cdr.Attempt{CarrierID: a.CarrierID, Status: a.Status,
			Elapsed: time.Duration(a.ElapsedMs) * time.Millisecond, Dialed: a.Dialed, Reason: a.Reason})
	}
	a.s.cdr.Write(r)
}

// wall converts a shard clock reading to wall time; 0 stays zero.
func (s *Server) wall(sh *shard.Shard, d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Now().Add(d - sh.Now())
}

// Start opens the SIP sockets and the admin API. On an error it releases
// what New built (a program embedding sipedge goes on running), and the
// Server is not to be used again.
func (s *Server) Start() error {
	if err := s.rt.Start(); err != nil {
		s.closeParts(context.Background())
		return err
	}
	s.health.Start()
	if !s.cfg.Admin.Listen.IsZero() {
		if err := s.startAdmin(); err != nil {
			s.rt.Shutdown(context.Background(), nil)
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

// LiveCalls counts the calls of every shard.
func (s *Server) LiveCalls() int {
	n := 0
	for _, e := range s.engines {
		n += e.LiveCalls()
	}
	return n
}

// Shutdown drains: new calls get 503 and /readyz turns false, running
// calls continue (in-dialog requests are served) until they end or the
// drain timeout passes. Calls still up then are ended by sipedge (BYE, or
// CANCEL and 503, on both legs) with their CDRs; then the runtime stops
// and the CDRs are flushed.
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
		s.endCalls(ctx)
	}
	err := s.rt.Shutdown(ctx, nil)
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
func (s *Server) endCalls(ctx context.Context) {
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
		case <-ctx.Done():
			return
		}
	}
}

// Reopen reopens the CDR file (SIGHUP after logrotate).
func (s *Server) Reopen() error { return s.cdr.Reopen() }

func (s *Server) startAdmin() error {
	mux := http.NewServeMux()
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
	mux.Handle("/v1/gateway/", serialized(&s.changeMu, s.health.Handler()))
	trunks := serialized(&s.changeMu, s.trunks.handler())
	mux.Handle("/v1/trunks", trunks)
	mux.Handle("/v1/trunks/", trunks)
	mux.Handle("/v1/lcr/static_routes", serialized(&s.changeMu, s.staticRoutes.handler()))
	mux.HandleFunc("POST /v1/reload", s.postReload)
	var h http.Handler = mux
	if tok := s.cfg.Admin.Token; tok != "" {
		h = bearer(tok, mux)
	} else {
		h = loopbackWrites(mux)
	}
	ln, err := net.Listen("tcp", s.cfg.Admin.Listen.String())
	if err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	s.adminAddr = ln.Addr()
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

// adminReadTimeout bounds reading a whole admin request, body included,
// and adminIdleTimeout a kept-alive connection between requests: without
// them a client that stalls holds a socket and a goroutine for ever.
var adminReadTimeout, adminIdleTimeout = 10 * time.Second, 60 * time.Second

// bearer requires "Authorization: Bearer TOKEN" on every request.
func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackWrites guards an admin API without a token: anyone who reaches
// the port may read it, but only a client on the same host may change it
// (the gateway groups calls are routed to).
func loopbackWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			ap, err := netip.ParseAddrPort(r.RemoteAddr)
			if err != nil || !ap.Addr().IsLoopback() {
				http.Error(w, "admin.token is not set: changes are accepted from this host only", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// WriteMetrics writes every metric in Prometheus text format.
func (s *Server) WriteMetrics(w io.Writer) {
	s.runtimeSet.WritePrometheus(w)
	s.engineSet.WritePrometheus(w)
	s.cdrSet.WritePrometheus(w)
	s.lcrSet.WritePrometheus(w)
	s.healthSet.WritePrometheus(w)
	s.cpsSet.WritePrometheus(w)
	s.adminSet.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}
