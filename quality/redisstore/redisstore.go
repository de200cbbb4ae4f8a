// Package redisstore keeps quality routing's disables in Redis
// (quality.Store), so that they survive a restart: the hash Key, one field
// per disable, named "<prefix>|<carrier>" ("*" for every prefix: a
// configured prefix is digits, never "*" nor "|"), its value the
// quality.Disable as JSON. Every command touches the one key, so a Redis
// Cluster takes it as a single server does; the nodes sharing a Redis
// share the disables, each change written as one field, so that nodes do
// not overwrite each other's.
//
// The Store is the quality.Monitor's, called from its persister goroutine
// only (quality/persist.go), never a shard's: each call is bounded by the
// context it is given. It connects on first use, and again on the call
// after a failed connection, so a Redis that is down at start delays
// nothing.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/sipedge/sipedge/internal/redisurl"
	"github.com/sipedge/sipedge/quality"
)

// Key is the Redis hash of the disables.
const Key = "sipedge:quality:disables"

// ErrURL is wrapped by New's error for a URL rueidis does not take.
var ErrURL = errors.New("redisstore: invalid Redis URL")

// Store is a quality.Store in Redis.
type Store struct {
	opt rueidis.ClientOption
	log *slog.Logger

	mu     sync.Mutex
	client rueidis.Client // nil until connected
}

// New returns a Store for the Redis at url (redis:// or rediss://; a
// Cluster's other nodes as ?addr=host:port&addr=...), not yet connected.
// log (nil: slog.Default()) gets the stored values that do not decode.
func New(url string, log *slog.Logger) (*Store, error) {
	opt, err := redisurl.Options(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrURL, err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Store{opt: opt, log: log}, nil
}

// get returns the client, connecting first if it is not yet.
func (s *Store) get() (rueidis.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	c, err := rueidis.NewClient(s.opt)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to Redis at %s: %w", strings.Join(s.opt.InitAddress, ","), err)
	}
	s.client = c
	return c, nil
}

// Close closes the connection.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

// field names a disable's field (quality.Target.Name).
func field(carrier string, prefix *string) string {
	return quality.Target{Carrier: carrier, Prefix: prefix}.Name()
}

// Load implements quality.Store.
func (s *Store) Load(ctx context.Context) ([]quality.Disable, error) {
	c, err := s.get()
	if err != nil {
		return nil, err
	}
	m, err := c.Do(ctx, c.B().Hgetall().Key(Key).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", Key, err)
	}
	out := make([]quality.Disable, 0, len(m))
	for f, v := range m {
		var d quality.Disable
		if err := json.Unmarshal([]byte(v), &d); err != nil || field(d.Carrier, d.Prefix) != f {
			s.log.Warn("quality: ignoring a stored disable that does not decode", "key", Key, "field", f, "value", v, "err", err)
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// Put implements quality.Store.
func (s *Store) Put(ctx context.Context, d quality.Disable) error {
	c, err := s.get()
	if err != nil {
		return err
	}
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := c.Do(ctx, c.B().Hset().Key(Key).FieldValue().FieldValue(field(d.Carrier, d.Prefix), string(v)).Build()).Error(); err != nil {
		return fmt.Errorf("cannot write %s: %w", Key, err)
	}
	return nil
}

// Delete implements quality.Store.
func (s *Store) Delete(ctx context.Context, t quality.Target) error {
	c, err := s.get()
	if err != nil {
		return err
	}
	if err := c.Do(ctx, c.B().Hdel().Key(Key).Field(field(t.Carrier, t.Prefix)).Build()).Error(); err != nil {
		return fmt.Errorf("cannot write %s: %w", Key, err)
	}
	return nil
}
