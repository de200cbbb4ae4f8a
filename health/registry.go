package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/transport"
)

// Errors returned by AddGroup and RemoveGroup; compare with errors.Is.
var (
	// ErrInvalidGroup: the group's configuration is not valid. The error
	// lists every problem.
	ErrInvalidGroup = errors.New("health: invalid gateway group")
	// ErrFixedGroup: the group comes from the YAML configuration; it
	// changes only when the file is reloaded (SyncFixed) or with a restart.
	ErrFixedGroup = errors.New("health: gateway group is defined in the YAML configuration and fixed until the file is reloaded")
	// ErrUnknownGroup: no group has that name.
	ErrUnknownGroup = errors.New("health: unknown gateway group")
)

// Options configure a Registry. Only Groups may need to be set; the rest
// have defaults.
type Options struct {
	// Groups are the groups of the YAML configuration: added by New and
	// fixed (RemoveGroup and AddGroup refuse them).
	Groups []GroupConfig
	// Prober sends the OPTIONS probes; nil = no group is probed (members
	// marked down by calls come back after passive.down_secs).
	Prober Prober
	// Resolve looks a DNS name up (default: net.DefaultResolver.LookupNetIP
	// with network "ip").
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// ResolveInterval is how often DNS names are resolved again (default
	// 60 s); ResolveTimeout bounds one lookup (default 5 s).
	ResolveInterval time.Duration
	ResolveTimeout  time.Duration
	// Logger gets one line per state change (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives the per-member metrics (default a new set).
	Metrics *metrics.Set
	// OnAdd and OnRemove hear of the groups added, replaced and removed
	// after New (AddGroup, RemoveGroup, SyncFixed; not Groups), under the
	// registry's lock: the user of what the registry stores without
	// interpreting (a group's CPS limit) applies it there. OnAdd is called
	// once the group is known to be valid and before it is published; its
	// error refuses the group.
	OnAdd    func(GroupConfig) error
	OnRemove func(name string)
}

// Registry holds the gateway groups and their members' health.
//
// Pick, PickLastResort, ReportCall and Cooldown are for the shards:
// lock-free, on a snapshot published atomically and per-member atomics.
// AddGroup, RemoveGroup, Groups, Group and Handler are for the control
// plane; writers are serialised among themselves and never block readers.
type Registry struct {
	snap  atomic.Pointer[snapshot]
	epoch time.Time
	clock func() time.Duration // the registry clock: time since epoch (tests set their own)
	log   *slog.Logger
	set   *metrics.Set

	prober         Prober
	onAdd          func(GroupConfig) error
	onRemove       func(string)
	resolve        func(ctx context.Context, host string) ([]netip.Addr, error)
	resolveEvery   time.Duration
	resolveTimeout time.Duration

	mu     sync.Mutex // serialises writers of snap
	syncMu sync.Mutex // serialises SyncFixed

	known    atomic.Pointer[map[netip.Addr]struct{}] // the members' addresses (Known)
	knownMu  sync.Mutex                              // serialises rebuilds of known
	free     []int                                   // slots of removed groups
	nextSlot int

	wake      chan struct{}
	tracked   map[*state]struct{} // the probe loop's: members with a nextProbe
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
}

// snapshot is an immutable view of the groups, replaced whole on a change.
type snapshot struct {
	groups map[string]*group
	order  []*group // YAML groups first, then runtime groups as added
}

// group is one immutable version of a gateway group.
type group struct {
	name         string
	cfg          GroupConfig // with its defaults
	fixed        bool
	slot         int // index of the group's state in Selectors
	alg          uint8
	transport    transport.Kind
	settings     *settings
	members      []member // by priority, then as configured
	tiers        []tier
	allTiers     []tier   // one tier of every member: a panic's
	firstStates  []*state // the first tier's members' (panicking's fast path)
	equalWeights bool
	panicPercent int
	gs           *groupState
}

// groupState is what every version of a group shares: its panic as the
// probe loop last logged it, and its metrics.
type groupState struct {
	panicking   atomic.Bool
	rescues     [2]*metrics.Counter // picks despite marks calls left: panic, last resort
	metricNames []string
}

const (
	algWeighted uint8 = iota
	algRoundRobin
	algHash
)

type member struct {
	weight    int64
	invWeight float64 // 1/weight, for weighted rendezvous hashing
	seed      uint64  // rendezvous hashing seed, from uri and address
	st        *state
	uri       string
	index     int
}

type tier struct{ start, end int }

// New returns a registry holding opts.Groups, fixed. DNS names are resolved
// before it returns. Call Start to run probing and re-resolution.
func New(opts Options) (*Registry, error) {
	r := &Registry{
		epoch:          time.Now(),
		log:            opts.Logger,
		set:            opts.Metrics,
		prober:         opts.Prober,
		onAdd:          opts.OnAdd,
		onRemove:       opts.OnRemove,
		resolve:        opts.Resolve,
		resolveEvery:   cmp.Or(opts.ResolveInterval, 60*time.Second),
		resolveTimeout: cmp.Or(opts.ResolveTimeout, 5*time.Second),
		wake:           make(chan struct{}, 1),
		tracked:        map[*state]struct{}{},
	}
	r.clock = func() time.Duration { return time.Since(r.epoch) }
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.set == nil {
		r.set = metrics.NewSet()
	}
	if r.resolve == nil {
		r.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.snap.Store(&snapshot{groups: map[string]*group{}})
	for _, g := range opts.Groups {
		if _, ok := r.snap.Load().groups[g.Name]; ok && g.Name != "" {
			r.Close()
			return nil, fmt.Errorf("cannot add group %q: %w: duplicate name", g.Name, ErrInvalidGroup)
		}
		if _, err := r.addGroup(g, addInitial); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Start runs the probe loop (probes, cooldown expiry, passive recovery of
// unprobed groups) and the DNS re-resolution loop, each a goroutine of its
// own. Calling it again does nothing.
func (r *Registry) Start() {
	r.startOnce.Do(func() {
		r.wg.Add(2)
		go r.probeLoop()
		go r.resolveLoop()
	})
}

// Close stops the goroutines Start started and waits for them. Pick and
// the rest keep working on the last state.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
	})
}

// now is the registry clock: monotonic time since New.
func (r *Registry) now() time.Duration { return r.clock() }

// AddGroup adds a runtime group, or replaces the runtime group of that name.
// Members whose uri and address are unchanged keep their health; the
// others start up (or unresolvable). Routing sees the change as soon as
// AddGroup returns. DNS names are resolved first (up to ResolveTimeout).
// Errors wrap ErrInvalidGroup or ErrFixedGroup.
func (r *Registry) AddGroup(cfg GroupConfig) error {
	_, err := r.addGroup(cfg, addRuntime)
	return err
}

// addMode says whose group addGroup adds.
type addMode uint8

const (
	// addRuntime: the admin API's; a fixed group of its name is not
	// replaced; OnAdd applies it.
	addRuntime addMode = iota
	// addInitial: one of Options.Groups, fixed; the caller set it up
	// itself (no OnAdd).
	addInitial
	// addSynced: one of SyncFixed's, fixed, replacing any group of its
	// name; OnAdd applies it.
	addSynced
)

// addGroup adds or replaces a group and reports whether it replaced one.
func (r *Registry) addGroup(cfg GroupConfig, mode addMode) (bool, error) {
	fixed := mode != addRuntime
	cfg, err := cfg.normalize()
	if err != nil {
		return false, fmt.Errorf("cannot add group %q: %w", cfg.Name, err)
	}
	type dest struct {
		host string
		port uint16
		ip   netip.Addr
	}
	dests := make([]dest, len(cfg.Destinations))
	var hosts []string
	for i, d := range cfg.Destinations {
		host, port, ip, _ := parseAddress(d.Address) // checked by normalize
		dests[i] = dest{host, port, ip}
		if !ip.IsValid() && !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	resolved := r.resolveAll(context.Background(), hosts)

	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	prev := old.groups[cfg.Name]
	if prev != nil && prev.fixed && mode == addRuntime {
		return false, fmt.Errorf("cannot replace group %q: %w", cfg.Name, ErrFixedGroup)
	}
	if mode != addInitial && r.onAdd != nil {
		// Last check, first change: nothing below fails.
		if err := r.onAdd(cfg); err != nil {
			return false, fmt.Errorf("cannot add group %q: %w: %w", cfg.Name, ErrInvalidGroup, err)
		}
	}
	set := &settings{group: cfg.Name, transport: cfg.Transport, probe: cfg.Probe, passive: cfg.Passive}
	if !cfg.Passive.Disabled {
		outcomes := cfg.Passive.Outcomes
		if len(outcomes) == 0 {
			outcomes = []string{PassiveNoResponse, PassiveStatus503, PassiveTransportError}
		}
		for _, o := range outcomes {
			switch o {
			case PassiveNoResponse:
				set.counts[OutcomeNoResponse] = true
			case PassiveStatus503:
				set.counts[OutcomeStatus503] = true
			case PassiveTransportError:
				set.counts[OutcomeTransportError] = true
			}
		}
	}
	g := &group{name: cfg.Name, cfg: cfg, fixed: fixed, transport: cfg.Transport, settings: set, equalWeights: true,
		panicPercent: *cfg.PanicThreshold}
	switch cfg.Algorithm {
	case AlgorithmRoundRobin:
		g.alg = algRoundRobin
	case AlgorithmHash:
		g.alg = algHash
	}
	kept := map[*state]bool{}
	for i, d := range cfg.Destinations {
		var st *state
		if prev != nil {
			st = prev.find(d.URI, d.Address)
		}
		if st != nil {
			kept[st] = true
		} else {
			st = &state{uri: d.URI, address: d.Address, port: dests[i].port}
			st.settings.Store(set)
			if ip := dests[i].ip; ip.IsValid() {
				ap := netip.AddrPortFrom(ip, dests[i].port)
				st.setAddr(&ap)
			} else {
				st.host = dests[i].host
				res := resolved[st.host]
				r.applyResolved(st, res.addrs, res.err)
			}
		}
		h := fnv.New64a()
		h.Write([]byte(d.URI))
		h.Write([]byte{0})
		h.Write([]byte(d.Address))
		g.members = append(g.members, member{weight: int64(d.Weight), invWeight: 1 / float64(d.Weight), seed: mix64(h.Sum64()), st: st, uri: d.URI, index: i})
		if d.Weight != cfg.Destinations[0].Weight {
			g.equalWeights = false
		}
	}
	slices.SortStableFunc(g.members, func(a, b member) int {
		return cmp.Compare(cfg.Destinations[a.index].Priority, cfg.Destinations[b.index].Priority)
	})
	for i := range g.members {
		p := cfg.Destinations[g.members[i].index].Priority
		if i == 0 || p != cfg.Destinations[g.members[i-1].index].Priority {
			g.tiers = append(g.tiers, tier{start: i})
		}
		g.tiers[len(g.tiers)-1].end = i + 1
	}
	g.allTiers = []tier{{start: 0, end: len(g.members)}}
	for i := range g.tiers[0].end {
		g.firstStates = append(g.firstStates, g.members[i].st)
	}
	if prev != nil {
		g.gs = prev.gs
		g.slot = prev.slot
		for i := range prev.members {
			if st := prev.members[i].st; !kept[st] {
				r.retire(st)
			}
		}
	} else {
		g.gs = &groupState{}
		r.registerGroupMetrics(g.gs, g.name)
		g.slot = r.allocSlot()
	}
	for i := range g.members {
		st := g.members[i].st
		if kept[st] {
			st.settings.Store(set)
		} else {
			r.registerMetrics(st, g.name)
		}
	}

	next := &snapshot{groups: make(map[string]*group, len(old.groups)+1), order: make([]*group, 0, len(old.order)+1)}
	for _, og := range old.order {
		if og == prev {
			next.order = append(next.order, g)
		} else {
			next.order = append(next.order, og)
		}
		next.groups[og.name] = og
	}
	if prev == nil {
		next.order = append(next.order, g)
	}
	next.groups[g.name] = g
	r.snap.Store(next)
	r.rebuildKnown()
	r.kick()

	verb := "added"
	if prev != nil {
		verb = "updated"
	}
	r.log.Info("gateway group "+verb, "group", g.name, "fixed", fixed, "members", len(g.members), "kept", len(kept))
	return prev != nil, nil
}

// RemoveGroup removes a runtime group: routing stops choosing it as soon
// as RemoveGroup returns, and its metrics are unregistered. Errors wrap
// ErrUnknownGroup or ErrFixedGroup.
func (r *Registry) RemoveGroup(name string) error { return r.removeGroup(name, false) }

// removeGroup removes a group, a fixed one only when fixedToo is set.
func (r *Registry) removeGroup(name string, fixedToo bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	g := old.groups[name]
	if g == nil {
		return fmt.Errorf("cannot remove group %q: %w", name, ErrUnknownGroup)
	}
	if g.fixed && !fixedToo {
		return fmt.Errorf("cannot remove group %q: %w", name, ErrFixedGroup)
	}
	next := &snapshot{groups: make(map[string]*group, len(old.groups)), order: make([]*group, 0, len(old.order))}
	for _, og := range old.order {
		if og != g {
			next.order = append(next.order, og)
			next.groups[og.name] = og
		}
	}
	r.snap.Store(next)
	r.rebuildKnown()
	if r.onRemove != nil {
		r.onRemove(name)
	}
	for i := range g.members {
		r.retire(g.members[i].st)
	}
	r.unregisterGroupMetrics(g.gs)
	r.free = append(r.free, g.slot)
	r.kick()
	r.log.Info("gateway group removed", "group", name, "fixed", g.fixed)
	return nil
}

// FixedChanges are the group names SyncFixed changes, never nil: added
// (new names), replaced (a fixed group whose configuration changed, or a
// runtime group that becomes fixed) and removed (fixed groups no longer
// given). Groups neither added nor replaced are untouched.
type FixedChanges struct {
	Added    []string `json:"added"`
	Replaced []string `json:"replaced"`
	Removed  []string `json:"removed"`
}

// PlanFixed checks groups as SyncFixed does and returns the changes it
// would make now, changing nothing. OnAdd is not consulted: a caller that
// refuses groups in OnAdd checks them itself before SyncFixed.
func (r *Registry) PlanFixed(groups []GroupConfig) (FixedChanges, error) {
	_, ch, err := r.planFixed(groups)
	return ch, err
}

// SyncFixed makes groups the fixed set, as a configuration file reloaded
// defines it: a group of a new name is added, fixed; a fixed group whose
// configuration (defaults filled in) is unchanged is left as it is; one
// that changed, and a runtime group of a name in groups, are replaced as
// AddGroup replaces (members with the same uri and address keep their
// health) and are fixed from then on; fixed groups not in groups are
// removed; runtime groups of other names are kept. OnAdd and OnRemove run
// as for AddGroup and RemoveGroup.
//
// between, when not nil, runs after the additions and replacements and
// before the removals: the caller switches what refers to the groups (a
// routing table) there, so that routing never names a group not yet added.
//
// Every group is checked before anything changes; the error then wraps
// ErrInvalidGroup. An OnAdd refusal stops SyncFixed part way, the changes
// before it kept: callers check what their OnAdd refuses first. Calls of
// SyncFixed are serialised; AddGroup and RemoveGroup may run concurrently
// (they cannot touch a fixed group).
func (r *Registry) SyncFixed(groups []GroupConfig, between func()) (FixedChanges, error) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	changed, ch, err := r.planFixed(groups)
	if err != nil {
		return ch, err
	}
	for _, g := range changed {
		if _, err := r.addGroup(g, addSynced); err != nil {
			return ch, err
		}
	}
	if between != nil {
		between()
	}
	for _, name := range ch.Removed {
		if err := r.removeGroup(name, true); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// planFixed checks groups and returns those to add or replace (normalized)
// and the changes SyncFixed would make.
func (r *Registry) planFixed(groups []GroupConfig) ([]GroupConfig, FixedChanges, error) {
	ch := FixedChanges{Added: []string{}, Replaced: []string{}, Removed: []string{}}
	s := r.snap.Load()
	var changed []GroupConfig
	names := make(map[string]bool, len(groups))
	for _, g := range groups {
		n, err := g.normalize()
		if err != nil {
			return nil, ch, fmt.Errorf("cannot add group %q: %w", g.Name, err)
		}
		if names[n.Name] {
			return nil, ch, fmt.Errorf("cannot add group %q: %w: duplicate name", n.Name, ErrInvalidGroup)
		}
		names[n.Name] = true
		switch prev := s.groups[n.Name]; {
		case prev == nil:
			ch.Added = append(ch.Added, n.Name)
		case !prev.fixed || !reflect.DeepEqual(prev.cfg, n):
			ch.Replaced = append(ch.Replaced, n.Name)
		default:
			continue
		}
		changed = append(changed, n)
	}
	for _, g := range s.order {
		if g.fixed && !names[g.name] {
			ch.Removed = append(ch.Removed, g.name)
		}
	}
	return changed, ch, nil
}

// retire marks a member state gone and unregisters its metrics. Called
// under r.mu.
func (r *Registry) retire(st *state) {
	st.removed.Store(true)
	r.unregisterMetrics(st)
}

func (r *Registry) allocSlot() int {
	if n := len(r.free); n > 0 {
		s := r.free[n-1]
		r.free = r.free[:n-1]
		return s
	}
	r.nextSlot++
	return r.nextSlot - 1
}

// kick wakes the probe loop to look at a new snapshot.
func (r *Registry) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// CPS returns the CPS limit and CPS rejects of the group called name, YAML
// or added at run time (nil when it has none or does not exist). Lock-free;
// the values are the group's own and must not be changed.
func (r *Registry) CPS(name string) (*CPSConfig, []CPSReject) {
	if g := r.snap.Load().groups[name]; g != nil {
		return g.cfg.CPS, g.cfg.CPSReject
	}
	return nil, nil
}

// Auth returns the account of the group called name, YAML or added at run
// time (nil when it has none or does not exist). Lock-free; the value is
// the group's own and must not be changed.
func (r *Registry) Auth(name string) *AuthConfig {
	if g := r.snap.Load().groups[name]; g != nil {
		return g.cfg.Auth
	}
	return nil
}

// RerouteCauses returns the reroute causes of the group called name, YAML
// or added at run time (nil when it has none or does not exist). Lock-free;
// the slice is the group's own and must not be changed.
func (r *Registry) RerouteCauses(name string) []int {
	if g := r.snap.Load().groups[name]; g != nil {
		return g.cfg.RerouteCauses
	}
	return nil
}

// Known reports whether a is the address a member of any group resolves
// to now: a carrier's gateway, which is never banned for flooding (its
// traffic is real calls). Lock-free; the set is rebuilt when a group or a
// resolution changes.
func (r *Registry) Known(a netip.Addr) bool {
	k := r.known.Load()
	if k == nil {
		return false
	}
	_, ok := (*k)[a.Unmap()]
	return ok
}

// rebuildKnown rebuilds Known's set from the current groups. The lock makes
// the last rebuild read the newest state.
func (r *Registry) rebuildKnown() {
	r.knownMu.Lock()
	defer r.knownMu.Unlock()
	k := make(map[netip.Addr]struct{})
	for _, g := range r.snap.Load().order {
		for i := range g.members {
			if ap := g.members[i].st.addr.Load(); ap != nil {
				k[ap.Addr()] = struct{}{}
			}
		}
	}
	r.known.Store(&k)
}

// find returns the state of the member with that uri and address, or nil.
func (g *group) find(uri, address string) *state {
	for i := range g.members {
		if st := g.members[i].st; st.uri == uri && st.address == address {
			return st
		}
	}
	return nil
}

// Groups returns every group's configuration, defaults filled in: the YAML
// groups first, then the runtime groups in the order they were added.
func (r *Registry) Groups() []GroupConfig {
	s := r.snap.Load()
	out := make([]GroupConfig, len(s.order))
	for i, g := range s.order {
		out[i] = g.cfg.clone()
	}
	return out
}

// GroupStatus is a group's configuration and its members' live state, as
// the admin API returns it.
type GroupStatus struct {
	GroupConfig
	// Fixed is true for a group of the YAML configuration.
	Fixed bool `json:"fixed"`
	// Panic is true while the group is in panic (see Pick).
	Panic   bool           `json:"panic"`
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one member's live state, in the group's configuration
// order.
type MemberStatus struct {
	URI      string `json:"uri"`
	Address  string `json:"address"`
	Resolved string `json:"resolved"` // "ip:port", "" when unresolvable
	// State is "up", "down", "half_open" or "cooling": up or half-open,
	// but skipped until CoolingUntil (a 503's Retry-After).
	State string `json:"state"`
	// DownBy says what holds a down member down: "calls" (its calls'
	// failures; a panic or a last resort may still choose it) or "probe"
	// (failed probes; only probes bring it back).
	DownBy       string `json:"down_by,omitempty"`
	Unresolvable bool   `json:"unresolvable"`
	// CooldownMs is the cooldown left (0 = none), CoolingUntil when it
	// ends (RFC 3339, UTC; "" = none). A member down keeps its cooldown
	// and shows both, its State "down".
	CooldownMs          int64   `json:"cooldown_ms"`
	CoolingUntil        string  `json:"cooling_until,omitempty"`
	TrialCallsLeft      int     `json:"trial_calls_left"`
	ConsecutiveFailures int     `json:"consecutive_probe_failures"`
	ConsecutiveCallFail int     `json:"consecutive_call_failures"`
	LastProbeCode       int     `json:"last_probe_code"`
	LastProbeRTTMs      float64 `json:"last_probe_rtt_ms"`
	// RecentCalls and RecentCallFailures are the calls reported in the
	// last ten seconds and those that failed: the evidence of outlier
	// detection, forgotten when the member changes state.
	RecentCalls        int `json:"recent_calls"`
	RecentCallFailures int `json:"recent_call_failures"`
}

// Group returns the configuration and live state of the group called name.
func (r *Registry) Group(name string) (GroupStatus, bool) {
	g := r.snap.Load().groups[name]
	if g == nil {
		return GroupStatus{}, false
	}
	gs := GroupStatus{GroupConfig: g.cfg.clone(), Fixed: g.fixed, Panic: g.panicking(&pickCtx{r: r}),
		Members: make([]MemberStatus, len(g.members))}
	clock := r.now()
	now := int64(clock)
	for i := range g.members {
		m := &g.members[i]
		st := m.st
		s := MemberStatus{
			URI:                 st.uri,
			Address:             st.address,
			State:               stateNames[st.health()],
			ConsecutiveFailures: int(st.probeFails.Load()),
			ConsecutiveCallFail: int(st.callFails.Load()),
			LastProbeCode:       int(st.lastCode.Load()),
			LastProbeRTTMs:      ms(time.Duration(st.lastRTT.Load())),
		}
		if ap := st.addr.Load(); ap != nil {
			s.Resolved = ap.String()
		} else {
			s.Unresolvable = true
		}
		if cd := st.cooldown.Load(); cd > now {
			s.CooldownMs = (cd - now) / int64(time.Millisecond)
			s.CoolingUntil = r.epoch.Add(time.Duration(cd)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
			if st.health() != stateDown {
				s.State = "cooling"
			}
		}
		switch w := st.word.Load(); {
		case w&healthMask == stateHalfOpen:
			s.TrialCallsLeft = int(max(st.trials.Load(), 0))
		case w&healthMask == stateDown && w&flagProbeDown != 0:
			s.DownBy = "probe"
		case w&healthMask == stateDown:
			s.DownBy = "calls"
		}
		s.RecentCalls, s.RecentCallFailures = st.window.totals(clock)
		gs.Members[m.index] = s
	}
	return gs, true
}
