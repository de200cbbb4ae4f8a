package shard

import (
	"net/netip"
	"time"
)

// FloodConfig bounds what one source address (an IPv6 /64) that is not
// exempt (not a trunk, not a carrier) may send: over PerSecond messages in
// a second on a loop, the source is banned for Ban and its messages are
// dropped silently, before parsing (docs/design/cps.md 9: in process, no
// Redis).
type FloodConfig struct {
	PerSecond int           // 0: no flood protection
	Ban       time.Duration // default 60 s
	// Exempt reports addresses never banned: configured trunks and
	// carriers (UDP sources are spoofable: a spoofed flood must not cut a
	// carrier off). Read from every loop; it must not block.
	Exempt func(netip.Addr) bool
}

// maxFloodEntries bounds the per-loop table, so a flood of spoofed sources
// cannot grow it without end: when full it is cleared (bans included).
const maxFloodEntries = 1 << 16

type floodEntry struct {
	window time.Duration // start of the current one-second window
	count  int
	banned time.Duration // until when; 0 when not banned
}

// floodGuard is one loop's view of its sources; only that loop uses it.
type floodGuard struct {
	cfg     *FloodConfig
	entries map[netip.Addr]*floodEntry
}

// drop counts a message from addr and reports whether to drop it. Sources
// are counted as the connection cap counts them (sourceKey: an IPv6 /64),
// exemption is by the exact address.
func (sh *Shard) floodDrop(addr netip.Addr, now time.Duration) bool {
	g := &sh.flood
	if g.cfg.PerSecond <= 0 || g.cfg.Exempt != nil && g.cfg.Exempt(addr) {
		return false
	}
	src := sourceKey(addr)
	e := g.entries[src]
	if e == nil {
		if len(g.entries) >= maxFloodEntries {
			clear(g.entries)
		}
		e = &floodEntry{window: now}
		g.entries[src] = e
	}
	if e.banned != 0 {
		if now < e.banned {
			sh.m.floodDropped.Inc()
			return true
		}
		e.banned, e.window, e.count = 0, now, 0
	}
	if now-e.window >= time.Second {
		e.window, e.count = now, 0
	}
	e.count++
	if e.count > g.cfg.PerSecond {
		e.banned = now + g.cfg.Ban
		sh.m.floodBans.Inc()
		sh.m.floodDropped.Inc()
		sh.srv.log.Warn("source banned for flooding", "addr", addr.String(), "source", src.String(), "ban", g.cfg.Ban.String(), "shard", sh.idx)
		return true
	}
	return false
}

// sweepFlood forgets sources idle for a while (called about once a second).
func (sh *Shard) sweepFlood(now time.Duration) {
	for a, e := range sh.flood.entries {
		if e.banned == 0 && now-e.window > 10*time.Second || e.banned != 0 && now > e.banned {
			delete(sh.flood.entries, a)
		}
	}
}
