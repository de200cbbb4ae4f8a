package quality

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"
)

// Status is the body of GET /v1/quality: the figures of every pair as of
// the last Update, and the disables.
type Status struct {
	Mode                 string    `json:"mode"`
	SamplingIntervalSecs int       `json:"sampling_interval_secs"`
	HistorySpanSecs      int       `json:"history_span_secs"`
	Confidence           float64   `json:"confidence"`
	Updated              time.Time `json:"updated"` // the last Update; zero before the first
	Carriers             []Entry   `json:"carriers"`
	Gateways             []Entry   `json:"gateways"`
	Disabled             []Disable `json:"disabled"`
}

// Entry is one (prefix, carrier) or (prefix, gateway) pair's figures over
// the window.
type Entry struct {
	Prefix  string `json:"prefix"`
	Carrier string `json:"carrier,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	Profile string `json:"profile"`
	// Score is the sum of the statistics' penalties: 0 is perfect.
	Score float64 `json:"score"`
	// Demoted: Score reaches the profile's critical penalty (demote mode
	// moves the carrier behind the others).
	Demoted bool `json:"demoted"`
	// Disabled: the carrier is disabled for this prefix, or for all.
	Disabled bool   `json:"disabled,omitempty"`
	Attempts uint64 `json:"attempts"`
	ASR      Figure `json:"asr"`
	CCR      Figure `json:"ccr"`
	PDD      Figure `json:"pdd_ms"`
	AST      Figure `json:"ast_ms"`
	ACD      Figure `json:"acd_secs"`
}

// Figure is one statistic of a pair: its value (a fraction for ASR and
// CCR, milliseconds for PDD and AST, seconds for ACD), its samples, the
// confidence bound it is judged by (doc.go), its level (ok, warning,
// critical, or disabled by the profile) and the penalty it adds to the
// score. Value and Bound are NaN, null in JSON, without samples.
type Figure struct {
	Value   float64
	Samples uint64
	Bound   float64
	Level   string
	Penalty float64
}

type figureJSON struct {
	Value   *float64 `json:"value"`
	Samples uint64   `json:"samples"`
	Bound   *float64 `json:"bound"`
	Level   string   `json:"level"`
	Penalty float64  `json:"penalty"`
}

// MarshalJSON implements json.Marshaler: NaN is null.
func (f Figure) MarshalJSON() ([]byte, error) {
	num := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	return json.Marshal(figureJSON{num(f.Value), f.Samples, num(f.Bound), f.Level, f.Penalty})
}

// UnmarshalJSON implements json.Unmarshaler: null is NaN.
func (f *Figure) UnmarshalJSON(b []byte) error {
	var j figureJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	num := func(x *float64) float64 {
		if x == nil {
			return math.NaN()
		}
		return *x
	}
	*f = Figure{num(j.Value), j.Samples, num(j.Bound), j.Level, j.Penalty}
	return nil
}

func (e *Entry) figure(s stat) *Figure {
	return [numStats]*Figure{statASR: &e.ASR, statCCR: &e.CCR, statPDD: &e.PDD, statAST: &e.AST, statACD: &e.ACD}[s]
}

// Event is a bad-destination event: a pair's score reached the event
// threshold (bad_dst_threshold, or its profile's critical penalty), having
// been below it. The pair's figures are those of the Update that saw it.
type Event struct {
	Entry
	Time      time.Time `json:"time"`
	Threshold float64   `json:"threshold"`
	// AutoDisabled: auto_disable disabled the (prefix, carrier) pair.
	AutoDisabled bool `json:"auto_disabled"`
}

// entryStatus returns e's Entry. Called with m.mu held.
func (m *Monitor) entryStatus(e *entry) Entry {
	p := m.profiles[e.key.prefix]
	out := Entry{
		Prefix:   m.cfg.Prefixes[e.key.prefix],
		Profile:  p.name,
		Score:    e.figs.score,
		Demoted:  e.figs.score >= p.criticalPenalty,
		Attempts: e.figs.attempts,
	}
	if e.key.gateway {
		out.Gateway = e.key.name
	} else {
		out.Carrier = e.key.name
		_, all := m.disables[disableKey{carrier: e.key.name, prefix: NoPrefix}]
		_, one := m.disables[disableKey{carrier: e.key.name, prefix: e.key.prefix}]
		out.Disabled = all || one
	}
	for s := range numStats {
		g, info := &e.figs.stat[s], &stats[s]
		*out.figure(stat(s)) = Figure{
			Value:   g.value / info.unit,
			Samples: g.samples,
			Bound:   g.bound / info.unit,
			Level:   g.level.String(),
			Penalty: g.penalty,
		}
	}
	return out
}

// Status returns the figures of every pair, carriers and gateways each by
// prefix then name, and the disables. Safe from any goroutine; not for the
// shards.
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{
		Mode:                 m.mode,
		SamplingIntervalSecs: m.cfg.SamplingIntervalSecs,
		HistorySpanSecs:      m.cfg.HistorySpanSecs,
		Confidence:           m.cfg.Confidence,
		Updated:              m.updated,
		Carriers:             []Entry{},
		Gateways:             []Entry{},
		Disabled:             m.disableList(),
	}
	entries := slices.Clone(m.entries)
	slices.SortFunc(entries, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(m.digits[a.key.prefix], m.digits[b.key.prefix]), cmp.Compare(a.key.name, b.key.name))
	})
	for _, e := range entries {
		if e.key.gateway {
			st.Gateways = append(st.Gateways, m.entryStatus(e))
		} else {
			st.Carriers = append(st.Carriers, m.entryStatus(e))
		}
	}
	return st
}

// maxBody bounds a POSTed target.
const maxBody = 64 << 10

// Handler returns the admin API of quality routing, JSON:
//
//	GET  /v1/quality          the Status
//	POST /v1/quality/disable  {"carrier": "...", "prefix": "..."}: 200 and the disables; 400 bad input
//	POST /v1/quality/enable   the same body: 200, "enabled" (whether a disable was lifted) and the disables
//
// A body without "prefix" names every prefix. Errors are {"error": "..."}.
// Authentication and the listening socket are the caller's.
func (m *Monitor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/quality", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, m.Status())
	})
	mux.HandleFunc("POST /v1/quality/disable", func(w http.ResponseWriter, r *http.Request) {
		t, ok := readTarget(w, r)
		if !ok {
			return
		}
		if err := m.Disable(t); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"disabled": m.Disables()})
	})
	mux.HandleFunc("POST /v1/quality/enable", func(w http.ResponseWriter, r *http.Request) {
		t, ok := readTarget(w, r)
		if !ok {
			return
		}
		lifted, err := m.Enable(t)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"enabled": lifted, "disabled": m.Disables()})
	})
	return mux
}

func readTarget(w http.ResponseWriter, r *http.Request) (Target, bool) {
	var t Target
	d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	d.DisallowUnknownFields()
	err := d.Decode(&t)
	if err == nil && d.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("cannot decode target: %w", err))
		return t, false
	}
	return t, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
