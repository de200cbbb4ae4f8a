package shard

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/shard/timer"
	"github.com/sipedge/sipedge/transport"
)

// loopWaker stands in for a shard's waker connection where no gnet loop
// runs: Wake hands the shard to a goroutine of the test that runs it, as
// the loop would.
type loopWaker struct {
	gnet.Conn
	woke chan struct{}
}

func (w *loopWaker) Wake(gnet.AsyncCallback) error {
	select {
	case w.woke <- struct{}{}:
	default: // the loop has a wake pending
	}
	return nil
}

// The ticker ticks every Config.Tick while a shard does not poll. While
// every shard polls it rests: no tick in a second. A shard that stops
// polling kicks it, and with a timer pending (overdue: nothing ran its
// wheel meanwhile) it is woken, and the timer fires, one Tick after the
// kick. Then the ticker ticks every Tick again. On synctest's clock.
func TestTickerRestsWhileEveryShardPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = 5 * time.Millisecond
		fired := make(chan time.Duration, 1)
		s, err := New(Config{Shards: 2, Tick: tick, Listen: listens("udp://127.0.0.1:5060")}, func(*Shard) Handler {
			return Handler{Timer: func(sh *Shard, _ timer.Payload) { fired <- sh.Now() }}
		}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var loops []chan struct{}
		for _, sh := range s.shards {
			w := &loopWaker{woke: make(chan struct{}, 1)}
			sh.waker = w
			loops = append(loops, w.woke)
			go func() {
				for range w.woke {
					sh.run()
				}
			}()
		}
		stopped := make(chan struct{})
		go func() {
			s.tick()
			close(stopped)
		}()
		defer func() {
			s.stopTicker()
			<-stopped
			for _, l := range loops {
				close(l)
			}
		}()
		sh := s.shards[0]
		onShard(sh, func() { sh.Timers().Start(100*time.Millisecond, timer.Payload{Arg: 1}) })

		ticks := func() uint64 { synctest.Wait(); return s.ticks.Get() }
		time.Sleep(10*tick + tick/2)
		if n := ticks(); n != 10 {
			t.Fatalf("%d ticks in 10 Ticks with no shard polling, want 10", n)
		}
		for _, sh := range s.shards {
			sh.polling.Store(true)
		}
		time.Sleep(time.Second)
		if n := ticks(); n != 11 {
			t.Fatalf("%d ticks after a second with every shard polling, want 11: one that found them polling", n)
		}
		select {
		case at := <-fired:
			t.Fatalf("the timer fired at %v with nothing running the shard's wheel", at)
		default:
		}

		// The shard stops polling (poll's end).
		sh.polling.Store(false)
		s.kickTicker()
		kicked := sh.Now()
		if at := <-fired; at-kicked != tick {
			t.Fatalf("the overdue timer fired %v after the kick, want one Tick (%v)", at-kicked, tick)
		}
		time.Sleep(10*tick + tick/2)
		if n := ticks(); n != 22 {
			t.Fatalf("%d ticks 11.5 Ticks after the kick, want 22: it ticks again", n)
		}
	})
}

// A loop polling under load has the ticker rest; when the load ends and it
// stops polling, a timer it started meanwhile still fires: leaving the
// polling loop kicks the ticker, which wakes the shard again each Tick.
func TestTimerFiresAfterPollingEnds(t *testing.T) {
	testtier.RequiresSockets(t)
	type started struct{ at, due time.Duration }
	start := make(chan started, 1)
	fired := make(chan time.Duration, 1)
	port := freePort(t)
	const delay = 20 * time.Millisecond
	s := runServer(t, Config{Shards: 1, Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port)),
		BatchInterval: time.Millisecond, BatchIntervalMax: 4 * time.Millisecond}, func(*Shard) Handler {
		return Handler{
			Message: func(sh *Shard, m *parser.Message, _ transport.Peer) {
				if string(m.CallID()) == "last" {
					sh.Timers().Start(delay, timer.Payload{})
					start <- started{at: sh.Now(), due: sh.Now() + delay}
				}
			},
			Timer: func(sh *Shard, _ timer.Payload) { fired <- sh.Now() },
		}
	}, nil)
	c := dialUDP(t, port)
	const n = 200 // a datagram a millisecond: the loop polls throughout
	for i := range n {
		id := fmt.Sprint("load-", i)
		if i == n-1 {
			id = "last"
		}
		if _, err := c.Write([]byte(options(id, id, "UDP", 5060))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	st := <-start
	if polls := metricSum(s.Metrics(), "sipedge_shard_batch_intervals_total"); polls == 0 {
		t.Fatal("the loop never polled: the test does not test what it says")
	}
	select {
	case at := <-fired:
		if at < st.due {
			t.Fatalf("the timer fired at %v, before it was due (%v)", at, st.due)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the timer started at %v, due %v later, did not fire in 2 s after the load ended", st.at, delay)
	}
}
