package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"

	"github.com/sipedge/sipedge/internal/redisurl"
)

// prefix is the hash tag of every fleet key: one Redis Cluster slot holds
// them all, so that a script may touch any of them (see the package doc).
const prefix = "{sipedge:fleet}"

// eventsChannel is the Pub/Sub channel of the change notifications.
const eventsChannel = "sipedge:fleet:events"

// Fleet is this node's membership of the fleet and the fleet-wide objects
// it keeps: channel limits, the shared state, the call journal. See the
// package doc for who may call what.
type Fleet struct {
	o     Options
	log   *slog.Logger
	lease time.Duration
	epoch time.Time // the monotonic clock of the loops: time.Since(epoch)

	client atomic.Pointer[redisClient] // nil: no Redis configured, or not connected yet
	up     atomic.Bool
	self   atomic.Pointer[identity] // the registration in force
	nodes  atomic.Int64             // live nodes, as the last heartbeat saw them

	members members
	chans   channels
	state   store
	journal Journal
	m       fleetMetrics

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	quit   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// identity is one incarnation of this node: the node id and a random
// token drawn at start, and again when the fleet declared the node dead
// (fenced) while it ran. Per-node Redis state (channel grants, the
// journal) is keyed by the incarnation, so a process that outlived its
// lease never writes into state the fleet has given away.
type identity struct {
	id, inc string
	field   string // "<id>:<inc>"
}

func newIdentity(id string) *identity {
	inc := strconv.FormatUint(rand.Uint64(), 36)
	return &identity{id: id, inc: inc, field: id + ":" + inc}
}

type redisClient struct{ rueidis.Client }

type fleetMetrics struct {
	downs    *metrics.Counter
	errors   map[string]*metrics.Counter // by op
	fenced   *metrics.Counter
	conflict *metrics.Counter
}

// ops are the kinds of Redis call the errors are counted by.
var ops = []string{"heartbeat", "grants", "journal", "claim", "state", "poll"}

// New starts this node's membership of the fleet. With Redis it registers
// the node (refusing, with ErrNodeIDTaken, an id a live node holds) and
// starts the fleet's goroutines; a Redis that does not answer is not an
// error: the node starts in the failure mode (see the package doc) and
// keeps connecting. Without Redis the fleet is this node alone.
func New(o Options) (*Fleet, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	f := &Fleet{o: o, log: o.Logger, lease: o.lease, epoch: time.Now(), quit: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.self.Store(newIdentity(o.NodeID))
	f.nodes.Store(int64(o.Nodes))
	set := o.Metrics
	f.m = fleetMetrics{
		downs:    set.GetOrCreateCounter("sipedge_fleet_redis_down_total"),
		errors:   make(map[string]*metrics.Counter, len(ops)),
		fenced:   set.GetOrCreateCounter("sipedge_fleet_fenced_total"),
		conflict: set.GetOrCreateCounter("sipedge_fleet_node_id_conflicts_total"),
	}
	for _, op := range ops {
		f.m.errors[op] = set.GetOrCreateCounter(`sipedge_fleet_redis_errors_total{op="` + op + `"}`)
	}
	if o.Redis != "" {
		set.GetOrCreateGauge("sipedge_fleet_redis_up", func() float64 {
			if f.up.Load() {
				return 1
			}
			return 0
		})
	}
	f.members.init(f)
	f.chans.init(f)
	f.state.init(f)
	f.journal.init(f)
	if o.Redis == "" {
		return f, nil
	}

	opt, err := redisurl.Options(o.Redis)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: cannot parse fleet.redis: %w", ErrInvalid, ErrRedisURL, err)
	}
	opt.Dialer.Timeout = time.Second // whatever the URL's dial_timeout: New waits no longer
	// A silent Redis would otherwise hold a pipelined connection for 10 s.
	opt.ConnWriteTimeout = time.Second
	c, err := rueidis.NewClient(opt)
	if err != nil {
		if err := redisurl.DBRefused(opt, err); err != nil {
			return nil, fmt.Errorf("%w: %w: %w", ErrInvalid, ErrRedisURL, err)
		}
		f.failed("heartbeat", err)
		f.wg.Add(1)
		go f.connect(opt)
	} else {
		f.client.Store(&redisClient{c})
		f.up.Store(true)
		if err := f.members.register(); errors.Is(err, ErrNodeIDTaken) {
			c.Close()
			return nil, err
		} else if err != nil {
			// Redis answered the dial, then not: the heartbeat registers
			// the node once it answers.
			f.log.Warn("fleet: cannot register the node yet", "node_id", o.NodeID, "error", err)
		}
	}
	f.wg.Add(5)
	go f.members.run()
	go f.chans.run()
	go f.journal.run()
	go f.journal.claimer()
	go f.state.run()
	return f, nil
}

// connect dials Redis every second until it answers: New's dial failed.
func (f *Fleet) connect(opt rueidis.ClientOption) {
	defer f.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	logged := false
	for {
		select {
		case <-f.quit:
			return
		case <-t.C:
		}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			if !logged {
				if err := redisurl.DBRefused(opt, err); err != nil {
					f.log.Error("fleet: redis refuses the URL's database", "error", err)
					logged = true
				}
			}
			continue
		}
		f.client.Store(&redisClient{c})
		f.members.wake()
		return
	}
}

var errNotConnected = errors.New("fleet: redis not connected")

// do runs fn against Redis with the deadline. It keeps the up/down state
// (each transition logged once) and counts failures by op.
func (f *Fleet) do(op string, fn func(ctx context.Context, c rueidis.Client) error) error {
	return f.doCtx(context.Background(), op, fn)
}

func (f *Fleet) doCtx(ctx context.Context, op string, fn func(ctx context.Context, c rueidis.Client) error) error {
	c := f.client.Load()
	if c == nil {
		return errNotConnected
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.Deadline)
	defer cancel()
	if err := fn(ctx, c.Client); err != nil {
		f.failed(op, err)
		return err
	}
	if f.up.CompareAndSwap(false, true) {
		f.log.Info("fleet: redis available, fleet-wide mode resumed", "node_id", f.o.NodeID)
	}
	return nil
}

// failed counts a failed Redis call and marks Redis down (logged once).
func (f *Fleet) failed(op string, err error) {
	f.m.errors[op].Inc()
	select {
	case <-f.quit:
		return // closing: not Redis' fault
	default:
	}
	if f.up.CompareAndSwap(true, false) || f.m.downs.Get() == 0 {
		f.m.downs.Inc()
		f.log.Warn("fleet: redis unavailable: channel limits fall back to the local share at lease end, shared state frozen",
			"node_id", f.o.NodeID, "op", op, "error", err)
	}
}

// Up reports whether the last Redis call succeeded. Always false without
// Redis.
func (f *Fleet) Up() bool { return f.up.Load() }

// NodeID is this node's id.
func (f *Fleet) NodeID() string { return f.o.NodeID }

// now is the loops' monotonic clock.
func (f *Fleet) now() time.Duration { return time.Since(f.epoch) }

// liveNodes is the fleet's size as last seen, at least 1.
func (f *Fleet) liveNodes() int64 { return max(f.nodes.Load(), 1) }

// Close stops the fleet's goroutines and leaves the fleet: it gives the
// channel grants back, writes the journal's last operations, and removes
// the node's registration. A journal that still holds calls (the owner
// did not end them) is left to be claimed by another node at once. Call
// it once, after the last Take, Answered and Ended.
func (f *Fleet) Close() {
	f.once.Do(func() {
		close(f.quit)
		f.cancel()
		f.wg.Wait()
		if f.client.Load() == nil {
			return
		}
		f.chans.leave()
		held := f.journal.leave()
		f.members.leave(held)
		f.client.Load().Close()
	})
}

// abandon stops the node as a kill -9 would, as far as Redis can tell: its
// goroutines stop and its connections close, with nothing given back.
func (f *Fleet) abandon() {
	f.once.Do(func() {
		close(f.quit)
		f.cancel()
		f.wg.Wait()
		if c := f.client.Load(); c != nil {
			c.Close()
		}
	})
}

// sleep waits d or until Close; it reports false on Close.
func (f *Fleet) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.quit:
		return false
	case <-t.C:
		return true
	}
}

// escapeLabel escapes a metric label value.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
