package fleet

import (
	"strconv"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

// BenchmarkJournalAnsweredEnded: what journalling costs a shard per call,
// Answered and Ended, the journal's goroutine aside (it would take the
// queue every few thousand operations: here the queue is emptied so).
func BenchmarkJournalAnsweredEnded(b *testing.B) {
	f, err := New(Options{Config: Config{NodeID: "a"}})
	must(b, err)
	defer f.Close()
	j := f.Journal()
	j.on = true // no goroutine takes the queue: the benchmark does
	c := testCall(1)
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		if !j.Answered(id, c) {
			b.Fatal("refused")
		}
		j.Ended(id)
		if id++; id%4096 == 0 {
			clear(j.pending.calls)
			j.pending = journalQueue{ops: j.pending.ops[:0], calls: j.pending.calls[:0]}
		}
	}
}

// BenchmarkJournalThroughput: calls journalled and ended per second through
// a real Redis: b.N calls answered at once, then ended, each phase until
// Redis holds what the node does.
func BenchmarkJournalThroughput(b *testing.B) {
	testtier.RequiresSockets(b)
	r := redistest.Start(b)
	n := startNode(b, r.URL(), "a", withJournal, func(o *Options) { o.JournalQueue = 1 << 30 })
	j := n.Journal()
	key := "HLEN {sipedge:fleet}:journal:" + n.self.Load().field
	wait := func(want int) {
		for r.MustDo(key) != ":"+strconv.Itoa(want) {
			time.Sleep(time.Millisecond)
		}
	}
	c := testCall(1)
	b.ResetTimer()
	for i := range b.N {
		j.Answered(uint64(i), c)
	}
	wait(b.N)
	for i := range b.N {
		j.Ended(uint64(i))
	}
	wait(0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkGrantRound: one grant round of a node for 20 limited keys, in
// one script call to a real Redis, as three nodes hold grants on them.
func BenchmarkGrantRound(b *testing.B) {
	testtier.RequiresSockets(b)
	r := redistest.Start(b)
	const keys = 20
	nodes := []*testNode{startNode(b, r.URL(), "a"), startNode(b, r.URL(), "b"), startNode(b, r.URL(), "c")}
	var reqs []grantReq
	for i := range keys {
		for _, n := range nodes {
			n.Channel("carrier-"+strconv.Itoa(i), 100)
		}
		reqs = append(reqs, grantReq{c: nodes[0].Channel("carrier-"+strconv.Itoa(i), 100), limit: 100, want: 10, bound: 10, had: true})
	}
	cs := &nodes[0].chans
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.exec(reqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/key")
}
