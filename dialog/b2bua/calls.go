package b2bua

import (
	"time"

	"github.com/sipedge/sipedge/dialog/cdr"
)

// CallInfo is a live call as the admin API lists it (AppendCalls): its
// own copies, the caller's to keep.
type CallInfo struct {
	ACallID string `json:"a_call_id"` // the caller's Call-ID
	Trunk   string `json:"trunk"`
	// Carrier is the carrier in flight, or that answered; "" while the
	// call waits for its routing decision.
	Carrier string    `json:"carrier"`
	State   string    `json:"state"` // one of the Call* states
	Start   time.Time `json:"start"` // the caller's INVITE
	Answer  time.Time `json:"answer,omitzero"`
}

// Live call states, as CallInfo.State names them.
const (
	CallRouting  = "routing"  // waiting for the routing decision
	CallDialing  = "dialing"  // a carrier dialled (or its CPS slot awaited), no 101-199 from it yet
	CallRinging  = "ringing"  // the carrier in flight sent 101-199
	CallAnswered = "answered" // a carrier answered
	CallEnding   = "ending"   // one side hung up; the BYE to the other waits for its ACK
)

// AppendCalls appends the engine's live calls to dst and returns it. It
// runs on the shard's goroutine only (the owner posts it there: the calls
// are the shard's, read without a lock) and allocates the calls' strings.
func (e *Engine) AppendCalls(dst []CallInfo) []CallInfo {
	for _, c := range e.calls.list {
		if c.state == stateFree {
			continue
		}
		ci := CallInfo{ACallID: string(c.a.callID), Carrier: c.att.dial.CarrierID, Start: e.wall(c.tInvite),
			Answer: e.wall(c.tAnswer)}
		if c.trunk != nil {
			ci.Trunk = c.trunk.Name
		}
		switch {
		case c.byeOnAck:
			ci.State = CallEnding
		case c.answered:
			ci.State = CallAnswered
		case c.state == stateRouting:
			ci.State = CallRouting
		case c.att.progress:
			ci.State = CallRinging
		default:
			ci.State = CallDialing
		}
		dst = append(dst, ci)
	}
	return dst
}

// EndCall ends the live call whose A-leg Call-ID is callID at an
// operator's request (the admin API), as EndAll ends each call at the end
// of a drain: answered, a BYE on both legs; not yet, the carrier in
// flight cancelled (RFC 3261 9.1) and 503 to the caller. Its CDR's
// hangup_side is "admin" (unless a side had hung up already). It reports
// whether there was such a call. It runs on the shard's goroutine only:
// the one its Call-ID hashes to.
func (e *Engine) EndCall(callID []byte, now time.Duration) bool {
	e.now = now
	c, s := e.lookupCall(callID)
	if c == nil || s != sideA {
		return false
	}
	e.endCall(c, cdr.HangupAdmin)
	return true
}

// endCall ends call c on sipedge's side, hung up by side.
func (e *Engine) endCall(c *Call, side cdr.HangupSide) {
	if c.answered {
		e.hangup(c, side)
		return
	}
	c.hangup = side
	e.failCall(c, 503, "Service Unavailable", nil)
}
