package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sipedge/sipedge/dialog/b2bua"
)

// shardWait bounds how long the admin API waits for a shard to run what it
// posted there: a shard answers between two messages, within microseconds
// unless it is stuck, and a stuck one must not hold the request for ever.
var shardWait = 2 * time.Second

// callsJSON is GET /v1/calls' answer.
type callsJSON struct {
	Calls []b2bua.CallInfo `json:"calls"`
	// MissingShards are the shards that did not answer in time: their
	// calls are not listed (and a warning is logged).
	MissingShards []int `json:"missing_shards,omitempty"`
}

// getCalls answers GET /v1/calls[?trunk=NAME][&carrier=ID]: the live calls
// of every shard, oldest first, collected on each shard's own goroutine
// (Engine.AppendCalls, posted) without a lock on the call path.
func (s *Server) getCalls(w http.ResponseWriter, r *http.Request) {
	trunk, carrier := r.URL.Query().Get("trunk"), r.URL.Query().Get("carrier")
	type answer struct {
		shard int
		calls []b2bua.CallInfo
	}
	answers := make(chan answer, len(s.apps)) // a late shard never blocks
	for i, a := range s.apps {
		a.sh.Post(func() { answers <- answer{i, a.eng.AppendCalls(nil)} })
	}
	out := callsJSON{Calls: []b2bua.CallInfo{}}
	answered := make([]bool, len(s.apps))
	deadline := time.After(shardWait)
gather:
	for range s.apps {
		select {
		case ans := <-answers:
			answered[ans.shard] = true
			for _, c := range ans.calls {
				if (trunk == "" || c.Trunk == trunk) && (carrier == "" || c.Carrier == carrier) {
					out.Calls = append(out.Calls, c)
				}
			}
		case <-deadline:
			break gather
		}
	}
	for i, ok := range answered {
		if !ok {
			out.MissingShards = append(out.MissingShards, i)
		}
	}
	if len(out.MissingShards) > 0 {
		s.log.Warn("GET /v1/calls: shards did not answer in time; their calls are not listed",
			"shards", fmt.Sprint(out.MissingShards), "wait", shardWait)
	}
	slices.SortFunc(out.Calls, func(a, b b2bua.CallInfo) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.ACallID, b.ACallID))
	})
	writeJSON(w, http.StatusOK, out)
}

// deleteCall answers DELETE /v1/calls/{a_call_id}: the call ends on the
// shard that owns it, the one its Call-ID hashes to (Engine.EndCall): a
// BYE on both legs, or a CANCEL to the carrier and 503 to the caller while
// it rings, and a CDR with hangup_side "admin". 204 when it ended, 404
// when no live call has that A-leg Call-ID.
func (s *Server) deleteCall(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("a_call_id")
	a := s.apps[s.rt.OwnerOf([]byte(id))] // apps are in shard order (newShardApp)
	ended := make(chan bool, 1)
	a.sh.Post(func() { ended <- a.eng.EndCall([]byte(id), a.sh.Now()) })
	select {
	case ok := <-ended:
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Errorf("no live call has the A-leg Call-ID %q", id))
			return
		}
		s.log.Info("call ended through the admin API", "call_id", id)
		w.WriteHeader(http.StatusNoContent)
	case <-time.After(shardWait):
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("shard %d did not answer within %v", a.sh.Index(), shardWait))
	}
}
