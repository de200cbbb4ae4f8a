package carrier

import (
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
)

// Shard is one shard's view of the plane: what a shard's calls ask of
// their carriers. It keeps the shard's gateway selection state, its
// per-carrier metric caches and its warnings' pacing, so it is not safe
// for concurrent use: every method runs on the shard's goroutine, and none
// blocks. Once warm (the metrics of a carrier created, its next hop read)
// the dial path allocates nothing, but for a CPS reservation answered
// later (Pace Pending).
type Shard struct {
	p       *Plane
	sel     health.Selector
	metrics carrierMetrics
	hops    hopCache
	paced   func(ref uint64, p Pace)
	now     func() time.Duration

	// The plane's quality statistics, nil without: this shard's
	// collector, and whether the mode orders carriers (not off).
	quality   *quality.Monitor
	collector *quality.Collector
	ordered   bool

	// warnUnknownGroup's pacing.
	unknownLogged     bool
	unknownLogAt      time.Duration
	unknownSuppressed int
}

// Reserve makes route r the carrier of a dial to number (as routed), in
// d: a channel of its gateway group, then a healthy member of it (key
// spreads hash selection per call), else its next_hop, or its ruri's host,
// when the group is unknown (a warning, paced, says so). A non-empty
// reason (a route.Reason constant) means the carrier cannot be dialled,
// and d is left as it was: ReasonDisabled first, for a carrier quality
// routing took out for the number's prefix, which then neither takes a
// channel nor is asked of its health. A channel taken is the dial's until
// Release.
func (s *Shard) Reserve(r *route.Route, key uint64, number []byte, d *Dial) string {
	return s.reserve(r, key, number, d, false)
}

// ReserveLast is Reserve for the last carrier a call can try, with none
// left to fail over to: when its group has no member Pick may choose, it
// takes one that calls marked down (health.PickLastResort; counted in
// sipedge_gateway_rescue_picks_total{mode="last_resort"}). The marks calls
// leave may be the network's doing or sipedge's own (a host dropping UDP
// under load), and the caller, who would get 503 undialled, loses nothing
// by the try; a member that answers it comes back. A member probes hold
// down, one cooling down after a 503 with Retry-After, or one whose name
// does not resolve is never taken: failed OPTIONS and a Retry-After are
// the gateway's own word, not a load's side effect, and dialling it would
// only make the caller wait for the failure it has. A carrier quality
// routing disabled stays disabled: that is a decision on its record, not
// a side effect of load.
func (s *Shard) ReserveLast(r *route.Route, key uint64, number []byte, d *Dial) string {
	return s.reserve(r, key, number, d, true)
}

func (s *Shard) reserve(r *route.Route, key uint64, number []byte, d *Dial, last bool) string {
	if s.quality != nil && s.quality.Disabled(s.quality.PrefixBytes(number), r.CarrierID) {
		return route.ReasonDisabled
	}
	// The channel before the member: a carrier at its limit is skipped
	// before a member is picked, which may take one of a half-open
	// member's trial calls.
	ch, ok := s.p.channels.take(r.GatewayGroup)
	if !ok {
		return route.ReasonCallsLimited
	}
	reason := s.pick(r, key, d, last)
	switch {
	case reason != "" && ch != nil:
		ch.Release()
	case reason == "":
		d.channel = ch
	}
	return reason
}

// pick is Reserve past the channel; last picks as ReserveLast.
func (s *Shard) pick(r *route.Route, key uint64, d *Dial, last bool) string {
	var m health.Member
	var res health.Result
	if last {
		m, res = s.p.health.PickLastResort(r.GatewayGroup, key, &s.sel)
	} else {
		m, res = s.p.health.Pick(r.GatewayGroup, key, &s.sel)
	}
	switch res {
	case health.OK:
		*d = Dial{CarrierID: r.CarrierID, Group: m.Group, URI: m.URI, Gateway: m, route: r}
		d.Peer.Addr, d.Peer.Transport = m.Addr, m.Transport
		return ""
	case health.UnknownGroup:
		if r.GatewayGroup != "" {
			s.warnUnknownGroup(r)
		}
		reason := s.hops.nextHop(r, d)
		if reason == "" {
			s.p.hops.add(d.Peer.Addr.Addr(), s.p.log)
		}
		return reason
	case health.Unresolvable:
		return route.ReasonUnresolvable
	}
	return route.ReasonGroupDown
}

// unknownGroupLogInterval paces the warning of routes naming an unknown
// gateway_group: an LCR API with a typo names it on every call.
const unknownGroupLogInterval = time.Minute

// warnUnknownGroup warns that r names a gateway_group the plane does not
// know, at most once per interval on this shard; the next warning counts
// the ones left out.
func (s *Shard) warnUnknownGroup(r *route.Route) {
	now := s.now()
	if s.unknownLogged && now-s.unknownLogAt < unknownGroupLogInterval {
		s.unknownSuppressed++
		return
	}
	s.p.log.Warn("route names an unknown gateway_group", "carrier", r.CarrierID, "gateway_group", r.GatewayGroup,
		"suppressed_since_last", s.unknownSuppressed)
	s.unknownLogged, s.unknownLogAt, s.unknownSuppressed = true, now, 0
}

// Pace reserves a slot of the dial's CPS account: the route's own cps
// (from the API), else its gateway group's; none paces nothing. A Pending
// answer comes later through ShardOptions.Paced, with ref.
func (s *Shard) Pace(d *Dial, ref uint64) Pace {
	k, ok := s.p.cps.keyOf(d.route, d.Group)
	if !ok {
		return Pace{}
	}
	paced := s.paced
	dec, now := s.p.cps.limiter.ReserveAsync(k, func(dec ratelimit.Decision) {
		paced(ref, Pace{Wait: dec.Wait, Over: dec.Over})
	})
	if !now {
		return Pace{Pending: true}
	}
	return Pace{Wait: dec.Wait, Over: dec.Over}
}

// CPSReject tells whether a final response to the dial d (code, its
// reason phrase and Reason header) is the carrier refusing the call over
// its CPS limit, by its group's cps_reject matchers, and after how long to
// retry the same carrier; a match backs the account off. A CPS reject is
// never the gateway's health.
func (s *Shard) CPSReject(d *Dial, code int, phrase, reason []byte) (time.Duration, bool) {
	return s.p.cps.reject(d, code, phrase, reason)
}

// Outcome reports what the dial said of its gateway, once per dial: a
// final status or an Outcome constant, with the response's Retry-After. A
// 503 with one cools the member down for that long (bounded by the
// group's passive.max_retry_after_secs).
func (s *Shard) Outcome(d *Dial, code int, retryAfter time.Duration) {
	if d.Gateway.Group == "" {
		return // a next hop, not a group member
	}
	o := outcomeOf(code)
	if o == health.OutcomeStatus503 && retryAfter > 0 {
		s.p.health.Cooldown(d.Gateway, retryAfter)
	}
	s.p.health.ReportCall(d.Gateway, o)
}

// Release gives back the channel the dial holds, if it does; a second
// Release does nothing.
func (s *Shard) Release(d *Dial) {
	if ch := d.channel; ch != nil {
		d.channel = nil
		ch.Release()
	}
}

// Credentials returns the account sipedge holds with the dial's carrier
// (its group's auth), nil when none: to answer the carrier's Digest
// challenges.
func (s *Shard) Credentials(d *Dial) *health.AuthConfig { return s.p.health.Auth(d.Group) }

// Redirect makes d's gateway the member of its group that a carrier's 3xx
// names (its Contact's host and port, 0 for none), when the group follows
// redirects (health.Registry.Redirect); false otherwise, d left as it was.
// The dial keeps its channel and CPS slot: the redirect is the same
// attempt. The member left must have had its Outcome first; the new one
// hears its own.
func (s *Shard) Redirect(d *Dial, host []byte, port uint16) bool {
	if d.Gateway.Group == "" {
		return false // a next hop: no group to stay within
	}
	m, ok := s.p.health.Redirect(d.Gateway.Group, host, port)
	if !ok {
		return false
	}
	d.Gateway, d.URI = m, m.URI
	d.Peer.Addr, d.Peer.Transport, d.Peer.Conn = m.Addr, m.Transport, 0
	return true
}

// Report records what the call core reports of an attempt or a call: the
// per-carrier metrics, and the quality statistics of the number's prefix.
func (s *Shard) Report(r *Report) {
	s.metrics.record(r)
	if s.collector != nil {
		s.recordQuality(r)
	}
}

// recordQuality feeds r to the shard's quality collector: an attempt's
// outcome, or an answered call's duration.
func (s *Shard) recordQuality(r *Report) {
	p := s.quality.PrefixBytes(r.Number)
	var gateway string
	if r.Gateway.Group != "" {
		gateway = r.Gateway.URI // a group member; a next hop has none
	}
	switch {
	case r.Event == CallEnded:
		s.collector.RecordEnd(r.At, p, r.CarrierID, gateway, r.Duration)
		return
	case r.CPSRejected:
		// Over the carrier's CPS limit: a fault not the carrier's counts
		// against no carrier (as for its gateway's health).
		return
	}
	o := quality.Outcome{Carrier: r.CarrierID, Gateway: gateway, Status: r.Code, Reason: r.Reason,
		Dialed: r.Dialed, Local: r.Local}
	if r.Progress != 0 {
		o.PDD = r.Progress - r.Invite
	}
	if r.Event == Answered {
		o.Setup = r.Answer - r.Invite
	}
	s.collector.Record(r.At, p, &o)
}

// Tick lets the quality collector seal its sampling interval once the
// shard's clock has passed it: call it on the shard's every loop run (at
// least once a sampling interval). A comparison when there is nothing to
// do.
func (s *Shard) Tick(now time.Duration) {
	if s.collector != nil {
		s.collector.Tick(now)
	}
}

// Order returns a call's routes in the order quality.mode says to try
// them, for number (as routed): demote moves the carriers demoted under
// its prefix behind the others, sort orders them by score. routes is
// never modified (a decision may be shared): when the order changes, the
// routes are copied into *buf (which grows to fit, and which the caller
// keeps for its next call, and must not be routes), and that is returned;
// otherwise routes itself is. Without quality statistics, or with mode
// off, routes itself. It allocates only when *buf must grow.
func (s *Shard) Order(routes []route.Route, number []byte, buf *[]route.Route) []route.Route {
	if !s.ordered || len(routes) < 2 {
		return routes
	}
	out := s.quality.Reorder((*buf)[:0], routes, s.quality.PrefixBytes(number))
	if &out[0] != &routes[0] {
		*buf = out
	}
	return out
}

// hopCache reads next hops once per shard: a route names the same few
// again and again, and reading one costs a parse and a string.
type hopCache struct {
	hops map[string]hop
}

// nextHop makes d the next hop of r, which has no usable gateway group:
// its next_hop, else its ruri's host (parseHop).
func (c *hopCache) nextHop(r *route.Route, d *Dial) string {
	dest := r.NextHop
	if dest == "" {
		dest = r.RURI
	}
	if dest == "" {
		return route.ReasonUnknownGroup
	}
	h, ok := c.hops[dest]
	if !ok {
		if c.hops == nil || len(c.hops) >= maxHopCache {
			c.hops = make(map[string]hop)
		}
		h = parseHop(dest)
		c.hops[dest] = h
	}
	if h.reason != "" {
		return h.reason
	}
	*d = Dial{CarrierID: r.CarrierID, Group: dest, URI: h.uri, Peer: h.peer, route: r}
	return ""
}

// NextHops is the carrier plane of a call core that has none: every route
// goes to its next hop (next_hop, else its ruri's host), with no gateway
// groups, limits, credentials or metrics. Not safe for concurrent use.
type NextHops struct {
	hops hopCache
}

// Reserve makes r's next hop the dial's carrier, as Shard.Reserve does for
// a route of no known group.
func (n *NextHops) Reserve(r *route.Route, _ uint64, _ []byte, d *Dial) string {
	return n.hops.nextHop(r, d)
}

// Order keeps the routes' order.
func (*NextHops) Order(routes []route.Route, _ []byte, _ *[]route.Route) []route.Route { return routes }

// ReserveLast is Reserve: a next hop has no health to rescue it from.
func (n *NextHops) ReserveLast(r *route.Route, key uint64, number []byte, d *Dial) string {
	return n.Reserve(r, key, number, d)
}

// Pace paces nothing.
func (*NextHops) Pace(*Dial, uint64) Pace { return Pace{} }

// CPSReject matches nothing.
func (*NextHops) CPSReject(*Dial, int, []byte, []byte) (time.Duration, bool) { return 0, false }

// Outcome records nothing.
func (*NextHops) Outcome(*Dial, int, time.Duration) {}

// Release holds nothing.
func (*NextHops) Release(*Dial) {}

// Credentials holds none.
func (*NextHops) Credentials(*Dial) *health.AuthConfig { return nil }

// Redirect follows none: a next hop has no group to stay within.
func (*NextHops) Redirect(*Dial, []byte, uint16) bool { return false }

// Report records nothing.
func (*NextHops) Report(*Report) {}
