package b2bua

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/parser"
)

// SessionTimer configures session timers (RFC 4028; doc.go, Session
// timers).
type SessionTimer struct {
	// Uphold makes sipedge keep a session timer on each leg of its own,
	// refreshing a leg whose peer does not, and end a call whose session
	// goes unrefreshed; otherwise (relay) the peers' timers pass through.
	Uphold bool
	// Interval is the session interval sipedge asks for, and the longest
	// it grants, in uphold (default 1800 s, RFC 4028 4's recommendation).
	Interval time.Duration
	// MinSE is the shortest session interval sipedge accepts, in either
	// mode: a request asking for less is answered 422 (RFC 4028 5, 9).
	// Default and floor 90 s (RFC 4028 4).
	MinSE time.Duration
}

// Session timer defaults and floor (RFC 4028 4).
const (
	DefaultSessionInterval = 1800 * time.Second
	MinSessionInterval     = 90 * time.Second
)

// withDefaults returns st with its defaults filled in and MinSE at least
// the RFC's floor, Interval at least MinSE.
func (st SessionTimer) withDefaults() SessionTimer {
	st.MinSE = max(st.MinSE, MinSessionInterval)
	if st.Interval == 0 {
		st.Interval = DefaultSessionInterval
	}
	st.Interval = max(st.Interval, st.MinSE)
	return st
}

// sessionLeg is a leg's session timer in uphold: what was negotiated with
// its peer, and when the session was last refreshed on it.
type sessionLeg struct {
	interval  time.Duration // the session interval; 0: none yet
	minSE     time.Duration // the peer's Min-SE, when its 422 asked for more than sipedge's
	ours      bool          // sipedge refreshes the leg, else its peer does
	update    bool          // the peer allows UPDATE: sipedge refreshes with one, else with a re-INVITE
	refreshed time.Duration // when the session was last refreshed (or began)
	timer     uint64        // the next refresh, when ours, else the check for the peer's
	refresh   txn.Handle    // sipedge's refresh in flight
	inviting  bool          // and it is a re-INVITE
	// sdp is the session description sipedge last sent the peer, which a
	// re-INVITE refresh offers again unchanged (RFC 4028 10; a pooled
	// buffer).
	sdp []byte
}

// sessionSide names a leg's session state in callExtra.session.
func sessionSide(s side) int { return int(s) - 1 }

// refuseInterval answers a request asking for a session interval below
// MinSE with 422 and sipedge's Min-SE (RFC 4028 6, 9), one whose
// Session-Expires does not parse with 400; it reports whether it did.
func (e *Engine) refuseInterval(h txn.Handle, m *parser.Message) bool {
	if m.Count(parser.HeaderSessionExpires) == 0 {
		return false
	}
	se, err := parser.ParseSessionExpires(m.Get(parser.HeaderSessionExpires))
	switch {
	case err != nil:
		e.respond(h, m, 400, "Bad Session-Expires", nil)
	case time.Duration(se.Delta)*time.Second < e.cfg.SessionTimer.MinSE:
		b := parser.AppendResponse(e.tmp.out[:0], m, 422, "Session Interval Too Small", e.tagFor(nil))
		b = parser.AppendHeaderUint(b, "Min-SE", uint64(e.cfg.SessionTimer.MinSE/time.Second))
		e.tmp.out = parser.AppendBody(b, "", nil)
		if e.txns.Respond(h, e.tmp.out, e.now) == nil {
			e.after()
		}
	default:
		return false
	}
	return true
}

// sessionCall sets up, in uphold, the session timers of call c from the
// caller's INVITE m: the caller's leg as it asks (sessionRequested), the
// carrier's at Interval, which the B-leg INVITE asks for.
func (e *Engine) sessionCall(c *Call, m *parser.Message) {
	e.sessionRequested(c, sideA, m)
	c.extra.session[sessionSide(sideB)].interval = e.cfg.SessionTimer.Interval
}

// sessionRequested takes, in uphold, what a request m from the peer of leg
// s (the caller's INVITE, a re-INVITE or UPDATE) says of the leg's session
// (RFC 4028 9): the interval it asks for, no longer than Interval and no
// shorter than its Min-SE; the refresher it names, else the peer when it
// supports timers, sipedge when not.
func (e *Engine) sessionRequested(c *Call, s side, m *parser.Message) {
	st := &e.extraOf(c).session[sessionSide(s)]
	cfg := &e.cfg.SessionTimer
	if st.interval == 0 {
		st.interval = cfg.Interval
	}
	var se parser.SessionExpires
	if v := m.Get(parser.HeaderSessionExpires); v != nil {
		se, _ = parser.ParseSessionExpires(v) // refuseInterval read it
		st.interval = min(time.Duration(se.Delta)*time.Second, cfg.Interval)
	}
	if v := m.Get(parser.HeaderMinSE); v != nil {
		if minSE, err := parser.ParseMinSE(v); err == nil {
			st.interval = max(st.interval, time.Duration(minSE)*time.Second)
		}
	}
	st.interval = max(st.interval, cfg.MinSE)
	switch se.Refresher {
	case parser.RefresherUAC:
		st.ours = false
	case parser.RefresherUAS:
		st.ours = true
	default:
		st.ours = !m.HasOptionTag(parser.HeaderSupported, "timer") && !m.HasOptionTag(parser.HeaderRequire, "timer")
	}
	if m.Count(parser.HeaderAllow) > 0 {
		st.update = m.HasOptionTag(parser.HeaderAllow, "UPDATE")
	}
}

// sessionAnswered takes, in uphold, what the 2xx m from the peer of leg s,
// to a request sipedge sent it (the B-leg INVITE, a relayed re-INVITE or
// UPDATE, a refresh), says of the leg's session (RFC 4028 7.2): its
// interval and refresher (sipedge was the UAC) or, with no Session-Expires,
// a peer that does not do session timers, whose leg sipedge refreshes at
// the interval it asked for.
func (e *Engine) sessionAnswered(c *Call, s side, m *parser.Message) {
	st := &e.extraOf(c).session[sessionSide(s)]
	if st.interval == 0 {
		st.interval = e.cfg.SessionTimer.Interval
	}
	st.ours = true
	if v := m.Get(parser.HeaderSessionExpires); v != nil {
		if se, err := parser.ParseSessionExpires(v); err == nil && se.Delta > 0 {
			st.interval, st.ours = time.Duration(se.Delta)*time.Second, se.Refresher != parser.RefresherUAS
		}
	}
	if m.Count(parser.HeaderAllow) > 0 {
		st.update = m.HasOptionTag(parser.HeaderAllow, "UPDATE")
	}
}

// appendSessionRequest appends the session timer of leg s to a request
// sipedge sends on it in uphold (RFC 4028 7.1): the leg's interval, with
// the refresher once one is agreed (initial: the B-leg INVITE, whose
// answer chooses), and sipedge's Min-SE.
func (e *Engine) appendSessionRequest(dst []byte, c *Call, s side, initial bool) []byte {
	st := &c.extra.session[sessionSide(s)]
	dst = append(dst, "Session-Expires: "...)
	dst = strconv.AppendUint(dst, uint64(st.interval/time.Second), 10)
	switch {
	case initial:
	case st.ours:
		dst = append(dst, ";refresher=uac"...)
	default:
		dst = append(dst, ";refresher=uas"...)
	}
	dst = append(dst, "\r\nMin-SE: "...)
	dst = strconv.AppendUint(dst, uint64(max(e.cfg.SessionTimer.MinSE, st.minSE)/time.Second), 10)
	return append(dst, "\r\n"...)
}

// appendSession2xx appends the session timer of the 2xx sipedge sends on
// leg s to an INVITE or UPDATE, resp being the other leg's 2xx it relays.
// In uphold, the leg's own (RFC 4028 9): its interval and refresher, and
// Require: timer when the peer refreshes. In relay, the other leg's
// Session-Expires passes with the header policy, and the 2xx gets the
// Require: timer RFC 4028 9 asks for with refresher=uac, which the policy
// never relays (sipedge writes Require itself).
func (e *Engine) appendSession2xx(dst []byte, c *Call, s side, resp *parser.Message) []byte {
	if !e.cfg.SessionTimer.Uphold {
		if resp.Count(parser.HeaderSessionExpires) > 0 && e.policy.kinds.Has(parser.HeaderSessionExpires) {
			if se, err := parser.ParseSessionExpires(resp.Get(parser.HeaderSessionExpires)); err == nil && se.Refresher == parser.RefresherUAC {
				dst = append(dst, "Require: timer\r\n"...)
			}
		}
		return dst
	}
	st := &c.extra.session[sessionSide(s)]
	dst = append(dst, "Session-Expires: "...)
	dst = strconv.AppendUint(dst, uint64(st.interval/time.Second), 10)
	if st.ours {
		return append(dst, ";refresher=uas\r\n"...)
	}
	return append(dst, ";refresher=uac\r\nRequire: timer\r\n"...)
}

// retryInterval answers, in uphold, the carrier's 422 to the B-leg INVITE
// (RFC 4028 7.4): the INVITE again, once per attempt, in the same dialog
// with the next CSeq, asking for the interval the 422's Min-SE names, its
// own Min-SE that value. False when the 422 is the attempt's failure: a
// second one, or one whose Min-SE asks for nothing longer.
func (e *Engine) retryInterval(c *Call, m *parser.Message) bool {
	minSE, err := parser.ParseMinSE(m.Get(parser.HeaderMinSE))
	st := &c.extra.session[sessionSide(sideB)]
	want := time.Duration(minSE) * time.Second
	ainv := e.aInviteCopy(c)
	if c.attIntervalRetried || err != nil || want <= st.interval || ainv == nil {
		return false
	}
	c.attIntervalRetried = true
	st.interval, st.minSE = want, want
	return e.sendInvite(c, ainv, nil)
}

// sessionRefreshed restarts leg s's session timer: a 2xx to a re-INVITE or
// UPDATE on it, or its session beginning (RFC 4028 10).
func (e *Engine) sessionRefreshed(c *Call, s side) {
	st := &c.extra.session[sessionSide(s)]
	st.refreshed = e.now
	e.scheduleSession(c, s)
}

// expiry is when the session of a leg expires for sipedge's purposes:
// "min(32, one third of the session interval)" before the interval runs
// out since its last refresh, when RFC 4028 10 has the side that does not
// refresh send its BYE.
func (st *sessionLeg) expiry() time.Duration {
	return st.refreshed + st.interval - min(32*time.Second, st.interval/3)
}

// scheduleSession arms leg s's timer: its refresh at half the interval
// when sipedge refreshes it (RFC 4028 10), else, and once a refresh is in
// flight, its expiry.
func (e *Engine) scheduleSession(c *Call, s side) {
	st := &c.extra.session[sessionSide(s)]
	if st.timer != 0 {
		e.env.Clock.Stop(st.timer)
		st.timer = 0
	}
	if st.interval == 0 {
		return
	}
	at := st.expiry()
	if st.ours && st.refresh == 0 {
		at = st.refreshed + st.interval/2
	}
	kind := timerSessionA
	if s == sideB {
		kind = timerSessionB
	}
	st.timer = e.env.Clock.StartAt(at, kind, e.arg(c))
}

// sessionTimer handles leg s's timer: its session expired, and the call
// ends with a BYE on both legs (end_reason session_expired); or it is
// time for sipedge's refresh, which waits while a relayed re-INVITE is in
// flight or a 2xx awaits its ACK (each a refresh of its own when it
// succeeds).
func (e *Engine) sessionTimer(c *Call, s side) {
	st := &c.extra.session[sessionSide(s)]
	st.timer = 0
	if c.state != stateConfirmed {
		return
	}
	if e.now >= st.expiry() {
		e.env.Log.Info("session expired: no refresh (RFC 4028 10); ending the call", "call_id", string(c.a.callID),
			"leg", legName(s), "interval_secs", int64(st.interval/time.Second), "refresher", refresherName(st.ours))
		e.m.sessionsExpired.Inc()
		c.ended = endSessionExpired
		e.hangup(c, cdr.HangupSystem)
		return
	}
	if !st.ours || st.refresh != 0 {
		e.scheduleSession(c, s)
		return
	}
	if c.reinvite[0] || c.reinvite[1] || len(c.ok2xx) > 0 || !e.sendRefresh(c, s) {
		st.timer = e.env.Clock.StartAt(min(e.now+2*time.Second, st.expiry()), timerOf(s), e.arg(c))
		return
	}
	e.scheduleSession(c, s)
}

func timerOf(s side) uint8 {
	if s == sideA {
		return timerSessionA
	}
	return timerSessionB
}

func legName(s side) string {
	if s == sideA {
		return "caller"
	}
	return "carrier"
}

func refresherName(ours bool) string {
	if ours {
		return "sipedge"
	}
	return "peer"
}

// sendRefresh sends sipedge's session refresh on leg s (RFC 4028 7.4, 10):
// an UPDATE without a body when the peer allows UPDATE (RFC 3311), else a
// re-INVITE offering the session description sipedge last sent it
// unchanged, with the leg's session timer. It reports whether it went.
func (e *Engine) sendRefresh(c *Call, s side) bool {
	st := &c.extra.session[sessionSide(s)]
	l := c.leg(s)
	method := "UPDATE"
	if !st.update && len(st.sdp) > 0 {
		method = "INVITE"
	}
	l.cseq++
	d := e.destOf(c, l)
	b := e.appendRequestHead(e.tmp.out[:0], method, l, &d, l.cseq, 70)
	b = e.appendContact(b, d.peer.Transport)
	b = append(b, "Supported: timer\r\n"...)
	b = e.appendSessionRequest(b, c, s, false)
	if method == "INVITE" {
		b = parser.AppendBody(b, "application/sdp", st.sdp)
	} else {
		b = parser.AppendBody(b, "", nil)
	}
	e.tmp.out = b
	h, err := e.sendBuilt(*d.peer)
	if err != nil {
		return false
	}
	if method == "INVITE" {
		// Its 2xx is ACKed on the leg as it comes (onRefreshResponse), and
		// another INVITE meets 491 meanwhile (refreshing, RFC 3261 14.1).
		l.inviteCSeq = l.cseq
	}
	st.refresh, st.inviting = h, method == "INVITE"
	e.watch(h, c, roleRefresh, 0, int8(s))
	e.m.sessionRefreshes.Inc()
	e.after()
	return true
}

// onRefreshResponse handles the answer to sipedge's refresh on leg s
// (RFC 4028 10): a 2xx refreshes the session (a re-INVITE's is ACKed); a
// 408 or 481 says the session is gone, and the call ends; 491 retries
// soon; 405 or 501 to an UPDATE retries with a re-INVITE; any other
// failure leaves the session to expire unless a later refresh succeeds.
func (e *Engine) onRefreshResponse(c *Call, s side, h txn.Handle, m *parser.Message) {
	st := &c.extra.session[sessionSide(s)]
	code := m.StatusCode()
	cseq, _ := m.CSeq()
	l := c.leg(s)
	if code >= 200 && code < 300 && h != st.refresh {
		e.ackAgain(c, l, cseq.Num) // a retransmitted 2xx of a re-INVITE
		return
	}
	if code < 200 || h != st.refresh {
		return
	}
	st.refresh, st.inviting = 0, false
	switch {
	case code < 300:
		if cseq.Method == parser.MethodInvite {
			e.ack(c, l, nil)
		}
		e.sessionAnswered(c, s, m)
		e.sessionRefreshed(c, s)
		return
	case code == 408 || code == 481:
		e.env.Log.Info("session refresh refused (RFC 4028 10); ending the call", "call_id", string(c.a.callID),
			"leg", legName(s), "code", code)
		e.m.sessionsExpired.Inc()
		c.ended = endSessionExpired
		e.hangup(c, cdr.HangupSystem)
		return
	case (code == 405 || code == 501) && cseq.Method == parser.MethodUpdate && len(st.sdp) > 0:
		st.update = false
		e.sessionTimer(c, s) // at once, as a re-INVITE
		return
	}
	// Again halfway to the expiry (at least a second on), or after a 491
	// the 2.1 to 4 s of RFC 3261 14.1.
	retry := e.now + max((st.expiry()-e.now)/2, time.Second)
	if code == 491 {
		retry = e.now + time.Duration(2100+rand.IntN(1900))*time.Millisecond
	}
	if st.timer != 0 {
		e.env.Clock.Stop(st.timer)
	}
	st.timer = e.env.Clock.StartAt(min(retry, st.expiry()), timerOf(s), e.arg(c))
}

// refreshFailed handles sipedge's refresh on leg s going unanswered (Timer
// B or F) or unsendable: the session is gone (RFC 4028 10).
func (e *Engine) refreshFailed(c *Call, s side) {
	st := &c.extra.session[sessionSide(s)]
	st.refresh, st.inviting = 0, false
	e.env.Log.Info("session refresh unanswered (RFC 4028 10); ending the call", "call_id", string(c.a.callID), "leg", legName(s))
	e.m.sessionsExpired.Inc()
	c.ended = endSessionExpired
	e.hangup(c, cdr.HangupSystem)
}

// refreshing reports whether a re-INVITE of sipedge's own refreshes a leg
// of c: another INVITE in the call meets 491 meanwhile (RFC 3261 14.1), as
// during a relayed one.
func (c *Call) refreshing() bool {
	return c.extra != nil && (c.extra.session[0].inviting || c.extra.session[1].inviting)
}

// keepSentSDP keeps body, a session description sipedge sent on leg s, in
// uphold, for a re-INVITE refresh of the leg: a peer that does not allow
// UPDATE, or refuses one (405, 501), gets one.
func (e *Engine) keepSentSDP(c *Call, s side, body []byte) {
	if !e.cfg.SessionTimer.Uphold || c.extra == nil || len(body) == 0 || s == 0 {
		return
	}
	st := &c.extra.session[sessionSide(s)]
	if st.sdp == nil {
		st.sdp = e.getBuf()
	}
	st.sdp = append(st.sdp[:0], body...)
}

// stopSessions stops the legs' session timers and gives their buffers back.
func (e *Engine) stopSessions(x *callExtra) {
	for i := range x.session {
		st := &x.session[i]
		if st.timer != 0 {
			e.env.Clock.Stop(st.timer)
		}
		e.putBuf(st.sdp)
	}
}
