package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
)

// maxRequestSize bounds a request body.
const maxRequestSize = 64 << 10

// parseDeck reads a CSV rate deck: one carrier per row, the columns prefix,
// carrier_id, gateway_group, rate and, optionally, currency. Lines starting
// with '#' are comments; a first row whose first column is "prefix" is a
// header. The rows of one prefix become its routes (any order: the table
// sorts them by rate). It returns the table and the number of rows.
func parseDeck(r io.Reader) (*lcr.StaticTable, int, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var entries []lcr.StaticEntry
	index := map[string]int{} // prefix -> entries index
	rows := 0
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read the deck: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if first && strings.EqualFold(strings.TrimSpace(rec[0]), "prefix") {
			continue
		}
		if len(rec) != 4 && len(rec) != 5 {
			return nil, 0, fmt.Errorf("line %d: %d columns, want prefix,carrier_id,gateway_group,rate[,currency]", line, len(rec))
		}
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		rate, err := strconv.ParseFloat(rec[3], 64)
		if err != nil || rate < 0 || rate != rate {
			return nil, 0, fmt.Errorf("line %d: rate %q is not a number >= 0", line, rec[3])
		}
		rt := route.Route{CarrierID: rec[1], GatewayGroup: rec[2], Rate: rate}
		if len(rec) == 5 {
			rt.Currency = rec[4]
		}
		if err := lcr.ValidateRoute(&rt); err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", line, err)
		}
		prefix := strings.TrimPrefix(rec[0], "+")
		i, ok := index[prefix]
		if !ok {
			i = len(entries)
			index[prefix] = i
			entries = append(entries, lcr.StaticEntry{Prefix: prefix})
		}
		entries[i].Routes = append(entries[i].Routes, rt)
		rows++
	}
	tab, err := lcr.NewStaticTable(entries)
	if err != nil {
		return nil, 0, err
	}
	return tab, rows, nil
}

// server answers POST /route with the routes of the longest matching
// prefix, cheapest first.
type server struct {
	table *lcr.StaticTable
	ttl   int    // cache_ttl_secs of every answer
	auth  string // required Authorization value; "" = none
	log   *slog.Logger
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /route", s.route)
	return mux
}

func (s *server) route(w http.ResponseWriter, r *http.Request) {
	if s.auth != "" && r.Header.Get("Authorization") != s.auth {
		writeError(w, http.StatusUnauthorized, "missing or wrong Authorization")
		return
	}
	var req lcr.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestSize))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request: "+err.Error())
		return
	}
	routes, _ := s.table.Lookup(req.DialedNumber)
	if routes == nil {
		routes = []route.Route{} // no route: the policy answers 404
	}
	ttl := s.ttl
	resp := lcr.Response{Routes: routes, CacheTTLSecs: &ttl}
	s.log.Info("route", "call_id", req.CallID, "dialed_number", req.DialedNumber,
		"trunk_group", req.Source.TrunkGroup, "routes", len(routes))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(&resp)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
