// Package shard is sipedge's runtime: the gnet v2 transport (UDP and TCP),
// Call-ID sharding onto per-core event loops, and each shard's timer wheel.
// It is the only package that imports gnet.
//
// # Sharding
//
// There is one shard per gnet event loop. The owner of a message is
// xxhash64(Call-ID) modulo the number of shards (Server.OwnerOf). The owner
// alone runs the Handler for that Call-ID, so transactions, dialogs and
// timers need no locks. The kernel spreads UDP datagrams over the loops'
// SO_REUSEPORT sockets by address, not by Call-ID, and TCP connections stay
// on the loop that accepted them, so a message parsed on a loop that does
// not own it is copied (parser.Message.CopyTo, no second parse) into a
// pooled packet and pushed on a single-producer single-consumer ring from
// that loop to its owner; one coalesced wake per batch makes the owner drain
// its rings. No mutex is taken on the per-message path.
//
// # Hand-off queues
//
// Each shard has one ring from every other shard, so their number grows
// with the square of the shards. Their depth is therefore not fixed: by
// default (HandoffQueueFor) it is the largest power of two from 8192 down
// to 256 with which the rings into one shard hold at most 65,536 messages
// together. Up to 9 shards every ring keeps 8192; 16 shards get 4096, 64
// get 1024, 128 get 512 and 256 (MaxShards) 256. The rings' memory is then
// about 512 KiB a shard (64 MiB at 128 shards, where 8192 everywhere took
// 1 GiB of pointer slots for the GC to scan), and a shard's backlog stays
// bounded however many loops feed it. A burst from one loop spreads over
// its rings by Call-ID, so it can still hand off about 65,536 messages at
// once. A full ring drops the message (a retransmission recovers it) and
// counts it in sipedge_shard_handoff_queue_full_total; Config.HandoffQueue
// sets another depth.
//
// Call-IDs a shard mints (B-legs, probes) are drawn at random until one
// hashes to the minting shard (MintCallID), so responses and in-dialog
// requests for them arrive where their dialogs live.
//
// # Loops and time
//
// Each loop learns its shard through a private waker connection; waking it
// runs the shard (Shard.run): drain the rings and posted functions, advance
// the timer wheel. The server's ticker wakes every shard with timers
// pending each Config.Tick (5 ms), so timers have that resolution; it rests
// while every shard polls (ticker.go). Under load a loop is not woken per
// datagram: while datagrams come faster than one every two
// Config.BatchInterval, it takes them every interval (lengthened up to
// Config.BatchIntervalMax while intervals bring few messages), runs its
// rings and timers, and sends, as long as each interval brings messages
// (poll.go); meanwhile other loops hand it messages without waking it.
// Shard.Post runs a function on a shard from any goroutine: it is how
// blocking work done elsewhere (an HTTP lookup, a Redis round trip)
// returns its result.
//
// # Transport
//
// The runtime reads a transport by its properties (transport.Kind): a
// datagram Kind (UDP) is served by a UDP listener and the udp.go path, a
// stream Kind (transport.Kind.Stream: TCP) by a TCP listener and the
// tcp.go path, each socket of the network the Kind names
// (transport.Kind.Network); an accepted connection is of its listener's
// Kind, a dialled one of the Kind the message is sent on. A peer is a
// transport.Peer: its Conn is the index of the listening socket
// (Config.Listen) on a datagram Kind, the connection's ConnID on a stream.
// A Kind whose bytes are not SIP as they are on its socket (TLS) needs its
// own handshake and record layer between the socket and the framer, which
// the stream path does not have.
// UDP is read and written in batches (udp.go): after the datagram gnet
// reads, the loop takes every other one its socket holds with recvmmsg,
// and what the handlers send waits in the shard's queue until the loop is
// done with what woke it, then leaves with one sendmmsg, from the
// listening port (a dup of the listener socket); so do a stream's bytes,
// one write per connection (flushTCP). Responses go where RFC 3261 18.2.2
// and RFC 3581 say (ResponseTarget). TCP is framed with parser.Frame; RFC
// 5626 CRLFCRLF pings get a CRLF pong; connections are capped per source
// address (per /64 for IPv6) and in total, buffered bytes are capped, and
// first-data, whole-message and idle timeouts close them; a framing error
// closes the connection. Bytes for a
// connection that lives on another loop are handed to that loop. Outbound
// TCP connections are dialled from a listen address for the owner's loop
// and reused by address.
//
// Every received message goes through Inspect (parse, then Validate), as
// `sipedge check-msg` runs it. Malformed requests are answered statelessly
// with the parser's code where their top Via says (RejectTarget: a 505 to
// the source address, since a Via of another SIP version is not ours to
// read); malformed responses, malformed ACKs, requests with no readable
// Via and oversize datagrams are dropped (Reply); all are counted in
// per-shard metrics created once with the shard label.
package shard
