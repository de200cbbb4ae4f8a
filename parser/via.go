package parser

import (
	"bytes"
	"encoding/binary"
)

// Via is one Via value (RFC 3261 20.42, RFC 3581).
type Via struct {
	Transport []byte // "UDP", "TCP", "TLS", "SCTP", or an extension token, as received
	Host      []byte // sent-by host; an IPv6 reference keeps its brackets
	Port      int    // sent-by port, 0 when absent
	Params    []byte // parameters without the leading ';'
	Branch    []byte
	Received  []byte
	Maddr     []byte
	RPort     []byte // the rport value, empty when the parameter has none
	HasRPort  bool
}

// magicCookie starts every RFC 3261 branch (RFC 3261 8.1.1.7).
const magicCookie = "z9hG4bK"

// IsRFC3261Branch reports whether the branch carries the magic cookie, so it
// alone identifies the transaction (RFC 3261 17.2.3).
func (v *Via) IsRFC3261Branch() bool {
	return len(v.Branch) > len(magicCookie) && equalFold(v.Branch[:len(magicCookie)], magicCookie)
}

// ParseVia parses one Via value:
// sent-protocol LWS sent-by *( SEMI via-params ), where LWS may surround each
// '/' of sent-protocol and the ':' of sent-by (RFC 3261 25.1, RFC 4475 3.1.1.1).
func ParseVia(b []byte, v *Via) error {
	*v = Via{}
	var i int
	if len(b) > 8 && binary.LittleEndian.Uint64(b)|sipFold == sipVersionSlash {
		// The usual form, "SIP/2.0/" with no LWS: the transport follows,
		// usually three token characters (UDP, TCP, TLS) and a SP, where
		// the scan would stop.
		if len(b) > 11 && byteClass[b[8]]&byteClass[b[9]]&byteClass[b[10]]&classToken != 0 && b[11] == ' ' {
			i = 11
		} else if i = scanClass(b, 8, classToken); i == 8 {
			return ErrBadVia
		}
		v.Transport = b[8:i]
		i = skipLWS(b, i)
	} else if err := parseSentProtocol(b, v, &i); err != nil {
		return err
	}
	if i == 0 || byteClass[b[i-1]]&classWS == 0 {
		return ErrBadVia // LWS must separate sent-protocol and sent-by
	}
	// sent-by = host [ COLON port ]
	hs := i
	if i < len(b) && b[i] == '[' {
		end := bytes.IndexByte(b[i:], ']')
		if end < 0 {
			return ErrBadVia
		}
		i += end + 1
	} else {
		i = scanClass(b, i, classHost)
	}
	if i == hs {
		return ErrBadVia
	}
	v.Host = b[hs:i]
	if v.Host[0] == '[' && !validIPv6Ref(v.Host) {
		return ErrBadVia
	}
	i = skipLWS(b, i)
	if i < len(b) && b[i] == ':' {
		i = skipLWS(b, i+1)
		// 1*DIGIT up to 65535, read in the pass that finds the digits.
		ps := i
		p, end, ok := readPort(b, ps)
		if !ok || end == ps {
			return ErrBadVia
		}
		i, v.Port = end, p
		i = skipLWS(b, i)
	}
	if i == len(b) {
		return nil
	}
	if b[i] != ';' {
		return ErrBadVia
	}
	v.Params = b[i+1:]
	it := paramIter{b: v.Params}
	// The usual first parameter, "branch=" (any case) and a token, is read
	// here, as the walk would read it; the walk goes on after its ';'.
	if p := v.Params; len(p) >= 8 && binary.LittleEndian.Uint64(p)&branchMask|branchFold == branchEqual {
		if e := scanClass(p, 7, classGenValue); e > 7 && (e == len(p) || p[e] == ';') {
			v.Branch = p[7:e]
			it.i, it.done = e+1, e == len(p)
		}
	}
	// A bare rport last (RFC 3581 3), as most clients send it after the
	// branch, is read in one compare too.
	if !it.done {
		if p := v.Params[it.i:]; len(p) == 5 && binary.LittleEndian.Uint32(p)|0x20202020 == 0x726f7072 && p[4]|0x20 == 't' {
			v.HasRPort, it.done = true, true
		}
	}
	for !it.done {
		name, value, _, err := it.next()
		if err != nil {
			return ErrBadVia
		}
		// The names are letters, so c|0x20 folds them (see equalTokenFold);
		// the length picks the one name to compare, a word at a time.
		le := binary.LittleEndian
		switch len(name) {
		case 6: // branch
			if le.Uint32(name)|0x20202020 == 0x6e617262 && le.Uint16(name[4:])|0x2020 == 0x6863 {
				v.Branch = value
			}
		case 8: // received
			if le.Uint64(name)|0x2020202020202020 == 0x6465766965636572 {
				v.Received = value
			}
		case 5: // maddr, rport
			switch w := le.Uint32(name) | 0x20202020; {
			case w == 0x6464616d && name[4]|0x20 == 'r':
				v.Maddr = value
			case w == 0x726f7072 && name[4]|0x20 == 't':
				// response-port = "rport" [EQUAL 1*DIGIT] (RFC 3581 3)
				if len(value) > 0 {
					if _, end, ok := readPort(value, 0); !ok || end != len(value) {
						return ErrBadVia
					}
				}
				v.RPort, v.HasRPort = value, true
			}
		}
	}
	return nil
}

// parseSentProtocol parses protocol-name "/" protocol-version "/" transport
// with LWS allowed around each '/' (RFC 3261 25.1) into v.Transport, and
// sets *pos past it and the LWS after it.
func parseSentProtocol(b []byte, v *Via, pos *int) error {
	i := skipLWS(b, 0)
	var parts [3][]byte
	for k := range parts {
		if k > 0 {
			if i == len(b) || b[i] != '/' {
				return ErrBadVia
			}
			i = skipLWS(b, i+1)
		}
		s := i
		i = scanClass(b, i, classToken)
		if i == s {
			return ErrBadVia
		}
		parts[k] = b[s:i]
		i = skipLWS(b, i)
	}
	if !equalFold(parts[0], "SIP") || string(parts[1]) != "2.0" {
		return ErrBadVia
	}
	v.Transport = parts[2]
	*pos = i
	return nil
}

// branchEqual is "branch=" read little-endian from the first eight bytes
// (branchMask drops the eighth); branchFold lowers the letters.
const (
	branchEqual = 0x3d68636e617262
	branchMask  = 0x00ffffffffffffff
	branchFold  = 0x0000202020202020
)

// sipVersionSlash is "sip/2.0/" read little-endian; sipFold lowers the
// letters of "SIP" (case-insensitive, RFC 3261 7.1) and changes no other byte.
const (
	sipVersionSlash = 0x2f302e322f706973
	sipFold         = 0x0000000000202020
)
