package redisstore

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

func newStore(t *testing.T, url string) *Store {
	t.Helper()
	s, err := New(url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func ptr(s string) *string { return &s }

// sorted returns ds by field.
func sorted(ds []quality.Disable) []quality.Disable {
	slices.SortFunc(ds, func(a, b quality.Disable) int {
		return strings.Compare(field(a.Carrier, a.Prefix), field(b.Carrier, b.Prefix))
	})
	return ds
}

// check puts, reads back and deletes disables through s: a disable for
// every prefix, one for the prefix "" and one for "+44" are three fields.
func check(t *testing.T, s *Store) {
	t.Helper()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []quality.Disable{
		{Carrier: "a|b", Prefix: ptr("+44"), Auto: true, Since: since},
		{Carrier: "a|b", Since: since},
		{Carrier: "c", Prefix: ptr(""), Since: since},
	}
	for _, d := range want {
		if err := s.Put(ctx(t), d); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Load(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sorted(got), sorted(slices.Clone(want))) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}
	if err := s.Delete(ctx(t), quality.Target{Carrier: "a|b"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx(t), quality.Target{Carrier: "nobody"}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Load(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []quality.Disable{want[0], want[2]}; !reflect.DeepEqual(sorted(got), sorted(want)) {
		t.Fatalf("after a delete\n%+v\nwant\n%+v", got, want)
	}
}

// TestStore: disables written, read back and deleted in a real Redis; a
// value that does not decode is skipped.
func TestStore(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	s := newStore(t, r.URL())
	check(t, s)
	if _, err := r.Do("HSET " + Key + " *|x garbage"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx(t))
	if err != nil || len(got) != 2 {
		t.Fatalf("with a bad value: %+v, %v", got, err)
	}
}

// TestStoreCluster: the one key works on a Redis Cluster as on a server.
func TestStoreCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	c := redistest.StartCluster(t, 3)
	check(t, newStore(t, "redis://"+c.Nodes[0].Addr()+"?addr="+c.Nodes[1].Addr()))
}

// TestStoreRedisLate: a Redis down at first fails the calls, at once and
// without a stall; once it is up, the Store connects.
func TestStoreRedisLate(t *testing.T) {
	testtier.RequiresSockets(t)
	redistest.SkipIfMissing(t)
	port := redistest.FreePort(t)
	s := newStore(t, "redis://127.0.0.1:"+strconv.Itoa(port))
	start := time.Now()
	if _, err := s.Load(ctx(t)); err == nil {
		t.Fatal("Load with Redis down: no error")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Load with Redis down took %v", d)
	}
	redistest.StartOn(t, port)
	check(t, s)
}

// A Monitor with the Store gets its disables back when it starts again,
// as sipedge does after a restart.
func TestMonitorRestart(t *testing.T) {
	testtier.RequiresSockets(t)
	r := redistest.Start(t)
	cfg := quality.Config{Prefixes: []string{"", "44"}}
	start := func() *quality.Monitor {
		m, err := quality.New(cfg, quality.Options{Shards: 1, Store: newStore(t, r.URL()), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	if err := m.Disable(quality.Target{Carrier: "a", Prefix: ptr("44")}); err != nil {
		t.Fatal(err)
	}
	if err := m.Disable(quality.Target{Carrier: "b"}); err != nil {
		t.Fatal(err)
	}
	waitFields(t, r, 2)
	m.Close()

	m = start()
	deadline := time.Now().Add(5 * time.Second)
	for len(m.Disables()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	p := m.Prefix("+447700900123")
	if !m.Disabled(p, "a") || !m.Disabled(p, "b") || m.Disabled(m.Prefix("+1202"), "a") {
		t.Fatalf("after the restart: %+v", m.Disables())
	}
	// A change just before a stop is written as it stops.
	if _, err := m.Enable(quality.Target{Carrier: "b"}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if got := r.MustDo("HLEN " + Key); got != ":1" {
		t.Fatalf("after an enable and a stop: HLEN %s, want 1", got)
	}
}

// waitFields waits until the hash has n fields.
func waitFields(t *testing.T, r *redistest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := r.Do("HLEN " + Key)
		if err == nil && got == ":"+strconv.Itoa(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("HLEN %s: %q %v, want %d", Key, got, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
