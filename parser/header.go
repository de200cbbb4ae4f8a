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
	// namesBySlot holds the long names by nameSlot, without collisions.
	namesBySlot [256]longName
	// shortNames holds the long names shorter than eight bytes by
	// shortSlot, lowered in the low bytes of word, without collisions.
	shortNames [64]struct {
		word uint64
		kind HeaderKind
	}
	// midNames holds the long names of eight to sixteen bytes by midSlot,
	// lowered, without collisions.
	midNames [64]longName
)

// longName is a long header name in lower case as little-endian words, for
// lookupName: last holds its last eight bytes (all of them, in its low
// bytes, when the name is shorter), first its first eight and second the
// eight after.
type longName struct {
	first, second, last uint64
	n, shift            uint8 // length, and 8 * (8 - length) when below 8
	kind                HeaderKind
}

// nameSlot hashes the header name b[s:e], s < e, case-insensitively
// from its length and its first and last bytes: a few operations instead of
// a multiply per byte, and collision-free over the long names (the init
// check keeps it so). Header names
// are tokens, among which c|0x20 folds only letters (RFC 3261 25.1).
func nameSlot(b []byte, s, e int) uint8 {
	return uint8(b[s]|0x20) + 7*uint8(b[e-1]|0x20) + 34*uint8(e-s)
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
		name := lowerNames[k]
		n := len(name)
		if n > 24 {
			panic("BUG: lookupName compares names of at most 24 bytes: " + info.name)
		}
		w := &namesBySlot[nameSlot(name, 0, n)]
		if w.kind != HeaderOther {
			panic("BUG: nameSlot collides on " + info.name)
		}
		var padded [8 + 24]byte // eight zeros, the name, zeros
		copy(padded[8:], name)
		le := binary.LittleEndian
		w.kind, w.n = k, uint8(n)
		w.shift = uint8(8 * max(8-n, 0))
		w.last = le.Uint64(padded[n:]) >> w.shift
		w.first = le.Uint64(padded[8:])
		w.second = le.Uint64(padded[16:])
		if n < 8 {
			s := &shortNames[shortSlot(w.first)]
			if s.kind != HeaderOther {
				panic("BUG: shortSlot collides on " + info.name)
			}
			s.word, s.kind = w.first, k
		}
		if n >= 8 && n <= 16 {
			s := &midNames[midSlot(w.first, w.last)]
			if s.kind != HeaderOther {
				panic("BUG: midSlot collides on " + info.name)
			}
			*s = *w
		}
	}
}

// LookupHeader returns the kind of a header name, matched case-insensitively
// against long and compact forms (RFC 3261 7.3.1, 7.3.3).
func LookupHeader(name []byte) HeaderKind {
	if !isToken(name) {
		return HeaderOther
	}
	return lookupName(name, 0, len(name))
}

// lookupName returns the kind of the header name b[s:e], s < e, without
// checking it is a token: a name it finds is a token but for CR, which
// c|0x20 folds onto '-'. The long names do not collide in namesBySlot, so
// each is at its own slot: one probe, then at most three word compares.
func lookupName(b []byte, s, e int) HeaderKind {
	n := e - s
	if n < 2 {
		return compactKinds[toLower[b[s]]]
	}
	w := &namesBySlot[nameSlot(b, s, e)]
	if int(w.n) != n {
		return HeaderOther // also for an empty slot, whose n is 0
	}
	if e < 8 {
		if equalTokenFold(b[s:e], lowerNames[w.kind]) {
			return w.kind
		}
		return HeaderOther
	}
	// The word ending at e holds the name's last bytes; a name shorter
	// than eight bytes is its top n bytes, the bytes before it shifted out.
	le := binary.LittleEndian
	if (le.Uint64(b[e-8:e])|fold)>>(w.shift&63) != w.last {
		return HeaderOther
	}
	if n > 8 && le.Uint64(b[s:s+8])|fold != w.first {
		return HeaderOther
	}
	if n > 16 && le.Uint64(b[s+8:s+16])|fold != w.second {
		return HeaderOther
	}
	return w.kind
}

// lookupShortName is lookupName for a name of n bytes, 2 <= n < 8, held
// in the low bytes of w (the bytes after it are ignored). Inlined, it reads
// the usual short names (Via, From, To, CSeq, Call-ID, Contact) in a
// multiply and a compare. Every byte of a lowered name is non-zero, so a
// word equal to a stored one is also the same length.
func lookupShortName(w uint64, n int) HeaderKind {
	w = (w | fold) & lowBytes[n&7]
	if s := &shortNames[shortSlot(w)]; s.word == w {
		return s.kind
	}
	return HeaderOther
}

// shortSlot hashes a name shorter than eight bytes, lowered in the low
// bytes of w: collision-free over the long names of that length (the init
// check keeps it so).
func shortSlot(w uint64) uint64 { return w * 0x803c72a7e1eab0d7 >> 58 }

// lookupMidName is lookupName for a name of n bytes, 8 <= n <= 16, whose
// first eight bytes are first and last eight last (together, every byte):
// inlined, a multiply and three compares.
func lookupMidName(first, last uint64, n int) HeaderKind {
	first, last = first|fold, last|fold
	if s := &midNames[midSlot(first, last)]; s.first == first && s.last == last && int(s.n) == n {
		return s.kind
	}
	return HeaderOther
}

// midSlot hashes a name of eight to sixteen bytes from its first and last
// eight lowered: collision-free over the long names of those lengths (the
// init check keeps it so).
func midSlot(first, last uint64) uint64 { return (first + last) * 0x86155e99e756ba19 >> 58 }

// lowBytes[n] keeps the low n bytes of a word.
var lowBytes = [8]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff}

// fold sets bit 0x20 of every byte: among token characters it folds only
// letters, onto lower case (RFC 3261 25.1).
const fold = 0x20 * ones

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
// lower, ignoring case (c|0x20 folds only letters among token characters).
func equalTokenFold(b, lower []byte) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
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
