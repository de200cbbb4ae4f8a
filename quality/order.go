package quality

import "github.com/sipedge/sipedge/route"

// snapshot is what the shards read: the scores and disables as of the last
// Update, Disable or Enable, immutable once published.
type snapshot struct {
	prefixes []prefixView // by Prefix
	// everywhere holds the carriers disabled for every prefix.
	everywhere map[string]struct{}
	disables   int // entries in Monitor.disables
}

// prefixView holds, for one prefix, the carriers with a score above 0 or a
// disable; a carrier it does not hold scores 0 and is not disabled there.
type prefixView struct {
	carriers map[string]carrierView
}

type carrierView struct {
	score    float64
	demoted  bool // score at or above the profile's critical penalty
	disabled bool // for this prefix
}

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
		if e.key.gateway || e.figs.score <= 0 {
			continue
		}
		pv, cv := view(e.key.prefix, e.key.name)
		cv.score = e.figs.score
		cv.demoted = e.figs.score >= m.profiles[e.key.prefix].criticalPenalty
		pv.carriers[e.key.name] = cv
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

// maxStackRoutes is the longest decision Reorder orders on the stack;
// longer ones allocate their sort keys.
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
	if m.mode == ModeOff || p < 0 || int(p) >= len(s.prefixes) || len(routes) < 2 {
		return routes
	}
	carriers := s.prefixes[p].carriers
	if len(carriers) == 0 {
		return routes
	}
	var stackKeys [maxStackRoutes]float64
	keys := stackKeys[:0]
	if len(routes) > maxStackRoutes {
		keys = make([]float64, 0, len(routes))
	}
	sorted := true
	for i := range routes {
		cv := carriers[routes[i].CarrierID]
		k := cv.score
		if m.mode == ModeDemote {
			k = 0
			if cv.demoted {
				k = 1
			}
		}
		if i > 0 && k < keys[i-1] {
			sorted = false
		}
		keys = append(keys, k)
	}
	if sorted {
		return routes
	}
	// A stable insertion sort of the routes by key into dst: decisions
	// are short, and it needs no index array.
	dst = append(dst[:0], routes...)
	for i := 1; i < len(dst); i++ {
		r, k := dst[i], keys[i]
		j := i
		for ; j > 0 && keys[j-1] > k; j-- {
			dst[j], keys[j] = dst[j-1], keys[j-1]
		}
		dst[j], keys[j] = r, k
	}
	return dst
}
