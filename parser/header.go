package parser

import (
	"encoding/binary"
	"strings"
)

// HeaderKind identifies a header the parser knows by name, long or compact.
// Unknown headers have kind HeaderOther and are kept as opaque values.
type HeaderKind uint8

// Known headers. The order is not significant but is stable: HeaderSet uses
// the values as bit positions.
const (
	HeaderOther HeaderKind = iota
	HeaderVia
	HeaderFrom
	HeaderTo
	HeaderCallID
	HeaderCSeq
	HeaderContact
	HeaderMaxForwards
	HeaderContentLength
	HeaderContentType
	HeaderContentEncoding
	HeaderContentDisposition
	HeaderRoute
	HeaderRecordRoute
	HeaderExpires
	HeaderMinExpires
	HeaderRetryAfter
	HeaderRequire
	HeaderProxyRequire
	HeaderSupported
	HeaderUnsupported
	HeaderAllow
	HeaderAllowEvents
	HeaderAccept
	HeaderAcceptEncoding
	HeaderAcceptLanguage
	HeaderPrivacy
	HeaderReason
	HeaderPAssertedIdentity
	HeaderPPreferredIdentity
	HeaderSubject
	HeaderEvent
	HeaderReferTo
	HeaderReferredBy
	HeaderSessionExpires
	HeaderMinSE
	HeaderIdentity
	HeaderIdentityInfo
	HeaderAcceptContact
	HeaderRejectContact
	HeaderRequestDisposition
	HeaderAuthorization
	HeaderProxyAuthorization
	HeaderWWWAuthenticate
	HeaderProxyAuthenticate
	HeaderUserAgent
	HeaderServer
	HeaderDate
	HeaderTimestamp
	HeaderWarning
	HeaderRSeq
	HeaderRAck
	HeaderPath
	HeaderDiversion
	numHeaderKinds
)

// headerInfo describes a known header.
type headerInfo struct {
	name    string // canonical spelling, written by the builder
	compact byte   // RFC 3261 7.3.3 or IANA-registered compact form, 0 if none
	list    bool   // split into one field per element, see Message
}

var headerInfos = [numHeaderKinds]headerInfo{
	HeaderOther:              {},
	HeaderVia:                {"Via", 'v', true},
	HeaderFrom:               {"From", 'f', false},
	HeaderTo:                 {"To", 't', false},
	HeaderCallID:             {"Call-ID", 'i', false},
	HeaderCSeq:               {"CSeq", 0, false},
	HeaderContact:            {"Contact", 'm', true},
	HeaderMaxForwards:        {"Max-Forwards", 0, false},
	HeaderContentLength:      {"Content-Length", 'l', false},
	HeaderContentType:        {"Content-Type", 'c', false},
	HeaderContentEncoding:    {"Content-Encoding", 'e', false},
	HeaderContentDisposition: {"Content-Disposition", 0, false},
	HeaderRoute:              {"Route", 0, true},
	HeaderRecordRoute:        {"Record-Route", 0, true},
	HeaderExpires:            {"Expires", 0, false},
	HeaderMinExpires:         {"Min-Expires", 0, false},
	HeaderRetryAfter:         {"Retry-After", 0, false},
	HeaderRequire:            {"Require", 0, false},
	HeaderProxyRequire:       {"Proxy-Require", 0, false},
	HeaderSupported:          {"Supported", 'k', false},
	HeaderUnsupported:        {"Unsupported", 0, false},
	HeaderAllow:              {"Allow", 0, false},
	HeaderAllowEvents:        {"Allow-Events", 'u', false},
	HeaderAccept:             {"Accept", 0, false},
	HeaderAcceptEncoding:     {"Accept-Encoding", 0, false},
	HeaderAcceptLanguage:     {"Accept-Language", 0, false},
	HeaderPrivacy:            {"Privacy", 0, false},
	HeaderReason:             {"Reason", 0, true},
	HeaderPAssertedIdentity:  {"P-Asserted-Identity", 0, true},
	HeaderPPreferredIdentity: {"P-Preferred-Identity", 0, true},
	HeaderSubject:            {"Subject", 's', false},
	HeaderEvent:              {"Event", 'o', false},
	HeaderReferTo:            {"Refer-To", 'r', false},
	HeaderReferredBy:         {"Referred-By", 'b', false},
	HeaderSessionExpires:     {"Session-Expires", 'x', false},
	HeaderMinSE:              {"Min-SE", 0, false},
	HeaderIdentity:           {"Identity", 'y', false},
	HeaderIdentityInfo:       {"Identity-Info", 'n', false},
	HeaderAcceptContact:      {"Accept-Contact", 'a', false},
	HeaderRejectContact:      {"Reject-Contact", 'j', false},
	HeaderRequestDisposition: {"Request-Disposition", 'd', false},
	HeaderAuthorization:      {"Authorization", 0, false},
	HeaderProxyAuthorization: {"Proxy-Authorization", 0, false},
	HeaderWWWAuthenticate:    {"WWW-Authenticate", 0, false},
	HeaderProxyAuthenticate:  {"Proxy-Authenticate", 0, false},
	HeaderUserAgent:          {"User-Agent", 0, false},
	HeaderServer:             {"Server", 0, false},
	HeaderDate:               {"Date", 0, false},
	HeaderTimestamp:          {"Timestamp", 0, false},
	HeaderWarning:            {"Warning", 0, true},
	HeaderRSeq:               {"RSeq", 0, false},
	HeaderRAck:               {"RAck", 0, false},
	HeaderPath:               {"Path", 0, true},
	HeaderDiversion:          {"Diversion", 0, true},
}

// String returns the canonical header name, or "" for HeaderOther.
func (k HeaderKind) String() string { return headerInfos[k].name }

// HeaderSet is a set of header kinds, for the builder's copy and remove operations.
type HeaderSet uint64

// NewHeaderSet returns the set of the given kinds.
func NewHeaderSet(kinds ...HeaderKind) HeaderSet {
	var s HeaderSet
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in s.
func (s HeaderSet) Has(k HeaderKind) bool { return s&(1<<k) != 0 }

var (
	compactKinds [256]HeaderKind // compact form letter (lower case) -> kind
	// kindsBySlot holds the long names by nameSlot, without collisions.
	kindsBySlot [256]HeaderKind
)

// nameSlot hashes a header name of at least one byte case-insensitively
// from its length and its first and last bytes: a few operations instead of
// a multiply per byte, and collision-free over the long names (the init
// check keeps it so). Header names
// are tokens, among which c|0x20 folds only letters (RFC 3261 25.1).
func nameSlot(name []byte) uint8 {
	return uint8(name[0]|0x20) + 7*uint8(name[len(name)-1]|0x20) + 34*uint8(len(name))
}

func init() {
	if numHeaderKinds > 64 {
		panic("BUG: HeaderSet cannot hold every HeaderKind")
	}
	for k := HeaderKind(1); k < numHeaderKinds; k++ {
		info := headerInfos[k]
		if info.compact != 0 {
			compactKinds[info.compact] = k
		}
		i := nameSlot([]byte(info.name))
		if kindsBySlot[i] != HeaderOther {
			panic("BUG: nameSlot collides on " + info.name)
		}
		kindsBySlot[i] = k
	}
}

// LookupHeader returns the kind of a header name, matched case-insensitively
// against long and compact forms (RFC 3261 7.3.1, 7.3.3).
func LookupHeader(name []byte) HeaderKind {
	if !isToken(name) {
		return HeaderOther
	}
	return lookupName(name)
}

// lookupName is LookupHeader without the token check: a name it finds is a
// token but for CR, which equalTokenFold folds onto '-'. The long names
// do not collide in kindsBySlot, so each is at its own slot: one probe.
func lookupName(name []byte) HeaderKind {
	if len(name) < 2 {
		if len(name) == 0 {
			return HeaderOther
		}
		return compactKinds[toLower[name[0]]]
	}
	if k := kindsBySlot[nameSlot(name)]; equalTokenFold(name, lowerNames[k]) {
		return k
	}
	return HeaderOther
}

// isToken reports whether b is a non-empty token (RFC 3261 25.1).
func isToken(b []byte) bool {
	for _, c := range b {
		if byteClass[c]&classToken == 0 {
			return false
		}
	}
	return len(b) > 0
}

// lowerNames holds the canonical names in lower case.
var lowerNames = func() (l [numHeaderKinds][]byte) {
	for k := range l {
		l[k] = []byte(strings.ToLower(headerInfos[k].name))
	}
	return l
}()

// equalTokenFold reports whether the token b equals the lower-case token
// lower, ignoring case. Among token characters c|0x20 folds only letters, so
// words are folded and compared whole; the last word overlaps the one before.
func equalTokenFold(b, lower []byte) bool {
	n := len(b)
	if n != len(lower) {
		return false
	}
	le := binary.LittleEndian
	switch {
	case n >= 8:
		const fold = 0x2020202020202020
		for i := 0; i < n-8; i += 8 {
			if le.Uint64(b[i:])|fold != le.Uint64(lower[i:]) {
				return false
			}
		}
		return le.Uint64(b[n-8:])|fold == le.Uint64(lower[n-8:])
	case n >= 4:
		const fold = 0x20202020
		return le.Uint32(b)|fold == le.Uint32(lower) && le.Uint32(b[n-4:])|fold == le.Uint32(lower[n-4:])
	}
	for i := range n {
		if b[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// equalFold reports whether b equals s, ignoring ASCII case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if toLower[b[i]] != toLower[s[i]] {
			return false
		}
	}
	return true
}
