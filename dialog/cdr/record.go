package cdr

import (
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/sipedge/sipedge/route"
)

// Record is the CDR of one call: one JSON object on one line. The shard that
// owns the call fills it in and hands it to Writer.Write, which takes it over
// (see the package documentation). AppendJSON gives the exact encoding.
//
// Records are pooled: get one with AcquireRecord. A Record made otherwise
// (new, a composite literal) is accepted as well and ends up in the pool.
type Record struct {
	noCopy noCopy

	ACallID      string     // a_call_id: Call-ID of the A-leg (the caller's)
	BCallID      string     // b_call_id: Call-ID of the last B-leg dialled, "" if none
	Trunk        string     // trunk: name of the ingress trunk
	TrunkGroup   string     // trunk_group: the trunk's group, what routing keys on
	Caller       string     // caller: calling party as received on the A-leg
	Callee       string     // callee: called party as received on the A-leg
	DialedNumber string     // dialed_number: the number routing looked up
	SourceIP     netip.Addr // source_ip: where the INVITE came from, IPv4-mapped IPv6 unmapped; "" when invalid

	// Times are written in UTC, RFC 3339 with milliseconds
	// (2006-01-02T15:04:05.000Z); a zero time is left out.
	TimeInvite           time.Time // time_invite: INVITE received on the A-leg
	TimeFirstProvisional time.Time // time_first_provisional: first 180/183 relayed to the caller (100 Trying does not count)
	TimeAnswer           time.Time // time_answer: 2xx relayed to the caller
	TimeEnd              time.Time // time_end: BYE, CANCEL or final failure

	FinalCode   int        // final_code: final status of the A-leg INVITE (200 when answered)
	FinalReason string     // final_reason: its reason phrase
	HangupSide  HangupSide // hangup_side
	// EndReason says why sipedge ended an answered call itself (hangup_side
	// "system"): an EndReason constant; left out when "".
	EndReason string // end_reason

	Route       string       // route: the winning (or last tried) gateway group or next hop
	CarrierID   string       // carrier_id: the winning (or last tried) carrier
	Rate        float64      // rate: the carrier's rate; a NaN or infinity is written as null
	Currency    string       // currency
	RouteSource route.Source // route_source: where the routing decision came from

	// CDRFields are the winning route's cdr_fields from the LCR API. They are
	// written flat, as extra top-level keys in sorted order, after the built-in
	// fields. A key that names a built-in field in any case (FieldNames, or "cdr_fields")
	// is left out and counted in sipedge_cdr_fields_shadowed_total: the API
	// cannot overwrite what sipedge measured. The map is only read, never
	// changed, and Reset drops the reference instead of clearing it, so it may
	// be shared with a cached routing decision as long as nobody writes to it.
	CDRFields map[string]string

	// Attempts are the carriers burned before the last one, oldest first:
	// lcr_attempts, always an array, [] when the first carrier answered.
	Attempts []Attempt

	// text holds the bytes of the strings String made: the record's own,
	// reused with it.
	text []byte
}

// String returns b as a string kept in r's own storage, without an
// allocation once r, pooled, has held as much: for the string fields of a
// record filled from bytes the caller does not keep (Call-IDs, numbers).
// The string is valid as long as r is: until r goes back to the pool
// (Writer.Write, ReleaseRecord), whoever holds it then reads another
// record's bytes. Copy what outlives the record (strings.Clone).
func (r *Record) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(r.text)+len(b) > cap(r.text) {
		// A new array: the strings made so far keep the old one alive.
		r.text = make([]byte, 0, max(2*cap(r.text), len(r.text)+len(b), 256))
	}
	at := len(r.text)
	r.text = append(r.text, b...)
	return unsafe.String(&r.text[at], len(b))
}

// Attempt is one failed carrier attempt, an element of lcr_attempts.
type Attempt struct {
	CarrierID string        // carrier_id
	Status    int           // status: the carrier's final code, or sipedge's verdict (408 ring-out, 503 undialable)
	Elapsed   time.Duration // elapsed_ms: from dialling the carrier to its failure, in whole milliseconds
	Dialed    bool          // dialed: false when no INVITE went out (group unknown or down, next hop unresolvable)
	Reason    string        // reason: why sipedge gave up on it without a final response, e.g. "cps_limited"; left out when ""
	// BCallID and TimeInvite are the B-leg the carrier saw: its Call-ID and
	// when its INVITE left (the last one's, after CPS-reject retries), to
	// reconcile a failed attempt with the carrier's own CDR. b_call_id and
	// time_invite are left out for an attempt not dialled.
	BCallID    string    // b_call_id
	TimeInvite time.Time // time_invite: as the record's times
}

// FieldNames lists the built-in top-level keys of a record in the order they
// are written. A CDRFields key equal to one of these in any case (or to "cdr_fields") is
// not written. Treat it as read-only.
var FieldNames = [...]string{
	"a_call_id", "b_call_id", "trunk", "trunk_group", "caller", "callee", "dialed_number", "source_ip",
	"time_invite", "time_first_provisional", "time_answer", "time_end", "duration_ms", "pdd_ms",
	"final_code", "final_reason", "hangup_side", "end_reason", "route", "carrier_id", "rate", "currency",
	"route_source", "lcr_attempts",
}

// reserved reports whether k may not be used as a CDRFields key. It must
// agree with FieldNames (a test checks).
// Names are compared ignoring case: Go's encoding/json matches keys so,
// the last one winning, and a consumer in Go would read a "Carrier_ID"
// written after the built-in fields as the carrier.
func reserved(k string) bool {
	if strings.EqualFold(k, "cdr_fields") {
		return true
	}
	for _, f := range FieldNames {
		if strings.EqualFold(k, f) {
			return true
		}
	}
	return false
}

// HangupSide says which side ended the call.
type HangupSide uint8

// Hangup sides.
const (
	HangupNone   HangupSide = iota // "": not known, or the call never connected
	HangupCaller                   // "caller": the A side (BYE or CANCEL from the caller)
	HangupCallee                   // "callee": the B side (BYE from the callee)
	HangupSystem                   // "system": sipedge (maximum duration, orphan reaping, shutdown)
	// HangupNodeLost ("node_lost"): the node that held the answered call
	// died (its fleet lease ran out); another node wrote the CDR from the
	// call journal, with time_end the dead node's last renewal of it.
	HangupNodeLost
	HangupAdmin // "admin": an operator, through the admin API (DELETE /v1/calls/{a_call_id})
	numHangupSides
)

var hangupNames = [numHangupSides]string{"", "caller", "callee", "system", "node_lost", "admin"}

// Values of end_reason: why sipedge ended a call itself.
const (
	EndMaxDuration    = "max_duration"    // b2bua.max_call_duration_secs
	EndSessionExpired = "session_expired" // a session timer ran out (RFC 4028 10): the peer's refresh never came, or sipedge's own was refused with 408 or 481 or went unanswered
	EndNoAck          = "no_ack"          // the 2xx was never ACKed (RFC 3261 13.3.1.4)
	EndNoResponse     = "no_response"     // a side stopped answering requests in the dialog, or had no such dialog (408, 481: RFC 3261 12.2.1.2)
	EndNoPrack        = "no_prack"        // the caller never PRACKed a reliable provisional (RFC 3262 3)
	EndShutdown       = "shutdown"        // a drain ran out of time
)

// String returns the value written in hangup_side.
func (h HangupSide) String() string {
	if h >= numHangupSides {
		return "HangupSide(" + strconv.Itoa(int(h)) + ")"
	}
	return hangupNames[h]
}

// routeSourceNames are the values written in route_source: none is
// empty.
var routeSourceNames = [...]string{route.SourceNone: "", route.SourceLCR: "lcr", route.SourceStatic: "static",
	route.SourceFallback: "fallback"}

// routeSourceName returns the value written in route_source for s.
func routeSourceName(s route.Source) string {
	if int(s) >= len(routeSourceNames) {
		return "RouteSource(" + strconv.Itoa(int(s)) + ")"
	}
	return routeSourceNames[s]
}

// Reset clears r for reuse, keeping the capacity of Attempts and of the
// storage of String. CDRFields is set to nil, not cleared: the map may
// belong to someone else.
func (r *Record) Reset() {
	clear(r.Attempts) // drop the strings they reference
	attempts, text := r.Attempts[:0], r.text[:0]
	*r = Record{Attempts: attempts, text: text}
}

var recordPool sync.Pool

// AcquireRecord returns an empty Record from the pool. Hand it to
// Writer.Write, which returns it to the pool when done; there is no release
// for the caller to call, except ReleaseRecord for a Record that is never
// written.
func AcquireRecord() *Record {
	if v := recordPool.Get(); v != nil {
		return v.(*Record)
	}
	return &Record{}
}

// ReleaseRecord resets r and returns it to the pool. Use it only for a Record
// that will not be passed to Writer.Write; r must not be used afterwards.
func ReleaseRecord(r *Record) {
	r.Reset()
	recordPool.Put(r)
}

// noCopy makes `go vet` report copies of a Record: a copy would share its
// Attempts with a Record the pool hands out again.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
