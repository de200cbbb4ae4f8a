package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
)

// The shared state: documents by kind and name, each with a version drawn
// from one fleet-wide counter, so that versions order every change. A
// write is one script call that stores the document, bumps the kind's
// version and publishes the change (document included) on the events
// channel. Every node applies what it is told, in version order per
// document, and also reads the kinds' versions every PollInterval: a kind
// whose version moved past what the node saw is read whole (a snapshot)
// and compared, so that a notification lost (Pub/Sub delivers at most
// once, and nothing while a node reconnects) costs at most a poll.
//
// Keys:
//
//	{sipedge:fleet}:state:version   the version counter
//	{sipedge:fleet}:state:kinds     HASH kind -> version of its last change
//	{sipedge:fleet}:doc:<kind>      HASH name -> "<version>\n<document>"

// putScript stores a document, if its version is the expected one.
//
// KEYS  doc:<kind>, state:version, state:kinds, state:epoch
// ARGV  kind, name, document, expected version (-1: any, 0: absent), events
// channel, an epoch for a Redis that has none
// returns {version, previous version}; {-1, current version} when not the expected one
var putScript = rueidis.NewLuaScript(`
redis.call('SET', KEYS[4], ARGV[6], 'NX')
local cur = redis.call('HGET', KEYS[1], ARGV[2])
local curv = 0
if cur then curv = tonumber(string.match(cur, '^(%d+)\n')) end
local want = tonumber(ARGV[4])
if want >= 0 and want ~= curv then return {-1, curv} end
local v = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[2], v .. '\n' .. ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], v)
redis.call('PUBLISH', ARGV[5], 's\n' .. v .. '\n' .. ARGV[1] .. '\n' .. ARGV[2] .. '\n' .. ARGV[3])
return {v, curv}
`)

// deleteScript removes a document.
//
// KEYS  doc:<kind>, state:version, state:kinds, state:epoch
// ARGV  kind, name, events channel, an epoch for a Redis that has none
// returns {version, previous version}; {0, 0} when there was none
var deleteScript = rueidis.NewLuaScript(`
redis.call('SET', KEYS[4], ARGV[4], 'NX')
local cur = redis.call('HGET', KEYS[1], ARGV[2])
if not cur then return {0, 0} end
local curv = tonumber(string.match(cur, '^(%d+)\n'))
local v = redis.call('INCR', KEYS[2])
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], v)
redis.call('PUBLISH', ARGV[3], 'd\n' .. v .. '\n' .. ARGV[1] .. '\n' .. ARGV[2])
return {v, curv}
`)

// snapshotScript reads a kind whole, with its version, atomically.
//
// KEYS  doc:<kind>, state:kinds
// ARGV  kind
// returns kind version, then name, "<version>\n<document>" pairs
var snapshotScript = rueidis.NewLuaScriptReadOnly(`
local r = {redis.call('HGET', KEYS[2], ARGV[1]) or '0'}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h do r[#r + 1] = h[i] end
return r
`)

// Change is a document added, replaced or removed.
type Change struct {
	Kind, Name string
	// Doc is the document (the owner's JSON); nil when it was removed.
	Doc []byte
	// Version orders the changes of the fleet: a later change has a
	// higher one.
	Version int64
	// Previous is the version the change replaced, 0 when the document
	// was new (Put and Delete only).
	Previous int64
}

// MaxDocBytes bounds a document in Redis: each goes whole into a
// notification on Pub/Sub, whose subscribers Redis cuts off past its
// output buffer limit (8 MB over a minute by default). Without Redis there
// is no bound.
const MaxDocBytes = 1 << 20

type docKey struct{ kind, name string }

type docEntry struct {
	version int64
	doc     []byte // nil: removed (a tombstone, so that an older write is not applied after it)
}

type store struct {
	f *Fleet

	mu        sync.Mutex // serialises the applies; guards the fields below
	apply     func(Change) error
	following bool
	docs      map[docKey]docEntry
	kinds     map[string]int64 // the version of each kind at its last snapshot
	version   int64            // without Redis: the version counter
	drops     int64            // the decision drops last seen; -1: not known yet
	epoch     string           // Redis' epoch, as last seen
	reseeding bool             // documents not written back yet after Redis lost the state

	events  chan string // notifications, from the subscriber to run
	resnap  chan struct{}
	applied *metrics.Counter
	failed  *metrics.Counter
	dropsM  *metrics.Counter
	lostM   *metrics.Counter
}

func (s *store) init(f *Fleet) {
	s.f = f
	s.docs = make(map[docKey]docEntry)
	s.kinds = make(map[string]int64)
	s.drops = -1
	s.events = make(chan string, 1024)
	s.resnap = make(chan struct{}, 1)
	s.applied = f.o.Metrics.GetOrCreateCounter("sipedge_fleet_state_applied_total")
	s.failed = f.o.Metrics.GetOrCreateCounter("sipedge_fleet_state_apply_errors_total")
	s.dropsM = f.o.Metrics.GetOrCreateCounter("sipedge_fleet_decision_drops_total")
	s.lostM = f.o.Metrics.GetOrCreateCounter("sipedge_fleet_state_lost_total")
}

// checkDoc checks a kind and a name: they go into keys and notifications.
func checkDoc(kind, name string) error {
	if kind == "" || len(kind) > 64 || strings.Trim(kind, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return fmt.Errorf("%w: kind %q: want 1 to 64 of a-z, 0-9 and _", ErrInvalid, kind)
	}
	if name == "" || len(name) > 256 || strings.ContainsAny(name, "\n") {
		return fmt.Errorf("%w: name %q: want 1 to 256 bytes without a newline", ErrInvalid, name)
	}
	return nil
}

// Follow makes apply the receiver of the shared state: it is called with
// every document there is now, before Follow returns, and then with every
// change any node makes (this one's Puts included), within a second. It
// is called on one goroutine at a time, never a shard, in version order
// for each document; it must not call Put or Delete. An error it returns
// is logged and counted: the fleet does not retry (the document stays
// stored, and the next change of it comes again).
//
// Call Follow once. When Redis does not answer it returns the error, and
// the state is read as soon as it does.
func (f *Fleet) Follow(apply func(Change) error) error {
	s := &f.state
	s.mu.Lock()
	s.apply = apply
	s.following = true
	if f.o.Redis == "" {
		for _, k := range s.sorted() {
			e := s.docs[k]
			if e.doc != nil {
				s.call(Change{Kind: k.kind, Name: k.name, Doc: e.doc, Version: e.version})
			}
		}
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if err := s.catchUp(context.Background()); err != nil {
		return fmt.Errorf("%w: cannot read the shared state: %w", ErrUnavailable, err)
	}
	return nil
}

// Put stores doc as the document name of kind, for every node, and
// applies it on this node before it returns (an apply error is returned
// wrapped in ErrApply: the document is stored all the same). Without Redis
// it only applies. It blocks for up to the deadline: call it from an admin
// goroutine, not a shard.
func (f *Fleet) Put(ctx context.Context, kind, name string, doc []byte) (Change, error) {
	return f.put(ctx, kind, name, doc, -1)
}

// PutIf is Put when the document's version is still version (0: when
// there is none); otherwise it changes nothing and returns ErrVersion.
func (f *Fleet) PutIf(ctx context.Context, kind, name string, doc []byte, version int64) (Change, error) {
	return f.put(ctx, kind, name, doc, max(version, 0))
}

func (f *Fleet) put(ctx context.Context, kind, name string, doc []byte, want int64) (Change, error) {
	if err := checkDoc(kind, name); err != nil {
		return Change{}, err
	}
	if len(doc) > MaxDocBytes && f.o.Redis != "" {
		return Change{}, fmt.Errorf("%w: document %s/%s: %d bytes, at most %d", ErrInvalid, kind, name, len(doc), MaxDocBytes)
	}
	if doc == nil {
		doc = []byte{}
	}
	s := &f.state
	if f.o.Redis == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		prev := s.docs[docKey{kind, name}]
		if prev.doc == nil {
			prev.version = 0
		}
		if want >= 0 && want != prev.version {
			return Change{}, fmt.Errorf("%w: %s/%s is at version %d, not %d", ErrVersion, kind, name, prev.version, want)
		}
		s.version++
		ch := Change{Kind: kind, Name: name, Doc: doc, Version: s.version, Previous: prev.version}
		return ch, s.applyPut(ch)
	}
	var v []int64
	err := f.doCtx(ctx, "state", func(ctx context.Context, c rueidis.Client) error {
		var err error
		v, err = putScript.Exec(ctx, c, []string{prefix + ":doc:" + kind, prefix + ":state:version", prefix + ":state:kinds", prefix + ":state:epoch"},
			[]string{kind, name, string(doc), strconv.FormatInt(want, 10), eventsChannel, newEpoch()}).AsIntSlice()
		return err
	})
	if err != nil {
		return Change{}, fmt.Errorf("%w: cannot store %s/%s: %w", ErrUnavailable, kind, name, err)
	}
	if len(v) != 2 {
		return Change{}, fmt.Errorf("fleet: unexpected reply %v", v)
	}
	if v[0] < 0 {
		return Change{}, fmt.Errorf("%w: %s/%s is at version %d, not %d", ErrVersion, kind, name, v[1], want)
	}
	ch := Change{Kind: kind, Name: name, Doc: doc, Version: v[0], Previous: v[1]}
	s.mu.Lock()
	defer s.mu.Unlock()
	return ch, s.applyPut(ch)
}

// Delete removes the document name of kind for every node, and from this
// node before it returns. It reports false when there was none.
func (f *Fleet) Delete(ctx context.Context, kind, name string) (Change, bool, error) {
	if err := checkDoc(kind, name); err != nil {
		return Change{}, false, err
	}
	s := &f.state
	if f.o.Redis == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		prev := s.docs[docKey{kind, name}]
		if prev.doc == nil {
			return Change{}, false, nil
		}
		s.version++
		ch := Change{Kind: kind, Name: name, Version: s.version, Previous: prev.version}
		return ch, true, s.applyDelete(ch)
	}
	var v []int64
	err := f.doCtx(ctx, "state", func(ctx context.Context, c rueidis.Client) error {
		var err error
		v, err = deleteScript.Exec(ctx, c, []string{prefix + ":doc:" + kind, prefix + ":state:version", prefix + ":state:kinds", prefix + ":state:epoch"},
			[]string{kind, name, eventsChannel, newEpoch()}).AsIntSlice()
		return err
	})
	if err != nil {
		return Change{}, false, fmt.Errorf("%w: cannot delete %s/%s: %w", ErrUnavailable, kind, name, err)
	}
	if len(v) != 2 {
		return Change{}, false, fmt.Errorf("fleet: unexpected reply %v", v)
	}
	if v[0] == 0 {
		return Change{}, false, nil
	}
	ch := Change{Kind: kind, Name: name, Version: v[0], Previous: v[1]}
	s.mu.Lock()
	defer s.mu.Unlock()
	return ch, true, s.applyDelete(ch)
}

// Get returns the document name of kind as this node applied it.
func (f *Fleet) Get(kind, name string) (Change, bool) {
	s := &f.state
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.docs[docKey{kind, name}]
	if e.doc == nil {
		return Change{}, false
	}
	return Change{Kind: kind, Name: name, Doc: e.doc, Version: e.version}, true
}

// List returns the documents of kind as this node applied them, by name.
func (f *Fleet) List(kind string) []Change {
	s := &f.state
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Change
	for _, k := range s.sorted() {
		if e := s.docs[k]; k.kind == kind && e.doc != nil {
			out = append(out, Change{Kind: kind, Name: k.name, Doc: e.doc, Version: e.version})
		}
	}
	return out
}

// sorted returns the documents' keys in order. Call with mu held.
func (s *store) sorted() []docKey {
	keys := make([]docKey, 0, len(s.docs))
	for k := range s.docs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].name < keys[j].name
	})
	return keys
}

// applyPut applies a stored document newer than what this node has. Call
// with mu held.
func (s *store) applyPut(ch Change) error {
	k := docKey{ch.Kind, ch.Name}
	if e, ok := s.docs[k]; ok && ch.Version <= e.version {
		return nil
	}
	s.docs[k] = docEntry{version: ch.Version, doc: ch.Doc}
	return s.call(ch)
}

// applyDelete applies a removal newer than what this node has. Call with
// mu held.
func (s *store) applyDelete(ch Change) error {
	k := docKey{ch.Kind, ch.Name}
	e, ok := s.docs[k]
	if ok && ch.Version <= e.version {
		return nil
	}
	s.docs[k] = docEntry{version: ch.Version}
	if !ok || e.doc == nil {
		return nil
	}
	ch.Doc = nil
	return s.call(ch)
}

// call hands ch to the owner, when it follows. Call with mu held.
func (s *store) call(ch Change) error {
	if !s.following {
		return nil
	}
	s.applied.Inc()
	if err := s.apply(ch); err != nil {
		s.failed.Inc()
		s.f.log.Error("fleet: cannot apply a shared document", "kind", ch.Kind, "name", ch.Name, "version", ch.Version, "error", err)
		return fmt.Errorf("%w %s/%s: %w", ErrApply, ch.Kind, ch.Name, err)
	}
	return nil
}

// applySnapshot applies a kind read whole at version kv: documents newer
// than this node's, and removals of the documents it has that are gone.
func (s *store) applySnapshot(kind string, kv int64, docs map[string]docEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.following {
		return
	}
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := docs[name]
		s.applyPut(Change{Kind: kind, Name: name, Doc: e.doc, Version: e.version})
	}
	for _, k := range s.sorted() {
		e := s.docs[k]
		if k.kind != kind || e.doc == nil {
			continue
		}
		if _, ok := docs[k.name]; !ok && kv > e.version {
			// Removed after the version this node has: the removal's own
			// version is between the two; kv orders it after both.
			s.applyDelete(Change{Kind: kind, Name: k.name, Version: kv})
		}
	}
	s.kinds[kind] = max(s.kinds[kind], kv)
}

// catchUp reads every kind whose version moved past the one this node
// saw, and applies it.
func (s *store) catchUp(ctx context.Context) error {
	f := s.f
	var kinds map[string]int64
	var drops int64
	var epoch string
	err := f.doCtx(ctx, "poll", func(ctx context.Context, c rueidis.Client) error {
		// The epoch is set by the first node to ask (or write): a Redis
		// that lost the state has none, or another.
		res := c.DoMulti(ctx, c.B().Set().Key(prefix+":state:epoch").Value(newEpoch()).Nx().Build(),
			c.B().Hgetall().Key(prefix+":state:kinds").Build(), c.B().Get().Key(prefix+":lcr:drops").Build(),
			c.B().Get().Key(prefix+":state:epoch").Build())
		var err error
		if kinds, err = res[1].AsIntMap(); err != nil {
			return err
		}
		if drops, err = res[2].AsInt64(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		epoch, err = res[3].ToString()
		return err
	})
	if err != nil {
		return err
	}
	lost := s.lost(epoch)
	if lost {
		s.dropsM.Inc()
		if cb := f.o.OnDropDecisions; cb != nil {
			cb("") // drops may have been missed with the count
		}
	}
	s.mu.Lock()
	again := s.reseeding
	s.mu.Unlock()
	if lost || again {
		// Until every document is written back: a write that failed (a
		// connection Redis' restart broke) is tried again at the next poll.
		done := s.reseed(ctx)
		s.mu.Lock()
		s.reseeding = !done
		s.mu.Unlock()
	}
	s.dropped(drops, "", false)
	s.mu.Lock()
	following, seen := s.following, make(map[string]int64, len(s.kinds))
	for k, v := range s.kinds {
		seen[k] = v
	}
	s.mu.Unlock()
	if !following {
		return nil
	}
	names := make([]string, 0, len(kinds))
	for kind := range kinds {
		names = append(names, kind)
	}
	sort.Strings(names)
	for _, kind := range names {
		if kinds[kind] <= seen[kind] {
			continue
		}
		if err := s.snapshot(ctx, kind); err != nil {
			return err
		}
	}
	return nil
}

// newEpoch returns a fresh epoch, for a Redis that has none: a new one
// each time, so that no node mistakes a new epoch for the one it knew.
func newEpoch() string { return strconv.FormatUint(rand.Uint64(), 36) }

// lost reports whether Redis lost the shared state (restarted without
// persistence, or failed over to a replica that missed writes): its epoch,
// set by the first node to read or write the state, changed. The node
// then forgets the
// versions it has (keeping the documents), so that new writes apply, and
// the count of decision drops.
func (s *store) lost(epoch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch == s.epoch || s.epoch == "" {
		s.epoch = epoch
		return false
	}
	s.epoch = epoch
	s.drops = -1
	s.lostM.Inc()
	s.f.log.Error("fleet: redis lost the shared state: this node writes back the documents it applied", "documents", len(s.docs))
	for k, e := range s.docs {
		if e.doc == nil {
			delete(s.docs, k)
			continue
		}
		s.docs[k] = docEntry{doc: e.doc}
	}
	clear(s.kinds)
	return true
}

// reseed writes back the documents this node has where Redis has none (the
// first node to do so wins; the others then get its version). It reports
// whether every write was done or found the document there.
func (s *store) reseed(ctx context.Context) bool {
	s.mu.Lock()
	var docs []Change
	for _, k := range s.sorted() {
		if e := s.docs[k]; e.doc != nil { // not a removal's tombstone
			docs = append(docs, Change{Kind: k.kind, Name: k.name, Doc: e.doc})
		}
	}
	s.mu.Unlock()
	done := true
	for _, d := range docs {
		if _, err := s.f.PutIf(ctx, d.Kind, d.Name, d.Doc, 0); err != nil && !errors.Is(err, ErrVersion) {
			s.f.log.Warn("fleet: cannot write back a shared document: trying again at the next poll", "kind", d.Kind, "name", d.Name, "error", err)
			done = false
		}
	}
	return done
}

// snapshot reads kind whole and applies it.
func (s *store) snapshot(ctx context.Context, kind string) error {
	var reply []string
	err := s.f.doCtx(ctx, "poll", func(ctx context.Context, c rueidis.Client) error {
		var err error
		reply, err = snapshotScript.Exec(ctx, c, []string{prefix + ":doc:" + kind, prefix + ":state:kinds"}, []string{kind}).AsStrSlice()
		return err
	})
	if err != nil {
		return err
	}
	if len(reply)%2 != 1 {
		return fmt.Errorf("fleet: unexpected snapshot of %q", kind)
	}
	kv, _ := strconv.ParseInt(reply[0], 10, 64)
	docs := make(map[string]docEntry, len(reply)/2)
	for i := 1; i < len(reply); i += 2 {
		vs, doc, ok := strings.Cut(reply[i+1], "\n")
		v, err := strconv.ParseInt(vs, 10, 64)
		if !ok || err != nil {
			s.f.log.Error("fleet: malformed shared document, skipped", "kind", kind, "name", reply[i])
			continue
		}
		docs[reply[i]] = docEntry{version: v, doc: []byte(doc)}
	}
	s.applySnapshot(kind, kv, docs)
	return nil
}

// run is the state goroutine: it applies the notifications the
// subscriber hands it, and polls.
func (s *store) run() {
	f := s.f
	defer f.wg.Done()
	if !f.o.noSubscribe {
		f.wg.Add(1)
		go s.subscribe()
	}
	t := time.NewTicker(f.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-f.quit:
			return
		case msg := <-s.events:
			s.handle(msg)
		case <-s.resnap:
			s.catchUp(f.ctx)
		case <-t.C:
			s.catchUp(f.ctx)
		}
	}
}

// subscribe keeps a subscription to the events channel, handing each
// message to run; it subscribes again after a broken connection.
func (s *store) subscribe() {
	f := s.f
	defer f.wg.Done()
	for {
		if c := f.client.Load(); c != nil {
			err := c.Receive(f.ctx, c.B().Subscribe().Channel(eventsChannel).Build(), func(m rueidis.PubSubMessage) {
				select {
				case s.events <- m.Message:
				default: // run is behind: the next poll catches up
					select {
					case s.resnap <- struct{}{}:
					default:
					}
				}
			})
			if f.ctx.Err() != nil {
				return
			}
			if err != nil {
				f.log.Debug("fleet: subscription ended", "error", err)
			}
			// Messages may have been missed meanwhile.
			select {
			case s.resnap <- struct{}{}:
			default:
			}
		}
		if !f.sleep(200 * time.Millisecond) {
			return
		}
	}
}

// handle applies one notification: a document stored ("s") or removed
// ("d"), a nudge about a channel grant ("g"), routing decisions dropped
// ("c").
func (s *store) handle(msg string) {
	typ, rest, _ := strings.Cut(msg, "\n")
	switch typ {
	case "g":
		s.f.chans.nudge(rest)
	case "c":
		ns, key, _ := strings.Cut(rest, "\n")
		if n, err := strconv.ParseInt(ns, 10, 64); err == nil {
			s.dropped(n, key, true)
		}
	case "s", "d":
		vs, rest, _ := strings.Cut(rest, "\n")
		kind, rest, _ := strings.Cut(rest, "\n")
		name, doc, hasDoc := strings.Cut(rest, "\n")
		v, err := strconv.ParseInt(vs, 10, 64)
		if err != nil || kind == "" || name == "" || (typ == "s" && !hasDoc) {
			s.f.log.Error("fleet: malformed notification, ignored", "message", msg)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.following {
			return
		}
		if typ == "s" {
			s.applyPut(Change{Kind: kind, Name: name, Doc: []byte(doc), Version: v})
		} else {
			s.applyDelete(Change{Kind: kind, Name: name, Version: v})
		}
	}
}

// dropDecisionsScript counts a drop of routing decisions and publishes it.
//
// KEYS  lcr:drops, state:epoch
// ARGV  cache key ("" for all), events channel, an epoch for a Redis that has none
var dropDecisionsScript = rueidis.NewLuaScript(`
redis.call('SET', KEYS[2], ARGV[3], 'NX')
local n = redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'c\n' .. n .. '\n' .. ARGV[1])
return n
`)

// DropDecisions tells every node of the fleet, this one included, to drop
// the routing decision cached under key from its in-process tier ("" for
// all): Options.OnDropDecisions is called on each. The decisions in Redis
// are the cache's to delete (route/lcr), before this is called. A node
// that may have missed a drop (it was cut off, its notification was lost)
// drops all, when its next poll sees the count of drops moved. It blocks
// for up to the deadline: call it from an admin goroutine.
func (f *Fleet) DropDecisions(ctx context.Context, key string) error {
	if f.o.Redis == "" {
		f.state.dropsM.Inc()
		if f.o.OnDropDecisions != nil {
			f.o.OnDropDecisions(key)
		}
		return nil
	}
	err := f.doCtx(ctx, "state", func(ctx context.Context, c rueidis.Client) error {
		return dropDecisionsScript.Exec(ctx, c, []string{prefix + ":lcr:drops", prefix + ":state:epoch"}, []string{key, eventsChannel, newEpoch()}).Error()
	})
	if err != nil {
		return fmt.Errorf("%w: cannot drop decisions: %w", ErrUnavailable, err)
	}
	return nil
}

// dropped handles the drop count n, from a notification (with the key)
// or a poll: the key's drop when it is the next one, all decisions when
// some were missed or the count went back (Redis lost it). The first count
// a poll sees is the baseline.
func (s *store) dropped(n int64, key string, notified bool) {
	s.mu.Lock()
	last := s.drops
	switch {
	case last < 0 && !notified: // the baseline
		s.drops = n
		s.mu.Unlock()
		return
	case notified && (last < 0 || n == last+1):
	case n > last:
		key = ""
	default: // an old notification: a poll saw it first
		s.mu.Unlock()
		return
	}
	s.drops = n
	s.mu.Unlock()
	s.dropsM.Inc()
	if cb := s.f.o.OnDropDecisions; cb != nil {
		cb(key)
	}
}
