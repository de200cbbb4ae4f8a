package txn

import (
	"strconv"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// SendRequest starts a client transaction for request m, to be sent to to:
// an INVITE client transaction for an INVITE (RFC 3261 17.1.1), a non-INVITE
// one otherwise (17.1.2). m must carry a top Via whose branch has the magic
// cookie, unique to this transaction (RFC 3261 8.1.1.7), and a CSeq. The
// table copies m.Bytes(); m may be reused once SendRequest returns. ACK is
// refused: the ACK for a 2xx is sent by the TU directly, the ACK for a
// non-2xx by the INVITE client transaction itself (RFC 3261 17.1.1.3).
func (t *Table) SendRequest(m *parser.Message, to transport.Peer, now time.Duration) (Handle, error) {
	t.begin(now)
	if m.IsResponse() {
		return 0, ErrNotRequest
	}
	var via parser.Via
	if err := m.TopVia(&via); err != nil {
		return 0, err
	}
	if _, err := m.CSeq(); err != nil {
		return 0, err
	}
	i, err := t.newClient(m.MethodBytes(), via.Branch, to)
	if err != nil {
		return 0, err
	}
	x := t.slots.at(i)
	x.msg = append(x.msg, m.Bytes()...)
	t.charge(x)
	t.start(i)
	return t.handle(i), nil
}

// Span is the byte range [Start, End) of a message.
type Span struct{ Start, End uint32 }

func (s Span) of(b []byte) []byte { return b[s.Start:s.End] }

// Built is a request the TU built, described by where it wrote what the
// table needs, for SendBuilt: the table neither parses nor checks the
// rest, which the TU vouches for.
type Built struct {
	Data   []byte
	Method Span // in the request line
	Branch Span // the top Via's branch
	// An INVITE's parts its ACK for a non-2xx response and its CANCEL
	// repeat (RFC 3261 17.1.1.3, 9.1): the Request-URI, the values of the
	// top Via, From, To and Call-ID, the Route header lines whole (empty
	// when none), and the CSeq number.
	URI, Via, From, To, CallID, Route Span
	CSeq                              uint32
}

// SendBuilt is SendRequest for a request the TU built and describes in r,
// which it need not parse: the table copies r.Data, and r may be reused
// once SendBuilt returns.
func (t *Table) SendBuilt(r *Built, to transport.Peer, now time.Duration) (Handle, error) {
	t.begin(now)
	i, err := t.newClient(r.Method.of(r.Data), r.Branch.of(r.Data), to)
	if err != nil {
		return 0, err
	}
	x := t.slots.at(i)
	x.msg = append(x.msg, r.Data...)
	t.charge(x)
	if x.kind == KindInviteClient {
		t.keepInvite(x, r)
	}
	t.start(i)
	return t.handle(i), nil
}

// newClient allocates and indexes a client transaction for a request with
// method and top Via branch.
func (t *Table) newClient(method, branch []byte, to transport.Peer) (int32, error) {
	if string(method) == "ACK" {
		return -1, ErrAck
	}
	if !to.Transport.Valid() {
		return -1, ErrTransport
	}
	if v := (parser.Via{Branch: branch}); !v.IsRFC3261Branch() {
		return -1, ErrBranch
	}
	t.clientKey(method, branch)
	h := t.hash(t.key)
	if t.find(h, nil, false) >= 0 {
		return -1, ErrDuplicate
	}
	kind, state := KindNonInviteClient, StateTrying
	if string(method) == "INVITE" {
		kind, state = KindInviteClient, StateCalling
	}
	i, err := t.alloc(kind, state, to)
	if err != nil {
		return -1, err
	}
	t.insert(i, h)
	return i, nil
}

// invite locates the parts of an INVITE client transaction's request that
// its ACK and CANCEL repeat, as SendBuilt was told them.
type invite struct {
	uri, via, from, to, callID, route, branch Span
	cseq                                      uint32
	next                                      int32 // free list
}

// keepInvite records where the parts of x's request lie. They are kept in
// a slab of their own, and only until the final response, after which no
// CANCEL goes (RFC 3261 9.1) and the ACK is built: a lingering transaction
// holds none.
func (t *Table) keepInvite(x *txn, r *Built) {
	k := t.freeInvite
	if k >= 0 {
		t.freeInvite = t.invites[k].next
	} else {
		t.invites = append(t.invites, invite{})
		k = int32(len(t.invites) - 1)
	}
	// Field by field: a composite literal goes through a stack copy whose
	// wide loads stall on the narrow stores that built it.
	v := &t.invites[k]
	v.uri, v.via, v.from, v.to, v.callID, v.route = r.URI, r.Via, r.From, r.To, r.CallID, r.Route
	v.branch, v.cseq, v.next = r.Branch, r.CSeq, 0
	x.invite = k + 1
}

// dropInvite frees what keepInvite kept for x.
func (t *Table) dropInvite(x *txn) {
	if x.invite != 0 {
		k := x.invite - 1
		t.invites[k].next = t.freeInvite
		t.freeInvite = k
		x.invite = 0
	}
}

// start sends a new client transaction's request and arms its timers.
func (t *Table) start(i int32) {
	x := t.slots.at(i)
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
	return t.CancelWith(h, nil, now)
}

// CancelWith is Cancel with header lines for the CANCEL: complete lines,
// each ending in CRLF, put after its CSeq, such as the Reason a B2BUA
// relays from the CANCEL it received (RFC 3326 2). They are copied, and
// kept with a CANCEL that waits for a provisional; a second cancel's are
// ignored, like the cancel itself.
func (t *Table) CancelWith(h Handle, headers []byte, now time.Duration) error {
	t.begin(now)
	i, ok := t.lookup(h)
	if !ok {
		return ErrStale
	}
	if t.slots.at(i).kind != KindInviteClient {
		return ErrState
	}
	return t.step(i, &event{in: inCancel, data: headers})
}

// AppendCancel appends to dst the CANCEL for INVITE client transaction h,
// built per RFC 3261 9.1: the INVITE's Request-URI, Call-ID, To, From and
// CSeq number, CSeq method CANCEL, a single Via equal to the INVITE's top
// Via, and the INVITE's Route headers, then the header lines CancelWith
// was given. Cancel uses it; a TU that sends its CANCEL itself may too.
func (t *Table) AppendCancel(dst []byte, h Handle) ([]byte, error) {
	i, ok := t.lookup(h)
	if !ok {
		return dst, ErrStale
	}
	if t.slots.at(i).kind != KindInviteClient {
		return dst, ErrState
	}
	var req request
	t.request(i, &req)
	dst = parser.AppendRequestLine(dst, "CANCEL", req.uri)
	dst = parser.AppendHeader(dst, "Via", req.via)
	dst = req.appendRoute(dst)
	dst = parser.AppendHeaderString(dst, "Max-Forwards", "70")
	dst = parser.AppendHeader(dst, "From", req.from)
	dst = parser.AppendHeader(dst, "To", req.to)
	dst = parser.AppendHeader(dst, "Call-ID", req.callID)
	dst = appendCSeq(dst, req.cseq, "CANCEL")
	dst = append(dst, t.slots.at(i).cancelHdrs...)
	return parser.AppendBody(dst, "", nil), nil
}

// appendAck appends the ACK for non-2xx response resp to the request of
// INVITE client transaction i (RFC 3261 17.1.1.3): Request-URI, Call-ID and
// From of the request, To of the response (with its tag), a single Via equal
// to the request's top Via, the CSeq number with method ACK, and the
// request's Route headers.
func (t *Table) appendAck(dst []byte, i int32, resp *parser.Message) []byte {
	var req request
	t.request(i, &req)
	dst = parser.AppendRequestLine(dst, "ACK", req.uri)
	dst = parser.AppendHeader(dst, "Via", req.via)
	dst = req.appendRoute(dst)
	dst = parser.AppendHeaderString(dst, "Max-Forwards", "70")
	dst = parser.AppendHeader(dst, "From", req.from)
	dst = parser.AppendHeader(dst, "To", resp.Get(parser.HeaderTo))
	dst = parser.AppendHeader(dst, "Call-ID", req.callID)
	dst = appendCSeq(dst, req.cseq, "ACK")
	return parser.AppendBody(dst, "", nil)
}

// request is what an INVITE client transaction's ACK and CANCEL repeat of
// its request: views into the stored request.
type request struct {
	uri, via, from, to, callID, branch []byte
	route                              []byte          // the Route header lines, when built
	parsed                             *parser.Message // else the request re-parsed, for its Route values
	cseq                               uint32
}

func (r *request) appendRoute(dst []byte) []byte {
	if r.parsed != nil {
		return parser.AppendKind(dst, r.parsed, parser.HeaderRoute)
	}
	return append(dst, r.route...)
}

// request fills r from where SendBuilt was told the parts lie or, for a
// request sent with SendRequest (or after the final response), by parsing
// the stored request again. A request sent with SendRequest parsed once
// already; one sent with SendBuilt is re-read only by AppendCancel after
// its final response, which the engine never calls: an error is a bug.
func (t *Table) request(i int32, r *request) {
	x := t.slots.at(i)
	if x.invite != 0 {
		p := &t.invites[x.invite-1]
		*r = request{uri: p.uri.of(x.msg), via: p.via.of(x.msg), from: p.from.of(x.msg), to: p.to.of(x.msg),
			callID: p.callID.of(x.msg), branch: p.branch.of(x.msg), route: p.route.of(x.msg), cseq: p.cseq}
		return
	}
	m := &t.scratch
	if err := m.ParseLimits(x.msg, &storedLimits); err != nil {
		panic("BUG: txn: stored request does not parse: " + err.Error())
	}
	var via parser.Via
	if err := m.TopVia(&via); err != nil {
		panic("BUG: txn: stored request lost its Via: " + err.Error())
	}
	cseq, _ := m.CSeq()
	*r = request{uri: m.RequestURI(), via: m.Get(parser.HeaderVia), from: m.Get(parser.HeaderFrom),
		to: m.Get(parser.HeaderTo), callID: m.CallID(), branch: via.Branch, parsed: m, cseq: cseq.Num}
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
	t.slots.at(i).cancel = cancelSent
	var req request
	t.request(i, &req)
	t.arm(i, inTimerCancel, t.long)
	t.clientKey(methodCancel, req.branch)
	h := t.hash(t.key)
	if t.find(h, nil, false) < 0 { // else the TU sent one itself
		j, err := t.alloc(KindNonInviteClient, StateTrying, t.slots.at(i).peer)
		if err != nil {
			return err
		}
		t.insert(j, h)
		c := t.slots.at(j)
		c.internal = true
		c.msg, _ = t.AppendCancel(c.msg[:0], t.handle(i))
		t.charge(c)
		t.start(j)
	}
	return nil
}

// ictCalling is the Calling state of the INVITE client transaction (RFC 3261
// 17.1.1.2, Figure 5, as amended by RFC 6026 8.4).
func (t *Table) ictCalling(i int32, e *event) error {
	x := t.slots.at(i)
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
			x.cancelHdrs = append(x.cancelHdrs[:0], e.data...)
			t.charge(x)
		}
	}
	return nil
}

// ictProceeding is the Proceeding state of the INVITE client transaction
// (RFC 3261 17.1.1.2, Figure 5, as amended by RFC 6026 8.4).
func (t *Table) ictProceeding(i int32, e *event) error {
	x := t.slots.at(i)
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
		switch x.cancel {
		case cancelNone:
			x.cancelHdrs = append(x.cancelHdrs[:0], e.data...)
			t.charge(x)
			return t.sendCancel(i)
		case cancelPending: // held in Calling: its headers are set
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
	x := t.slots.at(i)
	t.stopRtx(x)
	t.stopLife(x)
	x.state = StateAccepted
	t.dropInvite(x)
	t.tu(ActResponse, i) // with the request: shed after
	t.shed(x)
	t.arm(i, inTimerM, t.long)
}

// ictReject handles a 300-699 in Calling or Proceeding (RFC 3261 17.1.1.2):
// ACK it, pass it to the TU, and wait in Completed for retransmissions,
// Timer D (zero on reliable transports).
func (t *Table) ictReject(i int32, resp *parser.Message) {
	x := t.slots.at(i)
	t.stopRtx(x)
	t.stopLife(x)
	x.state = StateCompleted
	x.ack = t.appendAck(x.ack[:0], i, resp)
	t.charge(x)
	t.dropInvite(x)
	t.send(i, x.ack)
	t.tu(ActResponse, i)
	t.shed(x)
	t.linger(i, inTimerD, t.timerD)
}

// ictCompleted is the Completed state of the INVITE client transaction (RFC
// 3261 17.1.1.2, Figure 5).
func (t *Table) ictCompleted(i int32, e *event) error {
	switch e.in {
	case inFailure:
		// 17.1.1.2: a retransmitted final response is ACKed again and not
		// passed to the TU.
		t.resend(i, t.slots.at(i).ack)
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
	x := t.slots.at(i)
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
	x := t.slots.at(i)
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
	x := t.slots.at(i)
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
		t.shed(x)
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
