package journal

import (
	"log/slog"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/cdr"
	"github.com/sipedge/sipedge/fleet"
	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
	"github.com/sipedge/sipedge/route"
)

// answeredRecord is a record as the engine hands it over when a carrier
// answers: its Call-IDs and numbers in its own storage, no end.
func answeredRecord() *cdr.Record {
	r := cdr.AcquireRecord()
	r.ACallID, r.BCallID = r.String([]byte("a-call-1@caller.example")), r.String([]byte("b0001@sipedge"))
	r.Trunk, r.TrunkGroup = "acme", "cust-trunks"
	r.Caller, r.Callee = r.String([]byte("+13105550100")), r.String([]byte("+15551234"))
	r.DialedNumber = r.Callee
	r.SourceIP = netip.MustParseAddr("192.0.2.7")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r.TimeInvite, r.TimeFirstProvisional, r.TimeAnswer = at, at.Add(800*time.Millisecond), at.Add(3*time.Second)
	r.FinalCode, r.FinalReason = 200, r.String([]byte("OK"))
	r.Route, r.CarrierID, r.Rate, r.Currency = "carrier-b", "carrier-b", 0.0125, "USD"
	r.RouteSource = route.SourceLCR
	r.CDRFields = map[string]string{"plan": "gold"}
	r.Attempts = append(r.Attempts, cdr.Attempt{CarrierID: "carrier-a", Status: 503, Elapsed: 120 * time.Millisecond, Dialed: true},
		cdr.Attempt{CarrierID: "carrier-z", Status: 503, Dialed: false, Reason: route.ReasonCallsLimited})
	return r
}

// What a call's journal entry keeps comes back as its CDR, but for its end:
// the node's last renewal (not before the answer), hangup_side node_lost;
// the strings in the record's own storage are copied before the record
// goes back to the pool.
func TestLostCallRecord(t *testing.T) {
	r := answeredRecord()
	want := string(r.AppendJSON(nil))
	c := callOf(r)
	r.Reset() // the pool hands the record, and its storage, to another call
	r.String([]byte("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"))
	end := time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)
	lost := recordOf(&fleet.LostCall{Call: c, Node: "edge-1", End: end})
	got := string(lost.AppendJSON(nil))
	want = strings.Replace(want, `"duration_ms":0`, `"duration_ms":297000`, 1)
	want = strings.Replace(want, `"time_answer":"2026-12-01T10:00:03.000Z"`, `"time_answer":"2026-12-01T10:00:03.000Z","time_end":"2026-12-01T10:05:00.000Z"`, 1)
	want = strings.Replace(want, `"hangup_side":""`, `"hangup_side":"node_lost"`, 1)
	if got != want {
		t.Fatalf("lost call's CDR:\n%s\nwant\n%s", got, want)
	}

	c.Rate = math.NaN() // no rate
	lost = recordOf(&fleet.LostCall{Call: c, End: c.TimeAnswer.Add(-time.Second)})
	if !lost.TimeEnd.Equal(c.TimeAnswer) || !math.IsNaN(lost.Rate) {
		t.Errorf("a renewal before the answer (another host's clock): time_end %v, want the answer %v; rate %v", lost.TimeEnd, c.TimeAnswer, lost.Rate)
	}
	for _, s := range []route.Source{route.SourceNone, route.SourceLCR, route.SourceStatic, route.SourceFallback} {
		if sourceOf(s.String()) != s {
			t.Errorf("route source %v does not come back", s)
		}
	}
}

// bare is a Journal without its goroutine: the test drains it.
func bare(queue int) *Journal {
	return &Journal{max: queue, wake: make(chan struct{}, 1), dropped: metrics.NewSet().NewCounter("dropped"),
		refused: map[uint64]struct{}{}}
}

// Answered is refused past the queue's bound, counted, its record given
// back; Ended is never refused.
func TestQueueBound(t *testing.T) {
	j := bare(2)
	if !j.Answered(1, cdr.AcquireRecord()) || !j.Answered(2, cdr.AcquireRecord()) {
		t.Fatal("refused within the bound")
	}
	if j.Answered(3, cdr.AcquireRecord()) || j.dropped.Get() != 1 {
		t.Fatalf("the third Answered: accepted, or not counted (%d)", j.dropped.Get())
	}
	j.Ended(1)
	j.Ended(2)
	if len(j.queue) != 4 || j.queue[2].rec != nil || j.queue[3].id != 2 {
		t.Fatalf("queue %+v, want two answers then two ends", j.queue)
	}
}

// newFleet joins a fleet on redis with the call journal on; lost calls
// go to lost.
func newFleet(t *testing.T, redis *redistest.Server, id string, lost func([]fleet.LostCall)) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(fleet.Options{Config: fleet.Config{Redis: redis.URL(), NodeID: id, LeaseSecs: 1, CallJournal: true},
		OnLost: lost, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// cdrs collects the records written, as JSON.
type cdrs struct {
	mu   sync.Mutex
	recs []string
}

func (c *cdrs) Write(r *cdr.Record) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, string(r.AppendJSON(nil)))
	cdr.ReleaseRecord(r)
	return true
}

func (c *cdrs) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.recs...)
}

// A call answered on a node reaches the fleet's journal in Redis, and
// leaves it when it ends. The calls of a node that left the fleet with
// calls in its journal (Close without their ends, as when a node's calls
// outlive it) are written by another node, once, as node_lost.
func TestJournalInRedis(t *testing.T) {
	testtier.RequiresSockets(t)
	redis := redistest.Start(t)
	var lostCDRs cdrs
	fb := newFleet(t, redis, "edge-b", Lost(&lostCDRs, nil))
	defer fb.Close()
	b := New(Options{Fleet: fb.Journal()})
	defer b.Close()

	fa := newFleet(t, redis, "edge-a", Lost(&cdrs{}, nil))
	a := New(Options{Fleet: fa.Journal()})
	journalled := func() string {
		keys := redis.MustDo("KEYS {sipedge:fleet}:journal:edge-a:*")
		if keys == "*0" {
			return "none"
		}
		return "some"
	}
	a.Answered(1<<32|1, answeredRecord())
	waitFor(t, "the call in edge-a's journal", func() bool { return journalled() == "some" })
	a.Ended(1<<32 | 1)
	a.Answered(1<<32|2, answeredRecord())
	a.Close()
	fa.Close() // the journal keeps call 2: edge-a leaves it to the fleet

	waitFor(t, "edge-b writes edge-a's call as lost", func() bool { return len(lostCDRs.all()) > 0 })
	time.Sleep(500 * time.Millisecond) // a second copy would come now
	got := lostCDRs.all()
	if len(got) != 1 || !strings.Contains(got[0], `"a_call_id":"a-call-1@caller.example"`) || !strings.Contains(got[0], `"hangup_side":"node_lost"`) {
		t.Fatalf("lost CDRs %q, want the one call edge-a left, node_lost", got)
	}
	if journalled() != "none" {
		t.Errorf("edge-a's journal is still in Redis after edge-b wrote its calls")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
