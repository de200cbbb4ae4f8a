// Package testtier sorts tests into sipedge's two tiers.
//
// The fast tier, `go test -short ./...` (make test-short), is the one to run
// while editing: it opens no socket, starts no process (redis-server, SIPp)
// and waits on no wall clock, so that it finishes in seconds and gives the
// same answer on a loaded machine. The full tier, `go test ./...` (part of
// make test), runs everything, the tests below included.
//
// A test that opens a socket (a listener, an httptest.Server, a client of
// one, a Redis, SIPp or a gnet loop) or that waits for real time to pass
// (time.Sleep, a component's own timers, polling until a condition holds:
// Eventually) calls RequiresSockets or RequiresWallClock first, before it
// starts anything. A test that merely bounds a wait with a generous timeout (a
// select on a channel that a goroutine of the test closes, with
// time.After as the failure case) is not waiting on the wall clock.
//
// Only tests import this package (deps_test.go checks it).
package testtier

import "testing"

// RequiresSockets skips tb in the fast tier (-short): it opens sockets.
func RequiresSockets(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("full tier: opens sockets (runs without -short)")
	}
}

// RequiresWallClock skips tb in the fast tier (-short): it waits for real
// time to pass.
func RequiresWallClock(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("full tier: waits on the wall clock (runs without -short)")
	}
}
