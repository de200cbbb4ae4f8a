package parser

import (
	"bytes"
	"encoding/binary"
)

// Scheme is a URI scheme.
type Scheme uint8

const (
	SchemeOther Scheme = iota // any other scheme, kept opaque (RFC 4475 3.3.2)
	SchemeSIP
	SchemeSIPS
	SchemeTel
)

// URI is a parsed URI: views into the parsed bytes.
//
// For sip and sips (RFC 3261 19.1.1) every field may be set. For tel
// (RFC 3966) User holds the number and Params its parameters. Other schemes
// are opaque: only SchemeRaw and Opaque are set.
type URI struct {
	Scheme    Scheme
	SchemeRaw []byte
	User      []byte // still %-escaped; see Unescape
	Password  []byte
	Host      []byte // an IPv6 reference keeps its brackets
	Port      int    // 0 when absent
	Params    []byte // ";name=value;..." without the leading ';'; see Param
	Headers   []byte // after '?'
	Opaque    []byte // everything after "scheme:" (all schemes)
}

// IsSIP reports whether the URI is a sip or sips URI.
func (u *URI) IsSIP() bool { return u.Scheme == SchemeSIP || u.Scheme == SchemeSIPS }

// Param returns the value of the URI parameter name (case-insensitive) and
// whether it is present. A parameter without a value returns an empty value.
func (u *URI) Param(name string) ([]byte, bool) { return paramLookup(u.Params, name) }

// ParseURI parses an absolute URI into u.
func ParseURI(b []byte, u *URI) error {
	*u = URI{}
	// sip and sips first, in one compare each (schemes are case-insensitive,
	// RFC 3986 3.1; c|0x20 makes a letter only of the same letter). Their
	// parse follows here, not in a call of its own.
	var w uint32
	if len(b) >= 5 {
		w = binary.LittleEndian.Uint32(b)
	}
	switch {
	case len(b) >= 5 && w|0x00202020 == sipColon:
		u.Scheme, u.SchemeRaw, u.Opaque = SchemeSIP, b[:3], b[4:]
	case len(b) >= 5 && w|0x20202020 == sipsLetters && b[4] == ':':
		u.Scheme, u.SchemeRaw, u.Opaque = SchemeSIPS, b[:4], b[5:]
	default:
		if err := parseScheme(b, u); err != nil || !u.IsSIP() {
			return err
		}
	}
	// [userinfo "@"] hostport uri-parameters [headers] (RFC 3261 25.1).
	// Neither user nor password may hold an unescaped '@' and nothing
	// after the host may hold one, so the first '@' ends the userinfo.
	b = u.Opaque
	// Host characters are user characters too: the scan for the host finds
	// the usual user, up to an '@' that is then the first one.
	h := scanClass(b, 0, classHost)
	if h > 0 && h < len(b) && b[h] == '@' {
		u.User, b = b[:h], b[h+1:]
		h = scanClass(b, 0, classHost)
	} else if at := bytes.IndexByte(b, '@'); at >= 0 {
		info := b[:at]
		b = b[at+1:]
		// user [":" password]: no ':' in a user, so the first one ends it.
		i, ok := scanEscaped(info, 0, classUser)
		if !ok || i == 0 {
			return ErrBadURI
		}
		u.User = info[:i]
		if i < len(info) {
			if info[i] != ':' {
				return ErrBadURI
			}
			u.Password = info[i+1:]
			if !validChars(u.Password, classPassword) {
				return ErrBadURI
			}
		}
		h = scanClass(b, 0, classHost)
	}
	// hostport: host [":" port]. Hosts are hostnames, IPv4 addresses or
	// bracketed IPv6 references (RFC 3261 25.1); a port is 0-65535.
	i := h
	if len(b) > 0 && b[0] == '[' {
		if i = ipv6RefEnd(b); i < 0 {
			return ErrBadURI
		}
	} else if i == 0 {
		return ErrBadURI
	}
	u.Host = b[:i]
	if i < len(b) && b[i] == ':' {
		// 1*DIGIT up to 65535, read in the pass that finds the digits.
		start := i + 1
		p, end, ok := readPort(b, start)
		if !ok || end == start {
			return ErrBadURI
		}
		i, u.Port = end, p
	}
	if i < len(b) && b[i] == ';' {
		// '?' is no paramchar: the parameters end at the headers.
		end, ok := scanURIParams(b[i+1:])
		if !ok {
			return ErrBadURI
		}
		u.Params = b[i+1 : i+1+end]
		i += 1 + end
	}
	if i < len(b) && b[i] == '?' {
		u.Headers = b[i+1:]
		if len(u.Headers) == 0 || !validChars(u.Headers, classHeaderChar|classPassword) {
			return ErrBadURI
		}
		i = len(b)
	}
	if i != len(b) {
		return ErrBadURI
	}
	return nil
}

// parseScheme reads the scheme of a URI that does not start with sip: or
// sips: as ParseURI reads them, and parses it whole unless it is sip or
// sips, which ParseURI goes on with.
func parseScheme(b []byte, u *URI) error {
	colon := bytes.IndexByte(b, ':')
	if colon <= 0 || !hasScheme(b) {
		return ErrBadURI
	}
	u.SchemeRaw, u.Opaque = b[:colon], b[colon+1:]
	switch {
	case equalFold(u.SchemeRaw, "sip"):
		u.Scheme = SchemeSIP
	case equalFold(u.SchemeRaw, "sips"):
		u.Scheme = SchemeSIPS
	case equalFold(u.SchemeRaw, "tel"):
		u.Scheme = SchemeTel
		return parseTel(u, u.Opaque)
	default:
		if len(u.Opaque) == 0 {
			return ErrBadURI
		}
		for _, c := range u.Opaque {
			if c <= ' ' || c == 0x7f {
				return ErrBadURI
			}
		}
	}
	return nil
}

// parseTel parses telephone-subscriber (RFC 3966 3) loosely: the number up
// to the first ';', then parameters.
func parseTel(u *URI, b []byte) error {
	num := b
	if i := bytes.IndexByte(b, ';'); i >= 0 {
		num, u.Params = b[:i], b[i+1:]
		if len(u.Params) == 0 || !validURIParams(u.Params) {
			return ErrBadURI
		}
	}
	if len(num) == 0 || !validChars(num, classParam) {
		return ErrBadURI
	}
	u.User = num
	return nil
}

// ipv6RefEnd returns the length of the IPv6 reference "[" IPv6address "]"
// that starts b (validIPv6Ref), or -1 if it is malformed.
func ipv6RefEnd(b []byte) int {
	end := bytes.IndexByte(b, ']')
	if end < 0 || !validIPv6Ref(b[:end+1]) {
		return -1
	}
	return end + 1
}

// validURIParams checks name[=value] *(";" name[=value]) of paramchars and
// escapes (RFC 3261 25.1 uri-parameters, given without the first ';').
func validURIParams(b []byte) bool {
	end, ok := scanURIParams(b)
	return ok && end == len(b)
}

// scanURIParams checks the uri-parameters at the start of b (without the
// first ';') and returns where they end: at len(b) or at a '?'.
func scanURIParams(b []byte) (int, bool) {
	ok := true
	for i := 0; ; {
		// The inlined class scan reads the usual name and value, which
		// have no escape; scanEscaped goes on from a '%'.
		j := scanClass(b, i, classParam)
		if j < len(b) && b[j] == '%' {
			j, ok = scanEscaped(b, j, classParam)
		}
		if !ok || j == i {
			return 0, false // also an empty parameter, as after a trailing ';'
		}
		if j < len(b) && b[j] == '=' {
			k := scanClass(b, j+1, classParam)
			if k < len(b) && b[k] == '%' {
				k, ok = scanEscaped(b, k, classParam)
			}
			if !ok || k == j+1 {
				return 0, false
			}
			j = k
		}
		if j == len(b) || b[j] == '?' {
			return j, true
		}
		if b[j] != ';' {
			return 0, false
		}
		i = j + 1
	}
}

// validChars reports whether b holds only bytes of class and well-formed %HH escapes.
func validChars(b []byte, class uint16) bool {
	i, ok := scanEscaped(b, 0, class)
	return ok && i == len(b)
}

// scanEscaped returns the index of the first byte at or after i that is
// neither of class nor in a %HH escape, and false if that byte starts a
// malformed escape.
func scanEscaped(b []byte, i int, class uint16) (int, bool) {
	for i = scanClass(b, i, class); i < len(b) && b[i] == '%'; i = scanClass(b, i, class) {
		if i+2 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) {
			return i, false
		}
		i += 3
	}
	return i, true
}

// sipColon and sipsLetters are "sip:" and "sips" read little-endian.
const (
	sipColon    = 0x3a706973
	sipsLetters = 0x73706973
)

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// Unescape appends b to dst with %HH escapes decoded, once: "%2541" becomes
// "%41", not "A" (RFC 4475 3.1.1.3). A %00 yields a NUL byte; it does not
// end the string (RFC 4475 3.1.1.4).
func Unescape(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]) {
			dst = append(dst, unhex(b[i+1])<<4|unhex(b[i+2]))
			i += 2
			continue
		}
		dst = append(dst, b[i])
	}
	return dst
}
