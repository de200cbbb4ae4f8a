package fleet

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Errors. A configuration error wraps ErrInvalid (and ErrRedisURL when the
// URL is at fault).
var (
	ErrInvalid  = errors.New("fleet: invalid configuration")
	ErrRedisURL = errors.New("redis URL")
	// ErrNodeIDTaken: another live node holds this node's id. New returns
	// it, with the holder's address and how long its lease has left.
	ErrNodeIDTaken = errors.New("fleet: node id held by a live node")
	// ErrUnavailable: a write to the shared state (Put, Delete, a decision
	// drop) could not reach Redis within the deadline.
	ErrUnavailable = errors.New("fleet: redis unavailable")
	// ErrVersion: PutIf found another version than the one expected.
	ErrVersion = errors.New("fleet: document changed")
	// ErrApply: a document was stored, but this node's apply callback
	// refused it.
	ErrApply = errors.New("fleet: cannot apply")
)

// Config is the operators' `fleet:` YAML section:
//
//	fleet: {redis: "redis://host:port", node_id: edge-1, lease_secs: 10, call_journal: true}
//
// Without Redis the node is alone: channel limits are kept in process at
// ceil(limit / Options.Nodes), the shared state lives in process only, and
// there is no journal (the embedded default).
type Config struct {
	// Redis is the redis:// (or rediss://) URL the fleet shares; a Redis
	// Cluster lists more seed nodes as ?addr=host:port&addr=... and uses
	// database 0. Empty: one node, everything in process.
	Redis string `yaml:"redis"`
	// NodeID names this node in the fleet: 1 to 64 letters, digits, '.',
	// '_' or '-'. Default: the host name (cut at its first dot when the
	// full name does not fit).
	NodeID string `yaml:"node_id"`
	// LeaseSecs is how long the fleet trusts a silent node: its channels
	// and its registration expire that long after its last renewal, and
	// its journal is then claimed. Renewals go every third of it. Default
	// 10, at most 3600.
	LeaseSecs int `yaml:"lease_secs"`
	// CallJournal journals this node's answered calls in Redis, so that
	// another node writes their CDRs should this one die.
	CallJournal bool `yaml:"call_journal"`
}

// DefaultLeaseSecs is Config.LeaseSecs' default.
const DefaultLeaseSecs = 10

// Check reports each of c's problems to bad, with its field (redis,
// node_id, lease_secs or call_journal) and why. It does not apply the
// defaults: an empty node_id and a zero lease_secs are fine.
func (c *Config) Check(bad func(field, problem string)) {
	if c.Redis != "" {
		if err := checkRedisURL(c.Redis); err != nil {
			bad("redis", err.Error())
		}
	}
	if c.NodeID != "" && !validNodeID(c.NodeID) {
		bad("node_id", fmt.Sprintf("%q: want 1 to 64 letters, digits, '.', '_' or '-'", c.NodeID))
	}
	if c.LeaseSecs < 0 || c.LeaseSecs > 3600 {
		bad("lease_secs", fmt.Sprintf("%d: want 1 to 3600 (0: %d)", c.LeaseSecs, DefaultLeaseSecs))
	}
	if c.CallJournal && c.Redis == "" {
		bad("call_journal", "needs fleet.redis: the journal lives in Redis")
	}
}

// checkRedisURL checks what the fleet needs of a URL before rueidis parses
// it: the scheme and a host. The password is never shown.
func checkRedisURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return errors.New("want a redis:// or rediss:// URL with a host")
	}
	return nil
}

// validNodeID reports whether id may name a node: it goes into Redis keys
// (where ':' separates fields) and metric labels.
func validNodeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// HostNodeID is the default node id: the host name, or its first label
// when the full name is not a valid id; an error when neither is.
func HostNodeID() (string, error) { return hostNodeID() }

// hostNodeID is HostNodeID.
func hostNodeID() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("%w: node_id: cannot read the host name (%v): set fleet.node_id", ErrInvalid, err)
	}
	if validNodeID(h) {
		return h, nil
	}
	if first, _, _ := strings.Cut(h, "."); validNodeID(first) {
		return first, nil
	}
	return "", fmt.Errorf("%w: node_id: the host name %q is not a valid node id: set fleet.node_id", ErrInvalid, h)
}

// Options configures a Fleet. The zero value of every field but Config is
// replaced by its default.
type Options struct {
	Config

	// SIPAddr is the address peers reach this node's SIP at, as shown by
	// Nodes (GET /v1/fleet).
	SIPAddr string
	// Calls returns the calls this node holds; it is sent with every
	// heartbeat. Called on a fleet goroutine; nil reports 0.
	Calls func() int64
	// Nodes divides a channel limit when there is no Redis (ceil(limit /
	// Nodes) per node, the static split) and, while no live node count
	// is known yet, in the failure mode. Default 1.
	Nodes int

	// OnLost receives the calls of dead nodes' journals that this node
	// claimed, a batch at a time, on a fleet goroutine, to be written as
	// CDRs (hangup_side "node_lost"). Needed with CallJournal.
	OnLost func([]LostCall)
	// OnDropDecisions is called, on a fleet goroutine, when a node of the
	// fleet (this one included) dropped routing decisions from the shared
	// cache: key is the cache key, "" for all. The owner drops them from
	// its in-process tier.
	OnDropDecisions func(key string)

	Metrics *metrics.Set // nil: a private set
	Logger  *slog.Logger // nil: slog.Default()

	// Deadline bounds every Redis call; default 250 ms. No shard waits on
	// it: it bounds how long a fleet goroutine does.
	Deadline time.Duration
	// GrantInterval is how often channel grants are reconsidered; default
	// 100 ms (a refused Take asks at once).
	GrantInterval time.Duration
	// PollInterval is how often the shared state's versions are read, in
	// case a change notification was missed; default 500 ms.
	PollInterval time.Duration
	// JournalQueue bounds the journal operations waiting for the journal's
	// goroutine; Answered is refused beyond it. Default 65536.
	JournalQueue int

	// lease overrides LeaseSecs in tests that need a sub-second lease.
	lease time.Duration
	// noSubscribe leaves the change notifications unread (tests of the
	// polling path).
	noSubscribe bool
}

func (o *Options) defaults() error {
	var problems []string
	o.Config.Check(func(field, problem string) {
		problems = append(problems, "fleet."+field+": "+problem)
	})
	if len(problems) > 0 {
		err := fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
		if strings.HasPrefix(problems[0], "fleet.redis:") {
			err = fmt.Errorf("%w: %w", ErrRedisURL, err)
		}
		return err
	}
	if o.NodeID == "" {
		id, err := hostNodeID()
		if err != nil {
			return err
		}
		o.NodeID = id
	}
	orDefault(&o.LeaseSecs, DefaultLeaseSecs)
	orDefault(&o.lease, time.Duration(o.LeaseSecs)*time.Second)
	orDefault(&o.Nodes, 1)
	orDefault(&o.Deadline, 250*time.Millisecond)
	orDefault(&o.GrantInterval, 100*time.Millisecond)
	orDefault(&o.PollInterval, 500*time.Millisecond)
	orDefault(&o.JournalQueue, 65536)
	switch {
	case o.Nodes < 0 || o.Deadline < 0 || o.GrantInterval < 0 || o.PollInterval < 0 || o.JournalQueue < 0:
		return fmt.Errorf("%w: negative nodes, deadline, interval or queue", ErrInvalid)
	case o.CallJournal && o.OnLost == nil:
		return fmt.Errorf("%w: call_journal needs Options.OnLost, to write the CDRs of lost calls", ErrInvalid)
	}
	if o.Calls == nil {
		o.Calls = func() int64 { return 0 }
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
