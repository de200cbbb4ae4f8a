package cdr

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sipedge/sipedge/route"
)

var t0 = time.Date(2025, 3, 9, 14, 5, 7, 123_456_789, time.UTC)

// fullRecord returns a Record with every field set.
func fullRecord() *Record {
	return &Record{
		ACallID:              "a-1@198.51.100.7",
		BCallID:              "b-1@sipedge",
		Trunk:                "local",
		TrunkGroup:           "cust-trunks",
		Caller:               "+13105550100",
		Callee:               "+12025550123",
		DialedNumber:         "12025550123",
		SourceIP:             netip.MustParseAddr("198.51.100.7"),
		TimeInvite:           t0,
		TimeFirstProvisional: t0.Add(1500 * time.Millisecond),
		TimeAnswer:           t0.Add(4 * time.Second),
		TimeEnd:              t0.Add(64*time.Second + 250*time.Millisecond),
		FinalCode:            200,
		FinalReason:          "OK",
		HangupSide:           HangupCallee,
		EndReason:            EndSessionExpired,
		Route:                "carrier-b",
		CarrierID:            "carrier-b",
		Rate:                 0.0042,
		Currency:             "USD",
		RouteSource:          route.SourceLCR,
		CDRFields:            map[string]string{"account": "42", "tier": "gold"},
		Attempts: []Attempt{
			{CarrierID: "carrier-a", Status: 503, Elapsed: 1200 * time.Millisecond, Dialed: true,
				BCallID: "b-0@sipedge", TimeInvite: time.Date(2025, 3, 9, 14, 5, 7, 125_000_000, time.UTC)},
			{CarrierID: "carrier-c", Status: 503, Dialed: false, Reason: "cps_limited"},
		},
	}
}

// decode parses one JSON object, failing on trailing data, and returns its
// keys in order and its values.
func decode(t *testing.T, line []byte) ([]string, map[string]any) {
	t.Helper()
	if !utf8.Valid(line) {
		t.Fatalf("not valid UTF-8: %q", line)
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("cannot parse %s: %v", line, err)
	}
	if d.More() {
		t.Fatalf("trailing data after the object: %s", line)
	}
	// Key order, and no duplicate keys (a map would hide them).
	d = json.NewDecoder(bytes.NewReader(line))
	var keys []string
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			continue
		case json.Delim('}'), json.Delim(']'):
			depth--
			continue
		}
		if k, ok := tok.(string); ok && depth == 1 && d.More() {
			keys = append(keys, k)
			// Skip the value.
			var v json.RawMessage
			if err := d.Decode(&v); err != nil {
				t.Fatalf("cannot parse the value of %q: %v", k, err)
			}
		}
	}
	if len(keys) != len(m) {
		t.Fatalf("%d keys but %d distinct: %s", len(keys), len(m), line)
	}
	return keys, m
}

func TestAppendJSONFull(t *testing.T) {
	line := fullRecord().AppendJSON(nil)
	keys, m := decode(t, line)
	wantKeys := append(FieldNames[:], "account", "tier")
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("keys\n got %q\nwant %q", keys, wantKeys)
	}
	want := map[string]any{
		"a_call_id":              "a-1@198.51.100.7",
		"b_call_id":              "b-1@sipedge",
		"trunk":                  "local",
		"trunk_group":            "cust-trunks",
		"caller":                 "+13105550100",
		"callee":                 "+12025550123",
		"dialed_number":          "12025550123",
		"source_ip":              "198.51.100.7",
		"time_invite":            "2025-03-09T14:05:07.123Z",
		"time_first_provisional": "2025-03-09T14:05:08.623Z",
		"time_answer":            "2025-03-09T14:05:11.123Z",
		"time_end":               "2025-03-09T14:06:11.373Z",
		"duration_ms":            json.Number("60250"),
		"pdd_ms":                 json.Number("1500"),
		"final_code":             json.Number("200"),
		"final_reason":           "OK",
		"hangup_side":            "callee",
		"end_reason":             "session_expired",
		"route":                  "carrier-b",
		"carrier_id":             "carrier-b",
		"rate":                   json.Number("0.0042"),
		"currency":               "USD",
		"route_source":           "lcr",
		"lcr_attempts": []any{
			map[string]any{"carrier_id": "carrier-a", "status": json.Number("503"), "elapsed_ms": json.Number("1200"), "dialed": true,
				"b_call_id": "b-0@sipedge", "time_invite": "2025-03-09T14:05:07.125Z"},
			map[string]any{"carrier_id": "carrier-c", "status": json.Number("503"), "elapsed_ms": json.Number("0"), "dialed": false, "reason": "cps_limited"},
		},
		"account": "42",
		"tier":    "gold",
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got  %v\nwant %v", m, want)
	}
	// Compact: no whitespace anywhere outside strings.
	if bytes.ContainsAny(line, " \n\t") {
		t.Fatalf("not compact: %s", line)
	}
}

func TestAppendJSONEmpty(t *testing.T) {
	line := (&Record{}).AppendJSON(nil)
	const want = `{"a_call_id":"","b_call_id":"","trunk":"","trunk_group":"","caller":"","callee":"",` +
		`"dialed_number":"","source_ip":"","duration_ms":0,"final_code":0,"final_reason":"","hangup_side":"",` +
		`"route":"","carrier_id":"","rate":0,"currency":"","route_source":"","lcr_attempts":[]}`
	if string(line) != want {
		t.Fatalf("got\n%s\nwant\n%s", line, want)
	}
	decode(t, line)
}

func TestAppendJSONAttempts(t *testing.T) {
	f := func(attempts []Attempt, want string) {
		t.Helper()
		r := &Record{Attempts: attempts}
		line := string(r.AppendJSON(nil))
		_, got, ok := strings.Cut(line, `"lcr_attempts":`)
		if !ok || strings.TrimSuffix(got, "}") != want {
			t.Fatalf("lcr_attempts: got %s, want %s", got, want)
		}
	}
	f(nil, `[]`)
	f([]Attempt{}, `[]`)
	f([]Attempt{{CarrierID: "a", Status: 408, Elapsed: 6*time.Second + 999*time.Microsecond, Dialed: true}},
		`[{"carrier_id":"a","status":408,"elapsed_ms":6000,"dialed":true}]`)
	at := time.Date(2025, 3, 9, 14, 5, 7, 123456789, time.UTC)
	f([]Attempt{{CarrierID: "a", Status: 480, Elapsed: 5 * time.Millisecond, Dialed: true, BCallID: "b\"1@sipedge", TimeInvite: at}},
		`[{"carrier_id":"a","status":480,"elapsed_ms":5,"dialed":true,"b_call_id":"b\"1@sipedge","time_invite":"2025-03-09T14:05:07.123Z"}]`)
	f([]Attempt{
		{CarrierID: "a", Status: 503, Elapsed: 12 * time.Millisecond, Dialed: true},
		{CarrierID: "b", Status: 503, Dialed: false, Reason: "cps_limited"},
		{CarrierID: "c\"", Status: 486, Elapsed: -time.Second, Dialed: true},
	}, `[{"carrier_id":"a","status":503,"elapsed_ms":12,"dialed":true},`+
		`{"carrier_id":"b","status":503,"elapsed_ms":0,"dialed":false,"reason":"cps_limited"},`+
		`{"carrier_id":"c\"","status":486,"elapsed_ms":0,"dialed":true}]`)
}

func TestAppendJSONCDRFieldsDoNotClobber(t *testing.T) {
	r := fullRecord()
	r.CDRFields = map[string]string{
		"final_code":   "999",
		"trunk":        "evil",
		"time_answer":  "never",
		"pdd_ms":       "1",
		"cdr_fields":   "{}",
		"lcr_attempts": "[]",
		"account":      "42",
		"zz":           "last",
		"a\"b":         "quoted key",
		// Go's encoding/json matches keys case-insensitively, the last
		// one winning: a billing consumer in Go would read these as the
		// built-in fields.
		"Carrier_ID": "cheaper-carrier",
		"RATE":       "0",
	}
	line, shadowed := r.appendJSON(nil)
	if shadowed != 8 {
		t.Fatalf("shadowed = %d, want 8", shadowed)
	}
	keys, m := decode(t, line)
	if got, want := keys[len(FieldNames):], []string{"a\"b", "account", "zz"}; !slices.Equal(got, want) {
		t.Fatalf("extra keys %q, want %q (sorted)", got, want)
	}
	if m["final_code"] != json.Number("200") || m["trunk"] != "local" || m["time_answer"] != "2025-03-09T14:05:11.123Z" ||
		m["pdd_ms"] != json.Number("1500") || len(m["lcr_attempts"].([]any)) != 2 {
		t.Fatalf("a cdr_fields key overwrote a built-in field: %s", line)
	}
	if _, ok := m["cdr_fields"]; ok {
		t.Fatalf("cdr_fields written as a key: %s", line)
	}
	if m["account"] != "42" || m["zz"] != "last" || m["a\"b"] != "quoted key" {
		t.Fatalf("extra fields missing: %s", line)
	}

	// A reserved key stays reserved when its built-in field is left out.
	r = &Record{CDRFields: map[string]string{"pdd_ms": "7", "time_end": "x"}}
	_, m = decode(t, r.AppendJSON(nil))
	if _, ok := m["pdd_ms"]; ok {
		t.Fatal("pdd_ms filled in from cdr_fields")
	}
	if _, ok := m["time_end"]; ok {
		t.Fatal("time_end filled in from cdr_fields")
	}
}

// TestFieldNames checks that reserved, FieldNames and the encoder agree.
func TestFieldNames(t *testing.T) {
	for _, k := range FieldNames {
		if !reserved(k) {
			t.Errorf("%q is in FieldNames but not reserved", k)
		}
	}
	if !reserved("cdr_fields") || reserved("account") || reserved("") {
		t.Error("reserved is wrong about cdr_fields, account or the empty key")
	}
	r := fullRecord()
	r.CDRFields = nil
	keys, _ := decode(t, r.AppendJSON(nil))
	if !slices.Equal(keys, FieldNames[:]) {
		t.Fatalf("encoder writes %q\nFieldNames   %q", keys, FieldNames)
	}
}

func TestAppendJSONTimes(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CET", 3600)
	}
	f := func(in time.Time, want string) {
		t.Helper()
		if got := string(appendTime(nil, in)); got != want {
			t.Fatalf("appendTime(%v) = %s, want %s", in, got, want)
		}
		if p, err := time.Parse(time.RFC3339, want); err != nil || !p.Equal(in.Truncate(time.Millisecond)) {
			t.Fatalf("%s does not parse back as RFC 3339 to %v: %v %v", want, in, p, err)
		}
	}
	f(t0, "2025-03-09T14:05:07.123Z")
	f(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "2025-01-02T03:04:05.000Z")
	f(time.Date(2025, 12, 31, 23, 59, 59, 999_999_999, time.UTC), "2025-12-31T23:59:59.999Z")
	f(time.Date(2025, 7, 1, 0, 30, 0, 7_000_000, paris), "2025-06-30T22:30:00.007Z")
	f(time.Date(1, 1, 1, 0, 0, 0, 1e6, time.UTC), "0001-01-01T00:00:00.001Z")
	f(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), "9999-12-31T23:59:59.000Z")
	f(time.Unix(1741529107, 45e6).In(paris), "2025-03-09T14:05:07.045Z")
	// Out of the four-digit range: time's own formatting.
	if got := string(appendTime(nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))); got != "10000-01-01T00:00:00.000Z" {
		t.Fatalf("year 10000: %s", got)
	}

	// Zero times are left out, and so is pdd_ms without a provisional.
	r := &Record{TimeInvite: t0, TimeEnd: t0.Add(time.Second), FinalCode: 486}
	_, m := decode(t, r.AppendJSON(nil))
	for _, k := range []string{"time_first_provisional", "time_answer", "pdd_ms"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s written for a zero time", k)
		}
	}
	if m["duration_ms"] != json.Number("0") {
		t.Errorf("duration_ms of an unanswered call = %v, want 0", m["duration_ms"])
	}
	// A provisional at the INVITE's millisecond is a pdd of 0, still written.
	r = &Record{TimeInvite: t0, TimeFirstProvisional: t0}
	if _, m = decode(t, r.AppendJSON(nil)); m["pdd_ms"] != json.Number("0") {
		t.Errorf("pdd_ms = %v, want 0", m["pdd_ms"])
	}
}

func TestAppendString(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		got := string(appendString(nil, in))
		if got != want {
			t.Fatalf("appendString(%q) = %s, want %s", in, got, want)
		}
		checkLikeEncodingJSON(t, in, []byte(got))
	}
	f("", `""`)
	f("plain sip:+1@example.com;tag=x", `"plain sip:+1@example.com;tag=x"`)
	f(`say "hi"`, `"say \"hi\""`)
	f(`C:\path\`, `"C:\\path\\"`)
	f("a\nb\rc\td\be\ff", `"a\nb\rc\td\be\ff"`)
	f("\x00\x01\x1f\x7f", `"\u0000\u0001\u001f`+"\x7f"+`"`)
	f("<&>", `"<&>"`)
	f("héllo €𝄞", `"héllo €𝄞"`)
	f("bad\xffbyte", `"bad\ufffdbyte"`)
	f("\xc3", `"\ufffd"`)                     // truncated sequence
	f("\xc3\x28", `"\ufffd("`)                // invalid continuation
	f("\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`) // UTF-16 surrogate
	f("\xe2\x80\xa8|\xe2\x80\xa9", `"\u2028|\u2029"`)
	f("\xef\xbf\xbd", `"`+"\uFFFD"+`"`) // a real U+FFFD is kept as is
}

// checkLikeEncodingJSON checks that got is valid JSON that decodes to what
// encoding/json's encoding of in decodes to.
func checkLikeEncodingJSON(t *testing.T, in string, got []byte) {
	t.Helper()
	if !utf8.Valid(got) {
		t.Fatalf("appendString(%q) is not valid UTF-8: %q", in, got)
	}
	ref, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var a, b string
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("appendString(%q) = %s: %v", in, got, err)
	}
	if err := json.Unmarshal(ref, &b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("appendString(%q) decodes to %q, encoding/json's to %q", in, a, b)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\x7f", "\xff\xfe", "\xe2\x80\xa8", "é\xc3", "𝄞\xf0\x9d\x84"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendString(nil, s)
		checkLikeEncodingJSON(t, s, got)
		if bytes.ContainsFunc(got, func(r rune) bool { return r < 0x20 }) {
			t.Fatalf("raw control character in %q", got)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	for _, v := range []float64{0, 0.004, 0.0042, 1, -2.5, 1e-7, 1.5e-9, 123456789.125, 1e21, 1e20, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, v); string(got) != string(want) {
			t.Errorf("appendFloat(%v) = %s, want %s", v, got, want)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := appendFloat(nil, v); string(got) != "null" {
			t.Errorf("appendFloat(%v) = %s, want null", v, got)
		}
	}
}

func TestAppendJSONSourceIP(t *testing.T) {
	f := func(ip netip.Addr, want string) {
		t.Helper()
		_, m := decode(t, (&Record{SourceIP: ip}).AppendJSON(nil))
		if m["source_ip"] != want {
			t.Fatalf("source_ip of %v = %v, want %q", ip, m["source_ip"], want)
		}
	}
	f(netip.Addr{}, "")
	f(netip.MustParseAddr("192.0.2.1"), "192.0.2.1")
	f(netip.MustParseAddr("::ffff:192.0.2.1"), "192.0.2.1")
	f(netip.MustParseAddr("2001:db8::1"), "2001:db8::1")
	f(netip.MustParseAddr("fe80::1%eth\"0"), "fe80::1%eth\"0")
}

func TestEnumStrings(t *testing.T) {
	if HangupCaller.String() != "caller" || HangupCallee.String() != "callee" || HangupSystem.String() != "system" || HangupNodeLost.String() != "node_lost" || HangupAdmin.String() != "admin" || HangupNone.String() != "" {
		t.Error("HangupSide names")
	}
	if routeSourceName(route.SourceLCR) != "lcr" || routeSourceName(route.SourceStatic) != "static" || routeSourceName(route.SourceFallback) != "fallback" || routeSourceName(route.SourceNone) != "" {
		t.Error("RouteSource names")
	}
	if HangupSide(9).String() != "HangupSide(9)" || routeSourceName(route.Source(9)) != "RouteSource(9)" {
		t.Error("out-of-range names")
	}
}

func TestResetKeepsCapacity(t *testing.T) {
	r := fullRecord()
	fields := r.CDRFields
	r.Reset()
	if cap(r.Attempts) != 2 || len(r.Attempts) != 0 || r.CDRFields != nil || r.ACallID != "" || !r.TimeInvite.IsZero() {
		t.Fatalf("Reset left %+v", r)
	}
	if r.Attempts[:2][0].CarrierID != "" {
		t.Fatal("Reset kept the old attempts' strings")
	}
	if len(fields) != 2 {
		t.Fatal("Reset cleared a map it does not own")
	}
}

// String copies: the strings hold what the bytes held when made, however
// the bytes change after, and however many the record's storage grows.
func TestRecordString(t *testing.T) {
	r := AcquireRecord()
	defer ReleaseRecord(r)
	b := []byte("a-call-1")
	r.ACallID = r.String(b)
	copy(b, "XXXXXXXX")
	var long []string
	for i := range 100 {
		long = append(long, r.String([]byte(strings.Repeat(string(rune('a'+i%26)), 10))))
	}
	if r.ACallID != "a-call-1" || r.String(nil) != "" {
		t.Fatalf("ACallID %q", r.ACallID)
	}
	for i, s := range long {
		if s != strings.Repeat(string(rune('a'+i%26)), 10) {
			t.Fatalf("string %d is %q", i, s)
		}
	}
}
