package lcr

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sipedge/sipedge/route"
)

// APIVersion is the version of the JSON contract sent in Request.Version
// (docs/lcr-api.md). A Request whose Version is 0 is sent with this one.
const APIVersion = 1

// ErrInvalidResponse is wrapped by every error Response.Validate and
// ValidateRoute return: the API answered something the contract does not
// allow, and the answer is treated as an API failure.
var ErrInvalidResponse = errors.New("lcr: invalid response")

// Request is the body sipedge POSTs to the routing API: one call to route.
// See docs/lcr-api.md for the meaning of each field.
type Request struct {
	Version      int        `json:"version"`
	CallID       string     `json:"call_id"`
	From         string     `json:"from"`
	To           string     `json:"to"`
	DialedNumber string     `json:"dialed_number"`
	Source       CallSource `json:"source"`
	// Attributes are the call's attributes: its trunk's static
	// trunks[].attributes (ValidAttributeName, ValidAttributeValue). Those
	// named in Options.KeyAttributes are also part of the cache key.
	// Omitted from the JSON when empty.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Quality holds the quality scores of the call's prefix when
	// Options.Quality is set (lcr.send_quality), filled as the request
	// leaves: omitted otherwise, and when the number has no quality
	// prefix.
	Quality *Quality `json:"quality,omitempty"`
}

// Quality is what sipedge knows of the carriers' quality under the call's
// quality prefix (docs/lcr-api.md, "Quality scores"): a hint the API may weigh.
type Quality struct {
	// Prefix is the quality prefix the dialled number falls under, as
	// configured (quality.prefixes).
	Prefix string `json:"prefix"`
	// Carriers are those sipedge has figures or a disable for under
	// Prefix, by carrier_id; [] when none.
	Carriers []CarrierQuality `json:"carriers"`
}

// CarrierQuality is one carrier's standing under a quality prefix.
type CarrierQuality struct {
	CarrierID string  `json:"carrier_id"`
	Score     float64 `json:"score"`    // 0 is perfect, higher is worse
	Demoted   bool    `json:"demoted"`  // the score reaches its profile's critical penalty
	Disabled  bool    `json:"disabled"` // taken out of routing: sipedge skips it
}

// CallSource is where the call came from: the customer trunk's peer.
type CallSource struct {
	IP         string `json:"ip"`
	Port       int    `json:"port"`
	Transport  string `json:"transport"` // "udp" or "tcp"
	TrunkGroup string `json:"trunk_group"`
}

// Response is the routing API's answer. Routes are in the order to try them
// (the API owns cost order). Reject, when set, blocks the call and wins over
// Routes. CacheTTLSecs nil means "use Options.CacheTTL", 0 means "do not
// cache". A response must carry Routes (possibly empty: no route, 404) or
// Reject.
type Response struct {
	Routes       []route.Route `json:"routes"`
	CacheTTLSecs *int          `json:"cache_ttl_secs,omitempty"`
	Reject       *Reject       `json:"reject,omitempty"`
}

// Reject is an API-side block: the caller gets Code (400-699) and Reason.
type Reject struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// Caller-ID presentations of a route. Any other value is accepted by
// Validate: the policy treats it as restricted and logs it.
const (
	PresentationAllowed    = "allowed"
	PresentationRestricted = "restricted"
)

// Validate checks r against the contract (docs/lcr-api.md, "Validation") and returns
// the first violation, wrapping ErrInvalidResponse, or nil.
func (r *Response) Validate() error {
	if r.Routes == nil && r.Reject == nil {
		return fmt.Errorf("%w: neither routes nor reject", ErrInvalidResponse)
	}
	if r.CacheTTLSecs != nil && *r.CacheTTLSecs < 0 {
		return fmt.Errorf("%w: cache_ttl_secs %d is negative", ErrInvalidResponse, *r.CacheTTLSecs)
	}
	if r.Reject != nil && (r.Reject.Code < 400 || r.Reject.Code > 699) {
		return fmt.Errorf("%w: reject.code %d is not 400-699", ErrInvalidResponse, r.Reject.Code)
	}
	if r.Reject != nil && strings.ContainsFunc(r.Reject.Reason, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) {
		// It becomes a status line's reason phrase (RFC 3261 25.1).
		return fmt.Errorf("%w: reject.reason %q has control characters", ErrInvalidResponse, r.Reject.Reason)
	}
	for i := range r.Routes {
		if err := ValidateRoute(&r.Routes[i]); err != nil {
			return fmt.Errorf("routes[%d]: %w", i, err)
		}
	}
	return nil
}

// ValidateRoute checks one route: a carrier_id; a gateway_group, next_hop or
// ruri to dial; rate and timeout_secs not negative; reroute_causes 300-699;
// and that what goes into the carrier's INVITE can go there: caller_id a
// number, tech_prefix and ruri free of the characters that would end a URI
// or a header line (the config's checks, for the API's routes); a cps the
// CPS limiter can pace (see MinCPSRate). An unknown
// caller_id_presentation is not an error (see the constants).
func ValidateRoute(rt *route.Route) error {
	if rt.CarrierID == "" {
		return fmt.Errorf("%w: carrier_id is empty", ErrInvalidResponse)
	}
	if !ValidCarrierID(rt.CarrierID) {
		return fmt.Errorf("%w: carrier_id %q: want up to %d printable characters", ErrInvalidResponse, rt.CarrierID, MaxCarrierID)
	}
	if c := strings.TrimPrefix(rt.CallerID, "+"); rt.CallerID != "" && (c == "" || strings.Trim(c, "0123456789") != "") {
		return fmt.Errorf("%w: carrier %q: caller_id %q: want a number, digits with an optional leading +", ErrInvalidResponse, rt.CarrierID, rt.CallerID)
	}
	if !ValidTechPrefix(rt.TechPrefix) {
		return fmt.Errorf("%w: carrier %q: tech_prefix %q: not allowed in a user part", ErrInvalidResponse, rt.CarrierID, rt.TechPrefix)
	}
	if rt.RURI != "" && !SIPURI(rt.RURI) {
		return fmt.Errorf("%w: carrier %q: ruri %q: want a sip: or sips: URI", ErrInvalidResponse, rt.CarrierID, rt.RURI)
	}
	if rt.GatewayGroup == "" && rt.NextHop == "" && rt.RURI == "" {
		return fmt.Errorf("%w: carrier %q has none of gateway_group, next_hop, ruri", ErrInvalidResponse, rt.CarrierID)
	}
	if rt.Rate < 0 || rt.Rate != rt.Rate {
		return fmt.Errorf("%w: carrier %q: rate %v is not >= 0", ErrInvalidResponse, rt.CarrierID, rt.Rate)
	}
	if rt.TimeoutSecs < 0 {
		return fmt.Errorf("%w: carrier %q: timeout_secs %d is negative", ErrInvalidResponse, rt.CarrierID, rt.TimeoutSecs)
	}
	for _, c := range rt.RerouteCauses {
		if c < 300 || c > 699 {
			return fmt.Errorf("%w: carrier %q: reroute cause %d is not 300-699", ErrInvalidResponse, rt.CarrierID, c)
		}
	}
	if c := rt.CPS; c != nil {
		switch {
		case c.Rate < 0 || c.Rate != c.Rate:
			return fmt.Errorf("%w: carrier %q: cps.rate %v is not >= 0", ErrInvalidResponse, rt.CarrierID, c.Rate)
		case c.Rate > 0 && cpsInterval(c.Rate) > cpsMaxSpan:
			return fmt.Errorf("%w: carrier %q: cps.rate %v is under one call an hour (calls are spaced 1/rate × %v): want 0 or at least %g",
				ErrInvalidResponse, rt.CarrierID, c.Rate, cpsMargin, MinCPSRate)
		case c.Burst < 0:
			return fmt.Errorf("%w: carrier %q: cps.burst %d is negative", ErrInvalidResponse, rt.CarrierID, c.Burst)
		case c.Rate > 0 && float64(max(c.Burst, 1)-1)*max(cpsInterval(c.Rate), float64(time.Microsecond)) > cpsMaxSpan:
			return fmt.Errorf("%w: carrier %q: cps.burst %d at cps.rate %v: more than an hour of calls at once", ErrInvalidResponse, rt.CarrierID, c.Burst, c.Rate)
		case c.MaxWaitMs != nil && (*c.MaxWaitMs < 0 || *c.MaxWaitMs > maxCPSWaitMs):
			return fmt.Errorf("%w: carrier %q: cps.max_wait_ms %d is not 0-%d", ErrInvalidResponse, rt.CarrierID, *c.MaxWaitMs, maxCPSWaitMs)
		case len(c.Key) > maxCPSKey || strings.ContainsFunc(c.Key, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return fmt.Errorf("%w: carrier %q: cps.key %q: want up to %d visible characters", ErrInvalidResponse, rt.CarrierID, c.Key, maxCPSKey)
		}
	}
	return nil
}

// ValidTechPrefix reports whether p may stand before the number in a
// Request-URI's user part. The config's static routes are held to it too.
func ValidTechPrefix(p string) bool { return !strings.ContainsAny(p, " \t\r\n@:;<>?,\x00\x7f") }

// SIPURI reports whether s is "sip:" or "sips:" and then visible
// characters but '<' and '>': what a Request-URI may be. The config's
// URIs are held to it too.
func SIPURI(s string) bool {
	rest, ok := strings.CutPrefix(s, "sip:")
	if !ok {
		rest, ok = strings.CutPrefix(s, "sips:")
	}
	return ok && rest != "" && !strings.ContainsFunc(rest, func(c rune) bool { return c <= ' ' || c == 0x7f || c == '<' || c == '>' })
}

// Bounds of a route's cps: a wait longer than a minute holds a call for
// nothing a caller would wait for; a key is a Redis key name.
const (
	maxCPSWaitMs = 60000
	maxCPSKey    = 128
)

// The CPS limiter's bounds (ratelimit.Limit), which lcr may not import: it
// spaces an account's calls 1/rate × cpsMargin apart (its DefaultMargin),
// at most an hour, and takes a burst of at most an hour of calls at once.
// A route it refused would go unpaced, so ValidateRoute refuses it first;
// carrier's TestRouteCPSValidIsPaced keeps the two in step.
const (
	cpsMargin  = 1.15
	cpsMaxSpan = float64(time.Hour)
)

// MinCPSRate is the slowest cps.rate a route may ask for: one call an
// hour, margin included.
const MinCPSRate = float64(time.Second) * cpsMargin / cpsMaxSpan

// cpsInterval is the limiter's space between calls at rate, in ns.
func cpsInterval(rate float64) float64 { return math.Ceil(float64(time.Second) / rate * cpsMargin) }

// Bounds of a call's attributes (Request.Attributes): how many, and the
// length of a name and of a value, in characters.
const (
	MaxAttributes     = 16
	MaxAttributeName  = 64
	MaxAttributeValue = 128
)

// ValidAttributeName reports whether s can name an attribute: 1 to
// MaxAttributeName ASCII letters, digits, '_', '-' or '.'. A name is a key
// of the request's JSON and part of the cache key, where ':', ',' and '='
// separate.
func ValidAttributeName(s string) bool {
	if s == "" || len(s) > MaxAttributeName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ValidAttributeValue reports whether s can be an attribute's value: up to
// MaxAttributeValue printable characters of valid UTF-8 but ',' and ':'.
// The cache key ends in ":name=value,name=value": a value with either could
// make the key of one trunk's values, or of a crafted dialled number, that
// of another's, and one trunk would get the decision cached for another.
func ValidAttributeValue(s string) bool {
	return utf8.ValidString(s) && utf8.RuneCountInString(s) <= MaxAttributeValue &&
		!strings.ContainsFunc(s, func(r rune) bool { return r == ',' || r == ':' || !strconv.IsPrint(r) })
}

// MaxCarrierID bounds a carrier_id, in characters: a metric label and a
// CDR field.
const MaxCarrierID = 128

// ValidCarrierID reports whether id can be a carrier_id: 1 to MaxCarrierID
// printable characters of valid UTF-8. It labels the per-carrier metrics,
// and a character Prometheus' text format cannot carry would break every
// scrape of the node. The config's static routes are held to it too.
func ValidCarrierID(id string) bool {
	return id != "" && utf8.ValidString(id) && utf8.RuneCountInString(id) <= MaxCarrierID &&
		!strings.ContainsFunc(id, func(r rune) bool { return !strconv.IsPrint(r) })
}
