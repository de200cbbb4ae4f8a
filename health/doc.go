// Package health keeps gateway groups and their members' health: a lock-free
// map read by every shard, fed by OPTIONS probes and by live call outcomes.
package health
