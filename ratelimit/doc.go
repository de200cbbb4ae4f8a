// Package ratelimit paces calls per carrier account with GCRA: in Redis
// through rueidis for a fleet, in process as the embedded default and the
// fallback.
package ratelimit
