package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cespare/xxhash/v2"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/ratelimit"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/route/lcr"
	"github.com/sipedge/sipedge/transport"
)

// A dry run answers "where would this call go, and why" without placing
// it: the routing decision (lcr.Resolver.Explain), then each carrier in
// order as the carrier plane would make it (carrier.Plane.Preview) and
// the call core would present it (b2bua.Config.Present), taking no channel,
// trial call or CPS slot. POST /v1/route asks a running node (Mode live:
// its health, limits, channels and caches); sipedge route without -admin
// builds the parts from the configuration alone (RouteFromConfig, Mode
// config). Both answer a RouteAnswer, the same JSON.

// RouteQuery is a dry run's question: POST /v1/route's body, sipedge
// route's flags.
type RouteQuery struct {
	To    string `json:"to"`              // the dialled number, as the trunk sends it
	From  string `json:"from,omitempty"`  // the calling number
	Trunk string `json:"trunk,omitempty"` // the trunk the call comes from; "": the first configured
	// CallID stands for the call's Call-ID, whose hash picks the member of
	// a hash group; "" is hashed as it is.
	CallID string `json:"call_id,omitempty"`
}

// Dry run modes (RouteAnswer.Mode).
const (
	ModeLive   = "live"   // a running node's: its gateways' health, limits, channels and caches
	ModeConfig = "config" // the configuration alone: no probes, no Redis, no calls up
)

// RouteAnswer is a dry run's answer.
type RouteAnswer struct {
	Mode  string   `json:"mode"`
	Notes []string `json:"notes,omitempty"` // what the answer does not show
	// The call: its trunk, the numbers as given and as routed (the
	// trunk's number policy applied), and its ring bound (0: none).
	Trunk           string      `json:"trunk"`
	TrunkGroup      string      `json:"trunk_group"`
	To              string      `json:"to"`
	From            string      `json:"from,omitempty"`
	Dialed          string      `json:"dialed"`
	Caller          string      `json:"caller,omitempty"`
	RingTimeoutSecs int         `json:"ring_timeout_secs"`
	Decision        DecisionWhy `json:"decision"`
	// Carriers are the decision's routes in the order they would be
	// tried.
	Carriers []CarrierWhy `json:"carriers"`
}

// DecisionWhy is a dry run's routing decision and where it came from.
type DecisionWhy struct {
	Source string `json:"source"`         // api, cache, static, fallback or none (lcr.From*)
	Tier   string `json:"tier,omitempty"` // cache: local or redis
	// Prefix is the static table's prefix that matched (source static);
	// absent when none did.
	Prefix *string `json:"prefix,omitempty"`
	// Failure is why the API gave no decision (fallback, none): its kind
	// (sipedge_lcr_api_failures_total's) and text.
	Failure string `json:"failure,omitempty"`
	Error   string `json:"error,omitempty"`
	// Reject is what the caller gets when the decision has no carrier: an
	// API reject, 404 No Route, 503 Route Unavailable.
	Reject *RejectWhy `json:"reject,omitempty"`
}

// RejectWhy is a final response to the caller.
type RejectWhy struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// CarrierWhy is one carrier of a dry run: how it would be dialled, or why
// it would be skipped.
type CarrierWhy struct {
	CarrierID    string  `json:"carrier_id"`
	GatewayGroup string  `json:"gateway_group,omitempty"`
	Rate         float64 `json:"rate"`
	Currency     string  `json:"currency,omitempty"`
	// Demoted: its quality score under the number's prefix reaches its
	// profile's critical penalty (quality.mode demote tries it after the
	// others).
	Demoted bool `json:"demoted,omitempty"`
	// Skip, when set, is why the carrier would be skipped undialled (a
	// route.Reason constant: disabled for quality routing's), with
	// SkipDetail.
	Skip       string   `json:"skip,omitempty"`
	SkipDetail string   `json:"skip_detail,omitempty"`
	Dial       *DialWhy `json:"dial,omitempty"`
}

// DialWhy is how a carrier would be dialled.
type DialWhy struct {
	// Gateway is the member's URI (a gateway group) or the next hop as the
	// route wrote it; Member its place in the group's destinations (-1:
	// a next hop); Address and Transport where the INVITE goes.
	Gateway   string `json:"gateway"`
	Member    int    `json:"member"`
	Address   string `json:"address"`
	Transport string `json:"transport"`
	// LastResort: every member is down, and the call's last carrier
	// takes one calls marked down (health.PickLastResort).
	LastResort bool `json:"last_resort,omitempty"`
	// What the INVITE carries (b2bua.Presented).
	RURI              string   `json:"ruri"`
	To                string   `json:"to"`
	From              string   `json:"from"`
	PAssertedIdentity string   `json:"p_asserted_identity,omitempty"`
	Privacy           string   `json:"privacy,omitempty"`
	CallerID          string   `json:"caller_id"`
	Presentation      string   `json:"presentation"` // allowed or restricted
	TechPrefix        string   `json:"tech_prefix,omitempty"`
	NumberPolicy      string   `json:"number_policy,omitempty"`
	Headers           []string `json:"headers,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
	// ProgressTimeoutSecs is how long it has to show progress (101-199)
	// before the next carrier is tried; CPSKey the calls-per-second
	// account it draws from and CPSWaitMs how long a dial now would wait
	// for its slot.
	ProgressTimeoutSecs int    `json:"progress_timeout_secs"`
	CPSKey              string `json:"cps_key,omitempty"`
	CPSWaitMs           int64  `json:"cps_wait_ms,omitempty"`
}

// ErrBadQuery is wrapped by the errors of a question a dry run cannot
// answer: no number, an unknown trunk.
var ErrBadQuery = errors.New("bad dry-run query")

// dryRun holds what a dry run reads.
type dryRun struct {
	mode     string
	notes    []string
	res      *lcr.Resolver
	static   func() *lcr.StaticTable // the table in force; nil in API mode
	carriers *carrier.Plane
	trunks   *trunks
	engine   b2bua.Config // the call core's shaping and ring bound (shard 0's)
	// rerouted: an OnFailure hook may route the call again, so the
	// decision's last carrier is not the call's last (no last-resort pick).
	rerouted bool
}

// route answers q.
func (dr *dryRun) route(ctx context.Context, q RouteQuery) (RouteAnswer, error) {
	if q.To == "" {
		return RouteAnswer{}, fmt.Errorf("%w: to: the dialled number is required", ErrBadQuery)
	}
	t, ok := dr.trunks.lookup(q.Trunk)
	if !ok {
		if q.Trunk == "" {
			return RouteAnswer{}, fmt.Errorf("%w: trunk: none is configured", ErrBadQuery)
		}
		return RouteAnswer{}, fmt.Errorf("%w: trunk: unknown trunk %q", ErrBadQuery, q.Trunk)
	}
	dialed, caller := t.Number(nil, []byte(q.To)), t.Number(nil, []byte(q.From))
	a := RouteAnswer{Mode: dr.mode, Notes: dr.notes, Trunk: t.Name, TrunkGroup: t.Group, To: q.To, From: q.From,
		Dialed: string(dialed), Caller: string(caller), Carriers: []CarrierWhy{}}

	// The request a call from the trunk's first source would make.
	src := transport.Peer{Transport: transport.UDP}
	if len(t.Sources) > 0 {
		s := t.Sources[0]
		src.Addr = netip.AddrPortFrom(s.Prefix.Addr(), cmp.Or(s.Port, transport.UDP.DefaultPort()))
	}
	from := fmt.Appendf(nil, "sip:%s", src.Addr.Addr())
	if len(caller) > 0 {
		from = fmt.Appendf(nil, "sip:%s@%s", caller, src.Addr.Addr())
	}
	rq := route.Request{CallID: []byte(q.CallID), Trunk: t.Name, TrunkGroup: t.Group, Attributes: t.Attributes,
		Dialed: dialed, From: from, To: fmt.Appendf(nil, "sip:%s@%s", q.To, hostOnlyOf(dr.engine.Local.For(src.Transport))), Source: src}
	var static *lcr.StaticTable
	if dr.static != nil {
		static = dr.static()
	}
	ex := dr.res.Explain(ctx, static, &rq)
	a.Decision = DecisionWhy{Source: ex.From, Tier: ex.Tier, Failure: ex.Failure, Error: ex.Err}
	if ex.From == lcr.FromStatic && ex.Matched {
		a.Decision.Prefix = &ex.Prefix
	}
	d := ex.Decision
	if d.Code != 0 || len(d.Routes) == 0 {
		a.Decision.Reject = &RejectWhy{Code: cmp.Or(d.Code, 503), Reason: cmp.Or(d.Reason, "Service Unavailable")}
	}
	opts := t.Sequence(dr.engine.Sequence, &d)
	if ring := opts.Ring(); ring > 0 {
		a.RingTimeoutSecs = int(ring / time.Second)
	}
	key := xxhash.Sum64String(q.CallID)
	routes := dr.carriers.PreviewOrder(d.Routes, dialed) // quality.mode's order, as the engine's
	for i := range routes {
		last := i == len(routes)-1 && !dr.rerouted
		c, err := dr.carrier(ctx, &routes[i], &opts, key, caller, dialed, last)
		if err != nil {
			return RouteAnswer{}, err
		}
		a.Carriers = append(a.Carriers, c)
	}
	return a, nil
}

// carrier says how route r would be dialled, or why it would be skipped;
// last: it is the call's last carrier (the engine's ReserveLast).
func (dr *dryRun) carrier(ctx context.Context, r *route.Route, opts *route.SequenceOptions, key uint64, caller, dialed []byte, last bool) (CarrierWhy, error) {
	c := CarrierWhy{CarrierID: r.CarrierID, GatewayGroup: r.GatewayGroup, Rate: r.Rate, Currency: r.Currency}
	preview := dr.carriers.Preview
	if last {
		preview = dr.carriers.PreviewLast
	}
	pv, err := preview(ctx, r, key, dialed)
	if err != nil {
		return c, err
	}
	c.Demoted = pv.Demoted
	if pv.Reason != "" {
		c.Skip, c.SkipDetail = pv.Reason, skipDetail(r, &pv)
		return c, nil
	}
	p := dr.engine.Present(caller, dialed, r, &pv.Dial)
	dl := &DialWhy{Gateway: pv.Dial.Gateway.URI, Member: pv.Dial.Gateway.Index, Address: pv.Dial.Peer.Addr.String(),
		Transport: pv.Dial.Peer.Transport.Name(), RURI: p.RequestURI, To: p.To, From: p.From,
		PAssertedIdentity: p.PAssertedIdentity, Privacy: p.Privacy, CallerID: p.CallerID, Presentation: "allowed",
		TechPrefix: r.TechPrefix, NumberPolicy: p.NumberPolicy, Headers: p.Headers, Warnings: p.Warnings,
		ProgressTimeoutSecs: int(opts.ProgressWait(r) / time.Second), CPSKey: pv.CPSKey, CPSWaitMs: pv.Wait.Milliseconds(),
		LastResort: pv.LastResort}
	if pv.Dial.Gateway.Group == "" { // a next hop
		dl.Gateway, dl.Member = pv.Dial.Group, -1
	}
	if p.Restricted {
		dl.Presentation = "restricted"
	}
	c.Dial = dl
	return c, nil
}

// skipDetail says in words why the carrier of route r would be skipped.
func skipDetail(r *route.Route, pv *carrier.Preview) string {
	switch pv.Reason {
	case route.ReasonDisabled:
		return fmt.Sprintf("quality routing disabled carrier %q for the number's quality prefix (GET /v1/quality)", r.CarrierID)
	case route.ReasonCallsLimited:
		return fmt.Sprintf("gateway group %q has every channel it may use on this node in use (max_concurrent_calls)", r.GatewayGroup)
	case route.ReasonGroupDown:
		return fmt.Sprintf("every member of gateway group %q is down, in cooldown or out of half-open trial calls", r.GatewayGroup)
	case route.ReasonUnknownGroup:
		return fmt.Sprintf("no gateway group %q, and the route has no next_hop or ruri", r.GatewayGroup)
	case route.ReasonUnresolvable:
		if r.GatewayGroup != "" && r.NextHop == "" && r.RURI == "" {
			return fmt.Sprintf("no member of gateway group %q resolves", r.GatewayGroup)
		}
		return "its next hop is not an IP address (there is no DNS on a shard), or not a sip: URI"
	case route.ReasonCPSLimited:
		return fmt.Sprintf("its calls-per-second account %q has no slot within its max_wait now", pv.CPSKey)
	}
	return ""
}

// hostOnlyOf is the host of host:port.
func hostOnlyOf(hp string) string {
	if ap, err := netip.ParseAddrPort(hp); err == nil {
		return ap.Addr().String()
	}
	return hp
}

// postRoute answers POST /v1/route: a dry run on the running node.
func (s *Server) postRoute(w http.ResponseWriter, r *http.Request) {
	var q RouteQuery
	if err := decodeJSON(r.Body, maxAdminBody, &q, "route query"); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	a, err := s.dryRun().route(r.Context(), q)
	switch {
	case errors.Is(err, ErrBadQuery):
		writeError(w, http.StatusBadRequest, err)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err)
	default:
		writeJSON(w, http.StatusOK, a)
	}
}

// dryRun is the running node's: its resolver, table, carrier plane and
// trunks.
func (s *Server) dryRun() *dryRun {
	dr := &dryRun{mode: ModeLive, res: s.lcr, carriers: s.carriers, trunks: s.trunks, engine: s.b2buaConfig(0)}
	if s.cfg.LCR.APIURL == "" {
		dr.static = s.static.Load
	}
	dr.rerouted = s.policy.OnFailure != nil
	if s.policy.OnInvite != nil {
		dr.notes = append(dr.notes, "the embedding program's OnInvite hook is not run: its changes to the decision are not shown")
	}
	return dr
}

// RouteFromConfig answers q from cfg alone, as a node just started on it
// would, without starting one: the gateways as the configuration writes
// them (no probes: every member up), no Redis (no cached decision, the CPS
// accounts and channels all free), the LCR API asked when lcr.api_url is
// set, quality routing with no figures and no disables. Nothing is opened
// but the API's connection and the gateways' DNS names resolved.
func RouteFromConfig(ctx context.Context, cfg *config.Config, q RouteQuery, log *slog.Logger) (RouteAnswer, error) {
	dr, closeDR, err := configDryRun(cfg, log)
	if err != nil {
		return RouteAnswer{}, err
	}
	defer closeDR()
	return dr.route(ctx, q)
}

// configDryRun builds RouteFromConfig's parts, and what closes them.
func configDryRun(cfg *config.Config, log *slog.Logger) (*dryRun, func(), error) {
	if log == nil {
		log = slog.Default()
	}
	local := *cfg
	local.LCR.Cache, local.RateLimit.Redis = "", ""
	// Quality routing as a node just started has it: no figures yet, no
	// disables (they are in Redis).
	plane, err := carrier.New(carrier.Options{Groups: local.Gateway.Groups, Nodes: local.RateLimit.Nodes,
		Limiter: ratelimit.Options{Config: ratelimit.Config{Nodes: local.RateLimit.Nodes}}, Log: log,
		Quality: &local.Quality, QualityOptions: quality.Options{Shards: 1}})
	if err != nil {
		return nil, nil, err
	}
	s := &Server{cfg: &local, carriers: plane}
	res, table, err := newResolver(&local, metrics.NewSet(), log, s.qualityScores)
	if err != nil {
		plane.Close()
		return nil, nil, err
	}
	closeAll := func() { plane.Close(); res.Close() }
	ingress, err := ratelimit.NewLocal(ratelimit.Options{})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	set := metrics.NewSet()
	tr, err := newTrunks(&local, ingress, func(name string) *b2bua.TrunkStats { return b2bua.NewTrunkStats(set, name) }, nil, log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	dr := &dryRun{mode: ModeConfig, res: res, carriers: plane, trunks: tr, engine: s.b2buaConfig(0),
		notes: []string{"from the configuration alone: every gateway up (no probes), no cached decision or quality disable and every CPS account free (no Redis), every channel free and no quality figures (no calls); -admin URL asks a running node"}}
	if local.LCR.APIURL == "" {
		dr.static = func() *lcr.StaticTable { return table }
	}
	return dr, closeAll, nil
}

// WriteRoute writes a dry run's answer as sipedge route prints it: the
// call, the decision and where it came from, then each carrier in order,
// how it would be dialled or why it would be skipped.
func WriteRoute(w io.Writer, a RouteAnswer) error {
	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("call to %s", a.To)
	if a.From != "" {
		p(" from %s", a.From)
	}
	p(", trunk %s (trunk_group %s)\n", a.Trunk, a.TrunkGroup)
	p("routed as %s", a.Dialed)
	if a.Caller != "" {
		p(", caller %s", a.Caller)
	}
	if a.RingTimeoutSecs > 0 {
		p("; ring bound %d s\n", a.RingTimeoutSecs)
	} else {
		p("; no ring bound\n")
	}
	p("mode: %s\n", a.Mode)
	for _, n := range a.Notes {
		p("note: %s\n", n)
	}
	p("decision: %s\n", decisionText(&a.Decision))
	if r := a.Decision.Reject; r != nil {
		p("the caller gets %d %s\n", r.Code, r.Reason)
	}
	if len(a.Carriers) > 0 {
		p("carriers, in order:\n")
	}
	for i, c := range a.Carriers {
		p("  %d. %s", i+1, c.CarrierID)
		if c.GatewayGroup != "" {
			p(", gateway_group %s", c.GatewayGroup)
		}
		p(", rate %v", c.Rate)
		if c.Currency != "" {
			p(" %s", c.Currency)
		}
		if c.Demoted {
			p(", demoted (quality)")
		}
		p("\n")
		line := func(key, format string, args ...any) { p("       %-10s %s\n", key, fmt.Sprintf(format, args...)) }
		if c.Skip != "" {
			line("skipped", "%s: %s", c.Skip, c.SkipDetail)
			continue
		}
		d := c.Dial
		switch {
		case d.LastResort:
			line("dial", "%s (member %d) at %s %s, as a last resort: every member is down", d.Gateway, d.Member, d.Address, d.Transport)
		case d.Member >= 0:
			line("dial", "%s (member %d) at %s %s", d.Gateway, d.Member, d.Address, d.Transport)
		default:
			line("dial", "next hop %s at %s %s", d.Gateway, d.Address, d.Transport)
		}
		line("R-URI", "%s", d.RURI)
		line("To", "%s", d.To)
		line("From", "%s", d.From)
		if d.PAssertedIdentity != "" {
			line("PAI", "%s", d.PAssertedIdentity)
		}
		if d.Privacy != "" {
			line("Privacy", "%s", d.Privacy)
		}
		line("caller ID", "%s, presentation %s", cmp.Or(d.CallerID, "(none)"), d.Presentation)
		if d.TechPrefix != "" {
			line("prefix", "tech_prefix %s", d.TechPrefix)
		}
		if d.NumberPolicy != "" {
			line("policy", "number_policy %s", d.NumberPolicy)
		}
		for _, h := range d.Headers {
			line("header", "%s", h)
		}
		line("progress", "within %d s, else the next carrier", d.ProgressTimeoutSecs)
		switch {
		case d.CPSKey == "":
		case d.CPSWaitMs > 0:
			line("CPS", "account %s: a slot in %d ms", d.CPSKey, d.CPSWaitMs)
		default:
			line("CPS", "account %s: a slot now", d.CPSKey)
		}
		for _, warning := range d.Warnings {
			line("warning", "%s", warning)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// decisionText says where a decision came from.
func decisionText(d *DecisionWhy) string {
	failure := fmt.Sprintf("the routing API failed (%s: %s)", d.Failure, d.Error)
	switch d.Source {
	case lcr.FromAPI:
		return "the routing API's answer"
	case lcr.FromCache:
		return "the routing API's answer, cached (" + d.Tier + " tier)"
	case lcr.FromStatic:
		if d.Prefix == nil {
			return "the static rate table: no prefix matches"
		}
		return fmt.Sprintf("the static rate table, prefix %q", *d.Prefix)
	case lcr.FromFallback:
		return "fallback_gateway_group: " + failure
	case lcr.FromNone:
		return "none: " + failure + ", and no fallback_gateway_group"
	}
	return d.Source
}
