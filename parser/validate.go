package parser

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// singleValue lists headers that may appear once (RFC 3261 7.3.1, 20); a
// repeat is the ambiguity RFC 4475 3.3.8 warns of.
var singleValue = NewHeaderSet(HeaderFrom, HeaderTo, HeaderCallID, HeaderCSeq,
	HeaderMaxForwards, HeaderContentType, HeaderExpires, HeaderMinExpires,
	HeaderRetryAfter, HeaderRSeq, HeaderRAck, HeaderSessionExpires, HeaderMinSE,
	HeaderEvent, HeaderReferTo, HeaderReferredBy)

// Validate makes the checks a server makes after Parse and before acting on
// a message, in the spirit of Kamailio's sanity module:
//   - Via, From, To, Call-ID and CSeq present (RFC 3261 8.1.1); Max-Forwards
//     may be missing, as in RFC 2543 requests (RFC 4475 3.4.1);
//   - single-value headers not repeated (RFC 4475 3.3.8);
//   - CSeq number up to 2^32-1 and, in a request, its method equal to the
//     request method (RFC 3261 8.1.1.5; RFC 4475 3.1.2.17);
//   - Max-Forwards 0-255, Expires up to 2^32-1 (RFC 4475 3.1.2.4);
//   - the top Via well-formed; a branch with the magic cookie must carry a
//     transaction id after it (RFC 4475 3.2.1); a Via without a branch is an
//     RFC 2543 request and passes, for the transaction layer to match;
//   - From and To well-formed, with at most one tag each, and so every
//     Contact, Route, Record-Route, P-Asserted-Identity and
//     P-Preferred-Identity (RFC 4475 3.1.2.13), and in a request their
//     URIs within Limits.MaxURILength; a response's From and To URIs are
//     not parsed (see below);
//   - no control character in a header value but HTAB and folds;
//   - a request's URI is sip, sips or tel (416, RFC 3261 8.2.2.1;
//     RFC 4475 3.3.2) and, if sip, well-formed and without headers
//     (RFC 3261 19.1.1; RFC 4475 3.1.2.11);
//   - every option tag of Require and Proxy-Require is in supported (420,
//     RFC 3261 8.2.2.3; not checked for ACK and CANCEL);
//   - a response's reason phrase is UTF-8.
func (m *Message) Validate(supported []string) error {
	// Count, not Get: a header present is never a nil value, and Count
	// builds no slice.
	if m.Count(HeaderVia) == 0 {
		return ErrMissingVia
	}
	if m.Count(HeaderFrom) == 0 {
		return ErrMissingFrom
	}
	if m.Count(HeaderTo) == 0 {
		return ErrMissingTo
	}
	if m.Count(HeaderCallID) == 0 {
		return ErrMissingCallID
	}
	if m.Count(HeaderCSeq) == 0 {
		return ErrMissingCSeq
	}
	if m.repeated&singleValue != 0 {
		return ErrDupHeader
	}
	for i := range m.fields {
		// !parsedKinds.Has(f.kind) without its shift check: kinds are below 64.
		// The value is read untrimmed (f.value.of): the LWS around it is
		// SP, HTAB and folds, none of which HasControl reports, for in a
		// parsed message every CR is a fold's, followed by LF and SP or
		// HTAB within the value.
		if f := &m.fields[i]; parsedKinds>>(f.kind&63)&1 == 0 && HasControl(f.value.of(m.buf)) {
			return ErrBadHeader
		}
	}
	cseq, err := m.CSeq()
	if err != nil {
		return err
	}
	// A known method is its name exactly (LookupMethod is case-sensitive),
	// so two known methods are equal bytes when they are the same method.
	if m.IsRequest() && (cseq.Method != m.method ||
		cseq.Method == MethodOther && string(cseq.MethodRaw) != string(m.MethodBytes())) {
		return ErrCSeqMismatch
	}
	if _, _, err := m.MaxForwards(); err != nil {
		return err
	}
	if _, _, err := m.Expires(); err != nil {
		return err
	}
	if !validCallID(m.CallID()) {
		return ErrBadCallID
	}
	var via Via
	if err := m.TopVia(&via); err != nil {
		return err
	}
	if via.Branch != nil && len(via.Branch) <= len(magicCookie) && equalFold(via.Branch, magicCookie) {
		return ErrBadBranch
	}
	var (
		a Address
		u URI
	)
	for _, kind := range addressHeaders {
		for i := 0; i < m.Count(kind); i++ {
			if err := m.Address(kind, i, &a); err != nil {
				return err
			}
			if a.Star {
				continue // Contact: * (RFC 3261 10.2.2)
			}
			if !m.response && m.maxURI > 0 && len(a.URI) > int(m.maxURI) {
				// Limits.MaxURILength bounds the URIs of a request, which
				// a B2BUA may send on (a Contact becomes a Request-URI).
				// A response's are left to the header line limit: a
				// carrier's long Record-Route must not drop its 200.
				return ErrAddressURITooLong
			}
			if m.response && (kind == HeaderFrom || kind == HeaderTo) {
				// A response's From and To are its request's, copied back
				// (RFC 3261 8.2.6.2): a UAC reads their tags, never their
				// URIs, and a response cannot be answered, only dropped,
				// so a peer's garbled echo of a URI must not lose a call.
				continue
			}
			if err := a.ParseURI(&u); err != nil {
				return err
			}
		}
	}
	if m.IsResponse() {
		if !utf8.Valid(m.ReasonPhrase()) {
			return ErrReasonNotUTF8
		}
		return nil
	}
	if ruri := m.RequestURI(); !sameSIPURI(ruri, m) {
		if err := ParseURI(ruri, &u); err != nil {
			return err
		}
		if u.Scheme == SchemeOther {
			return ErrURIScheme
		}
		if u.Headers != nil {
			return ErrBadURI
		}
	}
	// Most requests have neither header: two compares spare the loop.
	if m.method != MethodAck && m.method != MethodCancel &&
		m.Count(HeaderRequire)+m.Count(HeaderProxyRequire) > 0 {
		// Both headers' syntax first: a 420 lists their unsupported tags
		// (AppendUnsupported), and an empty one in either would make its
		// Unsupported header malformed; such a request is a 400.
		unsupported := false
		for _, kind := range [...]HeaderKind{HeaderRequire, HeaderProxyRequire} {
			switch err := checkSupported(m, kind, supported); err {
			case nil:
			case ErrBadExtension:
				unsupported = true
			default:
				return err
			}
		}
		if unsupported {
			return ErrBadExtension
		}
	}
	return nil
}

// sameSIPURI reports whether a request's URI passes Validate's checks as
// its To URI, which Validate has parsed, did: an initial request is
// usually sent to its To URI byte for byte. That URI then parses; a sip
// or sips one (ParseURI's two-compare start) is neither SchemeOther nor,
// without a '?', one with headers, which follow a '?' (RFC 3261 19.1.1,
// 25.1).
func sameSIPURI(ruri []byte, m *Message) bool {
	if m.parsed&parsedTo == 0 || string(ruri) != string(m.to.URI) || len(ruri) < 5 {
		return false
	}
	w := binary.LittleEndian.Uint32(ruri)
	return (w|0x00202020 == sipColon || w|0x20202020 == sipsLetters && ruri[4] == ':') &&
		bytes.IndexByte(ruri, '?') < 0
}

// parsedKinds are the headers Validate parses to their grammar, which has
// no room for a control character; every other value is checked for one.
var parsedKinds = NewHeaderSet(HeaderFrom, HeaderTo, HeaderCallID, HeaderCSeq, HeaderContact,
	HeaderRoute, HeaderRecordRoute, HeaderPAssertedIdentity, HeaderPPreferredIdentity,
	HeaderMaxForwards, HeaderExpires, HeaderContentLength)

// HasControl reports whether a header value holds a control character
// other than HTAB and the CRLF of a fold: TEXT-UTF8char / LWS (RFC 3261
// 25.1). Validate refuses such a value; code that must check a value
// Validate has not seen calls it too.
// A NUL or a bare CR relayed or echoed as it is ends the value early at
// some peers and starts a forged header at others. Eight bytes a round, the
// last round reading the last eight bytes (overlapping the one before): a
// byte below 0x20, or 0x7F, stops the rounds, and the rest is checked byte
// by byte from the round that held it, which no fold can straddle (its CR
// would have stopped the round before).
func HasControl(b []byte) bool {
	i := 0
	if len(b) >= 8 {
		for n := len(b) - 8; i < n; i += 8 { // n: as in scanClass
			if ctlWord(binary.LittleEndian.Uint64(b[i : i+8])) {
				break
			}
		}
		if i >= len(b)-8 && !ctlWord(binary.LittleEndian.Uint64(b[len(b)-8:])) {
			return false
		}
	}
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c >= ' ' && c != 0x7f, c == '\t':
		case c == '\r' && i+2 < len(b) && b[i+1] == '\n' && (b[i+2] == ' ' || b[i+2] == '\t'):
			i++ // a fold
		default:
			return true
		}
	}
	return false
}

// ctlWord reports whether a byte of x is below 0x20 or is 0x7F, as
// notVisible (values.go) tests below 0x21 and DEL.
func ctlWord(x uint64) bool {
	del := x ^ (0x7f * ones)
	return ((x-0x20*ones)|(del-ones))&^x&(0x80*ones) != 0
}

// addressHeaders are the address headers a B2BUA reads; Validate parses
// them all, URIs included, so that no later reader meets a malformed one.
var addressHeaders = [...]HeaderKind{HeaderFrom, HeaderTo, HeaderContact, HeaderRoute,
	HeaderRecordRoute, HeaderPAssertedIdentity, HeaderPPreferredIdentity}

// validCallID checks callid = word [ "@" word ] (RFC 3261 25.1).
func validCallID(b []byte) bool {
	i := scanClass(b, 0, classCallID)
	if i == len(b) {
		return i > 0
	}
	if b[i] != '@' || i == 0 || i == len(b)-1 {
		return false
	}
	return scanClass(b, i+1, classCallID) == len(b)
}

// checkSupported checks option-tag *(COMMA option-tag) (RFC 3261 20.32,
// 25.1): an empty tag is malformed (400), an unknown one 420.
func checkSupported(m *Message, kind HeaderKind, supported []string) error {
	unsupported := false
	for i := 0; i < m.Count(kind); i++ {
		for tag, rest := NextListItem(m.Nth(kind, i)); tag != nil; tag, rest = NextListItem(rest) {
			if len(tag) == 0 || !validChars(tag, classToken) {
				return ErrEmptyListElement
			}
			if !containsFold(supported, tag) {
				unsupported = true
			}
		}
	}
	if unsupported {
		return ErrBadExtension
	}
	return nil
}

func containsFold(list []string, b []byte) bool {
	for _, s := range list {
		if equalFold(b, s) {
			return true
		}
	}
	return false
}

// AppendUnsupported appends, comma-separated, the option tags of Require and
// Proxy-Require that are not in supported: the value of the Unsupported
// header of a 420 response (RFC 3261 20.40).
func AppendUnsupported(dst []byte, m *Message, supported []string) []byte {
	n := 0
	for _, kind := range [...]HeaderKind{HeaderRequire, HeaderProxyRequire} {
		for i := 0; i < m.Count(kind); i++ {
			for tag, rest := NextListItem(m.Nth(kind, i)); tag != nil; tag, rest = NextListItem(rest) {
				if !containsFold(supported, tag) {
					if n > 0 {
						dst = append(dst, ", "...)
					}
					dst = append(dst, tag...)
					n++
				}
			}
		}
	}
	return dst
}
