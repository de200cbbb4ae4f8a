package carrier

import (
	"context"
	"time"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
)

// Preview is what a dial of a route would get now (Plane.Preview): a dry
// run's view of its carrier, which takes nothing.
type Preview struct {
	// Dial is the carrier Reserve would make of the route: the gateway
	// member (Gateway, Peer, URI) or the next hop. Set when Reason is "".
	Dial Dial
	// Reason, when not "", is why the carrier would be skipped without
	// being dialled: a route.Reason constant.
	Reason string
	// CPSKey names the calls-per-second account the dial would draw from
	// ("" when it is not paced); Wait is what a reservation would wait
	// now for its slot (Reason route.ReasonCPSLimited when none comes
	// within the account's max_wait).
	CPSKey string
	Wait   time.Duration
	// Demoted: the carrier's quality score under the number's prefix
	// reaches its profile's critical penalty (quality.mode demote moves
	// it behind the others: PreviewOrder).
	Demoted bool
	// LastResort: the member is one calls marked down, which only
	// ReserveLast would take (PreviewLast).
	LastResort bool
}

// PreviewOrder returns routes in the order a call to number (as routed)
// would try them now: Shard.Order's, quality.mode applied. routes is never
// modified; a reordered copy is returned when the order changes. Any
// goroutine may call it.
func (p *Plane) PreviewOrder(routes []route.Route, number []byte) []route.Route {
	if p.quality == nil || p.quality.Mode() == quality.ModeOff || len(routes) < 2 {
		return routes
	}
	return p.quality.Reorder(nil, routes, p.quality.PrefixBytes(number))
}

// Preview says what a call to number (as routed) dialling route r now
// would get of its carrier, as Reserve and Pace would decide (a carrier
// quality routing disabled for the number's prefix first), but taking
// nothing: no channel, no half-open trial call (health.Registry.Peek), no
// CPS slot (ratelimit.Limiter.Peek), no next hop recorded or account
// registered (a route's own cps account not used on this node yet is
// free). key spreads
// hash selection as a call's does (the hash of its Call-ID); for weighted
// and round_robin groups the member is the rotation's first choice. It
// blocks on Redis for an account there, at most the limiter's deadline:
// call it off the shards (the admin API's dry run). The error is ctx's.
func (p *Plane) Preview(ctx context.Context, r *route.Route, key uint64, number []byte) (Preview, error) {
	return p.preview(ctx, r, key, number, false)
}

// PreviewLast is Preview for a call's last carrier, as ReserveLast would
// decide: a member calls marked down when the group has no other.
func (p *Plane) PreviewLast(ctx context.Context, r *route.Route, key uint64, number []byte) (Preview, error) {
	return p.preview(ctx, r, key, number, true)
}

func (p *Plane) preview(ctx context.Context, r *route.Route, key uint64, number []byte, last bool) (Preview, error) {
	var pv Preview
	if q := p.quality; q != nil {
		prefix := q.PrefixBytes(number)
		for _, cs := range q.Scores(nil, prefix) {
			pv.Demoted = pv.Demoted || cs.Carrier == r.CarrierID && cs.Demoted
		}
		if q.Disabled(prefix, r.CarrierID) {
			pv.Reason = route.ReasonDisabled
			return pv, nil
		}
	}
	if p.channels.full(r.GatewayGroup) {
		pv.Reason = route.ReasonCallsLimited
		return pv, nil
	}
	m, res := p.health.Peek(r.GatewayGroup, key)
	if last && res == health.GroupDown {
		m, res = p.health.PeekLastResort(r.GatewayGroup, key)
		pv.LastResort = res == health.OK
	}
	switch res {
	case health.OK:
		pv.Dial = Dial{CarrierID: r.CarrierID, Group: m.Group, URI: m.URI, Gateway: m, route: r}
		pv.Dial.Peer.Addr, pv.Dial.Peer.Transport = m.Addr, m.Transport
	case health.UnknownGroup:
		dest := r.NextHop
		if dest == "" {
			dest = r.RURI
		}
		if dest == "" {
			pv.Reason = route.ReasonUnknownGroup
			return pv, nil
		}
		h := parseHop(dest)
		if h.reason != "" {
			pv.Reason = h.reason
			return pv, nil
		}
		pv.Dial = Dial{CarrierID: r.CarrierID, Group: dest, URI: h.uri, Peer: h.peer, route: r}
	case health.Unresolvable:
		pv.Reason = route.ReasonUnresolvable
		return pv, nil
	default:
		pv.Reason = route.ReasonGroupDown
		return pv, nil
	}
	k, name, paced, known := p.cps.peekKey(r, pv.Dial.Group)
	if !paced {
		return pv, nil
	}
	pv.CPSKey = name
	if !known {
		return pv, nil
	}
	dec, err := p.cps.limiter.Peek(ctx, k)
	if err != nil {
		return Preview{}, err
	}
	if dec.Over {
		pv.Reason = route.ReasonCPSLimited
	}
	pv.Wait = dec.Wait
	return pv, nil
}
