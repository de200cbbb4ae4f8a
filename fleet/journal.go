package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
)

// The call journal. A node journals its answered calls in Redis, so that,
// should it die, another node writes their CDRs. The shard hands each
// operation (Answered, Ended) over through a short queue and never waits:
// the journal's goroutine keeps the node's calls in memory (the truth) and
// mirrors them to Redis, one script call carrying what queued during the
// previous one. With each write it renews the journal: the renewal is the
// wall-clock time at which it took the queue, so every call still in the
// journal was up at that time, as far as the node knew. When the node
// dies, its calls' end is that last renewal (written at least every third
// of the lease). The mirror is rewritten whole when Redis lost it (a
// restart without persistence).
//
// Keys:
//
//	{sipedge:fleet}:journals              HASH "<id>:<inc>" -> "<owner> <renewed ms> live|lost"
//	{sipedge:fleet}:journal:<id>:<inc>    HASH call id (hex) -> the call, JSON
//
// The owner of a journal is the incarnation that may change it: its own
// node while it lives, then the node that claimed it (claim.go).

// syncScript writes a batch of a journal's changes, and renews it, if this
// incarnation still owns it.
//
// KEYS  journals, journal:<self>, dead:<self>
// ARGV  self, renewed ms ("" to keep the last), n, n (field, call) pairs,
// then the fields to delete
// returns {"ok" | "resync" (the index was missing) | "fenced", the
// journal's length}
var syncScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then return {'fenced', 0} end
local idx = redis.call('HGET', KEYS[1], ARGV[1])
local state = 'ok'
local renewed = ARGV[2]
if idx then
  local owner, last = string.match(idx, '^(%S+) (%d+)')
  if owner ~= ARGV[1] then return {'fenced', 0} end
  if renewed == '' then renewed = last end
else
  state = 'resync'
  if renewed == '' then renewed = '0' end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[1] .. ' ' .. renewed .. ' live')
local n = tonumber(ARGV[3])
if n > 0 then redis.call('HSET', KEYS[2], unpack(ARGV, 4, 3 + 2 * n)) end
if #ARGV > 3 + 2 * n then redis.call('HDEL', KEYS[2], unpack(ARGV, 4 + 2 * n)) end
return {state, redis.call('HLEN', KEYS[2])}
`)

// dropJournalScript removes an empty journal on Close.
//
// KEYS  journals, journal:<self>
// ARGV  self
var dropJournalScript = rueidis.NewLuaScript(`
local idx = redis.call('HGET', KEYS[1], ARGV[1])
if idx and string.match(idx, '^(%S+)') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
`)

// Call is what the journal keeps of an answered call: what its CDR needs,
// should its node die. The JSON names are the CDR's.
type Call struct {
	ACallID              string            `json:"a_call_id"`
	BCallID              string            `json:"b_call_id,omitempty"`
	Trunk                string            `json:"trunk,omitempty"`
	TrunkGroup           string            `json:"trunk_group,omitempty"`
	Caller               string            `json:"caller,omitempty"`
	Callee               string            `json:"callee,omitempty"`
	DialedNumber         string            `json:"dialed_number,omitempty"`
	SourceIP             string            `json:"source_ip,omitempty"`
	TimeInvite           time.Time         `json:"time_invite"`
	TimeFirstProvisional time.Time         `json:"time_first_provisional,omitzero"`
	TimeAnswer           time.Time         `json:"time_answer"`
	Route                string            `json:"route,omitempty"`
	CarrierID            string            `json:"carrier_id,omitempty"`
	Rate                 float64           `json:"-"` // NaN: none (JSON has no NaN; see callJSON)
	Currency             string            `json:"currency,omitempty"`
	RouteSource          string            `json:"route_source,omitempty"`
	CDRFields            map[string]string `json:"cdr_fields,omitempty"`
	Attempts             []Attempt         `json:"lcr_attempts,omitempty"`
}

// Attempt is a carrier tried before the one that answered.
type Attempt struct {
	CarrierID string        `json:"carrier_id"`
	Status    int           `json:"status"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Dialed    bool          `json:"dialed"`
	Reason    string        `json:"reason,omitempty"`
}

// LostCall is a journalled call whose node died: its CDR is the owner's
// to write, with hangup_side "node_lost" and End as time_end.
type LostCall struct {
	Call
	// Node is the id of the node that held the call.
	Node string
	// End is the node's last renewal of its journal: the call was up
	// then, and no news came after.
	End time.Time
}

// callJSON is a Call as the journal stores it.
type callJSON struct {
	callFields
	Rate *float64 `json:"rate,omitempty"`
}

type callFields Call // Call without its methods

func encodeCall(c *Call) ([]byte, error) {
	w := callJSON{callFields: callFields(*c)}
	if !math.IsNaN(c.Rate) && !math.IsInf(c.Rate, 0) {
		w.Rate = &c.Rate
	}
	return json.Marshal(&w)
}

func decodeCall(b []byte) (Call, error) {
	var w callJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return Call{}, err
	}
	c := Call(w.callFields)
	c.Rate = math.NaN()
	if w.Rate != nil {
		c.Rate = *w.Rate
	}
	return c, nil
}

// journalOp is one operation a shard handed over: a call answered (its
// index in the queue's calls) or ended (call -1).
type journalOp struct {
	id   uint64
	call int
}

// journalQueue is what the shards hand over, in order: an End carries no
// Call, so that it copies 16 bytes, not a Call's 300-odd.
type journalQueue struct {
	ops   []journalOp
	calls []Call
}

// journalEntry is a call in the journal's memory.
type journalEntry struct {
	rec    []byte // the call, JSON
	synced bool   // written to Redis
}

// Journal is the node's call journal. Answered and Ended never block and
// take only a short lock; any goroutine may call them, shards included.
// Without Options.CallJournal they do nothing.
type Journal struct {
	f  *Fleet
	on bool

	mu      sync.Mutex // guards pending
	pending journalQueue
	wakeCh  chan struct{}

	// The journal goroutine's.
	spare    journalQueue
	calls    map[uint64]*journalEntry
	dirty    map[uint64]struct{} // calls to write
	dels     map[string]struct{} // fields to delete
	indexed  bool                // the journal's index entry exists in Redis, as far as the node knows
	renewals int                 // renewals since the last reconcile
	resyncs  chan struct{}       // the incarnation changed: rewrite everything

	claimMu sync.Mutex
	toClaim []lostJournal
	claimCh chan struct{}

	m journalMetrics
}

type journalMetrics struct {
	dropped, lost, claimed, bad *metrics.Counter
}

func (j *Journal) init(f *Fleet) {
	j.f = f
	j.on = f.o.CallJournal && f.o.Redis != ""
	j.wakeCh = make(chan struct{}, 1)
	j.resyncs = make(chan struct{}, 1)
	j.claimCh = make(chan struct{}, 1)
	j.calls = make(map[uint64]*journalEntry)
	j.dirty = make(map[uint64]struct{})
	j.dels = make(map[string]struct{})
	set := f.o.Metrics
	j.m = journalMetrics{
		dropped: set.GetOrCreateCounter("sipedge_fleet_journal_dropped_total"),
		lost:    set.GetOrCreateCounter("sipedge_fleet_lost_calls_total"),
		claimed: set.GetOrCreateCounter("sipedge_fleet_journals_claimed_total"),
		bad:     set.GetOrCreateCounter("sipedge_fleet_journal_bad_records_total"),
	}
	if j.on {
		set.GetOrCreateGauge("sipedge_fleet_journal_pending", func() float64 {
			j.mu.Lock()
			defer j.mu.Unlock()
			return float64(len(j.pending.ops))
		})
	}
}

// Journal returns the node's call journal.
func (f *Fleet) Journal() *Journal { return &f.journal }

// Answered journals an answered call under id, which must be unique among
// the node's calls (e.g. the shard, the call's slot and its generation).
// It copies *c; the slices and maps c refers to must not change after.
// It reports false, journalling nothing, when the journal is off or its
// queue is full (counted): then do not call Ended for id.
func (j *Journal) Answered(id uint64, c *Call) bool {
	if !j.on {
		return false
	}
	j.mu.Lock()
	if len(j.pending.ops) >= j.f.o.JournalQueue {
		j.mu.Unlock()
		j.m.dropped.Inc()
		return false
	}
	q := &j.pending
	first := len(q.ops) == 0
	q.ops = append(q.ops, journalOp{id: id, call: len(q.calls)})
	q.calls = append(q.calls, *c)
	j.mu.Unlock()
	if first { // else the journal's goroutine is woken already
		j.wake()
	}
	return true
}

// Ended removes the call journalled under id: it ended normally, and its
// CDR is written. It is never refused (a call Answered took is ended
// whatever the queue holds, so that it is never written twice).
func (j *Journal) Ended(id uint64) {
	if !j.on {
		return
	}
	j.mu.Lock()
	first := len(j.pending.ops) == 0
	j.pending.ops = append(j.pending.ops, journalOp{id: id, call: -1})
	j.mu.Unlock()
	if first {
		j.wake()
	}
}

func (j *Journal) wake() {
	select {
	case j.wakeCh <- struct{}{}:
	default:
	}
}

// resync makes the journal goroutine forget the calls of the incarnation
// the fleet declared dead (another node wrote them as lost) and start the
// new one's journal.
func (j *Journal) resync() {
	select {
	case j.resyncs <- struct{}{}:
	default:
	}
}

// run is the journal goroutine.
func (j *Journal) run() {
	f := j.f
	defer f.wg.Done()
	if !j.on {
		return
	}
	renew := time.NewTicker(f.lease / 3)
	defer renew.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-f.quit:
			return
		case <-j.wakeCh:
		case <-renew.C:
			j.renewals++
		case <-retry.C:
		case <-j.resyncs:
			clear(j.calls)
			clear(j.dirty)
			clear(j.dels)
			j.indexed = false
		}
		if !j.sync() {
			retry.Reset(f.o.GrantInterval)
		}
	}
}

// take moves the operations the shards queued into the journal's memory.
func (j *Journal) take() {
	j.mu.Lock()
	q := j.pending
	j.pending = journalQueue{ops: j.spare.ops[:0], calls: j.spare.calls[:0]}
	j.mu.Unlock()
	for _, op := range q.ops {
		if op.call < 0 {
			e := j.calls[op.id]
			if e == nil {
				continue
			}
			delete(j.calls, op.id)
			delete(j.dirty, op.id)
			if e.synced {
				j.dels[callField(op.id)] = struct{}{}
			}
			continue
		}
		c := &q.calls[op.call]
		rec, err := encodeCall(c)
		if err != nil {
			j.m.bad.Inc()
			j.f.log.Error("fleet: cannot journal a call", "a_call_id", c.ACallID, "error", err)
			continue
		}
		if old := j.calls[op.id]; old != nil && old.synced {
			// The id came again: the new call replaces the old in Redis.
			delete(j.dels, callField(op.id))
		}
		j.calls[op.id] = &journalEntry{rec: rec}
		j.dirty[op.id] = struct{}{}
	}
	clear(q.calls) // drop the strings
	j.spare = journalQueue{ops: q.ops[:0], calls: q.calls[:0]}
}

// syncChunk bounds the calls of one script call.
const syncChunk = 256

// sync writes what changed, and the renewal; it reports false when Redis
// did not take it all (the rest goes next time).
func (j *Journal) sync() bool {
	f := j.f
	renewed := time.Now() // before take: every End queued before it is taken
	j.take()
	for {
		self := f.self.Load()
		state, n, err := j.write(self, renewed)
		if err != nil {
			return false
		}
		if state == "ok" && (n != int64(len(j.calls)) || j.renewals >= reconcileEvery) {
			// Redis may hold other calls than the node: it lost writes (a
			// replica promoted that missed them). Compare, and mend.
			j.renewals = 0
			if j.reconcile(self) {
				continue
			}
		}
		switch state {
		case "fenced":
			f.members.fenced(self)
			clear(j.calls)
			clear(j.dirty)
			clear(j.dels)
			j.indexed = false
			return true
		case "resync":
			if j.indexed {
				// Redis lost the journal (restarted empty): write it all
				// again.
				f.log.Warn("fleet: the call journal was gone from Redis: rewriting it", "calls", len(j.calls))
				for id, e := range j.calls {
					e.synced = false
					j.dirty[id] = struct{}{}
				}
				clear(j.dels)
				j.indexed = true
				continue
			}
			j.indexed = true
		}
		return true
	}
}

// reconcileEvery is how many renewals go between two comparisons of the
// journal in Redis with the node's, whatever its length says.
const reconcileEvery = 10

// callField is a call's field in the journal.
func callField(id uint64) string { return strconv.FormatUint(id, 16) }

// reconcile compares the journal's fields in Redis with the node's calls
// and marks what differs to be written or deleted; it reports whether
// anything did.
func (j *Journal) reconcile(self *identity) bool {
	var fields []string
	err := j.f.do("journal", func(ctx context.Context, c rueidis.Client) error {
		var err error
		fields, err = c.Do(ctx, c.B().Hkeys().Key(prefix+":journal:"+self.field).Build()).AsStrSlice()
		return err
	})
	if err != nil {
		return false
	}
	in := make(map[string]bool, len(fields))
	for _, k := range fields {
		in[k] = true
	}
	missing, extra := 0, 0
	for id, e := range j.calls {
		if !in[callField(id)] && e.synced {
			e.synced = false
			j.dirty[id] = struct{}{}
			missing++
		}
	}
	for _, k := range fields {
		id, err := strconv.ParseUint(k, 16, 64)
		if e := j.calls[id]; err != nil || e == nil {
			j.dels[k] = struct{}{}
			extra++
		}
	}
	if missing+extra == 0 {
		return false
	}
	j.f.log.Warn("fleet: the call journal in Redis differed from this node's: mended", "missing", missing, "extra", extra)
	return true
}

// write sends the dirty calls and the deletions in chunks, the renewal
// with the last; it returns the last chunk's state and the journal's
// length in Redis.
func (j *Journal) write(self *identity, renewed time.Time) (string, int64, error) {
	f := j.f
	keys := []string{prefix + ":journals", prefix + ":journal:" + self.field, prefix + ":dead:" + self.field}
	for {
		args := []string{self.field, "", ""}
		var sets []uint64
		var dels []string
		for id := range j.dirty {
			if len(sets) == syncChunk {
				break
			}
			sets = append(sets, id)
			args = append(args, callField(id), string(j.calls[id].rec))
		}
		for id := range j.dels {
			if len(sets)+len(dels) == syncChunk {
				break
			}
			dels = append(dels, id)
			args = append(args, id)
		}
		last := len(sets) == len(j.dirty) && len(dels) == len(j.dels)
		if last {
			args[1] = strconv.FormatInt(renewed.UnixMilli(), 10)
		}
		args[2] = strconv.Itoa(len(sets))
		var state string
		var n int64
		err := f.do("journal", func(ctx context.Context, c rueidis.Client) error {
			reply, err := syncScript.Exec(ctx, c, keys, args).ToArray()
			if err != nil {
				return err
			}
			if len(reply) != 2 {
				return fmt.Errorf("fleet: unexpected journal reply %v", reply)
			}
			if state, err = reply[0].ToString(); err != nil {
				return err
			}
			n, err = reply[1].AsInt64()
			return err
		})
		if err != nil {
			return "", 0, err
		}
		if state == "fenced" {
			return state, 0, nil
		}
		for _, id := range sets {
			j.calls[id].synced = true
			delete(j.dirty, id)
		}
		for _, id := range dels {
			delete(j.dels, id)
		}
		if last || state == "resync" && j.indexed {
			return state, n, nil
		}
	}
}

// leave writes the last operations on Close and removes an empty journal;
// it reports whether calls are left in it, for another node to claim.
func (j *Journal) leave() bool {
	if !j.on {
		return false
	}
	if !j.sync() {
		j.f.log.Warn("fleet: cannot write the call journal's last changes on close", "calls", len(j.calls))
	}
	if len(j.calls) > 0 {
		return true
	}
	self := j.f.self.Load()
	err := j.f.do("journal", func(ctx context.Context, c rueidis.Client) error {
		return dropJournalScript.Exec(ctx, c, []string{prefix + ":journals", prefix + ":journal:" + self.field},
			[]string{self.field}).Error()
	})
	return err != nil
}
