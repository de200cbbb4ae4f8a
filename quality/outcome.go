package quality

import (
	"time"

	"github.com/sipedge/sipedge/route"
)

// ReasonDisabled is the reason of an attempt on a carrier that quality
// disabled (Monitor.Disabled): skipped, not dialled.
const ReasonDisabled = route.ReasonDisabled

// Outcome is how one attempt on a carrier ended, as the failover engine
// reports it: for a failure, the fields of its route.Attempt; for an
// answer, Status 2xx.
type Outcome struct {
	Carrier string // route.Route.CarrierID
	// Gateway names the gateway member the attempt was sent to (its
	// statistics are kept beside the carrier's); "" for none.
	Gateway string
	Status  int    // the final status: the carrier's, or sipedge's own
	Reason  string // route.Attempt.Reason: "" for a response from the carrier
	Dialed  bool   // route.Attempt.Dialed: an INVITE left
	// Local is true when Status is sipedge's own though Reason is empty:
	// its Timer B 408 (no response at all) or a transport error's 503,
	// which the engine feeds to route.Sequence.Final as the carrier's.
	Local bool
	// PDD runs from the dial to the first 101-199 (route.Attempt.PDD); 0
	// when none came.
	PDD time.Duration
	// Setup runs from the dial to the final response: for an answer, the
	// AST sample.
	Setup time.Duration
}

// verdict is what an outcome counts for.
type verdict uint8

const (
	vNone      verdict = iota // counts against no carrier
	vAttempt                  // an attempt the far end did not complete
	vCompleted                // completed by the far end, not answered
	vAnswered                 // answered (and completed)
)

// classify says what o counts for (docs/design/quality.md, "What
// counts").
func classify(o *Outcome) verdict {
	switch {
	case !o.Dialed:
		// Group down, CPS or channel limited, unknown group, disabled: no
		// INVITE left, so nothing was asked of the carrier.
		return vNone
	case o.PDD == 0 && o.Reason == route.ReasonCallerCancelled:
		// The caller gave up before the carrier showed progress: too early
		// to say anything about it.
		return vNone
	case o.Status >= 200 && o.Status < 300:
		return vAnswered
	case o.Reason == route.ReasonCallerCancelled:
		// After progress: the far end had reached the callee; the caller,
		// not the carrier, ended it.
		return vCompleted
	case o.Local || o.Reason != "":
		// sipedge's own verdict (a ring-out 408, Timer B, a transport
		// error): the far end said nothing final.
		return vAttempt
	case o.Status >= 500 && o.Status < 600:
		return vAttempt
	case o.Status >= 300 && o.Status < 700:
		// The far end's own final answer: a redirect, busy, not found,
		// decline, its own 408.
		return vCompleted
	}
	return vAttempt
}

// moments sum a time statistic's samples, in seconds.
type moments struct {
	n       uint64
	sum, sq float64
}

func (m *moments) add(x float64) {
	m.n++
	m.sum += x
	m.sq += x * x
}

func (m *moments) merge(o *moments) {
	m.n += o.n
	m.sum += o.sum
	m.sq += o.sq
}

// remove takes out what merge(o) added. With no sample left the sums are
// reset, so that rounding errors do not outlive the samples.
func (m *moments) remove(o *moments) {
	m.n -= o.n
	m.sum -= o.sum
	m.sq -= o.sq
	if m.n == 0 {
		m.sum, m.sq = 0, 0
	}
}

// tally sums the outcomes of one pair: on a shard, over one sampling
// interval; in the reader, over one interval of every shard, and over the
// window.
type tally struct {
	attempts  uint64
	answered  uint64
	completed uint64
	pdd       moments
	ast       moments
	acd       moments
}

// record adds an attempt with verdict v, its PDD (0: none) and its setup
// time, in seconds.
func (t *tally) record(v verdict, pdd, setup float64) {
	t.attempts++
	if v >= vCompleted {
		t.completed++
	}
	if v == vAnswered {
		t.answered++
		t.ast.add(setup)
	}
	if pdd > 0 {
		t.pdd.add(pdd)
	}
}

// seconds converts d to seconds: Duration.Seconds in one division.
func seconds(d time.Duration) float64 { return float64(d) / 1e9 }

func (t *tally) merge(o *tally) {
	t.attempts += o.attempts
	t.answered += o.answered
	t.completed += o.completed
	t.pdd.merge(&o.pdd)
	t.ast.merge(&o.ast)
	t.acd.merge(&o.acd)
}

func (t *tally) remove(o *tally) {
	t.attempts -= o.attempts
	t.answered -= o.answered
	t.completed -= o.completed
	t.pdd.remove(&o.pdd)
	t.ast.remove(&o.ast)
	t.acd.remove(&o.acd)
}

func (t *tally) empty() bool { return t.attempts == 0 && t.acd.n == 0 }
