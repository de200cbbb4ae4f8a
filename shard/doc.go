// Package shard is sipedge's runtime: the gnet v2 transport (UDP and TCP),
// Call-ID sharding onto per-core event loops, and each shard's timer wheel.
// It is the only package that imports gnet. A shard alone owns the
// transactions and dialogs of the Call-IDs hashed to it, so the per-message
// path takes no locks; messages that arrive on another loop are copied and
// handed to their owner in batches.
package shard
