package carrier

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/ratelimit"
)

// Options configure a Plane.
type Options struct {
	// Groups are the configuration's gateway groups: fixed until a reload
	// (SyncFixed).
	Groups []health.GroupConfig
	// Prober sends the groups' OPTIONS probes (health.Options.Prober).
	Prober health.Prober
	// Limiter configures the carriers' calls-per-second accounts; the
	// Plane owns the limiter it builds (Close).
	Limiter ratelimit.Options
	// Fleet holds the groups' max_concurrent_calls, each as its Channel
	// "group:<name>": across the fleet with the fleet's Redis, else
	// ceil(limit / the fleet's Options.Nodes) per node. nil: the Plane
	// makes one of its own, in process, with Nodes.
	Fleet *fleet.Fleet
	// Nodes is how many nodes share the carriers (ratelimit.nodes) when
	// Fleet is nil: each keeps to its share of a group's
	// max_concurrent_calls. 0 means 1.
	Nodes int
	// HealthMetrics receive the groups' and members' metrics (the health
	// registry's and sipedge_gateway_calls); CarrierMetrics the
	// per-carrier attempts and times. nil: private sets.
	HealthMetrics, CarrierMetrics *metrics.Set
	// Log gets the plane's warnings; nil means slog.Default().
	Log *slog.Logger
	// Quality, when set, is the configuration of the quality statistics
	// (quality.New's, with QualityOptions): the plane keeps the Monitor
	// (Quality), a collector per shard fed by the shard's reports, orders
	// each call's carriers by quality.mode (Shard.Order) and dials no
	// disabled carrier (Shard.Reserve). nil: none of it.
	Quality *quality.Config
	// QualityOptions are the Monitor's options. Shards is how many
	// Shards the plane will make (NewShard), one collector each; Clock is
	// ignored: Start runs the reader on the shards' clock
	// (ShardOptions.Now). Logger defaults to Log.
	QualityOptions quality.Options
}

// Plane is a node's carrier plane: the gateway groups and their health,
// the carriers' CPS accounts and reject rules, their channel limits and
// credentials, the next hops dialled, and the per-carrier metrics. It is
// safe for concurrent use: the control plane (the admin API, a reload)
// changes it while the shards dial through their own Shard views.
type Plane struct {
	health   *health.Registry
	cps      *cps
	channels *channels
	hops     dialledHops
	ownFleet *fleet.Fleet // the in-process fleet New made, when Options had none
	metrics  *metrics.Set
	log      *slog.Logger
	quality  *quality.Monitor // nil without Options.Quality
	shards   int              // its collectors
	clock    func() time.Duration
}

// New builds a plane with the configuration's groups.
func New(opts Options) (*Plane, error) {
	p := &Plane{log: opts.Log, metrics: opts.CarrierMetrics}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.metrics == nil {
		p.metrics = metrics.NewSet()
	}
	healthSet := opts.HealthMetrics
	if healthSet == nil {
		healthSet = metrics.NewSet()
	}
	limiter, err := ratelimit.New(opts.Limiter)
	if errors.Is(err, ratelimit.ErrRedisURL) {
		return nil, fmt.Errorf("ratelimit.redis: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	if p.cps, err = newCPS(limiter, p.log, opts.Groups); err != nil {
		limiter.Close()
		return nil, err
	}
	f := opts.Fleet
	if f == nil {
		// No Redis: a fleet of this node alone, which starts nothing.
		if f, err = fleet.New(fleet.Options{Config: fleet.Config{NodeID: "local"}, Nodes: opts.Nodes, Logger: p.log}); err != nil {
			limiter.Close()
			return nil, err
		}
		p.ownFleet = f
	}
	p.channels = newChannels(f, healthSet)
	for _, g := range opts.Groups {
		p.channels.setGroup(g.Name, g.MaxConcurrentCalls)
	}
	// Groups added at run time (the admin API, a reload) pace their dials
	// and count their channels as the configuration's do.
	p.health, err = health.New(health.Options{Groups: opts.Groups, Prober: opts.Prober, Logger: p.log,
		Metrics: healthSet, OnAdd: p.onAdd, OnRemove: p.onRemove})
	if err != nil {
		limiter.Close()
		return nil, fmt.Errorf("gateway.groups: %w", err)
	}
	if opts.Quality != nil {
		qo := opts.QualityOptions
		qo.Clock = nil // Start's: the shards' clock
		if qo.Logger == nil {
			qo.Logger = p.log
		}
		if p.quality, err = quality.New(*opts.Quality, qo); err != nil {
			p.Close()
			return nil, fmt.Errorf("quality: %w", err)
		}
		p.shards = qo.Shards
	}
	return p, nil
}

// onAdd keeps the CPS accounts and channel limits in step with a group
// added or replaced at run time; an invalid CPS limit refuses the group.
func (p *Plane) onAdd(g health.GroupConfig) error {
	if err := p.cps.addGroup(g); err != nil {
		return err
	}
	p.channels.setGroup(g.Name, g.MaxConcurrentCalls)
	return nil
}

// onRemove forgets a group's CPS matchers and its channel limit; the
// calls still holding its channels give them back.
func (p *Plane) onRemove(name string) {
	p.cps.removeGroup(name)
	p.channels.setGroup(name, 0)
}

// Start starts the groups' probes and the quality statistics' reader, on
// the shards' clock (ShardOptions.Now: the shards of a node share one).
// Call it once the Shards are made.
func (p *Plane) Start() {
	p.health.Start()
	if p.quality != nil && p.clock != nil {
		p.quality.Start(p.clock)
	}
}

// Close stops the probes, the CPS limiter, the quality statistics and the
// in-process fleet New made (a fleet of Options is its owner's to close).
func (p *Plane) Close() {
	p.health.Close()
	p.cps.limiter.Close()
	if p.quality != nil {
		p.quality.Close()
	}
	if p.ownFleet != nil {
		p.ownFleet.Close()
	}
}

// Quality returns the quality statistics (their scores, disables and admin
// API: quality.Monitor), nil without Options.Quality.
func (p *Plane) Quality() *quality.Monitor { return p.quality }

// Limiter returns the carriers' CPS limiter.
func (p *Plane) Limiter() *ratelimit.Limiter { return p.cps.limiter }

// Handler returns the admin API of the gateway groups (health.Registry's,
// /v1/gateway/...): groups added, replaced and removed there keep their
// CPS accounts and channel limits in step.
func (p *Plane) Handler() http.Handler { return p.health.Handler() }

// AddGroup adds a runtime group, or replaces the runtime group of its name.
func (p *Plane) AddGroup(g health.GroupConfig) error { return p.health.AddGroup(g) }

// RemoveGroup removes a runtime group; the calls dialled through it go on.
func (p *Plane) RemoveGroup(name string) error { return p.health.RemoveGroup(name) }

// Groups returns every group's configuration, defaults filled in.
func (p *Plane) Groups() []health.GroupConfig { return p.health.Groups() }

// Group returns a group's configuration and its members' health.
func (p *Plane) Group(name string) (health.GroupStatus, bool) { return p.health.Group(name) }

// RerouteCauses returns a group's reroute causes, nil when it sets none
// (route.SequenceOptions.GroupCauses).
func (p *Plane) RerouteCauses(group string) []int {
	if c := p.health.RerouteCauses(group); len(c) > 0 {
		return c
	}
	return nil
}

// CheckGroup returns the error adding g would meet over its CPS limit,
// changing nothing: a reload checks all its groups before it adds any.
func (p *Plane) CheckGroup(g health.GroupConfig) error { return checkGroup(g) }

// PlanFixed checks groups, a reloaded configuration's, and says what
// SyncFixed would change, changing nothing.
func (p *Plane) PlanFixed(groups []health.GroupConfig) (health.FixedChanges, error) {
	return p.health.PlanFixed(groups)
}

// SyncFixed makes groups the fixed ones (health.Registry.SyncFixed),
// calling between after the groups added and replaced and before those
// removed.
func (p *Plane) SyncFixed(groups []health.GroupConfig, between func()) (health.FixedChanges, error) {
	return p.health.SyncFixed(groups, between)
}

// Exempt reports whether a is a carrier's: a gateway a group resolves to
// now, or a next hop a call was sent to. The flood guard never bans one.
func (p *Plane) Exempt(a netip.Addr) bool { return p.health.Known(a) || p.hops.has(a) }

// ShardOptions connect a Shard to its shard.
type ShardOptions struct {
	// Paced delivers, on any goroutine, a CPS reservation that Pace
	// answered Pending: the owner posts it to the shard's call core.
	Paced func(ref uint64, p Pace)
	// Now is the shard's clock, for the pacing of its warnings and the
	// quality reader (Start). Every shard of a plane shares one.
	Now func() time.Duration
	// Index is the shard's, from 0: its quality collector, of
	// QualityOptions.Shards.
	Index int
}

// NewShard returns the view of one shard. With quality statistics, the
// shard's Index must be below QualityOptions.Shards.
func (p *Plane) NewShard(opts ShardOptions) *Shard {
	s := &Shard{p: p, paced: opts.Paced, now: opts.Now, metrics: newCarrierMetrics(p.metrics)}
	if q := p.quality; q != nil {
		if opts.Index < 0 || opts.Index >= p.shards {
			panic(fmt.Sprintf("BUG: carrier: shard %d of %d quality collectors", opts.Index, p.shards))
		}
		s.quality, s.collector = q, q.Collector(opts.Index)
		s.ordered = q.Mode() != quality.ModeOff
		if p.clock == nil {
			p.clock = opts.Now
		}
	}
	return s
}

// outcomeOf maps an attempt's outcome on its gateway onto the passive
// health signal.
func outcomeOf(code int) health.Outcome {
	switch {
	case code == OutcomeNoResponse:
		return health.OutcomeNoResponse
	case code == OutcomeTransport:
		return health.OutcomeTransportError
	case code == OutcomeAbandoned:
		return health.OutcomeAbandoned
	case code >= 200 && code < 300:
		return health.OutcomeAnswered
	case code == 503:
		return health.OutcomeStatus503
	}
	return health.OutcomeOther
}
