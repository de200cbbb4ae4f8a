package fleet

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Grants. For each limited key Redis holds, per node incarnation, the
// channels the node occupies (o), the channels it wants (d) and when that
// expires (a lease on Redis' clock). One script call decides, for each key
// a node asks about, the node's new grant g:
//
//	free = limit - Σ o of the other nodes (expired entries dropped first)
//	g    = min(want, free), cut to the max-min fair share of the limit
//	       among all the nodes' wants when they add up to more than it
//	o    = max(g, bound)
//
// where bound is the most calls the node can hold while the call is in
// flight: its cap in force or its calls up, whichever is more. The node
// takes only within its cap; it applies g when the reply comes. So o is
// always at least what the node can hold, and no grant counts on channels
// another node may hold: the sum of the o stays within the limit, and
// with it the calls up across the fleet (while every node renews in time;
// the package doc lists when the bound does not hold). A grant below the
// node's calls up is a cap the calls shed to as they end: nothing is cut.
//
// Each node runs a round every GrantInterval, and at once when a Take was
// refused or came near its cap; a round asks only about the keys that need
// it: more wanted than held, held more than wanted, a renewal due (a third
// of the lease), or a nudge. When the wants add up to more than a limit,
// the script publishes a nudge for the key (at most once a second), so
// that nodes holding spare channels give them back within a round or two.
//
// want is the calls up plus a spare: the Takes expected during the next
// two intervals, by a rate that rises at once and decays with a time
// constant of ten intervals, and at least the Takes just refused. A node keeps a spare
// of one channel, so that the first call after a quiet spell does not wait
// a round, only while the key is not scarce (the fleet has a free channel
// per node beyond what is wanted).

// grantScript decides grants for several keys of one node incarnation.
//
// A node that had an entry and finds none (Redis restarted empty, or
// failed over to a replica that missed writes) is told so ("fresh") and
// granted no more than its bound: the others may not have claimed their
// calls again yet.
//
// KEYS  ch:<key> per key
// ARGV  field (the incarnation), lease ms, live nodes, events channel;
// then per key: limit, want (-1: give the grant back), bound, had an
// entry (1 or 0)
// returns per key g·4 + fresh·2 + scarce
var grantScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local self, lease, nodes, events = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local r = {}
for k = 1, #KEYS do
  local key = KEYS[k]
  local a = 4 * k + 1
  local limit, want, bound, had = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
  if want < 0 then
    redis.call('HDEL', key, self)
    r[k] = 0
  else
    local h = redis.call('HGETALL', key)
    local occ, dem, ds, found = 0, 0, {}, false
    for i = 1, #h, 2 do
      if h[i] == self then
        found = true
      else
        local o, d, exp = string.match(h[i + 1], '^(%d+) (%d+) (%d+)$')
        if not o or tonumber(exp) <= now then
          redis.call('HDEL', key, h[i])
        else
          occ = occ + tonumber(o)
          dem = dem + tonumber(d)
          ds[#ds + 1] = tonumber(d)
        end
      end
    end
    local fresh = 0
    if had == '1' and not found then
      fresh = 1
      want = math.min(want, bound)
    end
    local cap = limit - occ
    local contended = dem + want > limit
    if contended then
      ds[#ds + 1] = want
      table.sort(ds)
      local rem, n = limit, #ds
      for i = 1, n do
        local share = rem / (n - i + 1)
        if ds[i] > share then
          cap = math.min(cap, math.ceil(share))
          break
        end
        rem = rem - ds[i]
      end
      if redis.call('SET', key .. ':nudge', '1', 'NX', 'PX', 1000) then
        redis.call('PUBLISH', events, 'g\n' .. key)
      end
    end
    local g = math.max(0, math.min(want, cap))
    local o = math.max(g, bound)
    redis.call('HSET', key, self, string.format('%d %d %d', o, want, now + lease))
    redis.call('PEXPIRE', key, 2 * lease)
    local scarce = 0
    if contended or limit - occ - o < nodes then scarce = 1 end
    r[k] = g * 4 + fresh * 2 + scarce
  end
end
return r
`)

// grantState is a Channel's state in the grant loop (only the loop's
// goroutine touches it).
type grantState struct {
	rate       float64       // Takes per second, rising at once, decaying slowly
	takes      uint32        // Channel.takes when rate was last updated
	last       time.Duration // when rate was last updated
	validUntil time.Duration // the grant's lease end, with a margin; 0: none yet
	renewAt    time.Duration
	scarce     bool
	local      bool          // at the failure mode's local share
	registered bool          // holds an entry in Redis
	settle     time.Duration // no growth before: the other nodes are claiming their calls again
}

// grantReq is one key of a round.
type grantReq struct {
	c                  *Channel
	limit, want, bound int64
	had                bool // the node holds an entry, as far as it knows
}

// run is the grant loop.
func (cs *channels) run() {
	f := cs.f
	defer f.wg.Done()
	t := time.NewTicker(f.o.GrantInterval)
	defer t.Stop()
	// Rounds are at least a fifth of the interval apart: a flood of
	// refused Takes wakes the loop at every one.
	spacing := f.o.GrantInterval / 5
	var reqs []grantReq
	var last time.Duration
	for {
		select {
		case <-f.quit:
			return
		case <-t.C:
		case <-cs.wakeCh:
		}
		if d := last + spacing - f.now(); d > 0 && !f.sleep(d) {
			return
		}
		reqs = cs.round(reqs[:0])
		last = f.now()
	}
}

// round asks Redis about the keys that need it, in one script call, and
// applies the grants; keys whose grant lapsed without a renewal go to the
// local share.
func (cs *channels) round(reqs []grantReq) []grantReq {
	f := cs.f
	now := f.now()
	for _, c := range *cs.list.Load() {
		if r, ok := cs.ask(c, now); ok {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) > 0 {
		sent := f.now()
		grants, err := cs.exec(reqs)
		if err == nil {
			for i, r := range reqs {
				cs.granted(r, grants[i], sent)
			}
		}
	}
	for _, c := range *cs.list.Load() {
		st := &c.st
		if c.limit.Load() > 0 && !st.local && now >= st.validUntil && (st.validUntil > 0 || !f.up.Load()) {
			// The grant lapsed unrenewed, or there never was one and
			// Redis is down: the failure mode's local share.
			st.local = true
			cs.localShare.Add(1)
			cs.setLocal(c)
			f.log.Warn("fleet: channel limit at the local share: its grant could not be renewed",
				"key", c.name, "share", c.cap.Load(), "limit", c.limit.Load(), "nodes", f.liveNodes())
		}
	}
	return reqs
}

// ask decides whether c needs a round, and with what.
func (cs *channels) ask(c *Channel, now time.Duration) (grantReq, bool) {
	f := cs.f
	st := &c.st
	limit := c.limit.Load()
	if limit <= 0 {
		if st.registered {
			return grantReq{c: c, want: -1}, true
		}
		return grantReq{}, false
	}
	u := c.inUse()
	t := c.takes()
	takes := t - st.takes // wraps
	st.takes = t
	refused := c.refused.Swap(0)
	if dt := now - st.last; dt > 0 {
		// Up at once; down with a time constant of ten intervals, so that
		// a burst's spare is given back within a second or two.
		inst := float64(takes) / dt.Seconds()
		st.rate = max(inst, st.rate*math.Exp(-float64(dt)/float64(10*f.o.GrantInterval)))
		st.last = now
	}
	// Rounded, not up: the decaying rate never reaches 0.
	spare := max(int64(math.Round(st.rate*2*f.o.GrantInterval.Seconds())), refused)
	if !st.scarce {
		spare = max(spare, 1)
	}
	want := min(u+spare, limit)
	cp := c.cap.Load()
	if st.local || now < st.settle {
		// Back from the failure mode, or Redis lost the grants: claim
		// what is held, grow once every node had a renewal to do so.
		want = min(want, max(cp, u))
	}
	_, nudged := cs.nudged.LoadAndDelete(c.rkey)
	need := !st.registered || st.local || nudged || refused > 0 || want > cp || now >= st.renewAt ||
		(want < cp && st.scarce)
	if !need {
		return grantReq{}, false
	}
	if want < cp && !st.local {
		// Shrink here first, so that the claim sent (bound) is already
		// the smaller one: a round, not two, gives the channels back.
		c.cap.Store(max(want, u))
		cp = c.cap.Load()
	}
	bound := max(cp, c.inUse())
	return grantReq{c: c, limit: limit, want: want, bound: bound, had: st.registered && !st.local}, true
}

// exec runs the grant script for reqs.
func (cs *channels) exec(reqs []grantReq) ([]int64, error) {
	f := cs.f
	self := f.self.Load()
	keys := make([]string, len(reqs))
	args := make([]string, 4, 4+4*len(reqs))
	args[0], args[1], args[2], args[3] = self.field, strconv.FormatInt(f.lease.Milliseconds(), 10),
		strconv.FormatInt(f.liveNodes(), 10), eventsChannel
	for i, r := range reqs {
		keys[i] = r.c.rkey
		had := "0"
		if r.had {
			had = "1"
		}
		args = append(args, strconv.FormatInt(r.limit, 10), strconv.FormatInt(r.want, 10), strconv.FormatInt(r.bound, 10), had)
	}
	var grants []int64
	err := f.do("grants", func(ctx context.Context, c rueidis.Client) error {
		var err error
		grants, err = grantScript.Exec(ctx, c, keys, args).AsIntSlice()
		return err
	})
	if err == nil && len(grants) != len(reqs) {
		err = fmt.Errorf("fleet: grant script returned %d grants for %d keys", len(grants), len(reqs))
		f.log.Error(err.Error())
	}
	return grants, err
}

// granted applies one key's reply, sent being when the call left.
func (cs *channels) granted(r grantReq, v int64, sent time.Duration) {
	c, st := r.c, &r.c.st
	if r.want < 0 {
		st.registered = false
		c.cap.Store(unlimited)
		c.low.Store(unlimited)
		return
	}
	g, fresh, scarce := v>>2, v&2 != 0, v&1 != 0
	cs.f.log.Debug("fleet: grant", "key", c.name, "want", r.want, "bound", r.bound, "grant", g, "fresh", fresh, "scarce", scarce, "in_use", c.inUse())
	st.registered = true
	st.scarce = scarce
	// The lease counts from when Redis ran the script, after sent: the
	// node gives up the grant before the fleet can hand it to another.
	st.validUntil = sent + cs.f.lease*9/10
	st.renewAt = sent + cs.f.lease/3
	settle := sent + cs.f.lease/3 + 2*cs.f.o.GrantInterval
	if st.local {
		st.local = false
		st.settle = settle
		cs.localShare.Add(-1)
		cs.f.log.Info("fleet: channel limit back to fleet-wide grants", "key", c.name, "grant", g)
	}
	if fresh {
		st.settle = settle
		cs.f.log.Warn("fleet: redis had lost this node's channel grant: claiming the calls up again", "key", c.name)
	}
	if c.limit.Load() <= 0 { // unlimited meanwhile: the next round gives it back
		return
	}
	c.cap.Store(g)
	// Wake the loop when the spare left is less than two intervals' Takes.
	spare := max(int64(math.Round(st.rate*2*cs.f.o.GrantInterval.Seconds())), 1)
	c.low.Store(max(g-spare, 1))
}

// nudge asks for a round about the key whose Redis key is rkey: another
// node wants more of it than there is.
func (cs *channels) nudge(rkey string) {
	cs.nudged.Store(rkey, struct{}{})
	cs.wake()
}

// leave gives every grant back, on Close.
func (cs *channels) leave() {
	var reqs []grantReq
	for _, c := range *cs.list.Load() {
		if c.st.registered {
			reqs = append(reqs, grantReq{c: c, want: -1})
		}
	}
	if len(reqs) == 0 {
		return
	}
	if _, err := cs.exec(reqs); err != nil {
		cs.f.log.Warn("fleet: cannot give the channel grants back: they expire with their lease", "error", err)
	}
}
