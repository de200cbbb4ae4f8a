package parser

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// parseUint parses 1*DIGIT no greater than max. Leading zeros are allowed
// (RFC 4475 3.1.1.1); overflow is an error, never a wrap.
func parseUint(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > max {
			return 0, false
		}
	}
	return n, true
}

// readDigits reads the digits from b[i] on as a number no greater than max,
// in the pass that finds them, and returns it and where the digits end; ok
// is false past max (end is then meaningless).
//
// With eight bytes at b[i], a number of up to seven digits (a port, a
// CSeq) is read from one word, its value found without a loop; one of
// seven digits may go on, and the loop reads on from there. The prefixes
// of a number are never larger than it, so it exceeds max exactly when
// the loop would have stopped on one.
func readDigits(b []byte, i int, max uint64) (n uint64, end int, ok bool) {
	if i >= 0 && len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// The high bit of each byte that is not a digit: c-'0' borrows
		// (c < '0'), c+0x46 reaches 0x80 (c > '9'), or c has it set. A
		// borrow or carry only runs upwards from a byte so flagged, so
		// the lowest flag is exact; the eighth byte is flagged always.
		m := ((x-'0'*ones)|(x+0x46*ones)|x)&(0x80*ones) | 0x80<<56
		k := bits.TrailingZeros64(m) >> 3 // 0 to 7 digits
		// The k digits shifted to the top of the word follow zero
		// bytes, leading zeros; three multiplies then join bytes into
		// pairs, pairs into fours and fours into the number (each step:
		// the high part times 10, 100 or 10^4, plus the low part).
		d := x << (uint(56-8*k) & 63) << 8 & (0x0f * ones)
		d = d * (1 + 10<<8) >> 8 & 0x00ff00ff00ff00ff
		d = d * (1 + 100<<16) >> 16 & 0x0000ffff0000ffff
		n, i = d*(1+10000<<32)>>32, i+k
		if n > max {
			return 0, i, false
		}
		if k < 7 {
			return n, i, true
		}
	}
	for ; i < len(b); i++ {
		d := b[i] - '0' // one compare for '0' to '9'
		if d > 9 {
			break
		}
		if n = n*10 + uint64(d); n > max {
			return 0, i, false
		}
	}
	return n, i, true
}

// readPort reads a port, 1*DIGIT up to 65535 (RFC 3261 25.1), from b[i]
// on as readDigits does. The usual port, four digits (5060, 5061) and then
// the end or a byte that is no digit, is read here from one word: four
// digits stay below 65535. The word's bytes are digits when none borrows
// below '0', reaches 0x80 above '9' or has its high bit (as in
// readDigits); x*10 + x>>8 then makes each byte pair's low byte its
// two-digit number.
func readPort(b []byte, i int) (port, end int, ok bool) {
	if i >= 0 && len(b)-i >= 4 && (len(b)-i == 4 || b[i+4]-'0' > 9) {
		x := binary.LittleEndian.Uint32(b[i:])
		if ((x-0x30303030)|(x+0x46464646)|x)&0x80808080 == 0 {
			x -= 0x30303030
			x = (x*10 + x>>8) & 0x00ff00ff
			return int(x&0xff)*100 + int(x>>16), i + 4, true
		}
	}
	n, end, ok := readDigits(b, i, 65535)
	return int(n), end, ok
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// maxUint32 bounds CSeq numbers and delta-seconds (RFC 3261 8.1.1.5, 20.19).
const maxUint32 = 1<<32 - 1

// CSeq is a parsed CSeq value (RFC 3261 20.16).
type CSeq struct {
	Num       uint32
	Method    Method
	MethodRaw []byte
}

// ParseCSeq parses 1*DIGIT LWS Method.
func ParseCSeq(b []byte) (CSeq, error) {
	var c CSeq
	i := skipLWS(b, 0)
	s := i
	n, i, ok := readDigits(b, i, maxUint32)
	if !ok || i == s || i == len(b) || byteClass[b[i]]&classWS == 0 {
		return c, ErrBadCSeq
	}
	// The usual rest, one SP and a known method to the end, is a token
	// followed by no LWS: what the general path below accepts.
	if b[i] == ' ' {
		if m := LookupMethod(b[i+1:]); m != MethodOther {
			c.Num, c.MethodRaw, c.Method = uint32(n), b[i+1:], m
			return c, nil
		}
	}
	i = skipLWS(b, i)
	s = i
	i = scanClass(b, i, classToken)
	if i == s || skipLWS(b, i) != len(b) {
		return c, ErrBadCSeq
	}
	c.Num, c.MethodRaw, c.Method = uint32(n), b[s:i], LookupMethod(b[s:i])
	return c, nil
}

// parseDelta parses delta-seconds with optional surrounding LWS.
func parseDelta(b []byte, max uint64) (uint64, bool) {
	s, e := trimLWS(b, 0, len(b))
	return parseUint(b[s:e], max)
}

// RetryAfter is a parsed Retry-After value (RFC 3261 20.33).
type RetryAfter struct {
	Seconds  uint32
	Duration uint32 // the duration parameter, 0 when absent
	Comment  []byte
	Params   []byte
}

// ParseRetryAfter parses delta-seconds [ comment ] *( SEMI retry-param ).
func ParseRetryAfter(b []byte) (RetryAfter, error) {
	var r RetryAfter
	i := skipLWS(b, 0)
	s := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n, ok := parseUint(b[s:i], maxUint32)
	if !ok {
		return r, ErrBadRetryAfter
	}
	r.Seconds = uint32(n)
	i = skipLWS(b, i)
	if i < len(b) && b[i] == '(' {
		end, ok := skipComment(b, i)
		if !ok {
			return r, ErrBadRetryAfter
		}
		r.Comment = b[i+1 : end-1]
		i = skipLWS(b, end)
	}
	if i == len(b) {
		return r, nil
	}
	if b[i] != ';' {
		return r, ErrBadRetryAfter
	}
	r.Params = b[i+1:]
	if _, err := checkParams(r.Params); err != nil {
		return r, ErrBadRetryAfter
	}
	if d, ok := paramLookup(r.Params, "duration"); ok {
		n, ok := parseUint(d, maxUint32)
		if !ok {
			return r, ErrBadRetryAfter
		}
		r.Duration = uint32(n)
	}
	return r, nil
}

// skipComment returns the index just past the comment starting at
// b[i] == '(': comments nest and hold quoted-pairs (RFC 3261 25.1).
func skipComment(b []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// Privacy is a set of privacy values (RFC 3323 4.2, RFC 3325 9.3).
type Privacy uint8

const (
	PrivacyHeader Privacy = 1 << iota
	PrivacySession
	PrivacyUser
	PrivacyNone
	PrivacyCritical
	PrivacyID
	PrivacyOther // an extension value
)

// ParsePrivacy parses priv-value *( ";" priv-value ).
func ParsePrivacy(b []byte) (Privacy, error) {
	var p Privacy
	if len(b) == 0 {
		return 0, ErrBadPrivacy // at least one priv-value (RFC 3323 4.2)
	}
	for len(b) > 0 {
		end := bytes.IndexByte(b, ';')
		if end < 0 {
			end = len(b)
		}
		s, e := trimLWS(b, 0, end)
		v := b[s:e]
		if len(v) == 0 || !validChars(v, classToken) {
			return 0, ErrBadPrivacy
		}
		switch {
		case equalFold(v, "header"):
			p |= PrivacyHeader
		case equalFold(v, "session"):
			p |= PrivacySession
		case equalFold(v, "user"):
			p |= PrivacyUser
		case equalFold(v, "none"):
			p |= PrivacyNone
		case equalFold(v, "critical"):
			p |= PrivacyCritical
		case equalFold(v, "id"):
			p |= PrivacyID
		default:
			p |= PrivacyOther
		}
		if end == len(b) {
			break
		}
		b = b[end+1:]
		if len(b) == 0 {
			return 0, ErrBadPrivacy
		}
	}
	return p, nil
}

// Reason is one Reason header value (RFC 3326).
type Reason struct {
	Protocol []byte // "SIP", "Q.850", ...
	Cause    int    // the cause parameter, -1 when absent
	Text     []byte // the text parameter without its quotes
	Params   []byte
}

// ParseReason parses protocol *( SEMI reason-params ).
func ParseReason(b []byte) (Reason, error) {
	r := Reason{Cause: -1}
	i := skipLWS(b, 0)
	s := i
	for i < len(b) && byteClass[b[i]]&classToken != 0 {
		i++
	}
	if i == s {
		return r, ErrBadReasonHdr
	}
	r.Protocol = b[s:i]
	i = skipLWS(b, i)
	if i == len(b) {
		return r, nil
	}
	if b[i] != ';' {
		return r, ErrBadReasonHdr
	}
	r.Params = b[i+1:]
	it := paramIter{b: r.Params}
	for !it.done {
		name, value, _, err := it.next()
		if err != nil {
			return r, ErrBadReasonHdr
		}
		switch {
		case equalFold(name, "cause"):
			n, ok := parseUint(value, 65535)
			if !ok {
				return r, ErrBadReasonHdr
			}
			r.Cause = int(n)
		case equalFold(name, "text"):
			if len(value) >= 2 && value[0] == '"' {
				value = value[1 : len(value)-1]
			}
			r.Text = value
		}
	}
	return r, nil
}

// MediaType returns type "/" subtype of a Content-Type value, without
// parameters (RFC 3261 20.15).
func MediaType(b []byte) []byte {
	if i := bytes.IndexByte(b, ';'); i >= 0 {
		b = b[:i]
	}
	s, e := trimLWS(b, 0, len(b))
	return b[s:e]
}

// Typed accessors on Message. Each parses its header on demand into a value
// holding views into the message. The top Via, From, To, the first Contact
// and CSeq, which Validate, the transaction layer and the dialog layer all
// read, are parsed once per Parse (CopyTo carries them over) and then copied
// from the message; other values are parsed at each call, so call once and
// keep the value. Large values are filled through a pointer so that a caller
// can reuse them without copying.

// Via parses the n-th (from 0) Via value into v.
func (m *Message) Via(n int, v *Via) error {
	if n == 0 && m.parsed&parsedVia != 0 {
		*v = m.topVia
		return nil
	}
	var b []byte
	if n == 0 {
		b = m.Get(HeaderVia) // Nth(HeaderVia, 0), inlined
	} else {
		b = m.Nth(HeaderVia, n)
	}
	if b == nil {
		*v = Via{}
		return ErrMissingVia
	}
	err := ParseVia(b, v)
	if n == 0 && err == nil {
		m.topVia = *v
		m.parsed |= parsedVia
	}
	return err
}

// TopVia parses the first Via value into v.
func (m *Message) TopVia(v *Via) error { return m.Via(0, v) }

// Address parses the n-th value of an address header (From, To, Contact,
// Route, Record-Route, P-Asserted-Identity, P-Preferred-Identity, ...) into a.
func (m *Message) Address(kind HeaderKind, n int, a *Address) error {
	var cached *Address
	var bit uint8
	if n == 0 {
		switch kind {
		case HeaderFrom:
			cached, bit = &m.from, parsedFrom
		case HeaderTo:
			cached, bit = &m.to, parsedTo
		case HeaderContact:
			cached, bit = &m.contact, parsedContact
		}
		if m.parsed&bit != 0 {
			*a = *cached
			return nil
		}
	}
	var b []byte
	if n == 0 {
		b = m.Get(kind) // Nth(kind, 0), inlined
	} else {
		b = m.Nth(kind, n)
	}
	if b == nil {
		*a = Address{}
		return ErrNoHeader
	}
	err := parseAddress(b, 0, a) // b is trimmed
	if cached != nil && err == nil {
		*cached = *a
		m.parsed |= bit
	}
	return err
}

// From parses the From header into a.
func (m *Message) From(a *Address) error { return m.Address(HeaderFrom, 0, a) }

// To parses the To header into a.
func (m *Message) To(a *Address) error { return m.Address(HeaderTo, 0, a) }

// Contact parses the n-th Contact value into a.
func (m *Message) Contact(n int, a *Address) error { return m.Address(HeaderContact, n, a) }

// CallID returns the Call-ID, nil when absent.
func (m *Message) CallID() []byte { return m.Get(HeaderCallID) }

// CSeq parses the CSeq header.
func (m *Message) CSeq() (CSeq, error) {
	if m.parsed&parsedCSeq != 0 {
		return m.cseq, nil
	}
	b := m.Get(HeaderCSeq)
	if b == nil {
		return CSeq{}, ErrMissingCSeq
	}
	c, err := ParseCSeq(b)
	if err == nil {
		m.cseq = c
		m.parsed |= parsedCSeq
	}
	return c, err
}

// MaxForwards parses Max-Forwards (0-255). present is false when the header
// is absent, as in RFC 2543 requests.
func (m *Message) MaxForwards() (n int, present bool, err error) {
	b := m.Get(HeaderMaxForwards)
	if b == nil {
		return 0, false, nil
	}
	// The usual value, two digits (70, RFC 3261 8.1.1.6), as parseDelta
	// reads it: a byte is a digit when c-'0' is at most 9, and two digits
	// stay below 255.
	if len(b) == 2 && b[0]-'0' <= 9 && b[1]-'0' <= 9 {
		return int(b[0]-'0')*10 + int(b[1]-'0'), true, nil
	}
	v, ok := parseDelta(b, 255)
	if !ok {
		return 0, true, ErrBadMaxForwards
	}
	return int(v), true, nil
}

// Expires parses the Expires header (delta-seconds up to 2^32-1).
func (m *Message) Expires() (sec uint32, present bool, err error) {
	b := m.Get(HeaderExpires)
	if b == nil {
		return 0, false, nil
	}
	v, ok := parseDelta(b, maxUint32)
	if !ok {
		return 0, true, ErrBadExpires
	}
	return uint32(v), true, nil
}

// RetryAfter parses the Retry-After header.
func (m *Message) RetryAfter() (r RetryAfter, present bool, err error) {
	b := m.Get(HeaderRetryAfter)
	if b == nil {
		return RetryAfter{}, false, nil
	}
	r, err = ParseRetryAfter(b)
	return r, true, err
}

// Privacy parses the Privacy headers, all values combined.
func (m *Message) Privacy() (Privacy, error) {
	var p Privacy
	for i := 0; i < m.Count(HeaderPrivacy); i++ {
		v, err := ParsePrivacy(m.Nth(HeaderPrivacy, i))
		if err != nil {
			return 0, err
		}
		p |= v
	}
	return p, nil
}

// Reason parses the n-th Reason header value.
func (m *Message) Reason(n int) (Reason, error) {
	b := m.Nth(HeaderReason, n)
	if b == nil {
		return Reason{Cause: -1}, ErrNoHeader
	}
	return ParseReason(b)
}

// ContentType returns the media type of the body, without parameters.
func (m *Message) ContentType() []byte { return MediaType(m.Get(HeaderContentType)) }

// NextListItem returns the first element of a comma-separated token list
// (Allow, Supported, Require, ...) trimmed of LWS, and the rest of the list;
// rest is nil after the last element. An empty list has no element; an
// empty element (RFC 3261 25.1 allows none) yields an empty, non-nil item,
// also after a trailing comma. Iterate with:
//
//	for item, rest := NextListItem(v); item != nil; item, rest = NextListItem(rest) {
func NextListItem(b []byte) (item, rest []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	end := bytes.IndexByte(b, ',')
	if end < 0 {
		s, e := trimLWS(b, 0, len(b))
		return b[s:e:e], nil
	}
	s, e := trimLWS(b, 0, end)
	switch {
	case len(b) == 1: // the comma a trailing comma left: its empty element
		return b[:0:0], nil
	case end == len(b)-1: // a trailing comma: keep it to yield the empty element
		return b[s:e:e], b[end:]
	}
	return b[s:e:e], b[end+1:]
}

// HasOptionTag reports whether a Require, Proxy-Require, Supported or
// Unsupported header (kind) lists tag, case-insensitively.
func (m *Message) HasOptionTag(kind HeaderKind, tag string) bool {
	for i := 0; i < m.Count(kind); i++ {
		for item, rest := NextListItem(m.Nth(kind, i)); item != nil; item, rest = NextListItem(rest) {
			if equalFold(item, tag) {
				return true
			}
		}
	}
	return false
}

// scanClass returns the index of the first byte at or after i that is not
// of class, or len(b). Four bytes per round, their classes ANDed into one
// test: most of a message is scanned by such loops, and this form spends a
// fraction of the instructions; the byte loop then finds the one that
// stopped the round. With i known not negative, i < len(b)-3 lets the
// compiler drop the bounds checks of the four loads (n holds len(b)-3:
// the compiler would compute it again each round). After that loop it
// no longer knows i's sign: the byte loop compares unsigned, which drops
// its bounds check too.
func scanClass(b []byte, i int, class uint16) int {
	if i < 0 {
		return i // no caller passes one; a panic would cost every call a frame
	}
	for n := len(b) - 3; i < n; i += 4 {
		if byteClass[b[i]]&byteClass[b[i+1]]&byteClass[b[i+2]]&byteClass[b[i+3]]&class == 0 {
			break
		}
	}
	for uint(i) < uint(len(b)) && byteClass[b[i]]&class != 0 {
		i++
	}
	return i
}

// scanVisible is scanClass for classVisible (stop 0) or classInAngle
// (stop '>'), eight bytes a round: it returns the index of the first byte at
// or after i that is a control character, SP, DEL or stop, or len(b).
func scanVisible(b []byte, i int, stop byte) int {
	if i < 0 {
		return i // as in scanClass
	}
	stops := ones * uint64(stop)
	for n := len(b) - 7; i < n; i += 8 { // n: as in scanClass
		if m := notVisible(binary.LittleEndian.Uint64(b[i:i+8]), stops); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if rem := len(b) - i; rem > 0 && len(b) >= 8 {
		// The last eight bytes, shifted so that the rem unchecked ones come
		// first and zeros, which are flagged, fill the rest.
		x := binary.LittleEndian.Uint64(b[len(b)-8:]) >> (8 * (8 - rem))
		return i + bits.TrailingZeros64(notVisible(x, stops))>>3
	}
	for i < len(b) && notVisible(uint64(b[i]), stops)&0x80 == 0 {
		i++
	}
	return i
}

const ones = 0x0101010101010101

// notVisible sets the high bit of the lowest byte of x that is below 0x21
// (a control character or SP), DEL, or equal to the ASCII byte stops
// repeats (0 adds nothing), and possibly of higher bytes. Borrows run only
// upwards from a flagged byte, so the lowest flag is exact. Below it each
// difference keeps its high bit clear for a byte under 0x80, and the one
// mask &^x, shared by the three tests (DEL and stops are ASCII), clears
// the bytes from 0x80 up, which are visible.
func notVisible(x, stops uint64) uint64 {
	del, stop := x^(0x7f*ones), x^stops
	return ((x - 0x21*ones) | (del - ones) | (stop - ones)) &^ x & (0x80 * ones)
}
