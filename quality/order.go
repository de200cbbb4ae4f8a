package quality

import (
	"cmp"
	"slices"

	"github.com/sipedge/sipedge/route"
)

// snapshot is what the shards read: the scores and disables as of the last
// Update, Disable or Enable, immutable once published.
type snapshot struct {
	prefixes []prefixView // by Prefix
	// everywhere holds the carriers disabled for every prefix.
	everywhere map[string]struct{}
	disables   int // entries in Monitor.disables
}

// prefixView holds, for one prefix, the carriers with figures or a
// disable; a carrier it does not hold scores 0 and is not disabled there.
type prefixView struct {
	carriers map[string]carrierView
	// ranked holds the carriers Reorder moves under the mode: the demoted
	// ones (key 1) in demote mode, the scored ones (key: the score) in
	// sort mode. Empty, Reorder returns the decision at once. few holds
	// the same when they are fewFlat or fewer: comparing a route's carrier
	// with a handful of names is cheaper than a map lookup.
	ranked map[string]float64
	few    []rankedCarrier
}

type carrierView struct {
	score    float64
	demoted  bool // score at or above the profile's critical penalty
	disabled bool // for this prefix
}

type rankedCarrier struct {
	carrier string
	key     float64
}

// fewFlat is the most ranked carriers of a prefix kept in a slice.
const fewFlat = 8

// publish builds a snapshot of the entries' figures and the disables.
// Called with m.mu held (or before New returns).
func (m *Monitor) publish() {
	s := &snapshot{prefixes: make([]prefixView, len(m.digits)), disables: len(m.disables)}
	view := func(p Prefix, carrier string) (*prefixView, carrierView) {
		pv := &s.prefixes[p]
		if pv.carriers == nil {
			pv.carriers = map[string]carrierView{}
		}
		return pv, pv.carriers[carrier]
	}
	for _, e := range m.entries {
		if e.key.gateway {
			continue
		}
		pv, cv := view(e.key.prefix, e.key.name)
		cv.score = e.figs.score
		cv.demoted = e.figs.score >= m.profiles[e.key.prefix].criticalPenalty
		pv.carriers[e.key.name] = cv
		key := 0.0
		switch {
		case m.mode == ModeSort:
			key = cv.score
		case m.mode == ModeDemote && cv.demoted:
			key = 1
		}
		if key > 0 {
			if pv.ranked == nil {
				pv.ranked = map[string]float64{}
			}
			pv.ranked[e.key.name] = key
		}
	}
	for i := range s.prefixes {
		pv := &s.prefixes[i]
		if n := len(pv.ranked); n > 0 && n <= fewFlat {
			pv.few = make([]rankedCarrier, 0, n)
			for c, k := range pv.ranked {
				pv.few = append(pv.few, rankedCarrier{c, k})
			}
		}
	}
	for k := range m.disables {
		if k.prefix == NoPrefix {
			if s.everywhere == nil {
				s.everywhere = map[string]struct{}{}
			}
			s.everywhere[k.carrier] = struct{}{}
			continue
		}
		pv, cv := view(k.prefix, k.carrier)
		cv.disabled = true
		pv.carriers[k.carrier] = cv
	}
	m.snap.Store(s)
}

// key returns a carrier's sort key: 0 unless it is ranked.
func (pv *prefixView) key(carrier string) float64 {
	if pv.few != nil {
		for i := range pv.few {
			if pv.few[i].carrier == carrier {
				return pv.few[i].key
			}
		}
		return 0
	}
	return pv.ranked[carrier]
}

// Disabled reports whether carrier is disabled for quality prefix p: the
// engine then skips it undialled, with reason ReasonDisabled. Safe from any
// goroutine, lock-free; it does not allocate.
func (m *Monitor) Disabled(p Prefix, carrier string) bool {
	s := m.snap.Load()
	if s.disables == 0 {
		return false
	}
	if _, ok := s.everywhere[carrier]; ok {
		return true
	}
	if p < 0 || int(p) >= len(s.prefixes) {
		return false
	}
	return s.prefixes[p].carriers[carrier].disabled
}

// Score returns carrier's current score for quality prefix p: 0 is
// perfect, higher is worse (0 too for a carrier with no figures). Safe from
// any goroutine, lock-free; it does not allocate.
func (m *Monitor) Score(p Prefix, carrier string) float64 {
	s := m.snap.Load()
	if p < 0 || int(p) >= len(s.prefixes) {
		return 0
	}
	return s.prefixes[p].carriers[carrier].score
}

// CarrierScore is a carrier's standing under a quality prefix, as of the
// last Update, Disable or Enable.
type CarrierScore struct {
	Carrier string
	Score   float64
	// Demoted: Score reaches the profile's critical penalty.
	Demoted bool
	// Disabled for this prefix, or for every prefix.
	Disabled bool
}

// Scores appends to dst the standing under quality prefix p of every
// carrier with figures or a disable there (a carrier disabled for every
// prefix included), by carrier, and returns it: what a routing API may
// weigh (route/lcr's send_quality). Safe from any goroutine, lock-free;
// not for a shard's call path (it sorts and may grow dst).
func (m *Monitor) Scores(dst []CarrierScore, p Prefix) []CarrierScore {
	s := m.snap.Load()
	if p < 0 || int(p) >= len(s.prefixes) {
		return dst
	}
	start := len(dst)
	for c, cv := range s.prefixes[p].carriers {
		_, everywhere := s.everywhere[c]
		dst = append(dst, CarrierScore{Carrier: c, Score: cv.score, Demoted: cv.demoted, Disabled: cv.disabled || everywhere})
	}
	for c := range s.everywhere {
		if _, ok := s.prefixes[p].carriers[c]; !ok {
			dst = append(dst, CarrierScore{Carrier: c, Disabled: true})
		}
	}
	slices.SortFunc(dst[start:], func(a, b CarrierScore) int { return cmp.Compare(a.Carrier, b.Carrier) })
	return dst
}

// maxStackRoutes is the longest decision Reorder reorders on the stack;
// a longer one that must move allocates its sort keys.
const maxStackRoutes = 64

// Reorder applies the mode to a decision's routes for a number under
// quality prefix p: off keeps them; demote moves the carriers whose score
// reaches their profile's critical penalty behind the others, each group
// in the API's order; sort orders them by score, the API's order breaking
// ties. routes is never modified (a decision may be shared): when the order
// changes, the routes are copied into dst[:0] (append: pass the call's own
// buffer, kept across calls, to reorder without allocating) and that is
// returned; otherwise routes itself is. Safe from any goroutine, lock-free;
// it does not allocate when nothing moves.
func (m *Monitor) Reorder(dst, routes []route.Route, p Prefix) []route.Route {
	s := m.snap.Load()
	if p < 0 || int(p) >= len(s.prefixes) || len(routes) < 2 {
		return routes
	}
	pv := &s.prefixes[p]
	if len(pv.ranked) == 0 { // mode off, or no carrier to move
		return routes
	}
	prev := 0.0
	for i := range routes {
		k := pv.key(routes[i].CarrierID)
		if i > 0 && k < prev {
			return reorder(dst, routes, pv)
		}
		prev = k
	}
	return routes
}

// reorder copies routes into dst in the order of their keys, stably.
func reorder(dst, routes []route.Route, pv *prefixView) []route.Route {
	var stackKeys [maxStackRoutes]float64
	var stackOrder [maxStackRoutes]int
	keys, order := stackKeys[:0], stackOrder[:0]
	if len(routes) > maxStackRoutes {
		keys, order = make([]float64, 0, len(routes)), make([]int, 0, len(routes))
	}
	for i := range routes {
		keys, order = append(keys, pv.key(routes[i].CarrierID)), append(order, i)
	}
	// A stable insertion sort of the indices (decisions are short), then
	// one copy of each route.
	for i := 1; i < len(order); i++ {
		o := order[i]
		j := i
		for ; j > 0 && keys[order[j-1]] > keys[o]; j-- {
			order[j] = order[j-1]
		}
		order[j] = o
	}
	dst = slices.Grow(dst[:0], len(routes))[:len(routes)]
	for k, i := range order {
		dst[k] = routes[i]
	}
	return dst
}
