package txn

import "github.com/sipedge/sipedge/parser"

// input is an input to a transaction's state machine. Timer inputs double
// as timer ids in timer arguments.
type input uint8

const (
	inRequest        input = iota + 1 // a retransmission of the request (server)
	inAck                             // an ACK matching an INVITE server transaction
	inProvisional                     // a 1xx received (client)
	inSuccess                         // a 2xx received (client)
	inFailure                         // a 300-699 received (client)
	inTUProvisional                   // a 1xx from the TU (server)
	inTUSuccess                       // a 2xx from the TU (server)
	inTUFailure                       // a 300-699 from the TU (server)
	inCancel                          // the TU cancels (INVITE client, RFC 3261 9.1)
	inTransportError                  // the transport failed (RFC 3261 17.1.4, 17.2.4)

	inTimerA // INVITE request retransmission (RFC 3261 17.1.1.2)
	inTimerB // INVITE transaction timeout
	inTimerD // wait for response retransmissions (INVITE client, Completed)
	inTimerE // non-INVITE request retransmission (RFC 3261 17.1.2.2)
	inTimerF // non-INVITE transaction timeout
	inTimerG // INVITE response retransmission (RFC 3261 17.2.1)
	inTimerH // wait for ACK
	inTimerI // wait for ACK retransmissions (INVITE server, Confirmed)
	inTimerJ // wait for request retransmissions (non-INVITE server, Completed; RFC 3261 17.2.2)
	inTimerK // wait for response retransmissions (non-INVITE client, Completed)
	inTimerL // wait for accepted INVITE retransmissions (RFC 6026 7.1)
	inTimerM // wait for 2xx retransmissions and forks (RFC 6026 7.2)
	inTimerCancel
	// inTimerCancel is the wait of RFC 3261 9.1 after a CANCEL: "If there
	// is no final response for the original request in 64*T1 seconds ...
	// the client SHOULD then consider the original transaction cancelled".

	// inTimerTrim is the table's own timer, no transaction's (see trim).
	inTimerTrim
)

func (in input) timer() bool { return in >= inTimerA && in <= inTimerCancel }

// retransmit reports whether a timer is a retransmission timer.
func (in input) retransmit() bool { return in == inTimerA || in == inTimerE || in == inTimerG }

var timerNames = [...]string{inTimerA: "A", inTimerB: "B", inTimerD: "D", inTimerE: "E",
	inTimerF: "F", inTimerG: "G", inTimerH: "H", inTimerI: "I", inTimerJ: "J", inTimerK: "K",
	inTimerL: "L", inTimerM: "M", inTimerCancel: "cancel", inTimerTrim: "trim"}

// event is one input with its data.
type event struct {
	in    input
	m     *parser.Message // the response received (inProvisional, inSuccess, inFailure)
	data  []byte          // the TU's response (inTU*)
	toTag []byte          // the To tag of data, RFC 2543 transactions only
}

// step feeds an event to transaction i's state machine: one method per
// state, named after the transaction kind (ict, nict, ist, nist).
func (t *Table) step(i int32, e *event) error {
	x := t.slots.at(i)
	switch x.kind {
	case KindInviteClient:
		switch x.state {
		case StateCalling:
			return t.ictCalling(i, e)
		case StateProceeding:
			return t.ictProceeding(i, e)
		case StateCompleted:
			return t.ictCompleted(i, e)
		case StateAccepted:
			return t.ictAccepted(i, e)
		}
	case KindNonInviteClient:
		switch x.state {
		case StateTrying:
			return t.nictTrying(i, e)
		case StateProceeding:
			return t.nictProceeding(i, e)
		case StateCompleted:
			return t.nictCompleted(i, e)
		}
	case KindInviteServer:
		switch x.state {
		case StateProceeding:
			return t.istProceeding(i, e)
		case StateCompleted:
			return t.istCompleted(i, e)
		case StateConfirmed:
			return t.istConfirmed(i, e)
		case StateAccepted:
			return t.istAccepted(i, e)
		}
	case KindNonInviteServer:
		switch x.state {
		case StateTrying:
			return t.nistTrying(i, e)
		case StateProceeding:
			return t.nistProceeding(i, e)
		case StateCompleted:
			return t.nistCompleted(i, e)
		}
	}
	panic("BUG: txn: no state method for " + x.kind.String() + " " + x.state.String())
}
