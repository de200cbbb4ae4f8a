package txn

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Handle names one transaction. It carries the slot's generation, so a
// Handle goes stale when its transaction terminates and stays stale when the
// slot is reused: every method then ignores it or returns ErrStale. The zero
// Handle is never valid.
type Handle uint64

// Index returns the slot of h's transaction: below 1<<24, unique among live
// transactions and reused once one terminates. A TU can keep what it knows
// of its transactions in a slice by Index, comparing the Handle stored
// there, rather than in a map.
func (h Handle) Index() int { return int(uint32(h)) }

// Kind is the kind of a transaction (RFC 3261 17).
type Kind uint8

// Transaction kinds, with the abbreviations of RFC 3261 implementations.
const (
	KindInviteClient    Kind = iota + 1 // "ict", RFC 3261 17.1.1
	KindNonInviteClient                 // "nict", RFC 3261 17.1.2
	KindInviteServer                    // "ist", RFC 3261 17.2.1
	KindNonInviteServer                 // "nist", RFC 3261 17.2.2
)

var kindNames = [...]string{"", "ict", "nict", "ist", "nist"}

func (k Kind) String() string {
	if int(k) >= len(kindNames) {
		return "Kind(" + fmt.Sprint(uint8(k)) + ")"
	}
	return kindNames[k]
}

func (k Kind) client() bool { return k == KindInviteClient || k == KindNonInviteClient }

// State is a transaction state of RFC 3261 Figures 5 to 8, with the
// Accepted state of RFC 6026.
type State uint8

// States.
const (
	StateTerminated State = iota // also a free slot
	StateCalling
	StateTrying
	StateProceeding
	StateCompleted
	StateConfirmed
	StateAccepted
)

var stateNames = [...]string{"Terminated", "Calling", "Trying", "Proceeding", "Completed", "Confirmed", "Accepted"}

func (s State) String() string {
	if int(s) >= len(stateNames) {
		return "State(" + fmt.Sprint(uint8(s)) + ")"
	}
	return stateNames[s]
}

// ActionKind says what an Action asks of the owner.
type ActionKind uint8

// Action kinds. ActSend goes to the transport; ActTerminated and the others
// go to the TU (the dialog layer).
const (
	// ActSend: send Data to Peer. Txn is the transaction sending it; a send
	// failure is reported back with TransportError(Txn).
	ActSend ActionKind = iota + 1
	// ActRequest: a new server transaction Txn was created for the request
	// just received; pass the request to the TU. For a CANCEL, Ref is the
	// INVITE server transaction it cancels (RFC 3261 9.2), 0 if none (answer
	// the CANCEL 481).
	ActRequest
	// ActAck: an ACK the transaction layer does not absorb, for a 2xx
	// (RFC 3261 17.2.3, RFC 6026 7.1): Txn is the INVITE server
	// transaction in the Accepted state it matched, or 0 when it matched
	// none (the usual case: the ACK for a 2xx has a branch of its own).
	ActAck
	// ActResponse: pass the response just received to the TU for client
	// transaction Txn. Data is the request it answers, as the transaction
	// sent it: a TU that answers a challenge to it (RFC 3261 22.2) need
	// not keep a copy of its own. A 2xx retransmission in Accepted comes
	// with none: the request is no longer kept (shed.go).
	ActResponse
	// ActTimeout: transaction Txn timed out (Timer B, F or H, or the RFC
	// 3261 9.1 wait after a CANCEL).
	ActTimeout
	// ActTransportError: the transport failed for transaction Txn.
	ActTransportError
	// ActTerminated: transaction Txn has terminated; its Handle is stale.
	ActTerminated
)

var actionNames = [...]string{"", "send", "request", "ack", "response", "timeout", "transport-error", "terminated"}

func (k ActionKind) String() string {
	if int(k) >= len(actionNames) {
		return "ActionKind(" + fmt.Sprint(uint8(k)) + ")"
	}
	return actionNames[k]
}

// Action is one output of an input method. Data is a view into the
// transaction's own buffer, valid until the next call on the Table.
type Action struct {
	Kind ActionKind
	Txn  Handle
	Ref  Handle         // ActRequest of a CANCEL: the INVITE server transaction it cancels
	Peer transport.Peer // ActSend: the destination; otherwise the transaction's peer
	Data []byte         // ActSend: the message; ActResponse: the request answered
}

// Timers is the clock the Table arms its timers on: the owner's timer wheel.
// StartAt arms a timer that fires at the absolute time at, on the clock of
// the now arguments, and returns a handle for Stop; when it fires the owner
// calls Table.Timeout(arg, now). Stop cancels a pending timer; after Stop,
// the owner must not deliver that timer's fire. A shard adapts its wheel with
// a two-method struct holding a pointer, so the interface holds no boxed
// value; each timer operation is one dynamic call.
type Timers interface {
	StartAt(at time.Duration, arg uint64) uint64
	Stop(h uint64) bool
}

// Config configures a Table. Zero fields take defaults.
type Config struct {
	T1 time.Duration // RTT estimate; default 500ms (RFC 3261 17.1.1.1)
	T2 time.Duration // maximum retransmit interval of non-INVITE requests and INVITE responses; default 4s
	T4 time.Duration // maximum time a message stays in the network; default 5s

	// MaxTransactions bounds live transactions; beyond it ReceiveRequest and
	// SendRequest return ErrFull. Default and maximum 1<<24 - 1.
	MaxTransactions int
	// Capacity is the initial slab capacity, to avoid growth on warm-up.
	Capacity int
	// MaxStoredBytes is the table's budget for the messages its
	// transactions keep to retransmit: the capacity of their buffers
	// (responses, requests, ACKs, keys), live slots and free ones alike.
	// Over it, a non-INVITE server transaction that sends its final
	// response on UDP terminates at once instead of waiting out Timer J in
	// Completed, and a terminating transaction gives its buffers back to
	// the garbage collector; at twice it, new server transactions are
	// refused with ErrFull. INVITE and client transactions are never
	// shortened.
	// See the package documentation. Default DefaultMaxStoredBytes;
	// negative is refused.
	MaxStoredBytes int
	// IdleRelease is how long a free slot keeps its buffers for the next
	// transaction: past it, they go back to the garbage collector, and a
	// slab and index grown for a peak shrink (see the package
	// documentation). Default DefaultIdleRelease; negative: for ever.
	IdleRelease time.Duration
}

// Defaults (RFC 3261 17.1.1.1, Table 4).
const (
	DefaultT1       = 500 * time.Millisecond
	DefaultT2       = 4 * time.Second
	DefaultT4       = 5 * time.Second
	maxTransactions = 1<<24 - 1
	minTimerD       = 32 * time.Second // RFC 3261 17.1.1.2: "at least 32 seconds"
	// maxKeptSlotBytes bounds the buffers a slot keeps for its next
	// transaction (key, message, ACK, CANCEL headers): an INVITE with its
	// SDP and ACK is some 2 KB; larger ones go back to the collector as
	// their transaction ends (see terminate).
	maxKeptSlotBytes = 4 << 10
	// DefaultIdleRelease: a slot free for 10 s is surplus of a past peak,
	// not room the load reuses (it takes the slots freed last first).
	DefaultIdleRelease = 10 * time.Second
	// minShrink is the fewest slots a shrink of the slab gives back.
	minShrink = 1024
)

// DefaultMaxStoredBytes is the default budget of a table (one shard):
// 64 MiB. A non-INVITE server transaction keeps its final response for
// Timer J (64*T1, 32 s); a shard answering 1,000 non-INVITE requests a
// second with responses of about 1 KB (the buffer's capacity, key
// included) keeps some 32 MB, and the INVITE transactions of 100 calls
// a second a few MB more: the default leaves that load twice its room.
// A spoofed flood of 15 KB responses would keep 535 MB at the same
// rate; the budget holds it near 64 MiB, and 128 MiB at most, a shard.
const DefaultMaxStoredBytes = 64 << 20

// Errors. Parse errors of the message itself are the parser's *parser.Error
// values, returned as they are.
var (
	ErrStale       = errors.New("txn: no such transaction")
	ErrState       = errors.New("txn: not allowed in the transaction's state")
	ErrFull        = errors.New("txn: too many transactions")
	ErrDuplicate   = errors.New("txn: a transaction with this branch exists")
	ErrTransport   = errors.New("txn: unknown transport")
	ErrNotRequest  = errors.New("txn: not a request")
	ErrNotResponse = errors.New("txn: not a response")
	ErrAck         = errors.New("txn: ACK is not sent through a transaction")
	ErrBranch      = errors.New("txn: request lacks an RFC 3261 branch")
	ErrStatus      = errors.New("txn: bad status line in response")
	ErrStray       = errors.New("txn: response matches no transaction")
)

// Table holds one shard's transactions. See the package documentation for
// the contract: one owner goroutine, no allocation in steady state, outputs
// read from Actions after each call.
type Table struct {
	t1, t2, t4 time.Duration
	timerD     time.Duration // max(32s, 64*T1)
	long       time.Duration // 64*T1: Timers B, F, H, J, L, M and the RFC 3261 9.1 wait
	max        int
	timers     Timers
	// held is the capacity of every slot's buffers (txn.held summed), kept
	// up to date at each store (charge) and release: no scan; pooled is
	// the part free slots keep for reuse (in limbo or on the free list).
	// budget and hard are Config.MaxStoredBytes and twice it.
	held, pooled, budget, hard int
	seed                       maphash.Seed

	// The trim (see trim): idleRelease is Config.IdleRelease, trimArmed
	// says its timer is pending, genFloor is the generation new slots
	// start at, above that of every slot a shrink dropped, so that no
	// Handle of theirs names a slot grown again.
	idleRelease time.Duration
	trimArmed   bool
	genFloor    uint32
	minSlots    int // Config.Capacity: a shrink keeps this room

	slots slab
	// free are the free lists' heads by the kind of transaction that last
	// held the slot, -1 if none: a slot goes to a transaction of its kind
	// when one is free, whose buffers then fit at once (alloc).
	free  [len(kindNames)]int32
	limbo []int32 // terminated in the current call; freed at the next
	// Message buffers of transactions past sending them (shed.go): shed
	// in the current call, then spares by kind; spareLow is a list's
	// shortest since the last trim.
	shedding []shedBuf
	spares   [len(kindNames)][][]byte
	spareLow [len(kindNames)]int
	taken    int // lists out with TakeActions: limbo is kept until they are back
	live     int
	stats    Stats

	index   []int32 // open addressing, linear probing: 1 + slot index, 0 if empty
	indexed int

	invites    []invite // SendBuilt's INVITE client transactions before their final response
	freeInvite int32    // free list head, -1 if none

	actions []Action
	key     []byte         // scratch: the key being looked up
	scratch parser.Message // scratch: re-parses stored messages
	now     time.Duration
}

// New returns an empty Table arming its timers on timers.
func New(cfg Config, timers Timers) (*Table, error) {
	if timers == nil {
		return nil, errors.New("txn: nil Timers")
	}
	if cfg.T1 == 0 {
		cfg.T1 = DefaultT1
	}
	if cfg.T2 == 0 {
		cfg.T2 = DefaultT2
	}
	if cfg.T4 == 0 {
		cfg.T4 = DefaultT4
	}
	if cfg.T1 < 0 || cfg.T2 < cfg.T1 || cfg.T4 < 0 || cfg.T1 > time.Hour {
		return nil, fmt.Errorf("txn: cannot use timers T1=%v T2=%v T4=%v: want 0 < T1 <= T2, T4 >= 0", cfg.T1, cfg.T2, cfg.T4)
	}
	if cfg.MaxTransactions <= 0 || cfg.MaxTransactions > maxTransactions {
		cfg.MaxTransactions = maxTransactions
	}
	if cfg.MaxStoredBytes < 0 {
		return nil, fmt.Errorf("txn: cannot use a stored-bytes budget of %d", cfg.MaxStoredBytes)
	}
	if cfg.MaxStoredBytes == 0 {
		cfg.MaxStoredBytes = DefaultMaxStoredBytes
	}
	if cfg.Capacity < 0 || cfg.Capacity > cfg.MaxTransactions {
		return nil, fmt.Errorf("txn: cannot use capacity %d", cfg.Capacity)
	}
	if cfg.IdleRelease == 0 {
		cfg.IdleRelease = DefaultIdleRelease
	}
	t := &Table{
		t1:          cfg.T1,
		t2:          cfg.T2,
		t4:          cfg.T4,
		long:        64 * cfg.T1,
		timerD:      max(minTimerD, 64*cfg.T1),
		max:         cfg.MaxTransactions,
		budget:      cfg.MaxStoredBytes,
		hard:        2 * min(cfg.MaxStoredBytes, math.MaxInt/2),
		timers:      timers,
		seed:        maphash.MakeSeed(),
		idleRelease: cfg.IdleRelease,
		genFloor:    1,
		minSlots:    cfg.Capacity,
		freeInvite:  -1,
	}
	t.slots.reserve(cfg.Capacity)
	for k := range t.free {
		t.free[k] = -1
	}
	n := 64
	for n < 2*cfg.Capacity {
		n <<= 1
	}
	t.index = make([]int32, n)
	return t, nil
}

// Stats are a table's running counts, for metrics.
type Stats struct {
	Retransmissions uint64 // messages re-sent: timers A, E, G, and answers to retransmitted requests
	Absorbed        uint64 // retransmitted requests absorbed by their server transaction
	// BudgetShortcuts counts non-INVITE server transactions terminated at
	// their final response, Timer J skipped, because the table was over
	// its stored-bytes budget (Config.MaxStoredBytes).
	BudgetShortcuts uint64
	// BudgetRefused counts new transactions refused with ErrFull because
	// the table held twice its budget.
	BudgetRefused uint64
	// StoredBytes is the capacity of the buffers the table keeps now (a
	// gauge, not a count): what MaxStoredBytes bounds. InUseBytes is the
	// part live transactions hold, PooledBytes the part free slots keep
	// for reuse until Config.IdleRelease passes; they sum to StoredBytes.
	StoredBytes, InUseBytes, PooledBytes int
	// Slots is the length of the slab: live transactions and free slots.
	Slots int
}

// Stats returns the table's counts.
func (t *Table) Stats() Stats {
	st := t.stats
	st.StoredBytes, st.InUseBytes, st.PooledBytes = t.held, t.held-t.pooled, t.pooled
	st.Slots = t.slots.len()
	return st
}

// Actions returns the outputs of the last input method, in order. The slice
// and the Data views are valid until the next call on the Table.
func (t *Table) Actions() []Action { return t.actions }

// TakeActions is Actions for an owner that calls the Table again while it
// handles them, which would clear the list: the table gives the list up
// and records the next calls' actions in spare, emptied. Until the owner
// calls ReturnActions, the slots of transactions that terminated are not
// reused, so the list's handles name no new transaction and its Data views
// stay valid however many calls come in between. The list is the owner's
// to keep, typically as the spare of a later call.
func (t *Table) TakeActions(spare []Action) []Action {
	list := t.actions
	t.actions = spare[:0]
	t.taken++
	return list
}

// ReturnActions ends what TakeActions began: the owner is done with the
// list it took.
func (t *Table) ReturnActions() { t.taken-- }

// Len returns the number of live transactions.
func (t *Table) Len() int { return t.live }

// Unsettled returns how many live transactions still wait on their peer,
// those of method except left out ("" leaves none out): client
// transactions without a final response (Calling, Trying, Proceeding:
// their request is retransmitted per Timer A or E until one comes, or
// Timer B or F ends them), the CANCELs the table sends included; server
// transactions not yet answered (Trying, Proceeding); and INVITE server
// transactions whose non-2xx final response awaits its ACK (Completed:
// retransmitted per Timer G until it comes, or Timer H). A transaction
// past these states only absorbs retransmissions. What an owner waits for
// before it stops: it scans the table, which the per-message path must
// not.
func (t *Table) Unsettled(except string) int {
	n := 0
	for i := range t.slots.n {
		x := t.slots.at(i)
		switch x.state {
		case StateCalling, StateTrying, StateProceeding:
		case StateCompleted:
			if x.kind != KindInviteServer {
				continue
			}
		default:
			continue
		}
		if except != "" && string(keyMethod(x.key)) == except {
			continue
		}
		n++
	}
	return n
}

// State returns the kind and state of transaction h; ok is false when h is
// stale.
func (t *Table) State(h Handle) (k Kind, s State, ok bool) {
	i, ok := t.lookup(h)
	if !ok {
		return 0, StateTerminated, false
	}
	return t.slots.at(i).kind, t.slots.at(i).state, true
}

// Response returns the last response server transaction h sent (a 100
// Trying of its own included), nil when none, when h is stale or a
// client's, or once the transaction no longer keeps it (an INVITE's 2xx or
// ACK came: shed.go): a view into the transaction's buffer, valid until
// the next call on the Table.
func (t *Table) Response(h Handle) []byte {
	i, ok := t.lookup(h)
	if !ok || t.slots.at(i).kind.client() {
		return nil
	}
	return t.slots.at(i).msg
}

// begin starts an input method: it frees the slots terminated by the
// previous call (whose buffers that call's actions may have viewed) and
// clears the actions.
func (t *Table) begin(now time.Duration) {
	t.now = now
	clear(t.actions) // drop views into buffers about to be reused
	t.actions = t.actions[:0]
	if t.taken > 0 {
		return // a list TakeActions gave out may name them (see there)
	}
	for _, i := range t.limbo {
		x := t.slots.at(i)
		x.next, x.freedAt, x.swept = t.free[x.kind], now, false
		t.free[x.kind] = i
	}
	t.limbo = t.limbo[:0]
	t.unshed()
}

// storedLimits re-parse messages the table stored after they were parsed
// once by the owner, perhaps with larger limits than the defaults.
var storedLimits = parser.Limits{
	MaxMessageSize: math.MaxInt32,
	MaxHeaders:     math.MaxInt32,
	MaxHeaderLine:  math.MaxInt32,
	MaxVias:        math.MaxInt32,
	MaxURILength:   math.MaxInt32,
}
