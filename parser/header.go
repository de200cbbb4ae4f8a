package parser

import "strings"

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
	// kindsByHash is an open-addressing table of known names by nameHash.
	kindsByHash [256]HeaderKind
)

// nameHash hashes a header name case-insensitively. Header names are
// tokens, among which c|0x20 folds only letters (RFC 3261 25.1).
func nameHash(name []byte) uint32 {
	var h uint32
	for _, c := range name {
		h = h*31 + uint32(c|0x20)
	}
	return h
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
		i := nameHash([]byte(info.name))
		for kindsByHash[i%uint32(len(kindsByHash))] != HeaderOther {
			i++
		}
		kindsByHash[i%uint32(len(kindsByHash))] = k
	}
}

// LookupHeader returns the kind of a header name, matched case-insensitively
// against long and compact forms (RFC 3261 7.3.1, 7.3.3).
func LookupHeader(name []byte) HeaderKind {
	// Only tokens are names; among tokens c|0x20 folds letters alone.
	for _, c := range name {
		if byteClass[c]&classToken == 0 {
			return HeaderOther
		}
	}
	return lookupHashed(name, nameHash(name))
}

// lookupHashed is LookupHeader with the name's nameHash already computed.
func lookupHashed(name []byte, h uint32) HeaderKind {
	switch len(name) {
	case 0:
		return HeaderOther
	case 1:
		return compactKinds[toLower[name[0]]]
	}
	for ; ; h++ {
		k := kindsByHash[h%uint32(len(kindsByHash))]
		if k == HeaderOther || equalTokenFold(name, lowerNames[k]) {
			return k
		}
	}
}

// lowerNames holds the canonical names in lower case.
var lowerNames = func() (l [numHeaderKinds]string) {
	for k := range l {
		l[k] = strings.ToLower(headerInfos[k].name)
	}
	return l
}()

// equalTokenFold reports whether the token b equals the lower-case token
// lower, ignoring case. Among token characters c|0x20 folds only letters.
func equalTokenFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
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
