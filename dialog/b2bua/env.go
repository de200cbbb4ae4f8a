package b2bua

import (
	"log/slog"
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// Env is what an Engine needs from its shard and its owner. Send, Clock and
// MintCallID must be set; every other field has a working default.
type Env struct {
	Send       func(to transport.Peer, b []byte) // b may be reused once Send returns
	Clock      Clock                             // the shard's timer wheel
	MintCallID func(dst []byte) []byte           // a Call-ID that hashes to this shard
	// Carriers is the carrier plane as this shard sees it (a
	// carrier.Shard); by default every route goes to its next hop, with
	// no limits (carrier.NextHops).
	Carriers Carriers
	// Router decides where a new call goes (an lcr.Router); by default
	// every call gets 404 No Route.
	Router Router
	// CDR takes each call's record as the call ends (a cdr.Writer); by
	// default calls leave none, and none is built.
	CDR CDRSink
	// Journal, when set, hears of each call as a carrier answers it and as
	// it ends, its CDR written: to keep the calls up where another node
	// finds them should this one die (dialog/journal, over a fleet's call
	// journal). By default calls are not journalled.
	Journal Journal
	// Policy holds the optional hooks of a routing policy.
	Policy Policy
	// Draining makes new calls get 503 while it says true; by default the
	// engine never drains.
	Draining func() bool
	Log      *slog.Logger // default slog.Default()
}

// Clock is the shard's timer wheel and time. When a timer fires, the shard
// calls Engine.Timer with its kind and arg.
type Clock interface {
	StartAt(at time.Duration, kind uint8, arg uint64) uint64
	Stop(h uint64) bool
	// Wall returns the wall-clock time of at, a time on the shard's clock
	// (the now its inputs are given): the CDR's times.
	Wall(at time.Duration) time.Time
}

// Carriers is the carrier plane of one shard (carrier.Shard): what the
// calls ask of their carriers, each attempt's carrier held as a
// carrier.Dial from Reserve to Release. Its methods run on the shard's
// goroutine and must not block.
type Carriers interface {
	// Order returns the routes a call to number (as routed) tries, in the
	// order to try them: routes itself, or a copy reordered into *buf
	// (carrier.Shard.Order: quality.mode). routes may be shared and is
	// never modified; *buf is the engine's, which keeps what it returns
	// until the call ends.
	Order(routes []route.Route, number []byte, buf *[]route.Route) []route.Route
	// Reserve makes route r the carrier of a dial to number (as routed),
	// in d: a channel of its gateway group and a healthy member, or its
	// next hop. A non-empty reason (a route.Reason constant) means it
	// cannot be dialled (its group is down, it is disabled, ...): the
	// sequence burns it at once, and d is left as it was. key spreads hash
	// selection per call.
	Reserve(r *route.Route, key uint64, number []byte, d *carrier.Dial) (reason string)
	// ReserveLast is Reserve for the call's last carrier, with none left
	// to fail over to: a group whose members calls marked down still
	// gives one (carrier.Shard.ReserveLast).
	ReserveLast(r *route.Route, key uint64, number []byte, d *carrier.Dial) (reason string)
	// Pace reserves a calls-per-second slot for dialling d: now, after a
	// wait, over the limit, or Pending: the answer comes through
	// Engine.Paced for the call ref names.
	Pace(d *carrier.Dial, ref uint64) carrier.Pace
	// CPSReject tells whether a final response to the dial d (its code,
	// reason phrase and Reason header) is the carrier refusing the call
	// over its CPS limit and, if so, after how long to retry the same
	// carrier. The engine retries at most MaxCPSRetries times, then fails
	// over; a CPS reject never counts against the gateway's health.
	CPSReject(d *carrier.Dial, code int, phrase, reason []byte) (retry time.Duration, ok bool)
	// Outcome reports what a dial said of its gateway, once per dial: a
	// final status, or a carrier.Outcome constant, with the response's
	// Retry-After.
	Outcome(d *carrier.Dial, code int, retryAfter time.Duration)
	// Release gives back what d holds (its group's channel) as the call
	// leaves the carrier; a second Release does nothing.
	Release(d *carrier.Dial)
	// Credentials returns the account sipedge holds with d's carrier, to
	// answer its Digest challenges (RFC 3261 22.2); nil when none. A
	// non-empty Realm is the only realm it answers.
	Credentials(d *carrier.Dial) *health.AuthConfig
	// Redirect makes d the member of its gateway group that the carrier's
	// 3xx names (its Contact's host, and port: 0 for none), when the group
	// follows redirects; false otherwise, and d is left as it was. The dial
	// keeps its channel and CPS slot, and its new gateway hears its own
	// Outcome.
	Redirect(d *carrier.Dial, host []byte, port uint16) bool
	// Report tells what became of an attempt and of an answered call, for
	// the per-carrier figures. r is valid during the call only.
	Report(r *carrier.Report)
}

// Router decides where a new call goes (lcr.Router). It runs on the
// shard's goroutine and must not block: a decision that needs I/O is
// Pending, and the owner delivers it later through Engine.Decided for the
// call r.Ref names. r's byte slices are valid only during the call.
type Router interface {
	Route(r *route.Request) route.Decision
}

// CDRSink takes the record of each call that ends (cdr.Writer): Write
// takes r over, as cdr.Writer.Write does.
type CDRSink interface {
	Write(r *cdr.Record) bool
}

// Journal keeps the answered calls of a node (dialog/journal). Its methods
// run on the shard's goroutine, once per answered call each: they must not
// block, and should not allocate once warm.
type Journal interface {
	// Answered takes over r, the record of a call a carrier just answered
	// (its CDR so far: no time_end, no hangup side), under id, which no
	// other call of the node has while the call is up. false: the call is
	// not journalled (the journal is full), and Ended is not called.
	Answered(id uint64, r *cdr.Record) bool
	// Ended tells that the call journalled under id ended and its CDR was
	// handed to Env.CDR.
	Ended(id uint64)
}

// Routes is a Router that gives every call the same routes, from the
// static table; none is 404 No Route, the default Router.
type Routes []route.Route

// Route implements Router.
func (rs Routes) Route(*route.Request) route.Decision {
	if len(rs) == 0 {
		return route.Decision{Code: 404, Reason: "No Route"}
	}
	return route.Decision{Routes: rs, Source: route.SourceStatic}
}

// neverDraining is the default Env.Draining.
func neverDraining() bool { return false }

// Timer kinds the Engine starts: TimerTxn for the transaction layer, the
// others its own. A shard passes them back to Engine.Timer.
const (
	TimerTxn uint8 = iota + 1
	timer2xx       // retransmit the 2xx to the caller (RFC 3261 13.3.1.4)
	timerMaxDuration
	timerSequence // the failover sequence's deadline for the carrier in flight
	timerProbe    // a gateway probe's deadline
	timerPace     // a CPS slot has come (or a CPS reject's retry delay passed)
	timerRel      // retransmit a reliable provisional to the caller (RFC 3262 3)
	timerSessionA // the caller's leg's session timer: its refresh or its expiry (RFC 4028 10)
	timerSessionB // the carrier's
)

// MaxCPSRetries bounds the retries of one carrier after CPS rejects.
const MaxCPSRetries = 2

// Policy is a routing policy's hooks: the Go form of a routing script's
// handlers. Each is optional and runs on the shard's goroutine, in the
// middle of the call's processing: a hook must not block (no I/O, no
// locks held long), and must not keep the *Call, *route.Request or
// *route.Route it is given past its return; all are valid only during the
// hook. OnAnswer and OnRouteFailure run after the carrier plane heard of
// the attempt (Carriers.Report: sipedge's per-carrier metrics).
type Policy struct {
	// OnInvite runs once per new call, with the Router's decision. It may
	// filter or reorder d.Routes, set d.Code (and d.Reason) to reject, or
	// clear d.Code and set d.Routes to route a call the Router rejected,
	// and set d.RingTimeout, the call's ring bound over its trunk's.
	// d.Routes may be shared with other calls (a cache entry, the static
	// table): never change it in place; assign a new slice, which the call
	// then keeps, unmodified, until it ends.
	OnInvite func(r *route.Request, d *route.Decision)
	// OnAnswer runs when a carrier answers.
	OnAnswer func(c *Call, r *route.Route)
	// OnRouteFailure runs once per failed attempt, including the last; it
	// is a notification only.
	OnRouteFailure func(c *Call, r *route.Route, a route.Attempt)
	// OnFailure runs once per call, when every carrier failed, with the
	// code and reason the caller would get (the carrier plane orders its
	// routes, as OnInvite's, before they are tried: Carriers.Order); its FailureAction says what
	// happens instead, if anything. If it routes again and those carriers
	// fail too, the caller gets their failure: OnFailure does not run a
	// second time, so a policy cannot loop a call for ever.
	OnFailure func(c *Call, code int, reason string) FailureAction
}

// FailureAction is Policy.OnFailure's answer. The zero value keeps the
// default: the caller gets the sequence's code and reason.
type FailureAction struct {
	// Routes, when not empty, are tried next, in order (a backup trunk):
	// the call's attempts so far stay in its CDR's lcr_attempts. The
	// slice is kept, unmodified, until the call ends.
	Routes []route.Route
	// Code, when Routes is empty, is the caller's final response instead,
	// with Reason (the code's standard phrase when empty). Only failure
	// codes (300-699) are taken; any other is ignored. A 3xx reaches the
	// caller as 480: sipedge writes no Contact for it to redirect to.
	Code   int
	Reason string
}
