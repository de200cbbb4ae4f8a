package b2bua

import (
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/dialog/txn"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// Config configures an Engine.
type Config struct {
	// Trunks are the known sources of calls; the first whose sources match
	// a request's source address takes the call. They are fixed, unless
	// TrunkSet is set.
	Trunks []Trunk
	// TrunkSet, when set, is the trunks instead: the owner's, shared by its
	// engines, which it may swap at any time (trunks added and removed at
	// run time). It must hold a set before New. The engine loads it once
	// per request; a call keeps the *Trunk it began with, whatever the set
	// becomes.
	TrunkSet *atomic.Pointer[TrunkSet]
	// RejectUnknown answers INVITEs from unknown sources 403 instead of
	// dropping them silently (the default: a silent drop gives a scanner
	// nothing).
	RejectUnknown bool
	// HeaderAllow lists the headers copied from one leg's messages to the
	// other's (besides what the B2BUA builds itself). Dialog-forming and
	// topology-bearing headers are never copied, whatever this says.
	HeaderAllow []string
	// MaxCalls bounds concurrent calls per engine (per shard); above it new
	// calls get 503 (0: unlimited).
	MaxCalls int
	// MaxDuration ends calls that last longer (0: unlimited).
	MaxDuration time.Duration
	// ReferCode answers REFER (default 603 Decline).
	ReferCode int
	// Local is the host:port written into Via and Contact for each
	// transport: sipedge's own address as the other side must reach it.
	Local LocalAddrs
	// User is the user part of sipedge's Contact (default "sipedge").
	User string
	// Txn configures the transaction layer; its T1 and T2 also pace the
	// retransmission of a 2xx to the caller.
	Txn txn.Config
	// NumberPolicies are the named number-shaping presets; a route names
	// one, or DefaultNumberPolicy applies.
	NumberPolicies      map[string]NumberPolicy
	DefaultNumberPolicy string
	// AssertIdentity makes sipedge assert the caller's identity in its own
	// P-Asserted-Identity on B-legs (b2bua.assert_identity,
	// docs/design/lcr.md 4.5).
	AssertIdentity bool
	// SessionTimer configures session timers (RFC 4028): relayed, or
	// upheld by sipedge on each leg.
	SessionTimer SessionTimer
	// Sequence configures failover: the ring bound and the reroute causes.
	Sequence route.SequenceOptions
	// Metrics receives the engine's metrics, labelled with Shard.
	Metrics *metrics.Set
	Shard   int
}

// LocalAddrs holds sipedge's own host:port per transport, indexed by
// transport.Kind: LocalAddrs{transport.UDP: "192.0.2.1:5060"}. The wiring
// fills it from the listen addresses; the call core reads it only through
// For, so that it names no transport.
type LocalAddrs [transport.NumKinds]string

// For returns sipedge's host:port on transport k: k's own, else the first
// one set in Kind order (a node that listens on one transport writes that
// address on every one), "" when none is.
func (a *LocalAddrs) For(k transport.Kind) string {
	if int(k) < len(a) && a[k] != "" {
		return a[k]
	}
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}
