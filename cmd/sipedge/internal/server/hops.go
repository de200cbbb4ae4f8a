package server

import (
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
)

// dialledHops holds the addresses of the next hops calls were sent to
// whose route named no gateway group the registry knows: the API's
// next_hop and ruri routes. Their carriers answer and send in-dialog
// requests from there, so the flood guard must not ban them (issue 7: never
// ban carriers); static routes' hops are exempt from the start. Read
// lock-free by every loop for every message from a source that is not
// otherwise exempt; replaced whole, under mu, when a new hop is dialled,
// which is rare. The API names them, so they are bounded.
type dialledHops struct {
	set  atomic.Pointer[map[netip.Addr]struct{}]
	mu   sync.Mutex
	full bool // guarded by mu: maxDialledHops reached, warned once
}

// maxDialledHops bounds dialledHops; past it, further hops are subject to
// the flood guard like any source, with a warning.
const maxDialledHops = 10000

// has reports whether a call was sent to a.
func (h *dialledHops) has(a netip.Addr) bool {
	m := h.set.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[a.Unmap()]
	return ok
}

// add records a call sent to a.
func (h *dialledHops) add(a netip.Addr, log *slog.Logger) {
	a = a.Unmap()
	if h.has(a) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.set.Load()
	var n map[netip.Addr]struct{}
	if old != nil {
		if _, ok := (*old)[a]; ok {
			return
		}
		if len(*old) >= maxDialledHops {
			if !h.full {
				h.full = true
				log.Warn("too many distinct next hops dialled: new ones are no longer exempt from the flood guard",
					"max", maxDialledHops, "addr", a.String())
			}
			return
		}
		n = make(map[netip.Addr]struct{}, len(*old)+1)
		for k := range *old {
			n[k] = struct{}{}
		}
	} else {
		n = make(map[netip.Addr]struct{}, 1)
	}
	n[a] = struct{}{}
	h.set.Store(&n)
}
