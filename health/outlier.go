package health

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Outlier detection: how calls mark a member down (passive health).
//
// A consecutive count alone means nothing at a high call rate: at 1,000
// calls/s three INVITEs lost in a row are three milliseconds of a loaded
// host dropping datagrams, not a dead gateway. What tells a member that
// stopped answering from one that lost a few packets is time and share: a
// dead member fails every call, for as long as one looks. So a counted
// failure (no answer, 503, transport error) marks an up member down when
// either
//
//   - share: among the calls of the evidence span, at least
//     passive.failure_threshold failed, they are at least
//     passive.failure_percent of them, and they spread over half a second
//     at least (minFailureSpread). The span is the newest minEvidenceSpan
//     (one second) at least, stretched back bucket by bucket until it
//     holds passive.min_calls calls, and never beyond evidenceWindow (ten
//     seconds); when the window holds fewer calls than that, the share is
//     not judged. As Envoy's failure-percentage ejection, over a span that
//     adapts to the rate; or
//   - run: the last passive.failure_threshold calls or more all failed,
//     the first of them at least minEvidenceSpan before the last. This is
//     the evidence at low rates, where the window holds too few calls for
//     a share: three failures in a row at one call a second take two
//     seconds, at one every ten seconds twenty.
//
// With the defaults (3, 50 %, 20 calls) a member that stops answering is
// down about three quarters of a second after its failures start at 1,000
// calls/s (the share), a second after at 5 calls/s (the run) and two seconds
// after at 1 call/s; three or a hundred lost calls among thousands, a burst of
// failures shorter than half a second (even the first calls of a member
// with no history), or a steady loss of a few percent mark nothing.
//
// The window is a ring of time buckets, each one atomic word holding its
// bucket number, its calls and its failures: ReportCall adds with one
// compare-and-swap, and judging (on a failure of an up member only) reads
// at most numBuckets words. No lock, no allocation.
const (
	bucketWidth     = 250 * time.Millisecond
	evidenceWindow  = 10 * time.Second
	minEvidenceSpan = time.Second
	// minFailureSpread is how long the failures of the share must last at
	// least: from the end of the oldest bucket holding one to now.
	minFailureSpread = minEvidenceSpan / 2
	numBuckets       = int(evidenceWindow / bucketWidth)
	// minSpanBuckets covers minEvidenceSpan with the newest bucket, which
	// is partly over, and the full ones before it.
	minSpanBuckets = int(minEvidenceSpan/bucketWidth) + 1

	// A bucket word: bucket number (tagBits), calls, failures (countBits
	// each; saturating: 262,143 calls in 250 ms is a million a second).
	countBits  = 18
	countMask  = 1<<countBits - 1
	callsShift = countBits
	tagShift   = 2 * countBits
	tagMask    = 1<<(64-tagShift) - 1
)

// callWindow counts a member's recent calls and failures in time buckets.
// Safe for concurrent use.
type callWindow struct {
	buckets [numBuckets]atomic.Uint64
}

// add counts a call that ended at now.
func (w *callWindow) add(now time.Duration, failed bool) {
	seq := uint64(now / bucketWidth)
	b := &w.buckets[seq%uint64(numBuckets)]
	tag := (seq & tagMask) << tagShift
	for {
		old := b.Load()
		var calls, fails uint64
		if old&^(1<<tagShift-1) == tag {
			calls, fails = old>>callsShift&countMask, old&countMask
		}
		if calls == countMask {
			return // saturated: the share stays as it was
		}
		calls++
		if failed {
			fails++
		}
		if b.CompareAndSwap(old, tag|calls<<callsShift|fails) {
			return
		}
	}
}

// bucket returns the calls and failures of bucket seq, 0 when it was not
// written since the ring came round.
func (w *callWindow) bucket(seq uint64) (calls, fails int) {
	v := w.buckets[seq%uint64(numBuckets)].Load()
	if v>>tagShift != seq&tagMask {
		return 0, 0
	}
	return int(v >> callsShift & countMask), int(v & countMask)
}

// evidence sums the newest buckets at now: minSpanBuckets at least, more
// until they hold minCalls calls, at most the window. span is how far back
// they reach, spread how far back the end of the oldest bucket with a
// failure is.
func (w *callWindow) evidence(now time.Duration, minCalls int) (calls, fails int, span, spread time.Duration) {
	seq := uint64(now / bucketWidth)
	k := uint64(0)
	for k < uint64(numBuckets) && k <= seq {
		c, f := w.bucket(seq - k)
		calls += c
		fails += f
		if f > 0 {
			spread = max(now-time.Duration(seq-k+1)*bucketWidth, 0)
		}
		k++
		if k >= uint64(minSpanBuckets) && calls >= minCalls {
			break
		}
	}
	return calls, fails, now - time.Duration(seq+1-k)*bucketWidth, spread
}

// totals sums the whole window at now.
func (w *callWindow) totals(now time.Duration) (calls, fails int) {
	seq := uint64(now / bucketWidth)
	for k := uint64(0); k < uint64(numBuckets) && k <= seq; k++ {
		c, f := w.bucket(seq - k)
		calls += c
		fails += f
	}
	return calls, fails
}

// clear forgets every call: a member that changes state starts afresh.
// A call added concurrently may survive; it is one call.
func (w *callWindow) clear() {
	for i := range w.buckets {
		w.buckets[i].Store(0)
	}
}

// outlier judges a counted failure of an up member at now, run being the
// failures in a row so far: it returns why the member is to go down, or ""
// to keep it. It allocates only for a verdict.
func (st *state) outlier(p *PassiveConfig, now time.Duration, run int32, o Outcome) string {
	if int(run) >= p.FailureThreshold {
		if d := now - time.Duration(st.runStart.Load()); d >= minEvidenceSpan {
			return fmt.Sprintf("%d calls in a row failed over %v, the last %s", run, d.Round(time.Millisecond), o)
		}
	}
	calls, fails, span, spread := st.window.evidence(now, p.MinCalls)
	if calls >= p.MinCalls && fails >= p.FailureThreshold && fails*100 >= p.FailurePercent*calls && spread >= minFailureSpread {
		return fmt.Sprintf("%d of %d calls failed in the last %v, the last %s", fails, calls, span, o)
	}
	return ""
}
