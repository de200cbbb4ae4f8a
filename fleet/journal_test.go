package fleet

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

func testCall(i int) *Call {
	t0 := time.Date(2026, 12, 4, 10, 0, i, 0, time.UTC)
	return &Call{
		ACallID: fmt.Sprintf("a-%d@pbx", i), BCallID: fmt.Sprintf("b-%d", i), Trunk: "acme", TrunkGroup: "acme-tg",
		Caller: "+4930111", Callee: fmt.Sprintf("+4930%03d", i), DialedNumber: fmt.Sprintf("+4930%03d", i), SourceIP: "192.0.2.7",
		TimeInvite: t0, TimeFirstProvisional: t0.Add(time.Second), TimeAnswer: t0.Add(3 * time.Second),
		Route: "carrier-x", CarrierID: "x", Rate: 0.0123, Currency: "EUR", RouteSource: "lcr",
		CDRFields: map[string]string{"account": "42"},
		Attempts:  []Attempt{{CarrierID: "y", Status: 503, Elapsed: 120 * time.Millisecond, Dialed: true}},
	}
}

// TestCallEncoding: a journalled call comes back as it went in, a rate
// that is not a number included.
func TestCallEncoding(t *testing.T) {
	f := func(c *Call) {
		t.Helper()
		b, err := encodeCall(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeCall(b)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(c.Rate) != math.IsNaN(got.Rate) {
			t.Fatalf("rate %v came back %v", c.Rate, got.Rate)
		}
		want := *c
		want.Rate, got.Rate = 0, 0
		if !reflect.DeepEqual(&got, &want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\n%s", got, want, b)
		}
	}
	f(testCall(1))
	nan := testCall(2)
	nan.Rate = math.NaN()
	f(nan)
	f(&Call{ACallID: "x"})
	if b, _ := encodeCall(testCall(3)); !strings.Contains(string(b), `"a_call_id":"a-3@pbx"`) || !strings.Contains(string(b), `"rate":0.0123`) {
		t.Fatalf("encoding: %s", b)
	}
}

// TestJournalOff: without the journal, Answered journals nothing.
func TestJournalOff(t *testing.T) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(t, err)
	defer f.Close()
	if f.Journal().Answered(1, testCall(1)) {
		t.Fatal("journalled without a journal")
	}
	f.Journal().Ended(1)
}

// journalLen is the calls in a node's journal in Redis.
func journalLen(r *redistest.Server, n *testNode) string {
	return r.MustDo("HLEN {sipedge:fleet}:journal:" + n.self.Load().field)
}

// TestJournalNodeLost: a node dies with answered calls up; another node
// writes them as lost, each exactly once across the fleet, with the end at
// the dead node's last renewal; the calls that ended normally are not.
func TestJournalNodeLost(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	var nodes []*testNode
	for _, id := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, r.URL(), id, withJournal))
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	j := a.Journal()
	for i := range 8 {
		if !j.Answered(uint64(i), testCall(i)) {
			t.Fatalf("call %d not journalled", i)
		}
	}
	for _, i := range []uint64{1, 4, 6} {
		j.Ended(i)
	}
	eventually(t, time.Second, "journalled", func() bool { return journalLen(r, a) == ":5" })
	time.Sleep(400 * time.Millisecond) // a renewal with nothing new
	a.abandon()
	died := time.Now()
	took := eventually(t, 4*time.Second, "lost calls written", func() bool { return len(b.lostCalls())+len(c.lostCalls()) >= 5 })
	t.Logf("5 lost calls written %v after the node died (lease 1 s)", took)
	time.Sleep(700 * time.Millisecond) // more heartbeats: nothing more may come
	lost := append(b.lostCalls(), c.lostCalls()...)
	if len(lost) != 5 {
		t.Fatalf("%d lost calls written, want 5 (b %d, c %d)", len(lost), len(b.lostCalls()), len(c.lostCalls()))
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].ACallID < lost[j].ACallID })
	for k, i := range []int{0, 2, 3, 5, 7} {
		l := lost[k]
		want := testCall(i)
		if l.Node != "a" || l.ACallID != want.ACallID || l.CarrierID != "x" || !l.TimeAnswer.Equal(want.TimeAnswer) ||
			len(l.Attempts) != 1 || l.CDRFields["account"] != "42" || l.Rate != 0.0123 {
			t.Fatalf("lost call %d: %+v", k, l)
		}
		if l.End.After(died) || died.Sub(l.End) > 600*time.Millisecond {
			t.Fatalf("end %v, died %v: want the last renewal, within a third of the lease before", l.End, died)
		}
	}
	if r.MustDo("HLEN {sipedge:fleet}:journals") != ":2" || r.MustDo("EXISTS {sipedge:fleet}:journal:"+a.self.Load().field) != ":0" {
		t.Fatal("the lost journal is still in Redis")
	}
	m := metricsText(b.Fleet) + metricsText(c.Fleet)
	if !strings.Contains(m, "sipedge_fleet_lost_calls_total 5") || !(b.log.Contains("a node died with calls up") || c.log.Contains("a node died with calls up")) {
		t.Fatalf("not counted or logged:\n%s", m)
	}
}

// TestJournalCleanExit: a node that leaves with no calls up leaves no
// journal; one that leaves with calls up has them claimed at once.
func TestJournalCleanExit(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a", withJournal)
	b := startNode(t, r.URL(), "b", withJournal)
	c := startNode(t, r.URL(), "c", withJournal)
	a.Journal().Answered(7, testCall(7))
	a.Journal().Ended(7)
	a.Close()
	if r.MustDo("HEXISTS {sipedge:fleet}:journals "+a.self.Load().field) != ":0" {
		t.Fatal("an empty journal left behind")
	}
	c.Journal().Answered(9, testCall(9))
	c.Close()
	eventually(t, time.Second, "claimed", func() bool { return len(b.lostCalls()) == 1 })
	if b.lostCalls()[0].ACallID != "a-9@pbx" {
		t.Fatalf("lost %+v", b.lostCalls())
	}
}

// TestJournalRedisRestarted: Redis restarted empty: the node writes its
// journal again, and its loss is still written.
func TestJournalRedisRestarted(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a", withJournal)
	b := startNode(t, r.URL(), "b", withJournal)
	for i := range 3 {
		a.Journal().Answered(uint64(i), testCall(i))
	}
	eventually(t, time.Second, "journalled", func() bool { return journalLen(r, a) == ":3" })
	r.Restart()
	a.Journal().Ended(0)
	// Within 100 ms when the machine is idle; the bound is for a loaded
	// one, where the client's reconnection to the new Redis waits its turn.
	eventually(t, 10*time.Second, "journal written again", func() bool { return journalLen(r, a) == ":2" })
	if !a.log.Contains("the call journal was gone from Redis") && !a.log.Contains("differed from this node's: mended") {
		t.Fatalf("not logged:\n%s", a.log)
	}
	a.abandon()
	eventually(t, 4*time.Second, "lost calls", func() bool { return len(b.lostCalls()) == 2 })
}

// TestJournalFencedNodeForgetsItsCalls: a node the fleet declared dead
// while it ran has had its calls written as lost; it does not journal them
// again (which would write them a second time should it die later).
func TestJournalFencedNodeForgetsItsCalls(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a", withJournal, func(o *Options) { o.lease = time.Hour })
	b := startNode(t, r.URL(), "b", withJournal)
	a.Journal().Answered(1, testCall(1))
	eventually(t, time.Second, "journalled", func() bool { return journalLen(r, a) == ":1" })
	old := a.self.Load()
	r.MustDo("ZADD {sipedge:fleet}:leases 1 a") // a silent for its lease
	eventually(t, 2*time.Second, "claimed", func() bool { return len(b.lostCalls()) == 1 })
	a.members.wake()
	eventually(t, 2*time.Second, "fenced", func() bool { return a.self.Load() != old })
	a.Journal().Answered(2, testCall(2))
	a.Journal().Ended(1) // the call lost ends on a: nothing to remove
	eventually(t, time.Second, "new journal", func() bool { return journalLen(r, a) == ":1" })
	if got := r.MustDo("HEXISTS {sipedge:fleet}:journal:" + a.self.Load().field + " 2"); got != ":1" {
		t.Fatalf("call 2 not in the new journal: %s", got)
	}
}

// TestJournalQueueBound: with Redis frozen, Answered does not wait; it is
// refused past the queue's bound (counted); Ended never is.
func TestJournalQueueBound(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a", withJournal, func(o *Options) { o.JournalQueue = 4 })
	r.Freeze() // the journal's goroutine waits on Redis: the queue fills
	defer r.Thaw()
	time.Sleep(50 * time.Millisecond)
	a.journal.wake()
	time.Sleep(50 * time.Millisecond)
	n := 0
	var slowest time.Duration
	for i := range 20 {
		t0 := time.Now()
		if a.Journal().Answered(uint64(i), testCall(i)) {
			n++
		}
		slowest = max(slowest, time.Since(t0))
	}
	if slowest > 5*time.Millisecond {
		t.Fatalf("Answered took %v with Redis frozen", slowest)
	}
	if n < 4 || n > 8 || !strings.Contains(metricsText(a.Fleet), "sipedge_fleet_journal_dropped_total") {
		t.Fatalf("%d of 20 journalled with a queue of 4", n)
	}
	for i := range 20 {
		a.Journal().Ended(uint64(i))
	}
}

// TestJournalRedisLostWrites: Redis holds other calls than the node (a
// replica promoted that missed writes): the node mends its journal, at the
// latest at its periodic comparison.
func TestJournalRedisLostWrites(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	a := startNode(t, r.URL(), "a", withJournal)
	for i := range 3 {
		a.Journal().Answered(uint64(i), testCall(i))
	}
	eventually(t, time.Second, "journalled", func() bool { return journalLen(r, a) == ":3" })
	key := "{sipedge:fleet}:journal:" + a.self.Load().field
	r.MustDo("HDEL " + key + " 1")
	r.MustDo("HSET " + key + " ff stale") // the count is right, the calls are not
	a.Journal().Answered(9, testCall(9))
	eventually(t, 5*time.Second, "mended", func() bool {
		return journalLen(r, a) == ":4" && r.MustDo("HEXISTS "+key+" ff") == ":0" && r.MustDo("HEXISTS "+key+" 1") == ":1"
	})
	if !a.log.Contains("differed from this node's: mended") {
		t.Fatalf("not logged:\n%s", a.log)
	}
}
