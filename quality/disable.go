package quality

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors of Disable and Enable.
var (
	ErrUnknownPrefix = errors.New("quality: not a quality prefix")
	ErrInvalidTarget = errors.New("quality: invalid carrier")
)

// Target names a carrier for one quality prefix, or for all of them: the
// body of POST /v1/quality/disable and /v1/quality/enable.
type Target struct {
	Carrier string `json:"carrier"`
	// Prefix is one of the configured prefixes ('+' or not); nil is
	// every prefix. "" is the prefix "" (every number), not nil.
	Prefix *string `json:"prefix,omitempty"`
}

// Name names t's disable in a Store: "<prefix>|<carrier>", "*" for every
// prefix (a configured prefix is digits with an optional '+', never "*"
// nor "|").
func (t Target) Name() string {
	p := "*"
	if t.Prefix != nil {
		p = *t.Prefix
	}
	return p + "|" + t.Carrier
}

// ParseTarget is Name's inverse; false for a name Name never returns.
func ParseTarget(name string) (Target, bool) {
	p, carrier, ok := strings.Cut(name, "|")
	if !ok || carrier == "" {
		return Target{}, false
	}
	t := Target{Carrier: carrier}
	if p != "*" {
		t.Prefix = &p
	}
	return t, true
}

// Disable is a carrier taken out of routing, for one prefix or (Prefix
// nil) all; Auto when auto_disable took it out on a bad-destination event.
type Disable struct {
	Carrier string    `json:"carrier"`
	Prefix  *string   `json:"prefix,omitempty"`
	Auto    bool      `json:"auto"`
	Since   time.Time `json:"since"`
}

// disableKey is a Disable in Monitor.disables; prefix NoPrefix is every
// prefix.
type disableKey struct {
	carrier string
	prefix  Prefix
}

// maxCarrierID bounds a carrier ID given to Disable, as the LCR API's
// carrier_id is bounded (route/lcr.MaxCarrierID).
const maxCarrierID = 128

// validCarrierID reports whether id can be a carrier_id, by the LCR API's
// rule (route/lcr.ValidCarrierID): 1 to 128 printable characters of valid
// UTF-8.
func validCarrierID(id string) bool {
	return id != "" && utf8.ValidString(id) && utf8.RuneCountInString(id) <= maxCarrierID &&
		!strings.ContainsFunc(id, func(r rune) bool { return !strconv.IsPrint(r) })
}

// key checks t and returns its key.
func (m *Monitor) key(t Target) (disableKey, error) {
	if !validCarrierID(t.Carrier) {
		return disableKey{}, fmt.Errorf("%w: %q: want 1 to %d printable characters", ErrInvalidTarget, t.Carrier, maxCarrierID)
	}
	k := disableKey{carrier: t.Carrier, prefix: NoPrefix}
	if t.Prefix != nil {
		d, err := prefixDigits(*t.Prefix)
		if err == nil {
			k.prefix = Prefix(slices.Index(m.digits, d))
		}
		if err != nil || k.prefix == NoPrefix {
			return disableKey{}, fmt.Errorf("%w: %q", ErrUnknownPrefix, *t.Prefix)
		}
	}
	return k, nil
}

// Disable takes a carrier out of routing for a prefix, or for all: from
// the next call on, Disabled reports it. Disabling it again keeps the
// first disable. Safe from any goroutine; not for the shards (it takes the
// reader's lock).
func (m *Monitor) Disable(t Target) error {
	k, err := m.key(t)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.disables[k]; !ok {
		m.disables[k] = Disable{Carrier: k.carrier, Prefix: m.prefixPtr(k.prefix), Since: time.Now()}
		m.touch(k)
		m.publish()
	}
	return nil
}

// Enable puts a carrier back into routing. For every prefix (t.Prefix
// nil) it lifts all of the carrier's disables; for one prefix, that
// prefix's only: a disable for every prefix is lifted only for every
// prefix. It reports whether anything was lifted. Safe from any
// goroutine; not for the shards.
func (m *Monitor) Enable(t Target) (bool, error) {
	k, err := m.key(t)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.disables)
	if k.prefix == NoPrefix {
		for d := range m.disables {
			if d.carrier == k.carrier {
				delete(m.disables, d)
			}
		}
	} else {
		delete(m.disables, k)
	}
	// Before the stored disables are loaded, an enable here wins over
	// them: it is recorded whether it lifted anything or not.
	m.touch(k)
	if len(m.disables) == n {
		return false, nil
	}
	m.publish()
	return true, nil
}

// Disables returns the disables, by carrier then prefix (every prefix
// first). Safe from any goroutine; not for the shards.
func (m *Monitor) Disables() []Disable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.disableList()
}

func (m *Monitor) disableList() []Disable {
	keys := make([]disableKey, 0, len(m.disables))
	for k := range m.disables {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b disableKey) int {
		return cmp.Or(cmp.Compare(a.carrier, b.carrier), cmp.Compare(a.prefix, b.prefix))
	})
	out := make([]Disable, len(keys))
	for i, k := range keys {
		out[i] = m.disables[k]
	}
	return out
}
