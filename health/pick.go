package health

import (
	"math"
	"net/netip"

	"github.com/sipedge/sipedge/transport"
)

// Result says how a Pick went.
type Result uint8

const (
	// OK: the Member is usable.
	OK Result = iota
	// UnknownGroup: no group has that name (a typo, or not yet created):
	// fall back to the route's next_hop or skip the carrier.
	UnknownGroup
	// GroupDown: every member is down, in cooldown or out of half-open
	// trial calls (route.ReasonGroupDown).
	GroupDown
	// Unresolvable: every member's DNS name fails to resolve
	// (route.ReasonUnresolvable).
	Unresolvable
)

var resultNames = [...]string{"ok", "unknown_group", "group_down", "unresolvable"}

// String returns the result's name, e.g. "group_down".
func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "invalid"
}

// Member is a chosen gateway: where to send the call. It is a value; keep it
// for the duration of the attempt and hand it back to ReportCall.
type Member struct {
	Group     string
	URI       string         // the destination's uri, for the Request-URI
	Addr      netip.AddrPort // resolved address to send to
	Transport transport.Kind // the group's
	Index     int            // the destination's position in the group's configuration

	st *state
}

// Selector is one shard's selection state: smooth weighted round robin
// weights and round-robin counters, per group. Each shard owns one; it is
// not safe for concurrent use. The zero value is ready to use.
type Selector struct {
	groups []selState // by group slot
}

type selState struct {
	g  *group  // the group version cw belongs to
	cw []int64 // current weights, by member
	rr uint32
}

// state returns sel's state for g, resetting it when g is a new group or a
// new version of one. It allocates only then.
func (sel *Selector) state(g *group) *selState {
	if g.slot >= len(sel.groups) {
		sel.groups = append(sel.groups, make([]selState, g.slot+1-len(sel.groups))...)
	}
	ss := &sel.groups[g.slot]
	if ss.g != g {
		ss.g = g
		ss.rr = 0
		if cap(ss.cw) >= len(g.members) {
			ss.cw = ss.cw[:len(g.members)]
			clear(ss.cw)
		} else {
			ss.cw = make([]int64, len(g.members))
		}
	}
	return ss
}

// pickCtx is what one Pick judges members by: its mode, and the registry
// clock, read once and only when a member is in cooldown.
type pickCtx struct {
	r    *Registry
	t    int64
	mode pickMode
}

func (c *pickCtx) now() int64 {
	if c.t == 0 {
		c.t = int64(c.r.now()) | 1
	}
	return c.t
}

// Pick chooses a member of the group called name, from a shard, per dial.
// key matters for the hash algorithm only: a hash of what the choice must
// be stable for (the caller, the A-leg Call-ID). sel is the calling shard's
// Selector.
//
// Down members, members in cooldown, unresolvable members and half-open
// members out of trial calls are skipped. A tier (priority) is used only
// when no member of the tiers before it can be chosen. When the group is in
// panic (fewer than panic_threshold_percent of its members up, and at least
// one), the marks calls left are ignored: Pick chooses among every member
// that probes do not hold down, that is not in cooldown and that resolves,
// in every tier at once. Pick takes no lock; it does not allocate once sel
// has seen this version of the group. A member returned with OK must be
// reported with ReportCall when the attempt is over.
func (r *Registry) Pick(name string, key uint64, sel *Selector) (Member, Result) {
	return r.pick(name, key, sel, false)
}

// PickLastResort is Pick for the last carrier a call can try, when no
// other is left to fail over to: if Pick finds no member, it chooses among
// the members calls marked down or left out of trial calls, as a group in
// panic does, tiers in order. Members probes hold down, members in
// cooldown and unresolvable ones are never chosen: a gateway that answers
// no OPTIONS for failure_threshold probes in a row, or asked for a
// Retry-After, would only make the caller wait for the failure it already
// has. A member it returns is reported with ReportCall as Pick's are; a
// call it answers brings the member back half-open.
func (r *Registry) PickLastResort(name string, key uint64, sel *Selector) (Member, Result) {
	return r.pick(name, key, sel, true)
}

func (r *Registry) pick(name string, key uint64, sel *Selector, lastResort bool) (Member, Result) {
	g := r.snap.Load().groups[name]
	if g == nil {
		return Member{}, UnknownGroup
	}
	c := pickCtx{r: r}
	ss := sel.state(g)
	if g.panicking(&c) {
		c.mode = modePanic
	}
	i, ap, rescue := g.choose(ss, key, &c)
	if ap == nil && lastResort && c.mode == modeNormal {
		c.mode = modeLastResort
		i, ap, rescue = g.choose(ss, key, &c)
	}
	if ap == nil {
		return Member{}, g.noneResult()
	}
	if rescue {
		g.gs.rescues[c.mode-modePanic].Inc()
	}
	m := &g.members[i]
	return Member{Group: g.name, URI: m.uri, Addr: *ap, Transport: g.transport, Index: m.index, st: m.st}, OK
}

// choose picks a member in c's mode, reserving a half-open trial call, and
// returns its position in g.members and its address, nil if none; rescue
// says it was chosen despite the marks calls left on it.
func (g *group) choose(ss *selState, key uint64, c *pickCtx) (i int, ap *netip.AddrPort, rescue bool) {
	tiers := g.tiers
	if c.mode == modePanic {
		tiers = g.allTiers
	}
	// A half-open member's last trial call can be taken by another shard
	// between the choice and the reservation (or its name stop resolving):
	// choose again, at most once per member.
	for range len(g.members) + 1 {
		if i = g.byAlgorithm(ss, key, tiers, c); i < 0 {
			break
		}
		st := g.members[i].st
		if ap = st.addr.Load(); ap == nil {
			continue // unresolvable since the choice
		}
		if st.word.Load() == stateUp {
			return i, ap, false // the common case: nothing to reserve
		}
		rescue, ok := st.reserve(c.mode)
		if !ok {
			continue // out of trials, or down, since the choice
		}
		return i, ap, rescue
	}
	return -1, nil, false
}

// panicking reports whether the group is in panic: some of its members are
// up, but fewer than its panic threshold. With tiers, a tier's share counts
// as the share of the group it stands for (a full backup tier makes up for
// a dead primary, as Envoy's priority levels do): the shares of the tiers
// are summed. A group none of whose members is up is not in panic: there
// is no remaining member to spare the load of the others, and the call
// goes on to its next carrier (or to PickLastResort). When the first
// tier's members are all up with nothing to check, the common case, it
// reads their words and nothing else.
func (g *group) panicking(c *pickCtx) bool {
	for _, st := range g.firstStates {
		if st.word.Load() != stateUp {
			return g.panicPercent != 0 && g.panickingSlow(c)
		}
	}
	return false
}

func (g *group) panickingSlow(c *pickCtx) bool {
	if len(g.tiers) == 1 {
		up, n := 0, len(g.firstStates)
		for _, st := range g.firstStates {
			if st.up(c) {
				up++
			}
		}
		return up > 0 && up*100 < g.panicPercent*n
	}
	share, anyUp := 0.0, false
	for _, t := range g.tiers {
		up, n := 0, t.end-t.start
		for i := t.start; i < t.end; i++ {
			if g.members[i].st.up(c) {
				up++
			}
		}
		if up == n {
			return false // a whole tier up is a share of 1 at least
		}
		anyUp = anyUp || up > 0
		share += float64(up) / float64(n)
	}
	return anyUp && share*100 < float64(g.panicPercent)
}

// Peek returns the member Pick would choose now for key, taking nothing: no
// half-open trial call, and no shard's rotation moved (it chooses with a
// fresh Selector: for a hash group the member key maps to, as Pick; for
// weighted and round_robin the rotation's first choice, which a shard's
// own rotation may have moved past). It judges members as Pick does, the
// panic threshold included. A dry run's view of the group (the admin
// API's POST /v1/route): any goroutine may call it, it allocates, and its
// Member is not to be reported (ReportCall).
func (r *Registry) Peek(name string, key uint64) (Member, Result) {
	return r.peek(name, key, false)
}

// PeekLastResort is Peek for PickLastResort: the member it would choose
// now, taking nothing.
func (r *Registry) PeekLastResort(name string, key uint64) (Member, Result) {
	return r.peek(name, key, true)
}

func (r *Registry) peek(name string, key uint64, lastResort bool) (Member, Result) {
	g := r.snap.Load().groups[name]
	if g == nil {
		return Member{}, UnknownGroup
	}
	c := pickCtx{r: r}
	if g.panicking(&c) {
		c.mode = modePanic
	}
	i, ap := g.peek(key, &c)
	if ap == nil && lastResort && c.mode == modeNormal {
		c.mode = modeLastResort
		i, ap = g.peek(key, &c)
	}
	if ap == nil {
		return Member{}, g.noneResult()
	}
	m := &g.members[i]
	return Member{Group: g.name, URI: m.uri, Addr: *ap, Transport: g.transport, Index: m.index}, OK
}

// peek is choose without its reservation, with a fresh Selector.
func (g *group) peek(key uint64, c *pickCtx) (int, *netip.AddrPort) {
	tiers := g.tiers
	if c.mode == modePanic {
		tiers = g.allTiers
	}
	var sel Selector
	ss := sel.state(g)
	i := g.byAlgorithm(ss, key, tiers, c)
	if i < 0 {
		return -1, nil
	}
	return i, g.members[i].st.addr.Load()
}

// noneResult is Pick's result when no member can be chosen.
func (g *group) noneResult() Result {
	for i := range g.members {
		if g.members[i].st.addr.Load() != nil {
			return GroupDown
		}
	}
	return Unresolvable
}

// byAlgorithm is the group's algorithm's choice of a member in tiers, -1
// for none.
func (g *group) byAlgorithm(ss *selState, key uint64, tiers []tier, c *pickCtx) int {
	switch g.alg {
	case algWeighted:
		return g.pickWeighted(ss, tiers, c)
	case algRoundRobin:
		return g.pickRoundRobin(ss, tiers, c)
	default:
		return g.pickHash(key, tiers, c)
	}
}

// pickWeighted is smooth weighted round robin (nginx): each usable member's
// current weight grows by its weight, the largest wins and loses the total.
func (g *group) pickWeighted(ss *selState, tiers []tier, c *pickCtx) int {
	cw := ss.cw[:len(g.members)]
	for _, t := range tiers {
		best, bestW, total := -1, int64(0), int64(0)
		for i := t.start; i < t.end; i++ {
			m := &g.members[i]
			if !m.st.usable(c) {
				continue
			}
			w := cw[i] + m.weight
			cw[i] = w
			total += m.weight
			if best < 0 || w > bestW {
				best, bestW = i, w
			}
		}
		if best >= 0 {
			cw[best] -= total
			return best
		}
	}
	return -1
}

// pickRoundRobin takes the next usable member after the last one chosen.
func (g *group) pickRoundRobin(ss *selState, tiers []tier, c *pickCtx) int {
	for _, t := range tiers {
		n := uint32(t.end - t.start)
		for k := uint32(0); k < n; k++ {
			i := t.start + int((ss.rr+k)%n)
			if g.members[i].st.usable(c) {
				ss.rr += k + 1
				return i
			}
		}
	}
	return -1
}

// pickHash is rendezvous (highest random weight) hashing: every member
// scores the key, the best usable one wins, so a member's arrival or
// departure moves only the keys it wins or had won. With unequal weights
// the score is weighted (-ln(u)/w, lowest wins).
func (g *group) pickHash(key uint64, tiers []tier, c *pickCtx) int {
	key = mix64(key)
	for _, t := range tiers {
		best := -1
		var bestH uint64
		var bestF float64
		for i := t.start; i < t.end; i++ {
			m := &g.members[i]
			if !m.st.usable(c) {
				continue
			}
			h := mix64(key ^ m.seed)
			if g.equalWeights {
				if best < 0 || h > bestH {
					best, bestH = i, h
				}
				continue
			}
			u := (float64(h>>12) + 0.5) * (1.0 / (1 << 52)) // in (0, 1)
			f := -math.Log(u) * m.invWeight
			if best < 0 || f < bestF {
				best, bestF = i, f
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
