package parser

import "bytes"

// FrameKind says what Frame found at the start of a stream.
type FrameKind uint8

const (
	FrameNeedMore FrameKind = iota // no complete unit yet: read more
	FrameMessage                   // a message of n bytes: Parse b[:n]
	FramePing                      // CRLFCRLF keep-alive: answer CRLF (RFC 5626 4.4.1)
	FramePong                      // CRLF: a keep-alive answer or stray CRLF before a start line (RFC 3261 7.5); skip it
)

// Frame finds the first unit in b, the bytes read so far from a stream
// transport, without copying. Framing follows RFC 3261 18.3: a message ends
// Content-Length bytes after the empty line, and Content-Length is mandatory
// on streams. An error means the stream cannot be framed again and the
// connection must be closed: Content-Length missing, duplicated, not a number
// or larger than maxSize, or no end of headers within maxSize bytes.
//
// Frame always makes progress: when it returns a unit, n > 0.
func Frame(b []byte, maxSize int) (kind FrameKind, n int, err error) {
	if len(b) == 0 {
		return FrameNeedMore, 0, nil
	}
	if b[0] == '\r' {
		switch {
		case len(b) < 2:
			return FrameNeedMore, 0, nil
		case b[1] != '\n':
			return FrameNeedMore, 0, ErrBadHeader
		case len(b) == 2 || len(b) == 3 && b[2] == '\r':
			return FrameNeedMore, 0, nil // a pong, or the start of a ping
		case b[2] != '\r':
			return FramePong, 2, nil
		case b[3] != '\n':
			return FrameNeedMore, 0, ErrBadHeader
		}
		return FramePing, 4, nil
	}
	limit := min(len(b), maxSize)
	end := bytes.Index(b[:limit], crlfcrlf)
	if end < 0 {
		if len(b) >= maxSize {
			return FrameNeedMore, 0, ErrMessageTooLarge
		}
		return FrameNeedMore, 0, nil
	}
	cl, err := frameContentLength(b[:end+2], maxSize)
	if err != nil {
		return FrameNeedMore, 0, err
	}
	n = end + 4 + cl
	if n > maxSize {
		return FrameNeedMore, 0, ErrMessageTooLarge
	}
	if n > len(b) {
		return FrameNeedMore, 0, nil
	}
	return FrameMessage, n, nil
}

// frameContentLength finds the one Content-Length in a header section that
// ends in CRLF, with the same name, fold and number rules as Parse.
func frameContentLength(h []byte, maxSize int) (int, error) {
	cl := -1
	i := bytes.Index(h, []byte("\r\n")) + 2 // skip the start line
	for i < len(h) {
		eol := i + bytes.Index(h[i:], []byte("\r\n"))
		// Extend over continuation lines.
		next := eol + 2
		for next < len(h) && (h[next] == ' ' || h[next] == '\t') {
			eol = next + bytes.Index(h[next:], []byte("\r\n"))
			next = eol + 2
		}
		line := h[i:eol]
		i = next
		n := 0
		for n < len(line) && byteClass[line[n]]&classToken != 0 {
			n++
		}
		if k := LookupHeader(line[:n]); k != HeaderContentLength {
			continue
		}
		// Only SP and HTAB between the name and its colon, as in Parse: a
		// fold there is no header line it reads (RFC 3261 7.3.1).
		c := n
		for c < len(line) && (line[c] == ' ' || line[c] == '\t') {
			c++
		}
		if c == len(line) || line[c] != ':' {
			continue // Parse rejects the line
		}
		if cl >= 0 {
			return 0, ErrDupContentLength
		}
		v, ok := parseDelta(line[c+1:], uint64(maxSize))
		if !ok {
			return 0, ErrBadContentLength
		}
		cl = int(v)
	}
	if cl < 0 {
		return 0, ErrNoContentLength
	}
	return cl, nil
}
