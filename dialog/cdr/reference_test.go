package cdr

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/route"
)

// cdrReference is the CDR's reference for operators: a section per table,
// each row's first cell a field or value in backquotes.
const cdrReference = "../../docs/cdr.md"

// referenceTables returns the first cells of docs/cdr.md's table rows by the
// section ("## ...") they are in, in order; `""` stands for the empty value.
func referenceTables(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(cdrReference)
	if err != nil {
		t.Fatalf("cannot open the CDR reference: %v", err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]*)` \\|")
	tables := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			v := m[1]
			if v == `""` {
				v = ""
			}
			tables[section] = append(tables[section], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tables
}

// keysOf returns the keys of a JSON object in the order they are written.
func keysOf(t *testing.T, obj []byte) []string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(string(obj)))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", obj)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func sameList(t *testing.T, what string, documented, actual []string) {
	t.Helper()
	for _, a := range actual {
		if !slices.Contains(documented, a) {
			t.Errorf("%s: %s %q is written but not documented", cdrReference, what, a)
		}
	}
	for _, d := range documented {
		if !slices.Contains(actual, d) {
			t.Errorf("%s: %s %q is documented but never written", cdrReference, what, d)
		}
	}
	if !t.Failed() && !slices.Equal(documented, actual) {
		t.Errorf("%s: the %s are documented in the order %q, written %q", cdrReference, what, documented, actual)
	}
}

// TestReferenceFields: docs/cdr.md lists every field the encoder writes
// for a record with every field set, in order, and every field of an
// lcr_attempts entry.
func TestReferenceFields(t *testing.T) {
	now := time.Date(2026, 12, 5, 3, 37, 4, 420e6, time.UTC)
	r := &Record{ACallID: "a", BCallID: "b", Trunk: "t", TrunkGroup: "tg", Caller: "1", Callee: "2",
		DialedNumber: "2", SourceIP: netip.MustParseAddr("192.0.2.1"), TimeInvite: now,
		TimeFirstProvisional: now.Add(time.Second), TimeAnswer: now.Add(2 * time.Second), TimeEnd: now.Add(3 * time.Second),
		FinalCode: 200, FinalReason: "OK", HangupSide: HangupSystem, EndReason: EndMaxDuration, Route: "g", CarrierID: "c", Rate: 0.004,
		Currency: "USD", RouteSource: route.SourceStatic,
		Attempts: []Attempt{{CarrierID: "x", Status: 408, Elapsed: time.Second, Dialed: true, Reason: route.ReasonRingTimeout,
			BCallID: "bx", TimeInvite: now}}}
	line := r.AppendJSON(nil)
	tables := referenceTables(t)
	sameList(t, "fields", tables["Fields"], keysOf(t, line))
	if !slices.Equal(tables["Fields"], FieldNames[:]) {
		t.Errorf("%s: fields %q, FieldNames %q", cdrReference, tables["Fields"], FieldNames)
	}
	var rec struct {
		Attempts []json.RawMessage `json:"lcr_attempts"`
	}
	if err := json.Unmarshal(line, &rec); err != nil || len(rec.Attempts) != 1 {
		t.Fatalf("lcr_attempts of %s: %v", line, err)
	}
	sameList(t, "lcr_attempts fields", tables["lcr_attempts"], keysOf(t, rec.Attempts[0]))
}

// TestReferenceValues: docs/cdr.md lists every value of hangup_side,
// end_reason and route_source the encoder can write, and every attempt reason sipedge
// records (route's Reason constants and the call core's own).
func TestReferenceValues(t *testing.T) {
	tables := referenceTables(t)
	var sides []string
	for h := HangupSide(0); h < numHangupSides; h++ {
		sides = append(sides, h.String())
	}
	sameList(t, "hangup_side values", tables["hangup_side"], sides)
	sameList(t, "end_reason values", tables["end_reason"], []string{EndMaxDuration, EndSessionExpired, EndNoAck,
		EndNoResponse, EndNoPrack, EndShutdown})
	sameList(t, "route_source values", tables["route_source"], routeSourceNames[:])

	// The reasons are constants of route (route.go) and the call core
	// (dialog/b2bua): read from their source, as no list of them exists.
	reason := regexp.MustCompile(`(?m)^\s*(?:const\s+)?[rR]eason[A-Z]\w*\s*=\s*"([a-z_]+)"`)
	var reasons []string
	for _, file := range []string{"../../route/route.go", "../b2bua/dial.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reason.FindAllStringSubmatch(string(src), -1) {
			reasons = append(reasons, m[1])
		}
	}
	if !slices.Contains(reasons, route.ReasonCPSLimited) || !slices.Contains(reasons, "send_failed") {
		t.Fatalf("reasons read from the source: %q: has the pattern stopped matching?", reasons)
	}
	documented := slices.Clone(tables["reason"])
	slices.Sort(documented)
	slices.Sort(reasons)
	sameList(t, "lcr_attempts reasons", documented, reasons)
}
