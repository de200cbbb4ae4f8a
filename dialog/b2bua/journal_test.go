package b2bua

import (
	"fmt"
	"testing"

	"github.com/sipedge/sipedge/dialog/cdr"
)

// journalLog is an Env.Journal that writes down what the engine tells it,
// and whether the call's CDR was written by then.
type journalLog struct {
	r      *rig
	refuse bool // Answered refuses every call
	events []string
}

func (j *journalLog) Answered(id uint64, rec *cdr.Record) bool {
	j.events = append(j.events, fmt.Sprintf("answered %x %s %s %d %s end=%v", id, rec.ACallID, rec.CarrierID,
		rec.FinalCode, rec.HangupSide, rec.TimeEnd))
	if rec.TimeAnswer.IsZero() || rec.TimeInvite.IsZero() {
		j.r.t.Errorf("journalled record without its times: %+v", rec)
	}
	cdr.ReleaseRecord(rec)
	return !j.refuse
}

func (j *journalLog) Ended(id uint64) {
	j.events = append(j.events, fmt.Sprintf("ended %x after %d CDRs", id, len(j.r.calls)))
}

// An answered call is journalled as it is answered, under an id naming its
// shard, with its record so far (no end, no hangup side), and ended once
// its CDR is written; a call no carrier answered is not journalled, nor is
// the end of a call the journal refused.
func TestJournal(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Shard = 3 })
	j := &journalLog{r: r}
	r.e.env.Journal = j
	_, aTag := r.answerCall()
	r.hangUp(aTag)
	want := []string{"answered 300000001 a-call-1 carrier-a 200  end=0001-01-01 00:00:00 +0000 UTC", "ended 300000001 after 1 CDRs"}
	if fmt.Sprint(j.events) != fmt.Sprint(want) {
		t.Fatalf("journal heard %q, want %q", j.events, want)
	}

	j.events = nil
	r.recv(caller, callerInvite("2", "a-call-2", "15551234"))
	r.expect(caller, "SIP/2.0 100 Trying")
	inv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(inv, 486, "Busy Here", ""))
	r.take(carrierA)
	r.take(caller)
	if len(j.events) != 0 {
		t.Fatalf("a call no carrier answered: journal heard %q", j.events)
	}

	r = newRig(t, nil)
	j = &journalLog{r: r, refuse: true}
	r.e.env.Journal = j
	_, aTag = r.answerCall()
	r.hangUp(aTag)
	if len(j.events) != 1 {
		t.Fatalf("a call the journal refused: journal heard %q, want its answer only", j.events)
	}
}
