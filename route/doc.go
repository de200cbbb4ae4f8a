// Package route makes the least-cost-routing decision (HTTP API client,
// decision cache, static rate table) and runs the sequential failover engine
// over its ordered carriers. Blocking lookups run off the shards and their
// results are posted back.
package route
