package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/dialog/cdr"
)

// finished reports a call that ends, as it ends: the answered call's
// duration to its carrier's plane, its result to its trunk's counters, and
// its record to the CDR sink.
func (e *Engine) finished(c *Call) {
	if c.tAnswer != 0 && c.tEnd != 0 && c.att.route != nil {
		e.tmp.rep = carrier.Report{Event: carrier.CallEnded, CarrierID: c.att.route.CarrierID, Gateway: c.att.dial.Gateway,
			Number: c.callee, Code: c.finalCode, Dialed: true, Answer: c.tAnswer, Duration: c.tEnd - c.tAnswer, At: e.now}
		e.tmp.rep.Invite, e.tmp.rep.Progress = c.seq.Timing()
		e.env.Carriers.Report(&e.tmp.rep)
	}
	if c.trunk != nil {
		c.trunk.Stats.ended(c.tAnswer != 0, c.hangup)
	}
	if e.env.CDR != nil {
		e.env.CDR.Write(e.record(c))
	}
	if c.journal != 0 {
		e.env.Journal.Ended(e.journalID(c.journal))
	}
}

// journalAnswered hands Env.Journal the record of call c, which a carrier
// just answered: its CDR so far, should the node die before the call ends.
func (e *Engine) journalAnswered(c *Call) {
	if e.env.Journal == nil {
		return
	}
	if e.calls.journaled++; e.calls.journaled == 0 { // 0 is "not journalled"
		e.calls.journaled = 1
	}
	if e.env.Journal.Answered(e.journalID(e.calls.journaled), e.record(c)) {
		c.journal = e.calls.journaled
	}
}

// journalID is the node-wide id of the shard's call number n: the shard
// in the high half. A number comes back after 2^32 answered calls on the
// shard, by when its first call is long over.
func (e *Engine) journalID(n uint32) uint64 { return uint64(uint32(e.cfg.Shard))<<32 | uint64(n) }

// record builds the CDR of call c, which ends. Its strings live in the
// record's own storage (cdr.Record.String): a warm engine allocates
// nothing for a CDR.
func (e *Engine) record(c *Call) *cdr.Record {
	r := cdr.AcquireRecord()
	r.ACallID, r.BCallID = r.String(c.a.callID), r.String(c.b.callID)
	if t := c.trunk; t != nil {
		r.Trunk, r.TrunkGroup = t.Name, t.Group
	}
	r.Caller, r.Callee = r.String(c.caller), r.String(c.callee)
	r.DialedNumber = r.Callee
	r.SourceIP = c.a.peer.Addr.Addr()
	r.TimeInvite = e.wall(c.tInvite)
	r.TimeFirstProvisional = e.wall(c.tProvisional)
	r.TimeAnswer = e.wall(c.tAnswer)
	r.TimeEnd = e.wall(c.tEnd)
	r.FinalCode, r.FinalReason = c.finalCode, r.String(c.finalReason)
	r.HangupSide = c.hangup
	r.EndReason = endReasons[c.ended]
	r.Route, r.CarrierID = c.att.dial.Group, c.att.dial.CarrierID
	if rt := c.att.route; rt != nil {
		r.Rate, r.Currency = rt.Rate, rt.Currency // the price of the dial's route
		if c.tAnswer != 0 {
			r.CDRFields = rt.CDRFields // only when this carrier won
		}
	}
	r.RouteSource = c.source
	for i, a := range c.seq.Attempts() {
		r.Attempts = append(r.Attempts, cdr.Attempt{CarrierID: a.CarrierID, Status: a.Status,
			Elapsed: time.Duration(a.ElapsedMs) * time.Millisecond, Dialed: a.Dialed, Reason: a.Reason})
		if x := c.extra; x != nil && i < len(x.legs) {
			// The B-leg the carrier saw, to reconcile with its own CDR.
			l := &x.legs[i]
			ra := &r.Attempts[len(r.Attempts)-1]
			ra.BCallID, ra.TimeInvite = r.String(x.ids[l.start:l.end]), e.wall(l.invite)
		}
	}
	return r
}

// endReason says why sipedge ended a call itself: the CDR's end_reason.
type endReason uint8

const (
	endNone endReason = iota
	endMaxDuration
	endSessionExpired
	endNoAck
	endNoResponse
	endNoPrack
	endShutdown
)

var endReasons = [...]string{endNone: "", endMaxDuration: cdr.EndMaxDuration, endSessionExpired: cdr.EndSessionExpired,
	endNoAck: cdr.EndNoAck, endNoResponse: cdr.EndNoResponse, endNoPrack: cdr.EndNoPrack, endShutdown: cdr.EndShutdown}

// wall converts a time on the shard's clock to wall time; 0, an event that
// did not happen, stays the zero time.
func (e *Engine) wall(at time.Duration) time.Time {
	if at == 0 {
		return time.Time{}
	}
	return e.env.Clock.Wall(at)
}
