package enginerig

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// Carriers is a carrier plane for tests, with the methods of
// b2bua.Carriers: each gateway group is one gateway (Gateways); by
// default routes keep their order, nothing is paced or limited, no
// failure is a CPS reject, no group holds credentials, no redirect is
// followed, and every report
// and dialled number is kept (Reports, Numbers). A hook,
// when set, replaces what its method does. The engine calls it on its
// goroutine only; so may the test, between the engine's calls.
type Carriers struct {
	// Gateways maps a gateway group to its one gateway; an invalid
	// address is a group whose members are all down. NewCarriers sets
	// carrier-a, carrier-b and down.
	Gateways map[string]netip.AddrPort

	OnOrder       func(routes []route.Route, number []byte, buf *[]route.Route) []route.Route
	OnReserve     func(r *route.Route, key uint64, d *carrier.Dial) (reason string)
	OnPace        func(d *carrier.Dial, ref uint64) carrier.Pace
	OnCPSReject   func(d *carrier.Dial, code int, phrase, reason []byte) (retry time.Duration, ok bool)
	OnOutcome     func(d *carrier.Dial, code int, retryAfter time.Duration)
	OnRelease     func(d *carrier.Dial)
	OnCredentials func(d *carrier.Dial) *health.AuthConfig
	OnRedirect    func(d *carrier.Dial, host []byte, port uint16) bool

	// Reports are what the engine reported, Number copied.
	Reports []carrier.Report
	// Numbers are the numbers Reserve and ReserveLast were given, in order.
	Numbers []string
	// Reserved are the carriers reserved, in order, "last:" before those
	// reserved with ReserveLast.
	Reserved []string
}

// NewCarriers returns the plane of the rig's network: carrier-a and
// carrier-b, one gateway each, and the group down.
func NewCarriers() *Carriers {
	return &Carriers{Gateways: map[string]netip.AddrPort{"carrier-a": CarrierA, "carrier-b": CarrierB, "down": {}}}
}

// Gateway makes route r's group's gateway the carrier of d: what Reserve
// does without a hook.
func (c *Carriers) Gateway(r *route.Route, d *carrier.Dial) string {
	addr, ok := c.Gateways[r.GatewayGroup]
	if !ok {
		return route.ReasonUnknownGroup
	}
	if !addr.IsValid() {
		return route.ReasonGroupDown
	}
	*d = carrier.Dial{CarrierID: r.CarrierID, Group: r.GatewayGroup, URI: "sip:" + addr.String(),
		Peer: transport.Peer{Addr: addr, Transport: transport.UDP}}
	return ""
}

// Order implements b2bua.Carriers: by default, the routes as they are.
func (c *Carriers) Order(routes []route.Route, number []byte, buf *[]route.Route) []route.Route {
	if c.OnOrder != nil {
		return c.OnOrder(routes, number, buf)
	}
	return routes
}

// Reserve implements b2bua.Carriers; it keeps number in Numbers.
func (c *Carriers) Reserve(r *route.Route, key uint64, number []byte, d *carrier.Dial) string {
	c.Reserved = append(c.Reserved, r.CarrierID)
	return c.reserve(r, key, number, d)
}

// ReserveLast implements b2bua.Carriers: Reserve, recorded apart (the
// rig's groups have no health to rescue a member from).
func (c *Carriers) ReserveLast(r *route.Route, key uint64, number []byte, d *carrier.Dial) string {
	c.Reserved = append(c.Reserved, "last:"+r.CarrierID)
	return c.reserve(r, key, number, d)
}

func (c *Carriers) reserve(r *route.Route, key uint64, number []byte, d *carrier.Dial) string {
	c.Numbers = append(c.Numbers, string(number))
	if c.OnReserve != nil {
		return c.OnReserve(r, key, d)
	}
	return c.Gateway(r, d)
}

// Pace implements b2bua.Carriers.
func (c *Carriers) Pace(d *carrier.Dial, ref uint64) carrier.Pace {
	if c.OnPace != nil {
		return c.OnPace(d, ref)
	}
	return carrier.Pace{}
}

// CPSReject implements b2bua.Carriers.
func (c *Carriers) CPSReject(d *carrier.Dial, code int, phrase, reason []byte) (time.Duration, bool) {
	if c.OnCPSReject != nil {
		return c.OnCPSReject(d, code, phrase, reason)
	}
	return 0, false
}

// Outcome implements b2bua.Carriers.
func (c *Carriers) Outcome(d *carrier.Dial, code int, retryAfter time.Duration) {
	if c.OnOutcome != nil {
		c.OnOutcome(d, code, retryAfter)
	}
}

// Release implements b2bua.Carriers.
func (c *Carriers) Release(d *carrier.Dial) {
	if c.OnRelease != nil {
		c.OnRelease(d)
	}
}

// Credentials implements b2bua.Carriers.
func (c *Carriers) Credentials(d *carrier.Dial) *health.AuthConfig {
	if c.OnCredentials != nil {
		return c.OnCredentials(d)
	}
	return nil
}

// Redirect implements b2bua.Carriers: by default, no redirect is followed.
func (c *Carriers) Redirect(d *carrier.Dial, host []byte, port uint16) bool {
	return c.OnRedirect != nil && c.OnRedirect(d, host, port)
}

// Report implements b2bua.Carriers.
func (c *Carriers) Report(r *carrier.Report) {
	kept := *r
	kept.Number = bytes.Clone(r.Number)
	c.Reports = append(c.Reports, kept)
}
