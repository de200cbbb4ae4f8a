package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

// SIGHUP reopens before the stop and during the drain that follows it; a
// second SIGTERM during the drain cancels the drain's context, which stops
// it at once, and a SIGHUP after it still reopens. Signals left unread
// while draining would take Go's default action and kill the process.
func TestSignalsDuringDrain(t *testing.T) {
	sig := make(chan os.Signal, 4)
	reopened := make(chan struct{}, 4)
	draining := make(chan context.Context)
	release := make(chan struct{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	go func() {
		done <- handleSignals(sig, log, func() { reopened <- struct{}{} }, func(ctx context.Context) error {
			draining <- ctx
			<-release
			return nil
		})
	}()
	sig <- syscall.SIGHUP
	waitFor(t, reopened, "the SIGHUP before the stop")
	sig <- syscall.SIGTERM
	ctx := waitFor(t, draining, "the drain")
	sig <- syscall.SIGHUP
	waitFor(t, reopened, "the SIGHUP during the drain")
	if ctx.Err() != nil {
		t.Fatal("the drain's context ended before a second SIGTERM")
	}
	sig <- syscall.SIGTERM
	waitFor(t, ctx.Done(), "the second SIGTERM cancelling the drain")
	sig <- syscall.SIGHUP
	waitFor(t, reopened, "a SIGHUP after a second SIGTERM")
	select {
	case err := <-done:
		t.Fatalf("returned before the drain ended: %v", err)
	default:
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("did not return when the drain ended")
	}
}

func waitFor[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(time.Second):
		t.Fatalf("no sign of %s", what)
	}
	var zero T
	return zero
}
