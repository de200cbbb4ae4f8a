package journal

import (
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/route"
)

// CDRSink takes the records of lost calls (cdr.Writer), taking each over.
type CDRSink interface {
	Write(r *cdr.Record) bool
}

// Options configure a Journal.
type Options struct {
	// Fleet is the fleet's call journal (fleet.Fleet.Journal).
	Fleet *fleet.Journal
	// Queue bounds the operations waiting for the Journal's goroutine;
	// Answered is refused beyond it. Default 65536.
	Queue   int
	Metrics *metrics.Set // nil: a private set
	Log     *slog.Logger // nil: slog.Default()
}

// Journal is the node's end of the fleet's call journal: see the package
// doc for who may call what.
type Journal struct {
	fj      *fleet.Journal
	max     int
	log     *slog.Logger
	dropped *metrics.Counter

	mu    sync.Mutex // guards queue
	queue []op
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once

	// The goroutine's.
	spare   []op
	refused map[uint64]struct{} // calls the fleet's journal refused: their ends are not passed on
}

// op is one call answered (its record) or ended (rec nil).
type op struct {
	id  uint64
	rec *cdr.Record
}

// New starts a Journal over o.Fleet.
func New(o Options) *Journal {
	if o.Queue <= 0 {
		o.Queue = 65536
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	j := &Journal{fj: o.Fleet, max: o.Queue, log: o.Log,
		dropped: o.Metrics.GetOrCreateCounter("sipedge_call_journal_dropped_total"),
		wake:    make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		refused: make(map[uint64]struct{})}
	go j.run()
	return j
}

// Answered queues the call a carrier just answered, its record so far,
// under id (b2bua.Journal); it takes rec over. false: the queue is full,
// and the call is not journalled.
func (j *Journal) Answered(id uint64, rec *cdr.Record) bool {
	j.mu.Lock()
	if len(j.queue) >= j.max {
		j.mu.Unlock()
		j.dropped.Inc()
		cdr.ReleaseRecord(rec)
		return false
	}
	first := len(j.queue) == 0
	j.queue = append(j.queue, op{id: id, rec: rec})
	j.mu.Unlock()
	if first { // else the goroutine is woken already
		j.kick()
	}
	return true
}

// Ended queues the end of the call journalled under id, whose CDR is
// written (b2bua.Journal). It is never refused.
func (j *Journal) Ended(id uint64) {
	j.mu.Lock()
	first := len(j.queue) == 0
	j.queue = append(j.queue, op{id: id})
	j.mu.Unlock()
	if first {
		j.kick()
	}
}

func (j *Journal) kick() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Close hands the fleet's journal what is queued and stops the goroutine.
// Call it after the last Answered and Ended, before the fleet's Close.
func (j *Journal) Close() {
	j.once.Do(func() {
		close(j.quit)
		<-j.done
	})
}

func (j *Journal) run() {
	defer close(j.done)
	for {
		select {
		case <-j.wake:
			j.drain()
		case <-j.quit:
			j.drain()
			return
		}
	}
}

// drain passes what the shards queued on to the fleet's journal, in order.
func (j *Journal) drain() {
	j.mu.Lock()
	q := j.queue
	j.queue = j.spare[:0]
	j.mu.Unlock()
	for i, o := range q {
		if o.rec == nil {
			if _, ok := j.refused[o.id]; ok {
				delete(j.refused, o.id)
			} else {
				j.fj.Ended(o.id)
			}
			continue
		}
		c := callOf(o.rec)
		cdr.ReleaseRecord(o.rec)
		q[i].rec = nil
		if !j.fj.Answered(o.id, &c) {
			j.refused[o.id] = struct{}{}
		}
	}
	j.spare = q[:0]
}

// callOf copies what the journal keeps of an answered call's record.
// The strings the engine made in the record's own storage
// (cdr.Record.String), which the pool hands to another call, are copied.
func callOf(r *cdr.Record) fleet.Call {
	c := fleet.Call{ACallID: strings.Clone(r.ACallID), BCallID: strings.Clone(r.BCallID), Trunk: r.Trunk, TrunkGroup: r.TrunkGroup,
		Caller: strings.Clone(r.Caller), Callee: strings.Clone(r.Callee), DialedNumber: strings.Clone(r.DialedNumber),
		TimeInvite: r.TimeInvite, TimeFirstProvisional: r.TimeFirstProvisional, TimeAnswer: r.TimeAnswer,
		Route: r.Route, CarrierID: r.CarrierID, Rate: r.Rate, Currency: r.Currency,
		RouteSource: r.RouteSource.String(), CDRFields: r.CDRFields}
	if r.SourceIP.IsValid() {
		c.SourceIP = r.SourceIP.String()
	}
	if len(r.Attempts) > 0 {
		c.Attempts = make([]fleet.Attempt, len(r.Attempts))
		for i, a := range r.Attempts {
			c.Attempts[i] = fleet.Attempt{CarrierID: a.CarrierID, Status: a.Status, Elapsed: a.Elapsed, Dialed: a.Dialed, Reason: a.Reason}
		}
	}
	return c
}

// Lost returns what writes to w the CDRs of the calls whose node died
// (fleet.Options.OnLost): each answered, ended with hangup_side
// "node_lost" at the node's last renewal of its journal (never before the
// answer). A record w refuses (its queue full) is logged.
func Lost(w CDRSink, log *slog.Logger) func([]fleet.LostCall) {
	if log == nil {
		log = slog.Default()
	}
	return func(calls []fleet.LostCall) {
		for i := range calls {
			lc := &calls[i]
			if !w.Write(recordOf(lc)) {
				log.Error("call journal: the CDR of a lost call was dropped", "a_call_id", lc.ACallID, "node", lc.Node)
			}
		}
	}
}

// recordOf is the CDR of a lost call.
func recordOf(lc *fleet.LostCall) *cdr.Record {
	r := cdr.AcquireRecord()
	r.ACallID, r.BCallID, r.Trunk, r.TrunkGroup = lc.ACallID, lc.BCallID, lc.Trunk, lc.TrunkGroup
	r.Caller, r.Callee, r.DialedNumber = lc.Caller, lc.Callee, lc.DialedNumber
	r.SourceIP, _ = netip.ParseAddr(lc.SourceIP)
	r.TimeInvite, r.TimeFirstProvisional, r.TimeAnswer = lc.TimeInvite, lc.TimeFirstProvisional, lc.TimeAnswer
	r.TimeEnd = lc.End
	if r.TimeEnd.Before(r.TimeAnswer) { // the clocks of two hosts
		r.TimeEnd = r.TimeAnswer
	}
	r.FinalCode, r.FinalReason, r.HangupSide = 200, "OK", cdr.HangupNodeLost
	r.Route, r.CarrierID, r.Rate, r.Currency = lc.Route, lc.CarrierID, lc.Rate, lc.Currency
	r.RouteSource = sourceOf(lc.RouteSource)
	r.CDRFields = lc.CDRFields
	for _, a := range lc.Attempts {
		r.Attempts = append(r.Attempts, cdr.Attempt{CarrierID: a.CarrierID, Status: a.Status,
			Elapsed: a.Elapsed.Truncate(time.Millisecond), Dialed: a.Dialed, Reason: a.Reason})
	}
	return r
}

// sourceOf reads a route.Source back from its name (route.Source.String).
func sourceOf(name string) route.Source {
	for s := route.SourceNone; s <= route.SourceFallback; s++ {
		if s.String() == name {
			return s
		}
	}
	return route.SourceNone
}
