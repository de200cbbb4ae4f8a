package route

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRerouteCausesPrecedence(t *testing.T) {
	groups := map[string][]int{"gx": {404, 408}, "gempty": {}}
	f := func(opt SequenceOptions, r Route, want []int) {
		t.Helper()
		if got := opt.RerouteCauses(&r); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("RerouteCauses(%+v) = %v, want %v", r, got, want)
		}
	}
	byGroup := func(g string) []int { return groups[g] }

	f(SequenceOptions{}, Route{}, DefaultRerouteCauses)
	f(SequenceOptions{}, Route{GatewayGroup: "gx"}, DefaultRerouteCauses)
	f(SequenceOptions{GlobalCauses: []int{503}}, Route{}, []int{503})
	f(SequenceOptions{GlobalCauses: []int{}}, Route{}, []int{})
	f(SequenceOptions{GlobalCauses: []int{503}, GroupCauses: byGroup}, Route{GatewayGroup: "gx"}, []int{404, 408})
	f(SequenceOptions{GlobalCauses: []int{503}, GroupCauses: byGroup}, Route{GatewayGroup: "gy"}, []int{503})
	f(SequenceOptions{GroupCauses: byGroup}, Route{GatewayGroup: "gy"}, DefaultRerouteCauses)
	f(SequenceOptions{GroupCauses: byGroup}, Route{GatewayGroup: "gempty"}, []int{})
	f(SequenceOptions{GlobalCauses: []int{503}, GroupCauses: byGroup},
		Route{GatewayGroup: "gx", RerouteCauses: []int{486}}, []int{486})
	f(SequenceOptions{GroupCauses: byGroup}, Route{GatewayGroup: "gx", RerouteCauses: []int{}}, []int{})
	// A route with no gateway_group (next_hop only) does not ask the groups.
	f(SequenceOptions{GroupCauses: func(string) []int { panic("called") }}, Route{NextHop: "h"}, DefaultRerouteCauses)
}

func TestBestFailure(t *testing.T) {
	f := func(attempts string, want int) {
		t.Helper()
		var as []Attempt
		for _, a := range strings.Fields(attempts) {
			status, undialed := strings.CutSuffix(a, "u")
			var code int
			for _, c := range status {
				code = code*10 + int(c-'0')
			}
			as = append(as, Attempt{Status: code, Dialed: !undialed})
		}
		if got := bestFailure(as); got != want {
			t.Errorf("bestFailure(%s) = %d, want %d", attempts, got, want)
		}
	}
	f("503", 0)
	f("408 503", 0) // the seed: a ring-out outranks a later 503
	f("503 408", 1) // lowest class, wherever it is
	f("502 503", 0) // earliest within a class
	f("503 500 502", 0)
	f("404 486", 0)
	f("404 407", 1) // 4xx preferring 401, 407, 415, 420, 484
	f("401 407", 0)
	f("503 484", 1)
	f("404 603", 1) // 6xx over everything
	f("302 404", 0) // a 3xx ranks as the 480 it becomes: the earliest 4xx
	f("404 302", 0)
	f("302 503", 0)
	f("503 301", 1)
	f("302 407", 1)
	f("503u 502", 1) // an undialled carrier's 503 is sipedge's, not a carrier's failure
	f("408u 503u 500", 2)
}

func TestForwarded(t *testing.T) {
	f := func(code int, own bool, want int) {
		t.Helper()
		if got, _ := forwarded(code, "x", own); got != want {
			t.Errorf("forwarded(%d, own=%v) = %d, want %d", code, own, got, want)
		}
	}
	f(503, false, 500) // RFC 3261 16.7 step 6
	f(503, true, 503)  // sipedge's own 503 stays
	f(408, true, 408)
	f(486, false, 486)
	f(500, false, 500)
	f(603, false, 603)
	f(302, false, 480) // a redirect the caller cannot follow (RFC 3261 21.3)
	f(301, false, 480)
	f(380, false, 480)
}

func TestRouteJSON(t *testing.T) {
	const in = `{"carrier_id":"carrier-a","gateway_group":"carrier-a","next_hop":"sip:gw.example",
		"ruri":"sip:+1@x","tech_prefix":"1010288","number_policy":"e164","caller_id":"+13105550100",
		"caller_id_presentation":"restricted","rate":0.0042,"currency":"USD","timeout_secs":6,
		"reroute_after_progress":true,"reroute_causes":[404,408],"headers":{"X-Account":"42"},
		"cdr_fields":{"deck":"q3"}}`
	var r Route
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	want := Route{CarrierID: "carrier-a", GatewayGroup: "carrier-a", NextHop: "sip:gw.example",
		RURI: "sip:+1@x", TechPrefix: "1010288", NumberPolicy: "e164", CallerID: "+13105550100",
		CallerIDPresentation: "restricted", Rate: 0.0042, Currency: "USD", TimeoutSecs: 6,
		RerouteAfterProgress: true, RerouteCauses: []int{404, 408},
		Headers: map[string]string{"X-Account": "42"}, CDRFields: map[string]string{"deck": "q3"}}
	out, _ := json.Marshal(r)
	wantOut, _ := json.Marshal(want)
	if string(out) != string(wantOut) || !slices.Equal(r.RerouteCauses, want.RerouteCauses) {
		t.Errorf("decoded %s\nwant    %s", out, wantOut)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	var orig map[string]any
	_ = json.Unmarshal([]byte(in), &orig)
	for k := range orig {
		if _, ok := back[k]; !ok {
			t.Errorf("field %q lost in a round trip", k)
		}
	}

	// reroute_causes: absent is unset (nil), [] is set and empty; both survive a round trip.
	for _, c := range []struct {
		in      string
		wantNil bool
	}{{`{"carrier_id":"a"}`, true}, {`{"carrier_id":"a","reroute_causes":[]}`, false}} {
		var r Route
		if err := json.Unmarshal([]byte(c.in), &r); err != nil {
			t.Fatal(err)
		}
		if (r.RerouteCauses == nil) != c.wantNil {
			t.Errorf("%s: RerouteCauses = %#v", c.in, r.RerouteCauses)
		}
		b, _ := json.Marshal(r)
		var r2 Route
		_ = json.Unmarshal(b, &r2)
		if (r2.RerouteCauses == nil) != c.wantNil {
			t.Errorf("%s: after a round trip (%s) RerouteCauses = %#v", c.in, b, r2.RerouteCauses)
		}
	}
}

func TestAttemptJSON(t *testing.T) {
	f := func(a Attempt, want string) {
		t.Helper()
		b, err := json.Marshal(a)
		if err != nil || string(b) != want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", a, b, err, want)
		}
	}
	f(Attempt{CarrierID: "a", Status: 503, ElapsedMs: 1500, Dialed: true},
		`{"carrier_id":"a","status":503,"elapsed_ms":1500,"dialed":true}`)
	f(Attempt{CarrierID: "b", Status: 503, Reason: ReasonGroupDown},
		`{"carrier_id":"b","status":503,"elapsed_ms":0,"dialed":false,"reason":"group_down"}`)
}

// TestStepCarriesEveryAttempt checks the on_route_failure contract over
// random flows: every recorded attempt is announced by exactly one Step,
// in order, and the sequence always ends.
func TestStepCarriesEveryAttempt(t *testing.T) {
	routes := []Route{{CarrierID: "a", TimeoutSecs: 6}, {CarrierID: "b", RerouteAfterProgress: true, TimeoutSecs: 3},
		{CarrierID: "c", RerouteCauses: []int{404, 408}}, {CarrierID: "d"}}
	finals := []int{200, 302, 404, 408, 486, 500, 503, 603}
	for seed := uint64(1); seed < 2000; seed++ {
		x := seed
		rnd := func(n int) int { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return int(x % uint64(n)) }
		s := NewSequence(routes, SequenceOptions{RingTimeout: []time.Duration{0, NoRingBound, 10 * time.Second}[rnd(3)]})
		var announced []Attempt
		now := time.Duration(0)
		st := s.Next(now)
		for steps := 0; st.Kind != StepAnswered && st.Kind != StepFail; steps++ {
			if steps > 100 {
				t.Fatalf("seed %d: no end", seed)
			}
			now += time.Second
			switch rnd(4) {
			case 0:
				if s.state == stCalling {
					st = s.Undialable(now, ReasonGroupDown)
				} else {
					st = s.Final(now, finals[rnd(len(finals))], "")
				}
			case 1:
				st = s.Progress(now, 180)
			case 2:
				if s.deadline != NoDeadline {
					now = max(now, s.deadline)
				}
				st = s.Timeout(now)
			default:
				st = s.Final(now, finals[rnd(len(finals))], "")
			}
			if st.Burned {
				announced = append(announced, st.Attempt)
			}
		}
		if got := s.Attempts(); !slices.Equal(got, announced) {
			t.Fatalf("seed %d: attempts %v, announced %v", seed, got, announced)
		}
		if st.Kind == StepFail && (st.Code < 300 || st.Code > 699) {
			t.Fatalf("seed %d: fail with %d", seed, st.Code)
		}
	}
}

// TestHugeTimeoutSecs: a timeout_secs past what time.Duration holds (an
// API's 9999999999 for "no limit") waits at least as long as it can, not
// a negative time: that deadline was in the past, so the B2BUA armed no
// timer and a carrier that black-holed the call held it until Timer B.
func TestHugeTimeoutSecs(t *testing.T) {
	for _, secs := range []int{9_999_999_999, 1 << 62} {
		s := NewSequence([]Route{{CarrierID: "a", TimeoutSecs: secs}, {CarrierID: "b"}}, SequenceOptions{})
		st := s.Next(time.Minute)
		if st.Kind != StepDial || st.Deadline <= time.Minute+DefaultRingTimeout {
			t.Fatalf("timeout_secs %d: %+v, want a dial with a deadline far ahead", secs, st)
		}
		if st := s.Timeout(time.Minute + time.Hour); st.Kind != StepNone {
			t.Fatalf("timeout_secs %d: Timeout an hour later: %+v, want it stale", secs, st)
		}
		if st := s.Progress(2*time.Minute, 180); st.Kind != StepNone || s.deadline != s.dialAt+s.progressWait(&s.routes[0]) {
			t.Fatalf("timeout_secs %d: progress: %+v, deadline %v, want it unchanged", secs, st, s.deadline)
		}
	}
}

func TestSourceString(t *testing.T) {
	f := func(s Source, want string) {
		t.Helper()
		if got := s.String(); got != want {
			t.Fatalf("Source(%d).String() = %q, want %q", s, got, want)
		}
	}
	f(SourceNone, "none")
	f(SourceLCR, "lcr")
	f(SourceStatic, "static")
	f(SourceFallback, "fallback")
	f(Source(42), "unknown")
}
