// Package redisurl is what the packages sharing a Redis (ratelimit,
// route/lcr, fleet, quality/redisstore) agree on about its URL: the client
// options a redis:// or rediss:// URL becomes (Options), and the one
// refusal of that URL a Redis reached makes only at connection, its
// database (DBRefused).
//
// Each caller wraps the errors in its own sentinels and tunes the options
// it returns (timeouts, pipelining) for its own traffic. Its functions
// hold no state and may be called from any goroutine; DBRefused connects
// to Redis, so it blocks, and must never run on a shard. A leaf: it
// imports nothing of the module (deps_test.go checks it).
package redisurl
