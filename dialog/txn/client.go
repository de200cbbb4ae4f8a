package txn

import (
	"strconv"
	"time"

	"github.com/sipedge/sipedge/parser"
)

// SendRequest starts a client transaction for request m, to be sent to to:
// an INVITE client transaction for an INVITE (RFC 3261 17.1.1), a non-INVITE
// one otherwise (17.1.2). m must carry a top Via whose branch has the magic
// cookie, unique to this transaction (RFC 3261 8.1.1.7), and a CSeq. The
// table copies m.Bytes(); m may be reused once SendRequest returns. ACK is
// refused: the ACK for a 2xx is sent by the TU directly, the ACK for a
// non-2xx by the INVITE client transaction itself (RFC 3261 17.1.1.3).
func (t *Table) SendRequest(m *parser.Message, to Peer, now time.Duration) (Handle, error) {
	t.begin(now)
	if m.IsResponse() {
		return 0, ErrNotRequest
	}
	if m.Method() == parser.MethodAck {
		return 0, ErrAck
	}
	if !to.Transport.valid() {
		return 0, ErrTransport
	}
	var via parser.Via
	if err := m.TopVia(&via); err != nil {
		return 0, err
	}
	if !via.IsRFC3261Branch() {
		return 0, ErrBranch
	}
	if _, err := m.CSeq(); err != nil {
		return 0, err
	}
	t.clientKey(m.MethodBytes(), via.Branch)
	h := t.hash(t.key)
	if t.find(h, nil, false) >= 0 {
		return 0, ErrDuplicate
	}
	kind, state := KindNonInviteClient, StateTrying
	if m.Method() == parser.MethodInvite {
		kind, state = KindInviteClient, StateCalling
	}
	i, err := t.alloc(kind, state, to)
	if err != nil {
		return 0, err
	}
	t.insert(i, h)
	x := &t.txns[i]
	x.msg = append(x.msg, m.Bytes()...)
	t.start(i)
	return t.handle(i), nil
}

// start sends a new client transaction's request and arms its timers.
func (t *Table) start(i int32) {
	x := &t.txns[i]
	t.send(i, x.msg)
	retransmit, timeout := inTimerE, inTimerF // RFC 3261 17.1.2.2
	if x.kind == KindInviteClient {
		retransmit, timeout = inTimerA, inTimerB // RFC 3261 17.1.1.2
	}
	if !x.peer.Transport.Reliable() {
		x.interval = t.t1
		t.arm(i, retransmit, t.t1)
	}
	t.arm(i, timeout, t.long)
}

// ReceiveResponse passes a response to the client transaction it matches
// (RFC 3261 17.1.3: the branch of the top Via and the CSeq method), which
// passes it on to the TU as an ActResponse unless it absorbs it. A response
// that matches no transaction returns ErrStray and must be dropped: RFC 6026
// 8.9 has every element but a stateless proxy discard it. Checking that the
// top Via's sent-by is the owner's own (RFC 3261 18.1.2) is the owner's job.
func (t *Table) ReceiveResponse(m *parser.Message, now time.Duration) error {
	t.begin(now)
	if !m.IsResponse() {
		return ErrNotResponse
	}
	var via parser.Via
	if err := m.TopVia(&via); err != nil {
		return err
	}
	cseq, err := m.CSeq()
	if err != nil {
		return err
	}
	t.clientKey(cseq.MethodRaw, via.Branch)
	i := t.find(t.hash(t.key), nil, false)
	if i < 0 {
		return ErrStray
	}
	in := inFailure
	switch code := m.StatusCode(); {
	case code < 200:
		in = inProvisional
	case code < 300:
		in = inSuccess
	}
	return t.step(i, &event{in: in, m: m})
}

// Cancel cancels INVITE client transaction h (RFC 3261 9.1). The table
// builds the CANCEL (see AppendCancel) and sends it in a non-INVITE client
// transaction of its own, whose responses and timeouts the TU never sees;
// the TU hears the outcome as the INVITE's final response (487, or 200 when
// the CANCEL crossed it). Before any provisional response the CANCEL waits
// for one (9.1: it "MUST NOT be sent"), and is dropped if a final response
// comes first. Once the CANCEL is sent, a final response is awaited for
// 64*T1, after which the INVITE times out (ActTimeout). Cancelling twice is
// a no-op; cancelling after a final response returns ErrState. ErrFull means
// the CANCEL could not be sent; the 64*T1 wait runs all the same.
func (t *Table) Cancel(h Handle, now time.Duration) error {
	t.begin(now)
	i, ok := t.lookup(h)
	if !ok {
		return ErrStale
	}
	if t.txns[i].kind != KindInviteClient {
		return ErrState
	}
	return t.step(i, &event{in: inCancel})
}

// AppendCancel appends to dst the CANCEL for INVITE client transaction h,
// built per RFC 3261 9.1: the INVITE's Request-URI, Call-ID, To, From and
// CSeq number, CSeq method CANCEL, a single Via equal to the INVITE's top
// Via, and the INVITE's Route headers. Cancel uses it; a TU that sends its
// CANCEL itself may too.
func (t *Table) AppendCancel(dst []byte, h Handle) ([]byte, error) {
	i, ok := t.lookup(h)
	if !ok {
		return dst, ErrStale
	}
	if t.txns[i].kind != KindInviteClient {
		return dst, ErrState
	}
	req := t.reparse(i)
	cseq, _ := req.CSeq()
	dst = parser.AppendRequestLine(dst, "CANCEL", req.RequestURI())
	dst = parser.AppendHeader(dst, "Via", req.Get(parser.HeaderVia))
	dst = parser.AppendKind(dst, req, parser.HeaderRoute)
	dst = parser.AppendHeaderString(dst, "Max-Forwards", "70")
	dst = parser.AppendHeader(dst, "From", req.Get(parser.HeaderFrom))
	dst = parser.AppendHeader(dst, "To", req.Get(parser.HeaderTo))
	dst = parser.AppendHeader(dst, "Call-ID", req.CallID())
	dst = appendCSeq(dst, cseq.Num, "CANCEL")
	return parser.AppendBody(dst, "", nil), nil
}

// appendAck appends the ACK for non-2xx response resp to the request of
// INVITE client transaction i (RFC 3261 17.1.1.3): Request-URI, Call-ID and
// From of the request, To of the response (with its tag), a single Via equal
// to the request's top Via, the CSeq number with method ACK, and the
// request's Route headers.
func (t *Table) appendAck(dst []byte, i int32, resp *parser.Message) []byte {
	req := t.reparse(i)
	cseq, _ := req.CSeq()
	dst = parser.AppendRequestLine(dst, "ACK", req.RequestURI())
	dst = parser.AppendHeader(dst, "Via", req.Get(parser.HeaderVia))
	dst = parser.AppendKind(dst, req, parser.HeaderRoute)
	dst = parser.AppendHeaderString(dst, "Max-Forwards", "70")
	dst = parser.AppendHeader(dst, "From", req.Get(parser.HeaderFrom))
	dst = parser.AppendHeader(dst, "To", resp.Get(parser.HeaderTo))
	dst = parser.AppendHeader(dst, "Call-ID", req.CallID())
	dst = appendCSeq(dst, cseq.Num, "ACK")
	return parser.AppendBody(dst, "", nil)
}

// reparse parses client transaction i's stored request into the scratch
// message. It parsed once already, so an error is a bug.
func (t *Table) reparse(i int32) *parser.Message {
	if err := t.scratch.ParseLimits(t.txns[i].msg, &storedLimits); err != nil {
		panic("BUG: txn: stored request does not parse: " + err.Error())
	}
	return &t.scratch
}

func appendCSeq(dst []byte, num uint32, method string) []byte {
	dst = append(dst, "CSeq: "...)
	dst = strconv.AppendUint(dst, uint64(num), 10)
	dst = append(dst, ' ')
	dst = append(dst, method...)
	return append(dst, "\r\n"...)
}

// sendCancel sends the CANCEL for INVITE client transaction i in a new,
// internal non-INVITE client transaction, and starts the 64*T1 wait of RFC
// 3261 9.1 on the INVITE.
func (t *Table) sendCancel(i int32) error {
	t.txns[i].cancel = cancelSent
	var via parser.Via
	if err := t.reparse(i).TopVia(&via); err != nil {
		panic("BUG: txn: stored request lost its Via: " + err.Error())
	}
	t.arm(i, inTimerCancel, t.long)
	t.clientKey(methodCancel, via.Branch)
	h := t.hash(t.key)
	if t.find(h, nil, false) < 0 { // else the TU sent one itself
		j, err := t.alloc(KindNonInviteClient, StateTrying, t.txns[i].peer)
		if err != nil {
			return err
		}
		t.insert(j, h)
		c := &t.txns[j] // after alloc: the slab may have moved
		c.internal = true
		c.msg, _ = t.AppendCancel(c.msg[:0], t.handle(i))
		t.start(j)
	}
	return nil
}

// ictCalling is the Calling state of the INVITE client transaction (RFC 3261
// 17.1.1.2, Figure 5, as amended by RFC 6026 8.4).
func (t *Table) ictCalling(i int32, e *event) error {
	x := &t.txns[i]
	switch e.in {
	case inTimerA:
		// 17.1.1.2: retransmit and double A, without bound; Calling only.
		t.resend(i, x.msg)
		x.interval *= 2
		t.arm(i, inTimerA, x.interval)
	case inTimerB:
		// 17.1.1.2: B fires in Calling: inform the TU of the timeout; no ACK.
		t.tu(ActTimeout, i)
		t.terminate(i)
	case inTransportError:
		// 17.1.4, Figure 5: inform the TU and terminate.
		t.tu(ActTransportError, i)
		t.terminate(i)
	case inProvisional:
		// 17.1.1.2: a provisional moves to Proceeding and goes to the TU;
		// retransmissions stop, and Timer B, which only Calling heeds.
		t.stopRtx(x)
		t.stopLife(x)
		x.state = StateProceeding
		t.tu(ActResponse, i)
		if x.cancel == cancelPending {
			// RFC 3261 9.1: the CANCEL may go now. Should the table be
			// full, it does not go, and the 9.1 wait still ends the INVITE.
			_ = t.sendCancel(i)
		}
	case inSuccess:
		t.ictAccept(i)
	case inFailure:
		t.ictReject(i, e.m)
	case inCancel:
		// RFC 3261 9.1: no CANCEL before a provisional response; hold it.
		if x.cancel == cancelNone {
			x.cancel = cancelPending
		}
	}
	return nil
}

// ictProceeding is the Proceeding state of the INVITE client transaction
// (RFC 3261 17.1.1.2, Figure 5, as amended by RFC 6026 8.4).
func (t *Table) ictProceeding(i int32, e *event) error {
	x := &t.txns[i]
	switch e.in {
	case inProvisional:
		// 17.1.1.2: further provisionals go to the TU.
		t.tu(ActResponse, i)
	case inSuccess:
		t.ictAccept(i)
	case inFailure:
		t.ictReject(i, e.m)
	case inCancel:
		// RFC 3261 9.1: a provisional has arrived, the CANCEL may be sent.
		if x.cancel != cancelSent {
			return t.sendCancel(i)
		}
	case inTimerCancel:
		// RFC 3261 9.1: no final response 64*T1 after the CANCEL: consider
		// the INVITE cancelled.
		t.tu(ActTimeout, i)
		t.terminate(i)
	}
	// inTransportError: nothing is sent in Proceeding; Figure 5 has no such
	// transition.
	return nil
}

// ictAccept handles a 2xx in Calling or Proceeding (RFC 6026 8.4, amending
// RFC 3261 17.1.1.2): the 2xx goes to the TU, which ACKs it itself, and the
// transaction waits in Accepted for 2xx retransmissions and forks, Timer M.
func (t *Table) ictAccept(i int32) {
	x := &t.txns[i]
	t.stopRtx(x)
	t.stopLife(x)
	x.state = StateAccepted
	t.tu(ActResponse, i)
	t.arm(i, inTimerM, t.long)
}

// ictReject handles a 300-699 in Calling or Proceeding (RFC 3261 17.1.1.2):
// ACK it, pass it to the TU, and wait in Completed for retransmissions,
// Timer D (zero on reliable transports).
func (t *Table) ictReject(i int32, resp *parser.Message) {
	x := &t.txns[i]
	t.stopRtx(x)
	t.stopLife(x)
	x.state = StateCompleted
	x.ack = t.appendAck(x.ack[:0], i, resp)
	t.send(i, x.ack)
	t.tu(ActResponse, i)
	t.linger(i, inTimerD, t.timerD)
}

// ictCompleted is the Completed state of the INVITE client transaction (RFC
// 3261 17.1.1.2, Figure 5).
func (t *Table) ictCompleted(i int32, e *event) error {
	switch e.in {
	case inFailure:
		// 17.1.1.2: a retransmitted final response is ACKed again and not
		// passed to the TU.
		t.resend(i, t.txns[i].ack)
	case inTimerD:
		// 17.1.1.2: D fires: Terminated.
		t.terminate(i)
	case inTransportError:
		// 17.1.4, Figure 5: the ACK could not be sent: inform the TU.
		t.tu(ActTransportError, i)
		t.terminate(i)
	case inCancel:
		return ErrState // RFC 3261 9.1: a final response arrived
	}
	return nil
}

// ictAccepted is the Accepted state of the INVITE client transaction (RFC
// 6026 7.2, 8.4).
func (t *Table) ictAccepted(i int32, e *event) error {
	switch e.in {
	case inSuccess:
		// RFC 6026 7.2: every 2xx, retransmission or fork, goes to the TU,
		// which ACKs it; the transaction never does.
		t.tu(ActResponse, i)
	case inTimerM:
		// RFC 6026 8.4: M fires: Terminated.
		t.terminate(i)
	case inCancel:
		return ErrState // RFC 3261 9.1: a final response arrived
	}
	return nil
}

// nictTrying is the Trying state of the non-INVITE client transaction (RFC
// 3261 17.1.2.2, Figure 6).
func (t *Table) nictTrying(i int32, e *event) error {
	x := &t.txns[i]
	switch e.in {
	case inTimerE:
		// 17.1.2.2: retransmit; E doubles up to T2.
		t.resend(i, x.msg)
		x.interval = min(2*x.interval, t.t2)
		t.arm(i, inTimerE, x.interval)
	case inProvisional:
		// 17.1.2.2: a provisional moves to Proceeding and goes to the TU.
		x.state = StateProceeding
		t.tu(ActResponse, i)
	default:
		t.nictCommon(i, e)
	}
	return nil
}

// nictProceeding is the Proceeding state of the non-INVITE client
// transaction (RFC 3261 17.1.2.2, Figure 6).
func (t *Table) nictProceeding(i int32, e *event) error {
	x := &t.txns[i]
	switch e.in {
	case inTimerE:
		// 17.1.2.2: in Proceeding, retransmit every T2.
		t.resend(i, x.msg)
		x.interval = t.t2
		t.arm(i, inTimerE, x.interval)
	case inProvisional:
		// 17.1.2.2: further provisionals go to the TU.
		t.tu(ActResponse, i)
	default:
		t.nictCommon(i, e)
	}
	return nil
}

// nictCommon holds the transitions Trying and Proceeding share (RFC 3261
// 17.1.2.2, Figure 6).
func (t *Table) nictCommon(i int32, e *event) {
	x := &t.txns[i]
	switch e.in {
	case inTimerF:
		// 17.1.2.2: F fires: inform the TU of the timeout.
		t.tu(ActTimeout, i)
		t.terminate(i)
	case inTransportError:
		// 17.1.4, Figure 6: inform the TU and terminate.
		t.tu(ActTransportError, i)
		t.terminate(i)
	case inSuccess, inFailure:
		// 17.1.2.2: a final response goes to the TU; Completed waits Timer
		// K (zero on reliable transports) for its retransmissions.
		t.stopRtx(x)
		t.stopLife(x)
		x.state = StateCompleted
		t.tu(ActResponse, i)
		t.linger(i, inTimerK, t.t4)
	}
}

// nictCompleted is the Completed state of the non-INVITE client transaction
// (RFC 3261 17.1.2.2, Figure 6): it absorbs response retransmissions.
func (t *Table) nictCompleted(i int32, e *event) error {
	if e.in == inTimerK {
		// 17.1.2.2: K fires: Terminated.
		t.terminate(i)
	}
	return nil
}
