package parser

import (
	"bytes"
	"encoding/binary"
)

// Address is a name-addr or addr-spec with header parameters (RFC 3261
// 20.10, 20.20, 20.39, 25.1): the value of From, To, Contact, Route,
// Record-Route, P-Asserted-Identity and P-Preferred-Identity.
type Address struct {
	Display []byte // display name: the inside of a quoted string (quoted-pairs kept) or the tokens as received
	Quoted  bool   // the display name was a quoted string
	URI     []byte // the URI as received, without angle brackets; see ParseURI
	Params  []byte // header parameters after the URI, without the leading ';'; see Param
	Tag     []byte // the tag parameter, nil when absent
	Star    bool   // Contact: * (RFC 3261 10.2.2)
}

// ParseURI parses the address's URI into u.
func (a *Address) ParseURI(u *URI) error { return ParseURI(a.URI, u) }

// Param returns the value of header parameter name (case-insensitive) and
// whether it is present.
func (a *Address) Param(name string) ([]byte, bool) { return paramLookup(a.Params, name) }

// ParseAddress parses a name-addr or addr-spec with parameters. It checks
// the address's structure and parameters; the URI is parsed on demand with
// Address.ParseURI (Validate parses every one). In the
// addr-spec form the first ';' ends the URI: parameters after it belong to
// the header, not the URI (RFC 3261 20; RFC 4475 3.3.12), and a URI with
// '?' or ',' must be in angle brackets (RFC 4475 3.1.2.13).
func ParseAddress(b []byte, a *Address) error {
	// b is cut at its trimmed end only: indexes from s spare re-slicing its
	// start, and what follows the URI has no white space left at its end.
	s, e := trimLWS(b, 0, len(b))
	return parseAddress(b[:e], s, a)
}

// parseAddress is ParseAddress for b[s:], which has no LWS at either end:
// a Message's values are trimmed when read (valueAt), so Address need not
// trim them again.
func parseAddress(b []byte, s int, a *Address) error {
	*a = Address{}
	e := len(b)
	if e-s == 1 && b[s] == '*' {
		a.Star = true
		return nil
	}
	lt := -1
	if s < e && b[s] == '"' {
		// Usually qdtext alone up to the closing quote: one class scan
		// finds it; skipQuoted reads quoted-pairs and folds.
		end := scanClass(b, s+1, classQDText)
		if end < len(b) && b[end] == '"' {
			end++
		} else {
			var ok bool
			if end, ok = skipQuoted(b, s, len(b)); !ok {
				return ErrBadAddress // RFC 4475 3.1.2.6
			}
		}
		a.Display, a.Quoted = b[s+1:end-1], true
		if lt = skipLWS(b, end); lt == len(b) || b[lt] != '<' {
			return ErrBadAddress
		}
	} else if s < e && b[s] == '<' {
		lt, a.Display = s, b[s:s] // no display name: the usual Contact
	} else if j := indexUnquoted(b[s:], '<'); j >= 0 {
		lt = s + j
		// display-name = *(token LWS); LWS before '<' is optional (RFC 4475 3.1.1.6).
		for k := s; k < lt; k++ {
			if byteClass[b[k]]&(classToken|classWS) == 0 {
				return ErrBadAddress // e.g. "Bell, Alexander" (RFC 4475 3.1.2.15)
			}
		}
		ds, de := trimLWS(b, s, lt)
		a.Display = b[ds:de]
	}
	var r int // where what follows the URI starts
	if lt >= 0 {
		// Up to '>', with no white space inside <...> (RFC 4475 3.1.2.14)
		// nor any control character, which no URI has (RFC 3986 2).
		gt := scanVisible(b, lt+1, '>')
		if gt == len(b) || b[gt] != '>' {
			return ErrBadAddress
		}
		a.URI = b[lt+1 : gt]
		r = gt + 1
	} else {
		r = len(b)
		if i := bytes.IndexByte(b[s:], ';'); i >= 0 {
			r = s + i
		}
		us, ue := trimLWS(b, s, r)
		a.URI = b[us:ue]
		if bytes.IndexByte(a.URI, '?') >= 0 || bytes.IndexByte(a.URI, ',') >= 0 ||
			scanVisible(a.URI, 0, 0) != len(a.URI) {
			return ErrBadAddress // no white space inside either (RFC 3261 25.1 addr-spec)
		}
	}
	if len(a.URI) == 0 || !hasScheme(a.URI) {
		return ErrBadAddress
	}
	if r = skipLWS(b, r); r < len(b) {
		if b[r] != ';' {
			return ErrBadAddress
		}
		a.Params = b[r+1:]
		// The usual parameters of a From or To, a tag alone (RFC 3261 25.1
		// tag-param): "tag=" (any case) and an unquoted value, as
		// checkParams reads them.
		if p := a.Params; len(p) > 4 && binary.LittleEndian.Uint32(p)|0x00202020 == tagEqual && scanClass(p, 4, classGenValue) == len(p) {
			a.Tag = p[4:]
			return nil
		}
		var err error
		if a.Tag, err = checkParams(a.Params); err != nil {
			return err
		}
	}
	return nil
}

// indexUnquoted returns the index of the first c in b outside quoted
// strings, or -1.
func indexUnquoted(b []byte, c byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case c:
			return i
		case '"':
			end, ok := skipQuoted(b, i, len(b))
			if !ok {
				return -1
			}
			i = end - 1
		}
	}
	return -1
}

// checkParams validates header parameters and returns the tag parameter; a
// repeated tag is an error.
func checkParams(b []byte) (tag []byte, err error) {
	it := paramIter{b: b}
	seenTag := false
	for !it.done {
		name, value, _, err := it.next()
		if err != nil {
			return nil, err
		}
		// "tag" in any case, in two compares (c|0x20 folds a letter only
		// into itself, as in ParseVia).
		if len(name) == 3 && binary.LittleEndian.Uint16(name)|0x2020 == 0x6174 && name[2]|0x20 == 'g' {
			if seenTag {
				return nil, ErrDupTag
			}
			if len(value) == 0 {
				return nil, ErrBadTag
			}
			seenTag, tag = true, value
		}
	}
	return tag, nil
}

// tagEqual is "tag=" read little-endian.
const tagEqual = 0x3d676174

// paramIter walks generic-params (RFC 3261 25.1):
// *( SEMI token [ EQUAL ( token / host / quoted-string ) ] ), LWS allowed
// around SEMI and EQUAL, given without the first SEMI.
type paramIter struct {
	b    []byte
	i    int
	done bool
}

// next returns the next parameter; ok is false at the end. A quoted value is
// returned with its quotes. Until done, next returns a parameter or an
// error: a loop on !it.done spares the call that finds the end.
func (it *paramIter) next() (name, value []byte, ok bool, err error) {
	if it.done {
		return nil, nil, false, nil
	}
	b, i := it.b, skipLWS(it.b, it.i)
	n := i
	i = scanClass(b, i, classToken)
	if i == n {
		return nil, nil, false, ErrBadParams // empty parameter (RFC 4475 3.1.2.1)
	}
	name = b[n:i]
	i = skipLWS(b, i)
	if i < len(b) && b[i] == '=' {
		i = skipLWS(b, i+1)
		v := i
		if i < len(b) && b[i] == '"' {
			end, ok := skipQuoted(b, i, len(b))
			if !ok {
				return nil, nil, false, ErrBadParams
			}
			i = end
		} else {
			// token, or host: an IPv6 reference brings ':' '[' ']'.
			i = scanClass(b, i, classGenValue)
		}
		if i == v {
			return nil, nil, false, ErrBadParams
		}
		value = b[v:i]
		i = skipLWS(b, i)
	}
	switch {
	case i == len(b):
		it.done = true
	case b[i] == ';':
		i++
	default:
		return nil, nil, false, ErrBadParams
	}
	it.i = i
	return name, value, true, nil
}

// skipLWS returns the index of the first byte at or after i that is not
// LWS, or len(b); the unsigned compare spares the load its bounds check.
func skipLWS(b []byte, i int) int {
	for uint(i) < uint(len(b)) && byteClass[b[i]]&classWS != 0 {
		i++
	}
	return i
}

// paramLookup finds parameter name in a ';'-separated list (without the
// leading ';'), tolerating LWS around ';' and '='. It assumes the list was
// validated: quoted values are skipped as a whole.
func paramLookup(b []byte, name string) ([]byte, bool) {
	for i := 0; i < len(b); {
		i = skipLWS(b, i)
		n := i
		for i < len(b) && b[i] != '=' && b[i] != ';' && byteClass[b[i]]&classWS == 0 {
			i++
		}
		match := equalFold(b[n:i], name)
		i = skipLWS(b, i)
		var value []byte
		if i < len(b) && b[i] == '=' {
			i = skipLWS(b, i+1)
			v := i
			if i < len(b) && b[i] == '"' {
				if end, ok := skipQuoted(b, i, len(b)); ok {
					i = end
				} else {
					i = len(b)
				}
			} else {
				for i < len(b) && b[i] != ';' && byteClass[b[i]]&classWS == 0 {
					i++
				}
			}
			value = b[v:i:i]
			i = skipLWS(b, i)
		}
		if match {
			if value == nil {
				value = b[i:i:i]
			}
			return value, true
		}
		if i < len(b) && b[i] != ';' {
			return nil, false // malformed: stop rather than guess
		}
		i++
	}
	return nil, false
}
