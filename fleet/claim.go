package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Claims. Every heartbeat reaps the nodes whose lease expired (their
// registration goes, a tombstone of their incarnation stays) and, on a
// node with the journal on, claims in the same script every journal whose
// owner is no longer a live incarnation: the journal becomes the
// claimer's, "lost". The script is atomic, so a journal has one owner at a
// time: exactly one node emits it. The claimer reads a batch, hands it to
// Options.OnLost and deletes it, checking at each step that it still owns
// the journal; a claimer that dies in between leaves the journal (with
// what it did not delete) to the next one: a batch handed to OnLost and
// not yet deleted is then emitted twice (a_call_id tells the two apart).

// reapScript reaps expired nodes and claims the journals of dead owners.
//
// KEYS  leases, journals
// ARGV  prefix, claimer ("" to claim nothing)
// returns journal, renewed ms pairs: the lost journals the claimer owns
var reapScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local P = ARGV[1]
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  local inc = redis.call('HGET', P .. ':node:' .. id, 'inc')
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', P .. ':node:' .. id)
  if inc then redis.call('SET', P .. ':dead:' .. id .. ':' .. inc, '1', 'PX', '` + tombstoneMS + `') end
end
local r = {}
if ARGV[2] == '' then return r end
local j = redis.call('HGETALL', KEYS[2])
for i = 1, #j, 2 do
  local field = j[i]
  local owner, renewed, state = string.match(j[i + 1], '^(%S+) (%d+) (%S+)$')
  if owner == ARGV[2] then
    if state == 'lost' then
      r[#r + 1] = field
      r[#r + 1] = renewed
    end
  elseif owner then
    local oid, oinc = string.match(owner, '^(.*):([^:]*)$')
    local live = redis.call('HGET', P .. ':node:' .. oid, 'inc') == oinc
    if not live then
      redis.call('HSET', KEYS[2], field, ARGV[2] .. ' ' .. renewed .. ' lost')
      r[#r + 1] = field
      r[#r + 1] = renewed
    end
  end
end
return r
`)

// takeScript reads a batch of a lost journal the claimer owns, or removes
// it when it is empty.
//
// KEYS  journals, journal:<field>
// ARGV  claimer, field, batch size
// returns {"gone"} (not the claimer's), {"done"} (emptied and removed),
// or {"ok", renewed ms, call id, call, ...}
var takeScript = rueidis.NewLuaScript(`
local idx = redis.call('HGET', KEYS[1], ARGV[2])
if not idx or string.match(idx, '^(%S+)') ~= ARGV[1] then return {'gone'} end
local got = redis.call('HRANDFIELD', KEYS[2], tonumber(ARGV[3]), 'WITHVALUES')
if #got == 0 then
  redis.call('HDEL', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[2])
  return {'done'}
end
local r = {'ok', string.match(idx, '^%S+ (%d+)')}
for i = 1, #got do r[#r + 1] = got[i] end
return r
`)

// ackScript deletes an emitted batch, if the claimer still owns the
// journal.
//
// KEYS  journals, journal:<field>
// ARGV  claimer, field, call ids...
var ackScript = rueidis.NewLuaScript(`
local idx = redis.call('HGET', KEYS[1], ARGV[2])
if not idx or string.match(idx, '^(%S+)') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[2], unpack(ARGV, 3))
return 1
`)

// lostJournal is a dead incarnation's journal this node claimed.
type lostJournal struct {
	field   string // "<id>:<inc>"
	renewed time.Time
}

// claimBatch is how many calls a claimer reads at a time.
const claimBatch = 64

// reap runs the reap script (heartbeat goroutine) and hands the lost
// journals this node owns to the claimer.
func (j *Journal) reap() {
	f := j.f
	claimer := ""
	if j.on {
		claimer = f.self.Load().field
	}
	var reply []string
	err := f.do("claim", func(ctx context.Context, c rueidis.Client) error {
		var err error
		reply, err = reapScript.Exec(ctx, c, []string{prefix + ":leases", prefix + ":journals"}, []string{prefix, claimer}).AsStrSlice()
		return err
	})
	if err != nil || len(reply) == 0 {
		return
	}
	lost := make([]lostJournal, 0, len(reply)/2)
	for i := 0; i+1 < len(reply); i += 2 {
		ms, _ := strconv.ParseInt(reply[i+1], 10, 64)
		lost = append(lost, lostJournal{field: reply[i], renewed: time.UnixMilli(ms)})
	}
	j.claimMu.Lock()
	j.toClaim = lost
	j.claimMu.Unlock()
	select {
	case j.claimCh <- struct{}{}:
	default:
	}
}

// claimer is the goroutine that emits the lost journals this node owns.
func (j *Journal) claimer() {
	f := j.f
	defer f.wg.Done()
	for {
		select {
		case <-f.quit:
			return
		case <-j.claimCh:
		}
		j.claimMu.Lock()
		lost := j.toClaim
		j.toClaim = nil
		j.claimMu.Unlock()
		for _, l := range lost {
			if err := j.emit(l); err != nil {
				f.log.Warn("fleet: cannot finish a lost journal: the next heartbeat takes it up again", "journal", l.field, "error", err)
			}
		}
	}
}

// emit hands a lost journal's calls to OnLost, a batch at a time.
func (j *Journal) emit(l lostJournal) error {
	f := j.f
	self := f.self.Load().field
	node, _, _ := strings.Cut(l.field, ":")
	keys := []string{prefix + ":journals", prefix + ":journal:" + l.field}
	first := true
	for {
		select {
		case <-f.quit:
			return nil
		default:
		}
		var reply []string
		err := f.do("claim", func(ctx context.Context, c rueidis.Client) error {
			var err error
			reply, err = takeScript.Exec(ctx, c, keys, []string{self, l.field, strconv.Itoa(claimBatch)}).AsStrSlice()
			return err
		})
		if err != nil {
			return err
		}
		if len(reply) == 0 {
			return fmt.Errorf("fleet: empty reply reading a lost journal")
		}
		switch reply[0] {
		case "gone":
			return nil
		case "done":
			if !first {
				f.log.Info("fleet: lost journal emitted", "node", node, "journal", l.field)
			}
			return nil
		}
		if first {
			j.m.claimed.Inc()
			f.log.Warn("fleet: a node died with calls up: writing them as lost", "node", node, "journal", l.field, "last_renewal", l.renewed)
			first = false
		}
		ms, _ := strconv.ParseInt(reply[1], 10, 64)
		end := time.UnixMilli(ms)
		var batch []LostCall
		ids := make([]string, 0, (len(reply)-2)/2)
		for i := 2; i+1 < len(reply); i += 2 {
			ids = append(ids, reply[i])
			c, err := decodeCall([]byte(reply[i+1]))
			if err != nil {
				j.m.bad.Inc()
				f.log.Error("fleet: unreadable journal record, dropped", "journal", l.field, "call", reply[i], "error", err)
				continue
			}
			batch = append(batch, LostCall{Call: c, Node: node, End: end})
		}
		if len(batch) > 0 {
			f.o.OnLost(batch)
			j.m.lost.Add(len(batch))
		}
		var owned int64
		err = f.do("claim", func(ctx context.Context, c rueidis.Client) error {
			var err error
			owned, err = ackScript.Exec(ctx, c, keys, append([]string{self, l.field}, ids...)).AsInt64()
			return err
		})
		if err != nil {
			return err
		}
		if owned == 0 {
			return nil
		}
	}
}
