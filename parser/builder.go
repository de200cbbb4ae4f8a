package parser

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// The Append functions build messages by appending to a caller-owned slice,
// strconv style: they allocate only when dst lacks capacity, so a reused
// buffer makes building allocation-free. A message is built in order: a
// start line, headers, then AppendBody, which writes Content-Length, the
// empty line and the body.

// AppendRequestLine appends Method SP Request-URI SP SIP/2.0 CRLF.
func AppendRequestLine(dst []byte, method string, uri []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, uri...)
	return append(dst, " SIP/2.0\r\n"...)
}

// AppendStatusLine appends SIP/2.0 SP Status-Code SP Reason-Phrase CRLF.
func AppendStatusLine(dst []byte, code int, reason string) []byte {
	dst = append(dst, "SIP/2.0 "...)
	if code >= 0 {
		dst = appendUint(dst, uint64(code))
	} else {
		dst = strconv.AppendInt(dst, int64(code), 10)
	}
	dst = append(dst, ' ')
	dst = append(dst, reason...)
	return append(dst, "\r\n"...)
}

// AppendStartLine appends m's start line as received.
func AppendStartLine(dst []byte, m *Message) []byte {
	if m.IsResponse() {
		dst = append(dst, "SIP/2.0 "...)
		dst = appendUint(dst, uint64(m.status))
		dst = append(dst, ' ')
		dst = append(dst, m.ReasonPhrase()...)
		return append(dst, "\r\n"...)
	}
	dst = append(dst, m.MethodBytes()...)
	dst = append(dst, ' ')
	dst = append(dst, m.RequestURI()...)
	return append(dst, " SIP/2.0\r\n"...)
}

// AppendHeader appends name: value CRLF.
func AppendHeader(dst []byte, name string, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendHeaderString appends name: value CRLF.
func AppendHeaderString(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendHeaderUint appends name: v CRLF.
func AppendHeaderUint(dst []byte, name string, v uint64) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = appendUint(dst, v)
	return append(dst, "\r\n"...)
}

// appendUint is strconv.AppendUint in base 10 with the numbers a message
// is full of, a one-digit Content-Length and a status code, written
// directly.
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v < 10:
		return append(dst, byte('0'+v))
	case v >= 100 && v < 1000:
		return append(dst, byte('0'+v/100), byte('0'+v/10%10), byte('0'+v%10))
	}
	return strconv.AppendUint(dst, v, 10)
}

// appendField writes parsed header value i: known kinds under their
// canonical name, others under the name received.
func appendField(dst []byte, m *Message, i int) []byte {
	f := &m.fields[i]
	if f.kind == HeaderOther {
		dst = append(dst, f.name.of(m.buf)...)
	} else {
		dst = append(dst, headerInfos[f.kind].name...)
	}
	dst = append(dst, ": "...)
	dst = append(dst, m.valueAt(i)...)
	return append(dst, "\r\n"...)
}

// AppendHeaders appends, in wire order, every header value of m whose kind is
// not in skip, one line each (list elements become separate lines, which
// RFC 3261 7.3.1 makes equivalent). Content-Length is always skipped:
// AppendBody writes it. To remove headers, skip them; to replace them, skip
// them and append the new values; to add, append.
func AppendHeaders(dst []byte, m *Message, skip HeaderSet) []byte {
	skip |= NewHeaderSet(HeaderContentLength)
	for i := range m.fields {
		if !skip.Has(m.fields[i].kind) {
			dst = appendField(dst, m, i)
		}
	}
	return dst
}

// AppendKind appends every value of kind in m, in order.
func AppendKind(dst []byte, m *Message, kind HeaderKind) []byte {
	i := int(m.first[kind])
	if i == 0 {
		return dst
	}
	return appendValues(dst, m, kind, i-1, int(m.count[kind]))
}

// appendValues appends the n values of kind found from m.fields[i] on.
func appendValues(dst []byte, m *Message, kind HeaderKind, i, n int) []byte {
	// Values on lines of their own, one after another: one copy. (A single
	// line costs about as much to check as to write.)
	if j := i + n; n > 1 && j <= len(m.fields) {
		if lines := verbatimLines(m, m.fields[i:j], kind); lines != nil {
			return append(dst, lines...)
		}
	}
	// From the first value to the last: a single-value header is one line.
	for ; n > 0 && i < len(m.fields); i++ {
		if m.fields[i].kind == kind {
			dst = appendField(dst, m, i)
			n--
		}
	}
	return dst
}

// verbatimLines returns the lines of fields in m's buffer, from the first
// name to the last CRLF, when they follow one another, are all of kind
// (of any kind, for HeaderOther) and each reads as appendField writes it:
// name, ": ", value, CRLF. One copy of them then does what appendField
// would line by line. A name is only checked for its length, so a known
// name in another case is kept as received, which RFC 3261 7.3.1 makes
// equivalent; a compact form is not a match. It returns nil otherwise.
func verbatimLines(m *Message, fields []field, kind HeaderKind) []byte {
	b := m.buf
	start := fields[0].name.start
	end := start
	for i := range fields {
		// Values are recorded untrimmed: the usual value (usualValue), the
		// colon and SP before it, is read in place. Lines that do not
		// read so are checked again by verbatimTrimmed, with every value
		// trimmed as valueAt trims it.
		f := &fields[i]
		ns, ne, vs, ve := f.name.start, f.name.end, f.value.start, f.value.end
		if ns != end || f.kind != kind && kind != HeaderOther ||
			vs != ne+1 || int(ne-ns) != len(headerInfos[f.kind].name) || int(ve)+2 > len(b) ||
			b[ne] != ':' || !usualValueAt(b, int(vs), int(ve)) || binary.LittleEndian.Uint16(b[ve:]) != '\r'|'\n'<<8 {
			return verbatimTrimmed(m, fields, kind)
		}
		end = ve + 2
	}
	return b[start:end]
}

// verbatimTrimmed is verbatimLines with each value trimmed as valueAt
// trims it, whatever its shape.
func verbatimTrimmed(m *Message, fields []field, kind HeaderKind) []byte {
	b := m.buf
	start := fields[0].name.start
	end := start
	for i := range fields {
		f := &fields[i]
		s, e := trimLWS(b, int(f.value.start), int(f.value.end))
		ns, ne, vs, ve := f.name.start, f.name.end, uint32(s), uint32(e)
		if ns != end || f.kind != kind && kind != HeaderOther ||
			vs != ne+2 || int(ne-ns) != len(headerInfos[f.kind].name) || int(ve)+2 > len(b) ||
			binary.LittleEndian.Uint16(b[ne:]) != ':'|' '<<8 || binary.LittleEndian.Uint16(b[ve:]) != '\r'|'\n'<<8 {
			return nil
		}
		end = ve + 2
	}
	return b[start:end]
}

// usualValueAt is usualValue(b[s:e]), read in place.
func usualValueAt(b []byte, s, e int) bool {
	return s+1 < e && b[s] == ' ' && b[s+1] > ' ' && b[e-1] > ' '
}

// AppendBody appends Content-Type (when contentType is set), Content-Length,
// the empty line and body, ending the message.
func AppendBody(dst []byte, contentType string, body []byte) []byte {
	if contentType != "" {
		dst = AppendHeaderString(dst, "Content-Type", contentType)
	}
	dst = AppendHeaderUint(dst, "Content-Length", uint64(len(body)))
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// AppendResponse appends the start line and the headers a response copies
// from its request (RFC 3261 8.2.6.2): every Via in order, From, To, Call-ID
// and CSeq, plus Timestamp in a 100 (RFC 3261 8.2.6.1). When toTag is not
// empty and the request's To has no tag, the To gets ";tag=toTag". When
// req's source is known (SetSource), the top Via is stamped with it as
// AppendVia does. The caller appends any other headers, then AppendBody.
func AppendResponse(dst []byte, req *Message, code int, reason string, toTag []byte) []byte {
	dst = AppendStatusLine(dst, code, reason)
	dst = appendVias(dst, req)
	tag := len(toTag) > 0 && !hasTag(req)
	if lines, toEnd := dialogLines(req); lines != nil {
		// From, To, Call-ID and CSeq as received, the tag inserted.
		if tag {
			dst = append(dst, lines[:toEnd]...)
			dst = append(dst, ";tag="...)
			dst = append(dst, toTag...)
			lines = lines[toEnd:]
		}
		dst = append(dst, lines...)
	} else {
		dst = AppendKind(dst, req, HeaderFrom)
		to := req.Get(HeaderTo)
		dst = append(dst, "To: "...)
		dst = append(dst, to...)
		if tag {
			dst = append(dst, ";tag="...)
			dst = append(dst, toTag...)
		}
		dst = append(dst, "\r\n"...)
		dst = AppendKind(dst, req, HeaderCallID)
		dst = AppendKind(dst, req, HeaderCSeq)
	}
	if code == 100 {
		dst = AppendKind(dst, req, HeaderTimestamp)
	}
	return dst
}

// dialogLines returns req's From and To (in either order), Call-ID and CSeq
// lines when they come one after another, one value each and verbatim (see
// verbatimLines), as most requests carry them: what AppendResponse writes
// for them, in the request's order (RFC 3261 7.3.1: the order of different
// headers is not significant). toEnd is where the To value ends in lines.
func dialogLines(req *Message) (lines []byte, toEnd int) {
	const once = HeaderSet(1<<HeaderFrom | 1<<HeaderTo | 1<<HeaderCallID | 1<<HeaderCSeq)
	from, to := int(req.first[HeaderFrom])-1, int(req.first[HeaderTo])-1
	i := min(from, to) // From and To, in either order, then Call-ID and CSeq
	if i < 0 || max(from, to) != i+1 || i+4 > len(req.fields) || req.repeated&once != 0 {
		return nil, 0
	}
	f := req.fields[i : i+4]
	if f[2].kind != HeaderCallID || f[3].kind != HeaderCSeq {
		return nil, 0
	}
	// Lines that are verbatim hold the To value, untrimmed, up to the
	// CRLF that ends it: where it ends, trimmed, is where it was recorded.
	return verbatimLines(req, f, HeaderOther), int(req.fields[to].value.end - f[0].name.start)
}

// hasTag reports whether req's To carries a tag parameter. It reads To
// through the message, which parses it once: Validate did already, and a
// request answered several times (100, 180, 200) is not parsed again.
func hasTag(req *Message) bool {
	var a Address
	return req.To(&a) == nil && a.Tag != nil
}

// appendVias appends req's Via values in order, one line each, the top one
// stamped with req's source when SetSource recorded one.
func appendVias(dst []byte, req *Message) []byte {
	var v Via
	if !req.source.IsValid() || req.TopVia(&v) != nil {
		return AppendKind(dst, req, HeaderVia) // nothing to stamp, or nothing to stamp it on
	}
	i := int(req.first[HeaderVia]) // the top Via is fields[i-1]: TopVia found it
	dst = appendStampedVia(dst, req.valueAt(i-1), &v, req.source)
	return appendValues(dst, req, HeaderVia, i, int(req.count[HeaderVia])-1)
}

// AppendVia appends a Via header from a received Via value with RFC 3581
// and RFC 3261 18.2.1 applied for a request from src: received=ip is added
// when src's address differs from sent-by (or rport was requested), and an
// empty rport gets src's port. Other parameters are kept in order. A value
// that does not parse is copied as it is.
func AppendVia(dst []byte, via []byte, src netip.AddrPort) []byte {
	var v Via
	if ParseVia(via, &v) != nil {
		dst = append(dst, "Via: "...)
		dst = append(dst, via...)
		return append(dst, "\r\n"...)
	}
	return appendStampedVia(dst, via, &v, src)
}

// appendStampedVia is AppendVia for via parsed into v.
func appendStampedVia(dst []byte, via []byte, v *Via, src netip.AddrPort) []byte {
	var buf [64]byte // an IPv6 address in text is at most 45 bytes
	ip := src.Addr().Unmap().WithZone("").AppendTo(buf[:0])
	host := v.Host
	if len(host) > 2 && host[0] == '[' {
		host = host[1 : len(host)-1] // received has no brackets (RFC 3261 25.1)
	}
	dst = append(dst, "Via: "...)
	if !v.HasRPort && v.Received == nil && string(host) == string(ip) {
		dst = append(dst, via...)
		return append(dst, "\r\n"...)
	}
	// The value up to its parameters, then each parameter with rport filled in.
	base := via
	if v.Params != nil {
		base = via[:len(via)-len(v.Params)-1]
	}
	dst = append(dst, base...)
	it := paramIter{b: v.Params}
	for {
		name, value, ok, _ := it.next()
		if !ok {
			break
		}
		if equalFold(name, "received") {
			continue // rewritten below
		}
		dst = append(dst, ';')
		dst = append(dst, name...)
		if equalFold(name, "rport") && len(value) == 0 {
			dst = append(dst, '=')
			dst = strconv.AppendUint(dst, uint64(src.Port()), 10)
		} else if value != nil {
			dst = append(dst, '=')
			dst = append(dst, value...)
		}
	}
	if v.HasRPort || string(host) != string(ip) {
		dst = append(dst, ";received="...)
		dst = append(dst, ip...)
	}
	return append(dst, "\r\n"...)
}
