package fleet

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
)

// Membership. A node registers under its id with a lease on Redis' clock
// and renews it every third of the lease (the heartbeat, which also says
// how many calls the node holds). The live nodes are the leases not
// expired. A node whose lease expired is reaped by the next heartbeat of
// any node: its registration goes and a tombstone of its incarnation is
// left, so that, should the process come back (a pause, a partition), its
// next heartbeat learns that the fleet declared it dead (fenced) and it
// starts a new incarnation.
//
// Keys (see prefix):
//
//	{sipedge:fleet}:leases            ZSET node id -> lease end, ms on Redis' clock
//	{sipedge:fleet}:node:<id>         HASH inc, sip, beat, calls, started, lease
//	{sipedge:fleet}:dead:<id>:<inc>   a reaped incarnation's tombstone (a day)

// tombstoneMS is how long a reaped incarnation's tombstone is kept: longer
// than any process pause that could end with a heartbeat.
const tombstoneMS = "86400000"

// beatScript registers or renews an incarnation. It refuses ("taken") an
// id held by another incarnation whose lease has not expired, and says
// "fenced" to an incarnation the fleet reaped. Over an expired other
// incarnation (a node that died and restarted under its id) it writes a
// tombstone for the old one, whose journal the reaper claims.
//
// KEYS  leases, node:<id>, dead:<id>:<inc>
// ARGV  id, inc, sip, lease ms, calls, started ms, prefix
// returns {"ok", now ms} | {"fenced"} | {"taken", sip, beat age ms, lease left ms}
var beatScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[3]) == 1 then return {'fenced'} end
local cur = redis.call('HGET', KEYS[2], 'inc')
if cur and cur ~= ARGV[2] then
  local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
  if exp > now then
    local h = redis.call('HMGET', KEYS[2], 'sip', 'beat')
    return {'taken', h[1] or '', tostring(now - tonumber(h[2] or now)), tostring(exp - now)}
  end
  redis.call('SET', ARGV[7] .. ':dead:' .. ARGV[1] .. ':' .. cur, '1', 'PX', '` + tombstoneMS + `')
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('HSET', KEYS[2], 'inc', ARGV[2], 'sip', ARGV[3], 'beat', now, 'calls', ARGV[5], 'started', ARGV[6], 'lease', ARGV[4])
return {'ok', tostring(now)}
`)

// nodesScript lists the live nodes.
//
// KEYS  leases
// ARGV  prefix
// returns now ms, then per node: id, inc, sip, beat, calls, started
var nodesScript = rueidis.NewLuaScriptReadOnly(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
local r = {tostring(now)}
for _, id in ipairs(ids) do
  local h = redis.call('HMGET', ARGV[1] .. ':node:' .. id, 'inc', 'sip', 'beat', 'calls', 'started')
  r[#r + 1] = id
  for i = 1, 5 do r[#r + 1] = h[i] or '' end
end
return r
`)

// leaveScript removes an incarnation's registration (a clean exit), or,
// when its journal still holds calls, ends its lease now so that the next
// heartbeat of another node reaps it and claims the journal.
//
// KEYS  leases, node:<id>
// ARGV  id, inc, "1" to keep the journal for a claim
var leaveScript = rueidis.NewLuaScript(`
if redis.call('HGET', KEYS[2], 'inc') ~= ARGV[2] then return 0 end
if ARGV[3] == '1' then
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[1], tonumber(t[1]) * 1000 - 1, ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
`)

// Node is a live node of the fleet, as GET /v1/fleet shows it.
type Node struct {
	ID            string    `json:"id"`
	SIPAddr       string    `json:"sip_address"`
	Started       time.Time `json:"started"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Calls         int64     `json:"calls"`
	Self          bool      `json:"self"`
}

type members struct {
	f       *Fleet
	started time.Time
	wakeCh  chan struct{}

	mu     sync.Mutex // guards gauges
	gauges map[string]*atomic.Int64
	set    *metrics.Set

	takenLogged bool // heartbeat goroutine only
}

func (m *members) init(f *Fleet) {
	m.f = f
	m.started = time.Now()
	m.wakeCh = make(chan struct{}, 1)
	m.gauges = make(map[string]*atomic.Int64)
	m.set = f.o.Metrics
	f.o.Metrics.GetOrCreateGauge("sipedge_fleet_nodes", func() float64 { return float64(f.liveNodes()) })
	m.gauge(f.o.NodeID)
}

// gauge returns the calls gauge of node id, creating it.
func (m *members) gauge(id string) *atomic.Int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gauges[id]
	if g == nil {
		g = new(atomic.Int64)
		m.gauges[id] = g
		calls := m.f.o.Calls
		if id == m.f.o.NodeID { // this node's, live
			m.set.GetOrCreateGauge(nodeCallsName(id), func() float64 { return float64(calls()) })
		} else {
			m.set.GetOrCreateGauge(nodeCallsName(id), func() float64 { return float64(g.Load()) })
		}
	}
	return g
}

func nodeCallsName(id string) string {
	return `sipedge_fleet_node_calls{node="` + escapeLabel(id) + `"}`
}

// wake runs a heartbeat now.
func (m *members) wake() {
	select {
	case m.wakeCh <- struct{}{}:
	default:
	}
}

// register is the first heartbeat, New's: ErrNodeIDTaken when a live
// node holds the id.
func (m *members) register() error {
	status, err := m.beat()
	if err != nil {
		return err
	}
	if status != "" {
		return fmt.Errorf("%w: %s", ErrNodeIDTaken, status)
	}
	return nil
}

// beat renews this node's registration. It returns a description of the
// live node that holds the id when the registration was refused. A fenced
// incarnation is replaced by a new one, registered at once.
func (m *members) beat() (taken string, err error) {
	f := m.f
	for range 2 {
		self := f.self.Load()
		var reply []string
		err = f.do("heartbeat", func(ctx context.Context, c rueidis.Client) error {
			var err error
			reply, err = beatScript.Exec(ctx, c,
				[]string{prefix + ":leases", prefix + ":node:" + self.id, prefix + ":dead:" + self.field},
				[]string{self.id, self.inc, f.o.SIPAddr, strconv.FormatInt(f.lease.Milliseconds(), 10),
					strconv.FormatInt(f.o.Calls(), 10), strconv.FormatInt(m.started.UnixMilli(), 10), prefix}).AsStrSlice()
			return err
		})
		if err != nil {
			return "", err
		}
		switch {
		case len(reply) > 0 && reply[0] == "ok":
			return "", nil
		case len(reply) == 4 && reply[0] == "taken":
			age, _ := strconv.ParseInt(reply[2], 10, 64)
			left, _ := strconv.ParseInt(reply[3], 10, 64)
			return fmt.Sprintf("node id %q is held by a live node (sip %q, last heartbeat %v ago, lease ends in %v): give each node its own fleet.node_id, or wait for the lease to end",
				f.o.NodeID, reply[1], time.Duration(age)*time.Millisecond, time.Duration(left)*time.Millisecond), nil
		case len(reply) > 0 && reply[0] == "fenced":
			m.fenced(self)
			continue
		}
		return "", fmt.Errorf("fleet: unexpected heartbeat reply %q", reply)
	}
	return "", fmt.Errorf("fleet: fenced twice in a row")
}

// fenced starts a new incarnation: the fleet declared old dead (its lease
// expired while the process ran on, cut off or paused) and gave its
// channels and journal away. The journal rewrites its calls under the new
// one; the calls it held were written as lost by another node too.
func (m *members) fenced(old *identity) {
	f := m.f
	next := newIdentity(old.id)
	if !f.self.CompareAndSwap(old, next) {
		return // another goroutine saw it first
	}
	f.m.fenced.Inc()
	f.log.Error("fleet: this node outlived its lease and was declared dead: the calls it journalled got node_lost CDRs from another node; continuing as a new incarnation",
		"node_id", old.id, "old", old.inc, "new", next.inc)
	f.journal.resync()
}

// run is the heartbeat goroutine: every third of the lease it renews the
// registration, reads the live nodes (for the gauges and the failure
// mode's share) and reaps expired nodes, claiming their journals.
func (m *members) run() {
	f := m.f
	defer f.wg.Done()
	every := f.lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		taken, err := m.beat()
		switch {
		case err == nil && taken != "":
			f.m.conflict.Inc()
			if !m.takenLogged {
				f.log.Error("fleet: cannot register: "+taken, "node_id", f.o.NodeID)
				m.takenLogged = true
			}
		case err == nil:
			m.takenLogged = false
		}
		if err == nil {
			if nodes, err := m.list(); err == nil {
				m.publish(nodes)
			}
			f.journal.reap()
		}
		select {
		case <-f.quit:
			return
		case <-t.C:
		case <-m.wakeCh:
		}
	}
}

// Nodes returns the live nodes, this one included (Self), ordered by id.
// It asks Redis (for at most the deadline): do not call it on a shard.
// Without Redis it returns this node alone.
func (f *Fleet) Nodes(ctx context.Context) ([]Node, error) {
	if f.o.Redis == "" {
		return []Node{{ID: f.o.NodeID, SIPAddr: f.o.SIPAddr, Started: f.members.started,
			LastHeartbeat: time.Now(), Calls: f.o.Calls(), Self: true}}, nil
	}
	nodes, err := f.members.listCtx(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nodes, nil
}

func (m *members) list() ([]Node, error) { return m.listCtx(context.Background()) }

func (m *members) listCtx(ctx context.Context) ([]Node, error) {
	f := m.f
	var reply []string
	err := f.doCtx(ctx, "heartbeat", func(ctx context.Context, c rueidis.Client) error {
		var err error
		reply, err = nodesScript.Exec(ctx, c, []string{prefix + ":leases"}, []string{prefix}).AsStrSlice()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(reply) < 1 || (len(reply)-1)%6 != 0 {
		return nil, fmt.Errorf("fleet: unexpected node list %q", reply)
	}
	self := f.self.Load()
	nodes := make([]Node, 0, (len(reply)-1)/6)
	for i := 1; i < len(reply); i += 6 {
		r := reply[i : i+6]
		beat, _ := strconv.ParseInt(r[3], 10, 64)
		calls, _ := strconv.ParseInt(r[4], 10, 64)
		started, _ := strconv.ParseInt(r[5], 10, 64)
		nodes = append(nodes, Node{ID: r[0], SIPAddr: r[2], Started: time.UnixMilli(started),
			LastHeartbeat: time.UnixMilli(beat), Calls: calls, Self: r[0] == self.id && r[1] == self.inc})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, nil
}

// publish updates the node count and the per-node calls gauges; a node
// gone loses its gauge.
func (m *members) publish(nodes []Node) {
	m.f.nodes.Store(int64(len(nodes)))
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n.ID] = true
		m.gauge(n.ID).Store(n.Calls)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.gauges {
		if !live[id] && id != m.f.o.NodeID {
			delete(m.gauges, id)
			m.set.UnregisterMetric(nodeCallsName(id))
		}
	}
}

// leave removes the registration on Close; keep leaves it to expire at
// once, for a journal that still holds calls.
func (m *members) leave(keep bool) {
	f := m.f
	self := f.self.Load()
	k := "0"
	if keep {
		k = "1"
	}
	err := f.do("heartbeat", func(ctx context.Context, c rueidis.Client) error {
		return leaveScript.Exec(ctx, c, []string{prefix + ":leases", prefix + ":node:" + self.id},
			[]string{self.id, self.inc, k}).Error()
	})
	if err != nil {
		f.log.Warn("fleet: cannot leave the fleet: the registration expires with its lease", "node_id", self.id, "error", err)
	}
}
