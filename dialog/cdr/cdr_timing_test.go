package cdr

import (
	"encoding/json"
	"testing"
)

// BenchmarkEncodeRecord measures the writer goroutine's encoding of a full
// record (two attempts, two cdr_fields).
func BenchmarkEncodeRecord(b *testing.B) {
	r := fullRecord()
	buf := r.AppendJSON(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
}

// jsonRecord is the baseline: the same record through encoding/json with
// struct tags (cdr_fields nested, since tags cannot flatten a map).
type jsonRecord struct {
	ACallID              string            `json:"a_call_id"`
	BCallID              string            `json:"b_call_id"`
	Trunk                string            `json:"trunk"`
	TrunkGroup           string            `json:"trunk_group"`
	Caller               string            `json:"caller"`
	Callee               string            `json:"callee"`
	DialedNumber         string            `json:"dialed_number"`
	SourceIP             string            `json:"source_ip"`
	TimeInvite           string            `json:"time_invite,omitempty"`
	TimeFirstProvisional string            `json:"time_first_provisional,omitempty"`
	TimeAnswer           string            `json:"time_answer,omitempty"`
	TimeEnd              string            `json:"time_end,omitempty"`
	DurationMS           int64             `json:"duration_ms"`
	PDDMS                *int64            `json:"pdd_ms,omitempty"`
	FinalCode            int               `json:"final_code"`
	FinalReason          string            `json:"final_reason"`
	HangupSide           string            `json:"hangup_side"`
	Route                string            `json:"route"`
	CarrierID            string            `json:"carrier_id"`
	Rate                 float64           `json:"rate"`
	Currency             string            `json:"currency"`
	RouteSource          string            `json:"route_source"`
	Attempts             []jsonAttempt     `json:"lcr_attempts"`
	CDRFields            map[string]string `json:"cdr_fields"`
}

type jsonAttempt struct {
	CarrierID string `json:"carrier_id"`
	Status    int    `json:"status"`
	ElapsedMS int64  `json:"elapsed_ms"`
	Dialed    bool   `json:"dialed"`
	Reason    string `json:"reason,omitempty"`
}

// BenchmarkEncodeRecordEncodingJSON is the baseline for BenchmarkEncodeRecord:
// conversion to a tagged struct plus json.Marshal.
func BenchmarkEncodeRecordEncodingJSON(b *testing.B) {
	r := fullRecord()
	conv := func() *jsonRecord {
		const layout = "2006-01-02T15:04:05.000Z"
		pdd, _ := r.PDDMS()
		j := &jsonRecord{
			ACallID: r.ACallID, BCallID: r.BCallID, Trunk: r.Trunk, TrunkGroup: r.TrunkGroup,
			Caller: r.Caller, Callee: r.Callee, DialedNumber: r.DialedNumber, SourceIP: r.SourceIP.String(),
			TimeInvite: r.TimeInvite.UTC().Format(layout), TimeFirstProvisional: r.TimeFirstProvisional.UTC().Format(layout),
			TimeAnswer: r.TimeAnswer.UTC().Format(layout), TimeEnd: r.TimeEnd.UTC().Format(layout),
			DurationMS: r.DurationMS(), PDDMS: &pdd, FinalCode: r.FinalCode, FinalReason: r.FinalReason,
			HangupSide: r.HangupSide.String(), Route: r.Route, CarrierID: r.CarrierID, Rate: r.Rate,
			Currency: r.Currency, RouteSource: routeSourceName(r.RouteSource), CDRFields: r.CDRFields,
		}
		for _, a := range r.Attempts {
			j.Attempts = append(j.Attempts, jsonAttempt{a.CarrierID, a.Status, a.Elapsed.Milliseconds(), a.Dialed, a.Reason})
		}
		return j
	}
	buf, _ := json.Marshal(conv())
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(conv()); err != nil {
			b.Fatal(err)
		}
	}
}
