package parser

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"unsafe"
)

// Limits bound what Parse accepts. Exceeding one is an error with its own
// status code, never a truncation.
type Limits struct {
	MaxMessageSize int // whole message, start line to end of body (513 above)
	MaxHeaders     int // header fields, counting each element of a list header (400 above)
	MaxHeaderLine  int // one header, name to end of value, folds included (400 above)
	MaxVias        int // Via values (400 above)
	MaxURILength   int // Request-URI (414 above); Validate also bounds a request's address URIs by it (400)
}

// DefaultLimits are the limits Parse uses. They follow what trusted servers
// enforce (Kamailio: 16 KiB messages), loosened where RFC 4475's valid
// torture messages need more (longreq has 34 Via values).
var DefaultLimits = Limits{
	MaxMessageSize: 16 << 10,
	MaxHeaders:     128,
	MaxHeaderLine:  4096,
	MaxVias:        64,
	MaxURILength:   512,
}

// maxFields bounds header fields whatever Limits say: per-kind counts and
// indexes are uint16.
const maxFields = 1<<16 - 1

// span is a half-open byte range [start, end) of Message.buf.
type span struct{ start, end uint32 }

// field is one header value. A list header (Via: a, b) yields one field per element.
// value may hold LWS around the value proper, as on the wire after the
// colon: read it with valueAt.
type field struct {
	kind  HeaderKind
	name  span
	value span
}

// valueAt returns the value of field i, trimmed of LWS. Parse records a
// value as it stands after the colon and leaves the trimming to its
// readers: most values are never read (Validate reads them untrimmed).
// Taking the index keeps Get small enough to be inlined.
func (m *Message) valueAt(i int) []byte {
	v := m.fields[i].value.of(m.buf)
	if usualValue(v) {
		return v[1:]
	}
	s, e := trimLWS(v, 0, len(v))
	return v[s:e:e]
}

// usualValue reports whether v is the usual value as recorded, untrimmed:
// one SP, then the value, with no white space at its end. Trimmed, it is
// v[1:].
func usualValue(v []byte) bool {
	return len(v) > 1 && v[0] == ' ' && v[1] > ' ' && v[len(v)-1] > ' '
}

// Message is a parsed SIP request or response.
//
// Parse does not copy: every []byte a Message or its accessors return is a
// view into the buffer given to Parse, valid until that buffer is modified or
// the Message is parsed again. Copy what must outlive either. A Message is
// reused by calling Parse again, which keeps its capacity; it is not safe for
// concurrent use, not even by readers: the accessors remember what they parse.
//
// Header values are views of the wire bytes with surrounding white space
// trimmed. Lists whose elements are used one by one (Via, Contact, Route,
// Record-Route, P-Asserted-Identity, P-Preferred-Identity, Reason, Warning,
// Path, Diversion) are split: each element is a value of its own, whether it
// came on its own line or after a comma (RFC 3261 7.3.1). Token lists
// (Allow, Supported, Require, Accept, ...) stay one value per line; read
// them with NextListItem. A folded value (RFC 3261 7.3.1) keeps its CRLF and indentation
// inside the view; the typed accessors treat them as the LWS they are.
type Message struct {
	buf    []byte
	fields []field
	first  [numHeaderKinds]uint16 // 1 + index in fields of the first value of each kind; 0 if none
	count  [numHeaderKinds]uint16 // values of each kind
	// repeated holds the kinds with more than one value.
	repeated HeaderSet

	response      bool
	method        Method
	status        uint16
	methodS       span
	uriS          span
	reasonS       span
	bodyS         span
	contentLength int32          // -1 when absent
	maxURI        int32          // the limits' MaxURILength, for Validate's URIs
	source        netip.AddrPort // where the message came from (SetSource); kept by CopyTo

	// Values the accessors parsed, valid while parsed has their bit.
	parsed            uint8
	topVia            Via
	from, to, contact Address // contact: the first Contact value
	cseq              CSeq
}

// Bits of Message.parsed.
const (
	parsedVia uint8 = 1 << iota
	parsedFrom
	parsedTo
	parsedContact
	parsedCSeq
)

func (m *Message) reset(buf []byte) {
	m.buf = buf
	m.fields = m.fields[:0]
	m.first = [numHeaderKinds]uint16{}
	m.count = [numHeaderKinds]uint16{}
	m.repeated = 0
	m.response = false
	m.method = MethodOther
	m.status = 0
	m.methodS, m.uriS, m.reasonS, m.bodyS = span{}, span{}, span{}, span{}
	m.contentLength = -1
	m.source = netip.AddrPort{}
	m.parsed = 0
}

// Parse parses buf as one message received in a datagram (RFC 3261 18.3):
// bytes past Content-Length are ignored, a body shorter than Content-Length
// is an error, and without Content-Length the body runs to the end of buf.
// For stream transports, Frame first finds the message's length.
//
// On error the Message is partially filled: IsResponse tells whether the
// start line was a response's, which decides between answering and dropping
// (see Answer). After a bad Request-Line the headers are parsed all the
// same, as far as they parse, so that the request can be answered.
func (m *Message) Parse(buf []byte) error { return m.ParseLimits(buf, &DefaultLimits) }

// ParseLimits is Parse with explicit limits.
func (m *Message) ParseLimits(buf []byte, lim *Limits) error {
	m.reset(buf)
	m.maxURI = int32(min(lim.MaxURILength, 1<<30))
	pos := 0
	// RFC 3261 7.5: CRLFs before the start line are ignored.
	for pos+1 < len(buf) && buf[pos] == '\r' && buf[pos+1] == '\n' {
		pos += 2
	}
	if len(buf) > lim.MaxMessageSize {
		m.response = isStatusLine(buf[pos:])
		return ErrMessageTooLarge
	}
	if pos == len(buf) {
		return ErrEmpty
	}
	lineEnd, next, err := lineEndAt(buf, pos)
	if err == nil {
		// parseStartLine reads every byte of the line by rules that
		// exclude a CR, so a bare CR fails it: only then is one looked
		// for, to give the error a bare CR gives anywhere else.
		err = m.parseStartLine(buf[:lineEnd], pos, lim)
		if err != nil && bytes.IndexByte(buf[pos:lineEnd], '\r') >= 0 {
			err = ErrBadHeader
		}
	}
	if err != nil {
		m.response = isStatusLine(buf[pos:])
		if err == ErrUnterminatedHeaders {
			err = ErrBadRequestLine
			if m.response {
				err = ErrBadStatusLine
			}
			return err
		}
		if !m.response {
			// A request with a bad Request-Line is still answered (RFC 3261
			// 21.5.7 505, 21.4.12 414, 400 else): the headers a response
			// copies are parsed, as far as they parse, and the start
			// line's error is the one reported.
			_, _ = m.parseHeaders(buf, next, lim)
		}
		return err
	}
	pos, err = m.parseHeaders(buf, next, lim)
	if err != nil {
		return err
	}
	if m.contentLength >= 0 {
		end := pos + int(m.contentLength)
		if end > len(buf) {
			return ErrShortBody
		}
		m.buf = buf[:end]
	}
	m.bodyS = span{uint32(pos), uint32(len(m.buf))}
	return nil
}

// lineAt finds the line starting at pos. It returns the index of its CR and
// the index of the next line. Lines end in CRLF; a bare LF or a bare CR is an
// error because a peer that splits lines differently would see other headers.
func lineAt(buf []byte, pos int) (lineEnd, next int, err error) {
	if lineEnd, next, err = lineEndAt(buf, pos); err != nil {
		return 0, 0, err
	}
	if bytes.IndexByte(buf[pos:lineEnd], '\r') >= 0 {
		return 0, 0, ErrBadHeader
	}
	return lineEnd, next, nil
}

// lineEndAt is lineAt without the search for a bare CR inside the line.
func lineEndAt(buf []byte, pos int) (lineEnd, next int, err error) {
	i := bytes.IndexByte(buf[pos:], '\n')
	if i < 0 {
		return 0, 0, ErrUnterminatedHeaders
	}
	eol := pos + i
	if eol == pos || buf[eol-1] != '\r' {
		return 0, 0, ErrBadHeader
	}
	return eol - 1, eol + 1, nil
}

// parseStartLine parses line[pos:] (without its CRLF). RFC 3261 7.1 and 7.2.
func (m *Message) parseStartLine(line []byte, pos int, lim *Limits) error {
	if isStatusLine(line[pos:]) {
		m.response = true
		return m.parseStatusLine(line, pos)
	}
	// Method SP Request-URI SP SIP-Version; single SPs only (RFC 4475 3.1.2.9).
	// A known method of up to seven letters and its SP, in the first
	// word, are the token the scan would stop after.
	i, method := pos, MethodOther
	if len(line)-pos >= 8 {
		x := binary.LittleEndian.Uint64(line[pos:]) ^ (' ' * ones)
		if sp := bits.TrailingZeros64((x-ones)&^x&(0x80*ones)) >> 3; sp < 8 { // the first SP, as in indexColon
			i, method = pos+sp, LookupMethod(line[pos:pos+sp])
		}
	}
	if method == MethodOther {
		if i = scanClass(line, pos, classToken); i == pos || i == len(line) || line[i] != ' ' {
			return ErrBadRequestLine
		}
		method = LookupMethod(line[pos:i])
	}
	m.methodS = span{uint32(pos), uint32(i)}
	m.method = method
	i++
	u := i
	i = scanVisible(line, i, 0)
	if i == u || i == len(line) || line[i] != ' ' {
		return ErrBadRequestLine
	}
	if i-u > lim.MaxURILength {
		return ErrURITooLong
	}
	if !hasScheme(line[u:i]) {
		return ErrBadRequestLine // e.g. <sip:...> (RFC 4475 3.1.2.7)
	}
	m.uriS = span{uint32(u), uint32(i)}
	return checkVersion(line[i+1:])
}

// sipSlash is "sip/" read little-endian.
const sipSlash = 0x2f706973

// sipVersionSP is "sip/2.0 " read little-endian (see sipFold).
const sipVersionSP = 0x20302e322f706973

// isStatusLine reports whether a start line is a response's: it begins with
// SIP-Version, whose "SIP" is case-insensitive (RFC 3261 7.1).
func isStatusLine(b []byte) bool {
	return len(b) >= 4 && binary.LittleEndian.Uint32(b)|0x00202020 == sipSlash
}

// hasScheme reports whether b starts with a URI scheme and a colon (RFC 3986 3.1).
func hasScheme(b []byte) bool {
	if len(b) >= 4 && binary.LittleEndian.Uint32(b)|0x00202020 == sipColon {
		return true // the usual scheme, in one compare (as in ParseURI)
	}
	if len(b) == 0 || toLower[b[0]] < 'a' || toLower[b[0]] > 'z' {
		return false
	}
	for i := 1; i < len(b); i++ {
		if b[i] == ':' {
			return true
		}
		if byteClass[b[i]]&classScheme == 0 {
			return false
		}
	}
	return false
}

// checkVersion accepts exactly SIP/2.0 (case-insensitive "SIP", RFC 3261 7.1).
// Another well-formed version is 505 (RFC 3261 21.5.7); anything else is 400.
func checkVersion(v []byte) error {
	if len(v) == 7 && binary.LittleEndian.Uint32(v)|0x00202020 == sipSlash && string(v[4:]) == "2.0" {
		return nil
	}
	if len(v) < 7 || !equalFold(v[:4], "SIP/") {
		return ErrBadVersion
	}
	// SIP/1*DIGIT "." 1*DIGIT
	i, dot := 4, false
	for ; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.' && !dot && i > 4 && v[i-1] != '.':
			dot = true
		case c >= '0' && c <= '9':
		default:
			return ErrBadVersion
		}
	}
	if !dot || v[len(v)-1] == '.' {
		return ErrBadVersion
	}
	return ErrVersion
}

// parseStatusLine parses SIP-Version SP Status-Code SP Reason-Phrase (RFC 3261 7.2).
func (m *Message) parseStatusLine(line []byte, pos int) error {
	// The usual version and its SP, "SIP/2.0 ", in one compare.
	i := pos + 8
	if len(line)-pos < 8 || binary.LittleEndian.Uint64(line[pos:])|sipFold != sipVersionSP {
		sp := bytes.IndexByte(line[pos:], ' ')
		if sp < 0 {
			return ErrBadStatusLine
		}
		if err := checkVersion(line[pos : pos+sp]); err != nil {
			return err
		}
		i = pos + sp + 1
	}
	// Exactly three digits, 100-699; 4294967301 must not wrap (RFC 4475 3.1.2.19).
	if len(line)-i < 3 {
		return ErrBadStatusCode
	}
	code := 0
	for _, c := range line[i : i+3] {
		if c < '0' || c > '9' {
			return ErrBadStatusCode
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 || code > 699 {
		return ErrBadStatusCode
	}
	i += 3
	m.status = uint16(code)
	switch {
	case i == len(line): // no SP, no reason: tolerated (RFC 4475 3.1.1.13)
		m.reasonS = span{uint32(i), uint32(i)}
	case line[i] == ' ':
		// Reason-Phrase: no control characters but HTAB (RFC 3261 25.1).
		for _, c := range line[i+1:] {
			if c < ' ' && c != '\t' || c == 0x7f {
				return ErrBadReason
			}
		}
		m.reasonS = span{uint32(i + 1), uint32(len(line))}
	default:
		return ErrBadStatusCode
	}
	return nil
}

// parseHeaders parses header fields from pos up to and including the empty
// line, and returns where the body starts.
//
// Lines end in CRLF. A bare LF or a bare CR is an error: a peer that splits
// lines differently would see other headers. Each LF is checked for its CR
// as lines are split; bare CRs are caught at the end by counting: with every
// LF preceded by a CR, the section has as many CRs as lines.
func (m *Message) parseHeaders(buf []byte, pos int, lim *Limits) (int, error) {
	start, lines := pos, 0
	maxHeaders := min(lim.MaxHeaders, maxFields)
	var err error
	for {
		eol := bytes.IndexByte(buf[pos:], '\n')
		if eol <= 0 || buf[pos+eol-1] != '\r' {
			if eol < 0 {
				return 0, ErrUnterminatedHeaders
			}
			return 0, ErrBadHeader
		}
		lineEnd, next := pos+eol-1, pos+eol+1
		lines++
		if lineEnd == pos { // the empty line
			if bytes.Count(buf[start:next], cr) != lines {
				return 0, ErrBadHeader // a bare CR
			}
			return next, nil
		}
		// Name, optional white space, colon (RFC 3261 7.3.1). A token has no
		// colon, so the first one ends the name. A known name matched whole
		// is a token (c|0x20 folds no other byte onto its letters and '-',
		// but CR, which the count above rejects); any other is checked.
		//
		// A name of two to fifteen bytes, nearly all, ends in the first
		// two words of the line: its colon is found there and the name
		// looked up from the same words, inline. Any other name, white
		// space before the colon and a line within sixteen bytes of the
		// end of buf take headerName.
		var kind HeaderKind
		var colon, nameEnd int
		if len(buf)-pos >= 16 {
			le, w := binary.LittleEndian, buf[pos:pos+16]
			w0, w1 := le.Uint64(w), le.Uint64(w[8:])
			n := colonIn(w0, w1)
			colon, nameEnd = pos+n, pos+n
			if n < 2 || n == 16 || colon >= lineEnd || buf[colon-1] == ' ' || buf[colon-1] == '\t' {
				if colon, nameEnd, kind, err = headerName(buf, pos, lineEnd); err != nil {
					return 0, err
				}
			} else if n < 8 {
				kind = lookupShortName(w0, n)
			} else {
				kind = lookupMidName(w0, le.Uint64(buf[colon-8:colon]), n)
			}
		} else if colon, nameEnd, kind, err = headerName(buf, pos, lineEnd); err != nil {
			return 0, err
		}
		if kind == HeaderOther && !isToken(buf[pos:nameEnd]) {
			return 0, ErrBadHeaderName
		}
		// Continuation lines: CRLF followed by SP or HTAB.
		for next < len(buf) && (buf[next] == ' ' || buf[next] == '\t') {
			if lineEnd, next, err = lineAt(buf, next); err != nil {
				return 0, err
			}
			lines++
		}
		if lineEnd-pos > lim.MaxHeaderLine {
			return 0, ErrHeaderTooLong
		}
		name := span{uint32(pos), uint32(nameEnd)}
		// The value is recorded as it stands after the colon: its LWS is
		// trimmed when it is read (valueAt). A list's elements and
		// Content-Length are read here, trimmed.
		vs, ve := colon+1, lineEnd
		// A list header's value with no comma is one element, recorded as
		// any other value.
		if listKinds>>(kind&63)&1 != 0 && bytes.IndexByte(buf[vs:ve], ',') >= 0 { // listKinds.Has(kind); kinds are below 64
			if err := m.addList(buf, kind, name, vs, ve, maxHeaders, lim); err != nil {
				return 0, err
			}
		} else {
			if len(m.fields) >= maxHeaders {
				return 0, ErrTooManyHeaders
			}
			if kind == HeaderVia && int(m.count[HeaderVia]) >= lim.MaxVias {
				return 0, ErrTooManyVias // empty values too
			}
			if kind == HeaderContentLength {
				if err := m.setContentLength(buf[vs:ve], lim); err != nil {
					return 0, err
				}
			}
			m.appendField(kind, name, span{uint32(vs), uint32(ve)})
		}
		pos = next
	}
}

// colonIn returns the index of the first ':' in the sixteen bytes of w0
// and w1, little-endian words, or 16 if none.
func colonIn(w0, w1 uint64) int {
	// The high bit of the lowest zero byte of x, as in indexColon.
	x := w0 ^ (':' * ones)
	if m := (x - ones) &^ x & (0x80 * ones); m != 0 {
		return bits.TrailingZeros64(m) >> 3
	}
	x = w1 ^ (':' * ones)
	return 8 + bits.TrailingZeros64((x-ones)&^x&(0x80*ones))>>3 // 8 + 64/8 when none
}

// headerName finds the colon and the end of the name of the header line
// buf[pos:lineEnd] and looks the name up: parseHeaders' general path, for
// any name and white space before the colon.
func headerName(buf []byte, pos, lineEnd int) (colon, nameEnd int, kind HeaderKind, err error) {
	colon = indexColon(buf[pos:lineEnd])
	if colon <= 0 {
		return 0, 0, 0, ErrBadHeaderName // also a fold with no header to continue
	}
	colon += pos
	nameEnd = colon
	if c := buf[colon-1]; c == ' ' || c == '\t' {
		for nameEnd > pos && (buf[nameEnd-1] == ' ' || buf[nameEnd-1] == '\t') {
			nameEnd--
		}
		if nameEnd == pos { // white space alone
			return 0, 0, 0, ErrBadHeaderName
		}
	}
	// Names of two to sixteen bytes are looked up from words of the
	// line; compact forms, longer names and a name in the last eight
	// bytes of buf take lookupName.
	switch n := nameEnd - pos; {
	case n >= 2 && n < 8 && len(buf)-pos >= 8:
		kind = lookupShortName(binary.LittleEndian.Uint64(buf[pos:pos+8]), n)
	case n >= 8 && n <= 16:
		le := binary.LittleEndian
		kind = lookupMidName(le.Uint64(buf[pos:pos+8]), le.Uint64(buf[nameEnd-8:nameEnd]), n)
	default:
		kind = lookupName(buf, pos, nameEnd)
	}
	return colon, nameEnd, kind, nil
}

// indexColon returns the index of the first ':' in b, or -1, eight bytes a
// round.
func indexColon(b []byte) int {
	i := 0
	for ; i < len(b)-7; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:i+8]) ^ (':' * ones)
		// The high bit of the lowest zero byte of x; borrows run upwards only.
		if m := (x - ones) &^ x & (0x80 * ones); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if b[i] == ':' {
			return i
		}
	}
	return -1
}

// listKinds are the headers split into one field per element (see Message).
var listKinds = func() (s HeaderSet) {
	for k, info := range headerInfos {
		if info.list {
			s |= 1 << k
		}
	}
	return s
}()

// addList records the elements of a list header's value buf[start:end].
func (m *Message) addList(buf []byte, kind HeaderKind, name span, start, end, maxHeaders int, lim *Limits) error {
	for start <= end {
		elemEnd, err := listElementEnd(buf, start, end)
		if err != nil {
			return err
		}
		s, e := trimLWS(buf, start, elemEnd)
		if s == e {
			return ErrEmptyListElement
		}
		if len(m.fields) >= maxHeaders {
			return ErrTooManyHeaders
		}
		if kind == HeaderVia && int(m.count[HeaderVia]) >= lim.MaxVias {
			return ErrTooManyVias
		}
		m.appendField(kind, name, span{uint32(s), uint32(e)})
		start = elemEnd + 1
	}
	return nil
}

// setContentLength records the value of Content-Length, v untrimmed.
func (m *Message) setContentLength(v []byte, lim *Limits) error {
	if usualValue(v) {
		v = v[1:]
	} else {
		s, e := trimLWS(v, 0, len(v))
		v = v[s:e]
	}
	if m.contentLength >= 0 {
		return ErrDupContentLength // request smuggling (RFC 4475 3.3.9)
	}
	n, ok := parseUint(v, uint64(lim.MaxMessageSize))
	if !ok {
		if len(v) > 0 && allDigits(v) {
			return ErrBodyTooLarge
		}
		return ErrBadContentLength
	}
	m.contentLength = int32(n)
	return nil
}

// appendField records a header value; the caller checked the limits.
func (m *Message) appendField(kind HeaderKind, name, value span) {
	m.fields = append(m.fields, field{kind: kind, name: name, value: value})
	if m.first[kind] == 0 {
		m.first[kind] = uint16(len(m.fields))
	} else {
		m.repeated |= 1 << kind
	}
	m.count[kind]++
}

// listElementEnd returns the index of the comma ending the list element that
// starts at i, or end. Commas inside quoted strings and <...> do not count
// (RFC 3261 7.3.1).
func listElementEnd(buf []byte, i, end int) (int, error) {
	// Fast path: a comma with no quote or '<' before it ends the element.
	c := bytes.IndexByte(buf[i:end], ',')
	if c < 0 {
		return end, nil
	}
	if bytes.IndexByte(buf[i:i+c], '"') < 0 && bytes.IndexByte(buf[i:i+c], '<') < 0 {
		return i + c, nil
	}
	angle := false
	for ; i < end; i++ {
		switch buf[i] {
		case '"':
			j, ok := skipQuoted(buf, i, end)
			if !ok {
				return 0, ErrBadHeader
			}
			i = j - 1
		case '<':
			angle = true
		case '>':
			angle = false
		case ',':
			if !angle {
				return i, nil
			}
		}
	}
	return end, nil
}

// skipQuoted returns the index just past the quoted string starting at
// buf[i] == '"', honouring quoted-pairs (RFC 3261 25.1).
func skipQuoted(buf []byte, i, end int) (int, bool) {
	for i++; i < end; i++ {
		switch c := buf[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			// quoted-pair: any byte but CR and LF, NUL included (RFC 4475
			// 3.1.1.2).
			if i++; i < end && (buf[i] == '\r' || buf[i] == '\n') {
				return 0, false
			}
		case c >= ' ' && c != 0x7f, c == '\t':
		case c == '\r' && i+2 < end && buf[i+1] == '\n' && (buf[i+2] == ' ' || buf[i+2] == '\t'):
			i += 2 // LWS: a fold
		default:
			return 0, false // qdtext has no other control character (RFC 3261 25.1)
		}
	}
	return 0, false
}

func trimLWS(buf []byte, start, end int) (int, int) {
	for start < end && byteClass[buf[start]]&classWS != 0 {
		start++
	}
	for end > start && byteClass[buf[end-1]]&classWS != 0 {
		end--
	}
	return start, end
}

var (
	cr       = []byte("\r")
	crlfcrlf = []byte("\r\n\r\n")
)

func (s span) of(b []byte) []byte { return b[s.start:s.end:s.end] }

// SetSource records where a received request came from, the packet's
// source address: AppendResponse then stamps the top Via of responses to
// it with received and rport, as the server transport must (RFC 3261
// 18.2.1, RFC 3581 4). Parse forgets it; CopyTo keeps it.
func (m *Message) SetSource(src netip.AddrPort) { m.source = src }

// Source returns what SetSource recorded, the zero AddrPort if nothing.
func (m *Message) Source() netip.AddrPort { return m.source }

// IsResponse reports whether the message is a response.
func (m *Message) IsResponse() bool { return m.response }

// IsRequest reports whether the message is a request.
func (m *Message) IsRequest() bool { return !m.response }

// Method returns the request method, MethodOther for extension methods and responses.
func (m *Message) Method() Method { return m.method }

// MethodBytes returns the request method as received.
func (m *Message) MethodBytes() []byte { return m.methodS.of(m.buf) }

// RequestURI returns the Request-URI as received.
func (m *Message) RequestURI() []byte { return m.uriS.of(m.buf) }

// StatusCode returns the status code of a response, 0 for a request.
func (m *Message) StatusCode() int { return int(m.status) }

// ReasonPhrase returns the reason phrase of a response.
func (m *Message) ReasonPhrase() []byte { return m.reasonS.of(m.buf) }

// Body returns the message body (empty when there is none).
func (m *Message) Body() []byte { return m.bodyS.of(m.buf) }

// ContentLength returns the Content-Length value, or -1 when absent.
func (m *Message) ContentLength() int { return int(m.contentLength) }

// Bytes returns the message as parsed: the buffer given to Parse minus bytes
// past Content-Length.
func (m *Message) Bytes() []byte { return m.buf }

// Header is one header field value.
type Header struct {
	Kind  HeaderKind
	Name  []byte // as received, e.g. "v" or "VIA"
	Value []byte // trimmed; one element of a list header
}

// NumHeaders returns the number of header fields (each list element counts).
func (m *Message) NumHeaders() int { return len(m.fields) }

// HeaderAt returns header field i, in wire order, 0 <= i < NumHeaders.
func (m *Message) HeaderAt(i int) Header {
	f := &m.fields[i]
	return Header{Kind: f.kind, Name: f.name.of(m.buf), Value: m.valueAt(i)}
}

// KindAt returns the kind of header field i, 0 <= i < NumHeaders: what a
// filter reads before it takes the field with HeaderAt.
func (m *Message) KindAt(i int) HeaderKind { return m.fields[i].kind }

// Count returns how many values of kind the message has.
func (m *Message) Count(kind HeaderKind) int { return int(m.count[kind]) }

// Get returns the first value of kind, or nil.
func (m *Message) Get(kind HeaderKind) []byte {
	if i := m.first[kind]; i != 0 {
		return m.valueAt(int(i) - 1)
	}
	return nil
}

// Nth returns the n-th (from 0) value of kind, or nil.
func (m *Message) Nth(kind HeaderKind, n int) []byte {
	i := int(m.first[kind])
	if i == 0 || n >= int(m.count[kind]) {
		return nil
	}
	for i--; i < len(m.fields); i++ {
		if m.fields[i].kind == kind {
			if n == 0 {
				return m.valueAt(i)
			}
			n--
		}
	}
	return nil
}

// GetByName returns the first value of the header named name (any case),
// known or not.
func (m *Message) GetByName(name string) []byte {
	if k := LookupHeader([]byte(name)); k != HeaderOther {
		return m.Get(k)
	}
	for i := range m.fields {
		f := &m.fields[i]
		if f.kind == HeaderOther && equalFold(f.name.of(m.buf), name) {
			return m.valueAt(i)
		}
	}
	return nil
}

// CopyTo makes dst a parsed copy of m whose views point into buf, which
// receives a copy of m's bytes (buf is grown if needed and returned). It is
// how a message crosses to another goroutine without being parsed again,
// its remembered top Via, From, To, Contact and CSeq included: m's buffer
// may be reused as soon as CopyTo returns.
func (m *Message) CopyTo(dst *Message, buf []byte) []byte {
	buf = append(buf[:0], m.buf...)
	fields := append(dst.fields[:0], m.fields...)
	*dst = *m
	dst.buf, dst.fields = buf, fields
	dst.rebaseParsed(m.buf) // the parsed values are views of m's buffer
	return buf
}

// rebaseParsed points the parsed values, views of old, at the same bytes
// of m.buf, a copy of old: the copy is not parsed again.
func (m *Message) rebaseParsed(old []byte) {
	if m.parsed == 0 {
		return
	}
	lo, n := uintptr(unsafe.Pointer(unsafe.SliceData(old))), uintptr(len(old))
	r := func(v *[]byte) {
		// A view of old lies within it; nil and any other slice (a value
		// not parsed, left from an earlier message) stay.
		off := uintptr(unsafe.Pointer(unsafe.SliceData(*v))) - lo
		if *v != nil && off <= n && uintptr(len(*v)) <= n-off {
			end := off + uintptr(len(*v))
			*v = m.buf[off:end:end] // no room to append in place, as from Parse
		}
	}
	if m.parsed&parsedVia != 0 {
		v := &m.topVia
		r(&v.Transport)
		r(&v.Host)
		r(&v.Params)
		r(&v.Branch)
		r(&v.Received)
		r(&v.Maddr)
		r(&v.RPort)
	}
	for _, a := range [...]*Address{&m.from, &m.to, &m.contact} {
		r(&a.Display)
		r(&a.URI)
		r(&a.Params)
		r(&a.Tag)
	}
	r(&m.cseq.MethodRaw)
}
