package shard

import (
	"runtime"
	"time"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// Config configures a Server. Zero fields take the defaults documented on
// each; Validate reports the first bad field by its name.
type Config struct {
	// Listen holds the sockets to serve, as transport.ParseListen reads
	// them ("udp://0.0.0.0:5060", "tcp://[::]:5060").
	Listen []transport.Listen
	// Shards is the number of event loops, each one shard (default: one
	// per CPU but one, at least one, at most MaxShards: the spare CPU, and
	// the spare P it gives the Go runtime, run the GC, the CDR writer and
	// the kernel's network work, and let a busy loop sleep in nanosleep
	// (poll.go)).
	Shards int
	// Tick is how often every shard advances its timer wheel (default 5 ms).
	Tick time.Duration
	// Limits bound what the parser accepts (default parser.DefaultLimits).
	Limits parser.Limits
	// Supported are the option tags the application implements; requests
	// that Require others are answered 420 (RFC 3261 8.2.2.3).
	Supported []string
	// HandoffQueue is the capacity of each shard-to-shard queue (default:
	// HandoffQueueFor(Shards)).
	HandoffQueue int
	// TCP bounds stream connections.
	TCP TCPConfig
	// Flood protects against sources that are not trunks or carriers.
	Flood FloodConfig
	// SocketRecvBuffer and SocketSendBuffer size the listening sockets'
	// kernel buffers in bytes (SO_RCVBUF, SO_SNDBUF; accepted TCP
	// connections inherit them); 0 leaves the kernel's default. Start
	// warns when the kernel capped one (net.core.rmem_max, wmem_max).
	SocketRecvBuffer int
	SocketSendBuffer int
	// BatchInterval: while datagrams come faster than one every two
	// intervals, the loop takes them every interval rather than being
	// woken for each (poll.go); 0 wakes it for each.
	BatchInterval time.Duration
	// BatchIntervalMax: the longest the interval grows to while intervals
	// bring few messages (poll.go), the most a message waits in its
	// socket under load. At or below BatchInterval, the interval is fixed.
	BatchIntervalMax time.Duration
}

// TCPConfig bounds stream connections (what trusted SIP servers enforce).
type TCPConfig struct {
	MaxConns         int           // in total (default 10000)
	MaxConnsPerIP    int           // from one source address, or one IPv6 /64 (default 100)
	MaxBuffered      int           // unframed bytes held per connection (default 2 x Limits.MaxMessageSize)
	MaxQueued        int           // bytes queued for a peer that does not read, past the kernel's buffer, before the connection is closed (default 64 x Limits.MaxMessageSize)
	FirstDataTimeout time.Duration // from accept to the first byte (default 5 s)
	MessageTimeout   time.Duration // from a message's first byte to its last (default 10 s)
	IdleTimeout      time.Duration // without any traffic (default 300 s)
}

func (c *Config) setDefaults() {
	if c.Shards <= 0 {
		c.Shards = DefaultShards()
	}
	if c.Tick <= 0 {
		c.Tick = 5 * time.Millisecond
	}
	if c.Limits == (parser.Limits{}) {
		c.Limits = parser.DefaultLimits
	}
	if c.HandoffQueue <= 0 {
		c.HandoffQueue = HandoffQueueFor(c.Shards)
	}
	if c.Flood.Ban <= 0 {
		c.Flood.Ban = 60 * time.Second
	}
	t := &c.TCP
	if t.MaxConns <= 0 {
		t.MaxConns = 10000
	}
	if t.MaxConnsPerIP <= 0 {
		t.MaxConnsPerIP = 100
	}
	if t.MaxBuffered <= 0 {
		t.MaxBuffered = 2 * c.Limits.MaxMessageSize
	}
	if t.MaxQueued <= 0 {
		t.MaxQueued = 64 * c.Limits.MaxMessageSize
	}
	if t.FirstDataTimeout <= 0 {
		t.FirstDataTimeout = 5 * time.Second
	}
	if t.MessageTimeout <= 0 {
		t.MessageTimeout = 10 * time.Second
	}
	if t.IdleTimeout <= 0 {
		t.IdleTimeout = 300 * time.Second
	}
}

// DefaultShards is Config.Shards' default: one per CPU but one, at least
// one, at most MaxShards.
func DefaultShards() int { return max(1, min(runtime.NumCPU()-1, MaxShards)) }

// Each shard has one hand-off ring from every other shard, so rings of a
// fixed depth grow with the square of the shards (8192 slots of 8 bytes:
// 1 GiB at 128 shards, all of it pointers the GC scans). The default depth
// is instead bounded by handoffBudget, the slots all the rings into one
// shard may hold together, so memory grows with the shards, not their
// square: about 512 KiB a shard (shard/doc.go, "Hand-off queues").
const (
	handoffBudget   = 1 << 16 // slots into one shard, over its rings
	handoffQueueMax = 8192    // a small node's depth: up to 9 shards
	handoffQueueMin = 256     // reached at MaxShards only
)

// HandoffQueueFor returns the default capacity of each shard-to-shard
// queue for a node of the given shards: the largest power of two from 8192
// down to 256 with which the shards-1 rings into a shard hold at most
// 65536 messages together.
func HandoffQueueFor(shards int) int {
	q := handoffQueueMax
	for q > handoffQueueMin && q*(shards-1) > handoffBudget {
		q >>= 1
	}
	return q
}
