package server

import (
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/transport"
)

// prober sends the registry's OPTIONS probes through the shards: each
// member's probes go to the shard its address hashes to.
type prober struct{ s *Server }

func (p prober) Probe(m health.Member, timeout time.Duration, done func(health.ProbeResult)) {
	a := p.s.apps[int(xxhash.Sum64String(m.Addr.String())%uint64(len(p.s.apps)))]
	peer := transport.Peer{Addr: m.Addr, Transport: m.Transport}
	a.sh.Post(func() {
		a.eng.Probe(peer, m.URI, timeout, a.sh.Now(), func(code int, retry, rtt time.Duration, err error) {
			done(health.ProbeResult{Code: code, RetryAfter: retry, RTT: rtt, Err: err})
		})
	})
}
