package txn

import (
	"net/netip"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// ReceiveRequest passes a request received from from to the transaction
// layer, before any routing work. The request is matched per RFC 3261
// 17.2.3; m should have passed parser's Validate.
//
//   - A retransmission is absorbed by its server transaction, which re-sends
//     its last response if it has one; the TU sees nothing.
//   - An ACK that matches an INVITE server transaction is absorbed in the
//     Completed and Confirmed states (the ACK for a non-2xx), and passed to
//     the TU as an ActAck in Accepted (RFC 6026 7.1). An ACK that matches
//     none (the ACK for a 2xx has a branch of its own) is passed to the TU
//     as an ActAck with Txn 0. An ACK never creates a transaction.
//   - Any other request creates a server transaction and is passed to the TU
//     as an ActRequest. An INVITE is answered 100 Trying at once (RFC 3261
//     17.2.1), before the ActRequest. A CANCEL's ActRequest names the INVITE
//     server transaction it cancels in Ref (RFC 3261 9.2).
//
// Requests whose top Via branch lacks the magic cookie are RFC 2543 requests
// and are matched by the legacy rules of 17.2.3 (see the package
// documentation). ErrFull asks the owner to answer 503 statelessly; other
// errors are the parser's, for a malformed Via, CSeq, From, To or Call-ID:
// answer them as parser.Answer says. The table keeps no view into m.
func (t *Table) ReceiveRequest(m *parser.Message, from transport.Peer, now time.Duration) error {
	return t.receiveRequest(m, from, nil, now)
}

// ReceiveRequestTo is ReceiveRequest with the destination of the
// transaction's responses chosen by the owner instead of ReplyTo: the
// source port for a peer behind NAT that does not ask for rport.
func (t *Table) ReceiveRequestTo(m *parser.Message, from, replyTo transport.Peer, now time.Duration) error {
	return t.receiveRequest(m, from, &replyTo, now)
}

func (t *Table) receiveRequest(m *parser.Message, from transport.Peer, replyTo *transport.Peer, now time.Duration) error {
	t.begin(now)
	if m.IsResponse() {
		return ErrNotRequest
	}
	if !from.Transport.Valid() {
		return ErrTransport
	}
	var via parser.Via
	if err := m.TopVia(&via); err != nil {
		return err
	}
	method := m.Method()
	if method == parser.MethodAck {
		return t.receiveAck(m, &via, from)
	}
	legacy, _, err := t.requestKey(m, &via, m.MethodBytes())
	if err != nil {
		return err
	}
	h := t.hash(t.key)
	if i := t.find(h, nil, false); i >= 0 {
		// RFC 3261 17.2.3: a retransmission; its transaction absorbs it.
		t.stats.Absorbed++
		return t.step(i, &event{in: inRequest})
	}
	kind, state := KindNonInviteServer, StateTrying // RFC 3261 17.2.2
	if method == parser.MethodInvite {
		kind, state = KindInviteServer, StateProceeding // RFC 3261 17.2.1
	}
	to := ReplyTo(&via, from)
	if replyTo != nil {
		to = *replyTo
	}
	i, err := t.alloc(kind, state, to)
	if err != nil {
		return err
	}
	t.insert(i, h)
	x := t.slots.at(i)
	x.legacy = legacy
	if kind == KindInviteServer {
		// RFC 3261 17.2.1: "the server transaction MUST generate a 100
		// (Trying) response unless it knows that the TU will generate a
		// provisional or final response within 200 ms": always, at once.
		x.msg = parser.AppendResponse(x.msg, m, 100, "Trying", nil)
		x.msg = parser.AppendBody(x.msg, "", nil)
		t.charge(x)
		t.send(i, x.msg)
	}
	var ref Handle
	if method == parser.MethodCancel {
		ref = t.MatchCancel(m)
	}
	t.act(ActRequest, t.handle(i), from, nil).Ref = ref
	return nil
}

// ReplyTo returns where the responses to a request with top Via via,
// received from peer from, go (RFC 3261 18.2.2, RFC 3581 4): the source
// address, with the port via.ResponsePort names. On a stream the request's
// connection comes first; the address is for a new one if it is gone.
func ReplyTo(via *parser.Via, from transport.Peer) transport.Peer {
	port := via.ResponsePort(from.Addr.Port(), from.Transport.Reliable())
	from.Addr = netip.AddrPortFrom(from.Addr.Addr(), port)
	return from
}

// receiveAck matches an ACK to the INVITE server transaction it belongs to
// (RFC 3261 17.2.3: method INVITE; RFC 2543: the To tag of the response).
func (t *Table) receiveAck(m *parser.Message, via *parser.Via, from transport.Peer) error {
	legacy, toTag, err := t.requestKey(m, via, methodInvite)
	if err != nil {
		return err
	}
	i := t.find(t.hash(t.key), toTag, true) // an RFC 3261 ACK, or one for a re-INVITE
	if i < 0 && legacy && len(toTag) > 0 {
		// The ACK for the final response to an RFC 2543 INVITE without a To
		// tag, under which the INVITE's key was built (see legacyKey).
		t.key = t.key[:len(t.key)-len(toTag)]
		i = t.find(t.hash(t.key), toTag, true)
	}
	if i >= 0 {
		return t.step(i, &event{in: inAck})
	}
	// No transaction: the ACK for a 2xx, which is the TU's (RFC 3261
	// 13.3.1.4, 17.1.1.3).
	t.act(ActAck, 0, from, nil)
	return nil
}

// MatchCancel returns the INVITE server transaction that CANCEL request m
// cancels, 0 if none (RFC 3261 9.2: the transaction 17.2.3 matches, taking
// the CANCEL's method to be INVITE: same branch and sent-by, or for RFC 2543
// requests the same Request-URI, Call-ID, CSeq number, tags and top Via).
// ReceiveRequest fills the ActRequest's Ref with it. It outputs no Actions.
func (t *Table) MatchCancel(m *parser.Message) Handle {
	var via parser.Via
	if m.TopVia(&via) != nil {
		return 0
	}
	if _, _, err := t.requestKey(m, &via, methodInvite); err != nil {
		return 0
	}
	i := t.find(t.hash(t.key), nil, false)
	if i < 0 || t.slots.at(i).kind != KindInviteServer {
		return 0
	}
	return t.handle(i)
}

// Respond sends the TU's response resp for server transaction h: a complete
// message, e.g. built with parser.AppendResponse and parser.AppendBody. The
// table copies it into the transaction, which re-sends it for request
// retransmissions (and, for an INVITE's non-2xx on UDP, on Timer G); resp
// may be reused once Respond returns. While an INVITE server transaction is
// Accepted, the TU's retransmissions of its 2xx (RFC 3261 13.3.1.4) go
// through Respond too (RFC 6026 7.1). A response the state does not allow
// (a second final response, a provisional after a final) returns ErrState
// and is not sent.
func (t *Table) Respond(h Handle, resp []byte, now time.Duration) error {
	t.begin(now)
	i, ok := t.lookup(h)
	if !ok {
		return ErrStale
	}
	x := t.slots.at(i)
	if x.kind.client() {
		return ErrState
	}
	code, ok := statusCode(resp)
	if !ok {
		return ErrStatus
	}
	e := event{in: inTUFailure, data: resp}
	switch {
	case code < 200:
		e.in = inTUProvisional
	case code < 300:
		e.in = inTUSuccess
	}
	if x.legacy && code >= 200 {
		// An RFC 2543 ACK is matched by the To tag of the final response.
		if err := t.scratch.ParseLimits(resp, &storedLimits); err != nil {
			return err
		}
		var a parser.Address
		if err := t.scratch.To(&a); err != nil {
			return err
		}
		e.toTag = a.Tag
	}
	return t.step(i, &e)
}

// statusCode reads the status code of a status line "SIP/2.0 NNN ...".
func statusCode(b []byte) (int, bool) {
	if len(b) < 12 || string(b[:8]) != "SIP/2.0 " || b[11] != ' ' && b[11] != '\r' {
		return 0, false
	}
	code := 0
	for _, c := range b[8:11] {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	return code, code >= 100 && code <= 699
}

// respond makes the TU's response the transaction's last response and sends it.
func (t *Table) respond(i int32, e *event) {
	x := t.slots.at(i)
	t.refill(x)
	x.msg = append(x.msg[:0], e.data...)
	if e.in != inTUProvisional {
		x.respTag = append(x.respTag[:0], e.toTag...)
	}
	t.charge(x)
	t.send(i, x.msg)
}

// istProceeding is the Proceeding state of the INVITE server transaction
// (RFC 3261 17.2.1, Figure 7, as amended by RFC 6026 7.1, 8.5).
func (t *Table) istProceeding(i int32, e *event) error {
	x := t.slots.at(i)
	switch e.in {
	case inRequest:
		// 17.2.1: a retransmitted INVITE gets the most recent provisional
		// (at least the 100 Trying) again.
		t.resend(i, x.msg)
	case inTUProvisional:
		// 17.2.1: provisionals from the TU are sent; the state stays.
		t.respond(i, e)
	case inTUSuccess:
		// RFC 6026 8.5: a 2xx is sent and the transaction waits in
		// Accepted for INVITE retransmissions and further 2xx, Timer L.
		t.respond(i, e)
		t.shed(x)
		x.state = StateAccepted
		t.arm(i, inTimerL, t.long)
	case inTUFailure:
		// 17.2.1: a 300-699 is sent; Completed retransmits it on Timer G
		// (unreliable transports only) until an ACK or Timer H.
		t.respond(i, e)
		x.state = StateCompleted
		if !x.peer.Transport.Reliable() {
			x.interval = t.t1
			t.arm(i, inTimerG, t.t1)
		}
		t.arm(i, inTimerH, t.long)
	case inTransportError:
		// Figure 7, RFC 6026 8.8: inform the TU and stay, for the TU's
		// final response.
		t.tu(ActTransportError, i)
	}
	// inAck: an ACK before any final response belongs to nothing; dropped.
	return nil
}

// istCompleted is the Completed state of the INVITE server transaction (RFC
// 3261 17.2.1, Figure 7).
func (t *Table) istCompleted(i int32, e *event) error {
	x := t.slots.at(i)
	switch e.in {
	case inRequest:
		// 17.2.1: a retransmitted INVITE gets the final response again.
		t.resend(i, x.msg)
	case inTimerG:
		// 17.2.1: retransmit; G doubles up to T2.
		t.resend(i, x.msg)
		x.interval = min(2*x.interval, t.t2)
		t.arm(i, inTimerG, x.interval)
	case inTimerH:
		// 17.2.1: H fires: the ACK never came; tell the TU.
		t.tu(ActTimeout, i)
		t.terminate(i)
	case inAck:
		// 17.2.1: the ACK moves to Confirmed, which absorbs ACK
		// retransmissions for Timer I (zero on reliable transports).
		t.stopRtx(x)
		t.stopLife(x)
		t.shed(x)
		x.state = StateConfirmed
		t.linger(i, inTimerI, t.t4)
	case inTransportError:
		// RFC 6026 8.8 (amending 17.2.4) and its Figure 7: inform the TU
		// and stay; Timer H still ends the transaction.
		t.tu(ActTransportError, i)
	case inTUProvisional, inTUSuccess, inTUFailure:
		return ErrState // a final response was sent
	}
	return nil
}

// istConfirmed is the Confirmed state of the INVITE server transaction (RFC
// 3261 17.2.1, Figure 7): it absorbs ACK and INVITE retransmissions.
func (t *Table) istConfirmed(i int32, e *event) error {
	switch e.in {
	case inTimerI:
		// 17.2.1: I fires: Terminated.
		t.terminate(i)
	case inTUProvisional, inTUSuccess, inTUFailure:
		return ErrState
	}
	return nil
}

// istAccepted is the Accepted state of the INVITE server transaction (RFC
// 6026 7.1, 8.7, and its amended Figure 7).
func (t *Table) istAccepted(i int32, e *event) error {
	switch e.in {
	case inRequest:
		// RFC 6026 7.1: INVITE retransmissions are absorbed without a
		// response; the TU retransmits its 2xx itself.
	case inAck:
		// RFC 6026 7.1: an ACK matching the transaction goes to the TU.
		t.tu(ActAck, i)
	case inTUSuccess:
		// RFC 6026 7.1: the TU's 2xx (retransmission or another) is sent.
		t.respond(i, e)
		t.shed(t.slots.at(i))
	case inTransportError:
		// RFC 6026 8.8 and its Figure 7: inform the TU and stay.
		t.tu(ActTransportError, i)
	case inTimerL:
		// RFC 6026 7.1, 8.7: L fires: Terminated.
		t.terminate(i)
	case inTUProvisional, inTUFailure:
		return ErrState
	}
	return nil
}

// nistTrying is the Trying state of the non-INVITE server transaction (RFC
// 3261 17.2.2, Figure 8).
func (t *Table) nistTrying(i int32, e *event) error {
	x := t.slots.at(i)
	switch e.in {
	case inRequest:
		// 17.2.2: retransmissions in Trying are discarded.
	case inTUProvisional:
		// 17.2.2: a provisional is sent and moves to Proceeding.
		t.respond(i, e)
		x.state = StateProceeding
	case inTUSuccess, inTUFailure:
		t.nistComplete(i, e)
	}
	// inTransportError: nothing was sent yet.
	return nil
}

// nistProceeding is the Proceeding state of the non-INVITE server
// transaction (RFC 3261 17.2.2, Figure 8).
func (t *Table) nistProceeding(i int32, e *event) error {
	x := t.slots.at(i)
	switch e.in {
	case inRequest:
		// 17.2.2: a retransmission gets the most recent provisional.
		t.resend(i, x.msg)
	case inTUProvisional:
		t.respond(i, e)
	case inTUSuccess, inTUFailure:
		t.nistComplete(i, e)
	case inTransportError:
		// RFC 6026 8.8, amending 17.2.4 (and so Figure 8's "Trnsprt Err"
		// transition): inform the TU and stay, for its final response.
		t.tu(ActTransportError, i)
	}
	return nil
}

// nistComplete sends a final response from Trying or Proceeding (RFC 3261
// 17.2.2): Completed answers retransmissions for Timer J (zero on reliable
// transports).
//
// Over the stored-bytes budget (Config.MaxStoredBytes), Timer J is taken
// as zero on UDP too: the transaction terminates with its response sent.
// Completed exists only to answer retransmissions of the request from the
// stored response (17.2.2); without it a retransmission reaches the TU as
// a new transaction (17.2.3 matches none) and is answered again, which for
// what fills a table under a spoofed flood (OPTIONS, 405, 481) is the same
// answer. The TU sees one more ActRequest, never a wrong state. INVITE
// transactions are not shortened: their Completed state carries the ACK
// handshake (17.2.1).
func (t *Table) nistComplete(i int32, e *event) {
	t.respond(i, e)
	t.slots.at(i).state = StateCompleted
	if t.held > t.budget && !t.slots.at(i).peer.Transport.Reliable() {
		t.stats.BudgetShortcuts++
		t.terminate(i)
		return
	}
	t.linger(i, inTimerJ, t.long)
}

// nistCompleted is the Completed state of the non-INVITE server transaction
// (RFC 3261 17.2.2, Figure 8).
func (t *Table) nistCompleted(i int32, e *event) error {
	switch e.in {
	case inRequest:
		// 17.2.2: a retransmission gets the final response again.
		t.resend(i, t.slots.at(i).msg)
	case inTimerJ:
		// 17.2.2: J fires: Terminated.
		t.terminate(i)
	case inTransportError:
		// RFC 6026 8.8, amending 17.2.4: inform the TU and stay; Timer J
		// still ends the transaction.
		t.tu(ActTransportError, i)
	case inTUProvisional, inTUSuccess, inTUFailure:
		return ErrState // 17.2.2: other final responses are discarded
	}
	return nil
}
