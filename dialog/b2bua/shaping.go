package b2bua

import (
	"bytes"
	"slices"
	"strings"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/route"
	"github.com/sipedge/sipedge/transport"
)

// NumberPolicy is a named number-shaping preset (number_policies,
// docs/design/lcr.md 4.1): the form a carrier wants numbers in.
type NumberPolicy struct {
	National       bool   // national form instead of E.164
	CountryCode    string // e.g. "1"
	NationalPrefix string // e.g. "0"; may be empty
}

// Shape appends num in the policy's form. Visual separators are dropped.
// Input that is not a telephone number (a name, "anonymous") is appended
// unchanged: no policy reformats it.
//
// A short code (fewer than 7 digits, no "+" or "00": 999, 112, 911) is
// appended unchanged too.
//
// E.164: "+" kept; "00" becomes "+"; the national prefix becomes "+CC";
// a number already starting with the country code and long enough to hold
// one (11+ digits) gets "+"; any other number is national and gets "+CC".
// National: the E.164 form, then "+CC" becomes the national prefix; other
// countries' numbers stay international.
func (p *NumberPolicy) Shape(dst, num []byte) []byte {
	var buf [40]byte
	digits := buf[:0]
	plus := false
	for i, c := range num {
		switch {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
		case c == '+' && i == 0:
			plus = true
		case c == '-' || c == '.' || c == ' ' || c == '(' || c == ')':
		default:
			return append(dst, num...)
		}
		if len(digits) == cap(buf) {
			return append(dst, num...)
		}
	}
	// "00" is the international prefix only before a country code, and
	// no country code starts with 0 (ITU-T E.164): "000" is a short
	// code (Australia's emergency number), not "+0".
	intl := len(digits) > 2 && digits[0] == '0' && digits[1] == '0' && digits[2] != '0'
	if len(digits) == 0 || !plus && len(digits) < minSubscriberDigits && !intl {
		// No number, or a short code (999, 112, 911, a service code):
		// dialled as it is, never given a country code.
		return append(dst, num...)
	}
	// The E.164 digits, without "+".
	var e164 []byte
	switch {
	case plus:
		e164 = digits
	case intl:
		e164 = digits[2:]
	case p.NationalPrefix != "" && hasPrefix(digits, p.NationalPrefix):
		e164 = append(append(buf[len(digits):len(digits)], p.CountryCode...), digits[len(p.NationalPrefix):]...)
	case hasPrefix(digits, p.CountryCode) && len(digits) >= 11:
		e164 = digits
	default:
		e164 = append(append(buf[len(digits):len(digits)], p.CountryCode...), digits...)
	}
	if p.National && p.CountryCode != "" && hasPrefix(e164, p.CountryCode) {
		dst = append(dst, p.NationalPrefix...)
		return append(dst, e164[len(p.CountryCode):]...)
	}
	dst = append(dst, '+')
	return append(dst, e164...)
}

// minSubscriberDigits is the fewest digits a national number has; fewer
// are a short code (ITU-T E.164 leaves them national).
const minSubscriberDigits = 7

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// identity is what one B-leg presents: the numbers after the route's
// shaping, in their fixed order (docs/design/lcr.md 4.7).
type identity struct {
	caller   []byte // the calling number presented (From user)
	callee   []byte // the dialled number as the carrier wants it (To, R-URI)
	ruriUser []byte // callee with the tech prefix (the Request-URI user only)
	pai      []byte // the asserted identity's user; nil when none is asserted
	privacy  []byte // the caller's Privacy values sipedge forwards, ';'-separated, without id
	anon     bool   // CLIR (RFC 3323 4.1)
}

// shape computes a B-leg's identity for route r (docs/design/lcr.md 4,
// per-carrier shaping, presented number and CLIR): caller_id substitutes first, the
// identity is asserted second, number_policy reshapes third, anonymisation
// runs last; tech_prefix goes on the Request-URI user after the policy.
func (e *Engine) shape(id *identity, c *Call, r *route.Route) {
	policy, name, known := e.cfg.numberPolicy(r)
	if !known {
		e.env.Log.Warn("unknown number_policy: the number is not shaped", "call_id", string(c.a.callID),
			"carrier", carrierOf(r), "number_policy", name)
	}
	e.cfg.shapeNumbers(id, c.caller, c.callee, r, policy)
	// 4. Anonymise: "restricted", any presentation not understood (a
	// withheld call going out with the real number is the failure that
	// matters), and a caller that asks for it with Privacy.
	id.anon, id.privacy = false, id.privacy[:0]
	if ainv := e.aInviteCopy(c); ainv != nil {
		// Every Privacy line: one value split over several reads as one
		// (RFC 3261 7.3.1), as parser.Message.Privacy reads it; the first
		// alone let "Privacy: none" hide a following "Privacy: id".
		for i := 0; i < ainv.Count(parser.HeaderPrivacy); i++ {
			var withhold bool
			id.privacy, withhold = callerPrivacy(id.privacy, ainv.Nth(parser.HeaderPrivacy, i))
			id.anon = id.anon || withhold
		}
	}
	if r != nil {
		restricted, known := presentation(r.CallerIDPresentation)
		if !known {
			e.env.Log.Warn("unknown caller_id_presentation, treated as restricted", "call_id", string(c.a.callID),
				"carrier", r.CarrierID, "presentation", r.CallerIDPresentation)
		}
		id.anon = id.anon || restricted
	}
}

// shapeNumbers computes the numbers of a B-leg's identity on route r, the
// caller's and the callee's as its trunk gave them: steps 1 to 3 of shape,
// with policy the route's number policy (nil: none).
func (cfg *Config) shapeNumbers(id *identity, caller, callee []byte, r *route.Route, policy *NumberPolicy) {
	// 1. Substitute.
	if r != nil && r.CallerID != "" {
		caller = []byte(r.CallerID)
	}
	// 2. Assert: the real (or substituted) identity, before any policy.
	// 3. Reshape formats: caller, asserted identity and callee alike.
	id.caller, id.callee, id.ruriUser, id.pai = id.caller[:0], id.callee[:0], id.ruriUser[:0], id.pai[:0]
	if policy != nil {
		id.caller = policy.Shape(id.caller, caller)
		id.callee = policy.Shape(id.callee, callee)
	} else {
		id.caller = append(id.caller, caller...)
		id.callee = append(id.callee, callee...)
	}
	if cfg.AssertIdentity {
		id.pai = append(id.pai, id.caller...)
	} else {
		id.pai = nil
	}
	if r != nil {
		id.ruriUser = appendUserEscaped(id.ruriUser, r.TechPrefix)
	}
	if num, params, ok := ruriNumber(r); ok {
		// A ruri override's number is still shaped by the route's policy,
		// and tech_prefix goes on after it (docs/design/lcr.md 4.3). Its
		// user parameters (";npdi", RFC 4694) are kept as given.
		if policy != nil {
			id.ruriUser = policy.Shape(id.ruriUser, []byte(num))
		} else {
			id.ruriUser = append(id.ruriUser, num...)
		}
		id.ruriUser = append(id.ruriUser, params...)
	} else {
		id.ruriUser = append(id.ruriUser, id.callee...)
	}
}

// presentation reads a route's caller_id_presentation: whether it
// restricts the caller's identity (CLIR), and whether it is a value
// sipedge knows; one it does not is restricted, as withholding is the
// safe reading.
func presentation(p string) (restricted, known bool) {
	switch p {
	case "", "allowed":
		return false, true
	case "restricted":
		return true, true
	}
	return true, false
}

func carrierOf(r *route.Route) string {
	if r == nil {
		return ""
	}
	return r.CarrierID
}

// ruriNumber returns the number in the user part of route r's ruri and
// the user parameters after it (RFC 3966 5.1 par, in a SIP URI's user: RFC
// 3261 19.1.6); ok is false when r has no ruri or its ruri no user, and
// the Request-URI user is then the dialled number.
func ruriNumber(r *route.Route) (num, params string, ok bool) {
	if r == nil || r.RURI == "" {
		return "", "", false
	}
	rest := trimScheme(r.RURI)
	at := strings.IndexByte(rest, '@')
	if at <= 0 {
		return "", "", false
	}
	user := rest[:at]
	if i := strings.IndexByte(user, ';'); i >= 0 {
		return user[:i], user[i:], true
	}
	return user, "", true
}

// ruriHost returns what follows the user part of a ruri: host, port and
// URI parameters as given.
func ruriHost(ruri string) string {
	rest := trimScheme(ruri)
	if at := strings.IndexByte(rest, '@'); at >= 0 {
		return rest[at+1:]
	}
	return rest
}

// appendUserEscaped appends s to a SIP URI's user part, %-escaping what
// the user part may not hold as it is (RFC 3261 25.1 user; 19.1.2): the
// tech prefix "#31#" goes out as "%2331%23" (docs/design/lcr.md 4.2). An
// escape already in s is kept.
func appendUserEscaped(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			strings.IndexByte("-_.!~*'()&=+$,;?/", c) >= 0,
			c == '%' && i+2 < len(s) && isHexDigit(s[i+1]) && isHexDigit(s[i+2]):
			dst = append(dst, c)
		default:
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// numberPolicy returns the route's number policy, or the default one; nil
// when none applies. An unknown name, which shapes nothing, is known
// false.
func (cfg *Config) numberPolicy(r *route.Route) (p *NumberPolicy, name string, known bool) {
	name = cfg.DefaultNumberPolicy
	if r != nil && r.NumberPolicy != "" {
		name = r.NumberPolicy
	}
	if name == "" {
		return nil, "", true
	}
	np, ok := cfg.NumberPolicies[name]
	if !ok {
		return nil, name, false
	}
	return &np, name, true
}

// identityHeaders are the A INVITE's headers the B2BUA rewrites itself on
// the B-leg: the identity headers and Privacy.
var identityHeaders = parser.NewHeaderSet(parser.HeaderPAssertedIdentity, parser.HeaderPPreferredIdentity, parser.HeaderPrivacy)

// appendIdentity appends the P-Asserted-Identity and Privacy of a B-leg on
// transport k (its From is addressB's). With CLIR, From is anonymous,
// Privacy: id is appended to any existing value (RFC 3325 7), the PAI keeps
// carrying the real identity to the trusted next hop, and no
// P-Preferred-Identity is forwarded.
func (cfg *Config) appendIdentity(dst []byte, id *identity, k transport.Kind) []byte {
	host := hostOnly(cfg.Local.For(k))
	if len(id.pai) > 0 {
		dst = append(dst, "P-Asserted-Identity: <sip:"...)
		dst = append(dst, id.pai...)
		dst = append(dst, '@')
		dst = append(dst, host...)
		dst = append(dst, ">\r\n"...)
	}
	switch {
	case id.anon:
		dst = append(dst, "Privacy: "...)
		if len(id.privacy) > 0 {
			dst = append(dst, id.privacy...)
			dst = append(dst, ';')
		}
		dst = append(dst, "id\r\n"...)
	case len(id.privacy) > 0:
		dst = parser.AppendHeader(dst, "Privacy", id.privacy)
	}
	return dst
}

// callerPrivacy appends to dst the values of the caller's Privacy header
// (RFC 3323 4.2, RFC 3325 9.3) that sipedge forwards to the carrier:
// header, session, user and critical, ';'-separated; id is left to the
// caller of appendIdentity, and none and anything else are dropped: the
// header comes from an untrusted trunk, and is never copied as it is. It
// reports whether the caller asks for its identity to be withheld (id,
// user or header), which sipedge honours as CLIR.
func callerPrivacy(dst, v []byte) (out []byte, withhold bool) {
	for len(v) > 0 {
		i := bytes.IndexAny(v, ";,")
		tok := v
		if i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		tok = bytes.TrimSpace(tok)
		switch {
		case bytes.EqualFold(tok, []byte("id")):
			withhold = true
			continue
		case bytes.EqualFold(tok, []byte("user")), bytes.EqualFold(tok, []byte("header")):
			withhold = true
		case bytes.EqualFold(tok, []byte("session")), bytes.EqualFold(tok, []byte("critical")):
		default:
			continue
		}
		if len(dst) > 0 {
			dst = append(dst, ';')
		}
		for _, c := range tok {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
	}
	return dst, withhold
}

// dialogHeaders may not be injected by a route's headers: the B2BUA owns
// them (docs/design/lcr.md 4.4: route headers are applied after the
// header policy, dialog-forming ones refused).
var dialogHeaders = parser.NewHeaderSet(parser.HeaderVia, parser.HeaderFrom, parser.HeaderTo,
	parser.HeaderCallID, parser.HeaderCSeq, parser.HeaderContact, parser.HeaderRoute,
	parser.HeaderRecordRoute, parser.HeaderMaxForwards, parser.HeaderContentLength,
	parser.HeaderContentType)

// routeHeader reports whether a route may inject the header name: value,
// and why not when it may not: a dialog-forming header, an identity header
// (identityHeaders and the pre-standard Remote-Party-ID), or a name or
// value that would not make one header line. Identity goes through
// caller_id and caller_id_presentation (docs/design/lcr.md 4.5: caller_id
// is a field, not a header, so that it goes through the path that rewrites
// From with its tag intact): a second PAI from headers would bypass CLIR.
func routeHeader(name, value string) (k parser.HeaderKind, refused string) {
	if !validHeaderName(name) || !validHeaderValue(value) {
		return parser.HeaderOther, "route header refused: not one header line"
	}
	k = parser.LookupHeader([]byte(name))
	switch {
	case dialogHeaders.Has(k):
		return k, "route header refused: the B2BUA owns it"
	case identityHeaders.Has(k), k == parser.HeaderOther && slices.ContainsFunc(neverNames, func(n string) bool { return strings.EqualFold(n, name) }):
		return k, "route header refused: identity goes through caller_id and caller_id_presentation"
	}
	return k, ""
}

// RouteHeaderRefused says why a route may not inject the header name:
// value ("" when it may): the rule each call applies, for a config loader
// to refuse a static route's header at start rather than warn on every call.
func RouteHeaderRefused(name, value string) string {
	_, refused := routeHeader(name, value)
	return refused
}

// routeHeaderKinds returns the known kinds of the headers route r injects:
// the A-leg's copies of them are left out, so the route's value is the one
// the carrier reads (docs/design/lcr.md 4.4). A kind matches its compact
// form too.
func routeHeaderKinds(r *route.Route) parser.HeaderSet {
	var s parser.HeaderSet
	if r == nil {
		return s
	}
	for name, value := range r.Headers {
		if k, refused := routeHeader(name, value); refused == "" && k != parser.HeaderOther {
			s |= parser.NewHeaderSet(k)
		}
	}
	return s
}

// replacedByRoute reports whether one of a route's headers, injected,
// replaces the A-leg's header name, of no known kind (compared without
// regard to case, RFC 3261 7.3.5).
func replacedByRoute(headers map[string]string, name []byte) bool {
	for n, v := range headers {
		if equalFold(name, n) {
			if _, refused := routeHeader(n, v); refused == "" {
				return true
			}
		}
	}
	return false
}

// appendRouteHeaders appends a route's headers (an account token, a
// routing tag), refusing dialog-forming and identity ones with a warning.
// They go in the order of their names: a map has none, and the same route
// then gives the same INVITE, call after call.
func (e *Engine) appendRouteHeaders(dst []byte, c *Call, r *route.Route) []byte {
	if r == nil {
		return dst
	}
	var prev string
	for i := range len(r.Headers) {
		// The next name after prev: a route has a few headers, and sorting
		// them would take a slice per call.
		name, found := "", false
		for n := range r.Headers {
			if (i == 0 || n > prev) && (!found || n < name) {
				name, found = n, true
			}
		}
		prev = name
		value := r.Headers[name]
		if _, refused := routeHeader(name, value); refused != "" {
			e.env.Log.Warn(refused, "call_id", string(c.a.callID), "carrier", r.CarrierID, "header", name)
			continue
		}
		dst = parser.AppendHeaderString(dst, name, value)
	}
	return dst
}

// validHeaderValue refuses line breaks, which would inject headers.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' || s[i] == '\n' || s[i] == 0 {
			return false
		}
	}
	return true
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
