// Package txn is the SIP transaction layer: RFC 3261 section 17 with the
// corrections of RFC 6026. A Table holds one shard's client and server
// transactions, INVITE and non-INVITE, and runs their state machines:
//
//   - INVITE client, RFC 3261 17.1.1 (Figure 5) with the Accepted state and
//     Timer M of RFC 6026 7.2, 8.4;
//   - non-INVITE client, RFC 3261 17.1.2 (Figure 6);
//   - INVITE server, RFC 3261 17.2.1 (Figure 7) with the Accepted state and
//     Timer L of RFC 6026 7.1, 8.5, 8.7;
//   - non-INVITE server, RFC 3261 17.2.2 (Figure 8).
//
// Each state is one method (ictCalling, istAccepted, ...) taking an input
// enum, with the RFC section cited at each transition.
//
// # Contract
//
// Pure. The package does no I/O, starts no goroutines, takes no locks and
// reads no clock. Time is passed in: every input method takes now, a
// time.Duration on the clock of the owner's timer wheel (the clock of its
// Advance). Timers are armed through the Timers interface at absolute
// deadlines; when one fires, the owner calls Timeout with its argument.
//
// Owner goroutine. A Table belongs to one shard's event loop; only that
// goroutine may call it, including from inside the wheel's fire callback.
// It is not safe for concurrent use.
//
// Output. Every input method (ReceiveRequest, ReceiveResponse, SendRequest,
// SendBuilt, Respond, Cancel, CancelWith, Timeout, TransportError, Terminate) first clears the
// table's action list, then appends to it; the owner reads Actions after the
// call and, before its next call on the Table, sends every ActSend to its
// Peer and hands the other actions to the TU. Actions are plain values: no
// allocation, no interface, no callback per message. A method's error means
// the input was refused; its actions are still to be carried out.
//
// Copies and lifetimes. The table never keeps a view into the caller's
// messages: SendRequest and SendBuilt copy the request, Respond copies the response,
// and a server transaction builds its own 100 Trying. Each transaction
// keeps what it may retransmit (the request for clients, the last response
// for servers, the ACK for a non-2xx) in its own buffers, reused when its
// slot is, and only while it may retransmit it: past that (a client's
// final response, an INVITE server's 2xx or ACK) the message's buffer goes
// to spares for the next transaction of its kind (shed.go). Action.Data
// views those buffers and is valid until the next call on the Table; a
// terminated transaction's slot, and a shed buffer, are reused only after
// that.
//
// Handles. A Handle carries the transaction's slot and a generation, so it
// goes stale when the transaction terminates (ActTerminated) and never
// names the slot's next occupant, even once the slab shrank and grew back
// over the slot. Stale handles are refused with ErrStale; timer fires for
// them are ignored.
//
// Allocation. Transactions live in a slab with a free list, indexed by an
// open-addressing hash table (maphash with a per-table seed over key bytes
// built in a scratch buffer, the key compared in full on lookup, deletion
// by backward shift). A table allocates only when it holds more
// transactions, or longer messages, than its slots have room for (the most
// since its last trim, below), for a transaction
// whose buffers pass 4 KiB (a slot does not keep those for its next
// occupant: otherwise rare large messages would grow every slot to their
// size as slots take turns), or when it is over its budget (below): a
// steady state makes no allocation per transaction, as the allocation
// tests check.
//
// Memory returns after a peak (trim.go). A slot free for
// Config.IdleRelease (default 10 s; a steady load reuses the slots it frees
// within milliseconds) gives its buffers to the garbage collector, and when
// every free slot has, a slab and an index four times larger than the live
// transactions need shrink to fit. The table arms a timer of its own on
// Timers for this, whose fire (argument trimArg) the owner delivers to
// Timeout as any other. Stats splits the bytes kept into InUseBytes (live
// transactions) and PooledBytes (free slots, until IdleRelease passes, and
// spare buffers, until a trim finds them untaken since the one before).
//
// # Memory budget
//
// What a table keeps is bounded in bytes as well as in transactions. Each
// slot's buffers (the stored request or response, the ACK, the key) count
// by capacity toward Config.MaxStoredBytes (default 64 MiB a table), added
// at each store and taken off when a slot gives its buffers up, with no
// scan. The budget is there for floods from spoofed sources, which a
// per-source limit cannot see: each large out-of-dialog request (OPTIONS,
// one answered 405 or 481) would otherwise keep its response, which echoes
// every Via, for Timer J. Over the budget:
//
//   - a non-INVITE server transaction on UDP terminates as it sends its
//     final response, as if Timer J were zero (its value on reliable
//     transports, RFC 3261 17.2.2). A retransmission of its request then
//     matches nothing (17.2.3) and reaches the TU as a new request, which
//     the TU answers again; Stats.BudgetShortcuts counts these;
//   - a terminating transaction's buffers are released to the garbage
//     collector instead of kept for the slot's next occupant, so the table
//     shrinks back to its budget;
//   - at twice the budget, new server transactions are refused with
//     ErrFull (Stats.BudgetRefused), which the owner answers 503. The TU's
//     own requests (SendRequest, SendBuilt, Cancel) are not: they end
//     calls and probe gateways, and the requests admitted bound them.
//
// INVITE transactions, whose Completed and Accepted states carry the ACK
// handshake (17.2.1, RFC 6026 7.1), and client transactions, whose state
// the TU relies on, are never shortened: only the hard limit bounds them.
// Transactions already in Completed keep their Timer J.
//
// # Matching
//
// A request belongs to a server transaction by RFC 3261 17.2.3: the top Via
// branch (magic cookie "z9hG4bK"), its sent-by, and the method, ACK taking
// INVITE's. Branch and host compare without case (RFC 3261 7.3.1, 19.1.4).
// A retransmission is absorbed before any routing work: the transaction
// re-sends its last response, if any, and the TU sees nothing. A CANCEL is a
// transaction of its own; the INVITE it cancels (RFC 3261 9.2) is named in
// its ActRequest and by MatchCancel. A response belongs to a client
// transaction by RFC 3261 17.1.3: top Via branch and CSeq method; one that
// matches none is dropped (RFC 6026 8.9) and reported as ErrStray.
//
// RFC 2543 requests, whose top Via has no branch or one without the magic
// cookie, are matched by the legacy rules of RFC 3261 17.2.3 rather than
// refused: Request-URI, Call-ID, CSeq number, From tag, top Via and method,
// plus the To tag of the request that created the transaction, or for an
// ACK the To tag of the final response it sent. The header values are
// compared byte for byte, as a retransmission repeats them; the equivalence
// rules of RFC 3261 19.1.4 (URIs) and 20.42 (Via) are not applied, so a
// retransmission re-encoded differently would start a new transaction.
//
// # Timers
//
// With T1, T2, T4 from Config (defaults 500ms, 4s, 5s), per RFC 3261 Table
// 4 and, for L and M, RFC 6026:
//
//	A  T1, doubling                 INVITE retransmission, Calling, UDP only
//	B  64*T1                        INVITE timeout, Calling
//	D  max(32s, 64*T1), 0 reliable  INVITE client Completed
//	E  T1, doubling to T2 (Trying), T2 (Proceeding); UDP only
//	F  64*T1                        non-INVITE timeout
//	G  T1, doubling to T2           INVITE server non-2xx retransmission, UDP only
//	H  64*T1                        wait for ACK
//	I  T4, 0 reliable               INVITE server Confirmed
//	J  64*T1, 0 reliable            non-INVITE server Completed
//	K  T4, 0 reliable               non-INVITE client Completed
//	L  64*T1                        INVITE server Accepted (RFC 6026)
//	M  64*T1                        INVITE client Accepted (RFC 6026)
//
// A zero timer ends its state at once. Timer B is heeded in Calling only
// (17.1.1.2): once a provisional arrives, an INVITE client transaction ends
// on a final response, on the 64*T1 wait that RFC 3261 9.1 starts when the
// CANCEL is sent (see Cancel), or on Terminate.
//
// # Choices
//
// A server transaction sends its responses where RFC 3261 18.2.2 and RFC
// 3581 4 say (ReplyTo): the source address, at the source port when the
// top Via has rport, else at its sent-by port (5060 by default); on a
// stream, on the request's connection first. An INVITE server transaction answers
// 100 Trying at once, always. A transport error ends a client transaction
// (RFC 3261 17.1.4) but leaves a server transaction in its state (RFC 6026
// 8.8). The ACK for a 2xx is not a transaction: it reaches the TU as an
// ActAck, and the TU sends its own ACKs for 2xx directly. CANCELs sent by
// Cancel run in internal transactions whose events the TU never sees.
//
// # Driving it from a shard
//
//	tab, _ := txn.New(txn.Config{}, wheelTimers{wheel}) // StartAt/Stop on the wheel
//	// the wheel's fire callback, for the kind reserved to txn:
//	//	tab.Timeout(p.Arg, now); apply(tab.Actions())
//	for each datagram or framed message:
//		m.Parse(buf); validate
//		if m.IsRequest() {
//			err = tab.ReceiveRequest(&m, peer, now) // ErrFull: 503; *parser.Error: answer it
//		} else {
//			err = tab.ReceiveResponse(&m, now) // ErrStray: drop
//		}
//		apply(tab.Actions()) // before the next call on tab
//
//	func apply(acts []txn.Action) {
//		for _, a := range acts {
//			switch a.Kind {
//			case txn.ActSend: // write a.Data to a.Peer; remember a.Txn if it fails
//			default:          // to the TU, with &m for ActRequest, ActAck and ActResponse
//			}
//		}
//		// then, the loop done: tab.TransportError(failed, now); apply(tab.Actions())
//	}
package txn
