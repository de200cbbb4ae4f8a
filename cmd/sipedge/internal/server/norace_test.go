//go:build !race

package server

// raceEnabled: this test binary has the race detector (go test -race).
const raceEnabled = false
