package lcr

import (
	"testing"

	"github.com/sipedge/sipedge/route"
)

// The default policy's decisions: no decision is 503 Route Unavailable
// marked NoDecision, which an API reject with 503 is not.
func TestDecisionOf(t *testing.T) {
	none := decisionOf(Decision{NoDecision: true})
	if none.Code != 503 || none.Reason != "Route Unavailable" || !none.NoDecision {
		t.Errorf("no decision: %+v, want 503 Route Unavailable, NoDecision", none)
	}
	rej := decisionOf(Decision{Reject: &Reject{Code: 503, Reason: "Route Unavailable"}, Source: route.SourceLCR})
	if rej.Code != 503 || rej.NoDecision {
		t.Errorf("API reject: %+v, want 503 without NoDecision", rej)
	}
	if d := decisionOf(Decision{Source: route.SourceLCR}); d.Code != 404 || d.Reason != "No Route" || d.NoDecision {
		t.Errorf("no routes: %+v, want 404 No Route", d)
	}
}
