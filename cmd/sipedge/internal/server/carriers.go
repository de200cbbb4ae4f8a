package server

import (
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/health"
	"github.com/sipedge/sipedge/transport"
)

// healthGroups maps the YAML's gateway groups onto the health registry's.
func healthGroups(cfg *config.Config) []health.GroupConfig {
	var out []health.GroupConfig
	for _, g := range cfg.Gateway.Groups {
		hg := health.GroupConfig{Name: g.Name, Algorithm: g.Algorithm, Transport: g.Transport,
			RerouteCauses: g.RerouteCauses,
			Probe: health.ProbeConfig{Enabled: g.Probe.Enabled, Interval: g.Probe.Interval, Timeout: g.Probe.Timeout,
				FailureThreshold: g.Probe.FailureThreshold, SuccessThreshold: g.Probe.SuccessThreshold,
				HealthyCodes: g.Probe.HealthyCodes, Jitter: g.Probe.Jitter},
			Passive: health.PassiveConfig{Disabled: g.Passive.Disabled, Outcomes: g.Passive.Outcomes,
				FailureThreshold: g.Passive.FailureThreshold, FailurePercent: g.Passive.FailurePercent,
				MinCalls: g.Passive.MinCalls, HalfOpenCalls: g.Passive.HalfOpenCalls,
				DownTime: g.Passive.DownTime, MaxRetryAfter: g.Passive.MaxRetryAfter},
			PanicThreshold: &g.PanicThreshold, MaxConcurrentCalls: g.MaxConcurrentCalls,
			FollowRedirects: g.FollowRedirects}
		if g.CPS.Rate > 0 {
			w := g.CPS.MaxWait.Milliseconds()
			hg.CPS = &health.CPSConfig{Rate: g.CPS.Rate, Burst: g.CPS.Burst, MaxWaitMs: &w, Key: g.CPS.Key}
		}
		for _, r := range g.CPSReject {
			hg.CPSReject = append(hg.CPSReject, health.CPSReject{Code: r.Code, Reason: r.Reason})
		}
		if a := g.Auth; a != (config.Auth{}) {
			hg.Auth = &health.AuthConfig{Username: a.Username, Password: a.Password, Realm: a.Realm}
		}
		for _, d := range g.Destinations {
			hg.Destinations = append(hg.Destinations, health.DestConfig{URI: d.URI, Address: d.Address.String(),
				Weight: d.Weight, Priority: d.Priority})
		}
		out = append(out, hg)
	}
	return out
}

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
