package testtier

import (
	"testing"
	"time"
)

// Eventually polls cond every 5 ms until it holds; it fails tb if cond
// does not hold within d. That is often enough for a test that counts
// what happened by then (a prober's records, 20 ms apart); a condition
// that costs a round trip (a Redis client, an admin request) wants Poll
// at its own pace. It waits on the wall clock: its test is in the full
// tier, or bounds a goroutine's work with a generous d.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	Poll(tb, d, 5*time.Millisecond, what, cond)
}

// Poll is Eventually polling every every; it returns how long cond took
// to hold.
func Poll(tb testing.TB, d, every time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			tb.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(every)
	}
	return time.Since(start)
}
