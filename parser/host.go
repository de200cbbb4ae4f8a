package parser

import (
	"encoding/binary"
	"net/netip"
	"unsafe"
)

// validHost reports whether h, made of classHost bytes or an IPv6
// reference, is a host of RFC 3261 25.1: a hostname, an IPv4 address or
// an IPv6 reference (whose ABNF RFC 5954 corrects).
//
// hostname = *( domainlabel "." ) toplabel [ "." ]: labels are not empty
// and neither start nor end in '-', so no '.' or '-' starts the host, no
// '-' ends it and no "..", ".-" or "-." is in it; a toplabel starts with a
// letter, so a host whose last label starts with a digit must be an IPv4
// address. Underscores are tolerated as classHost says.
func validHost(h []byte) bool {
	if len(h) == 0 {
		return false
	}
	if h[0] == '[' {
		return validIPv6Ref(h)
	}
	if h[len(h)-1] == '.' {
		h = h[:len(h)-1] // the root's dot, as in "example.com."
	}
	n := len(h)
	if n == 0 || h[0] == '.' || h[0] == '-' || h[n-1] == '.' || h[n-1] == '-' || badPairs(h) {
		return false
	}
	top := n - 1 // the toplabel's first byte
	for top > 0 && h[top-1] != '.' {
		top--
	}
	return h[top]-'0' > 9 || validIPv4(h)
}

// badPairs reports whether h, of classHost bytes, holds "..", ".-" or
// "-.". Hosts are looked at in every request, so the pairs are checked
// seven at a time, in words that overlap by a byte; the last word ends at
// the end of h. '.' (0x2e) and '-' (0x2d) are the only classHost bytes
// below '0', and bit 0 tells them apart.
func badPairs(h []byte) bool {
	if len(h) < 8 {
		for i := 1; i < len(h); i++ {
			if a, b := h[i-1], h[i]; a == '.' && (b == '.' || b == '-') || a == '-' && b == '.' {
				return true
			}
		}
		return false
	}
	const high = 0x80 * ones
	for i := 0; ; i += 7 {
		i = min(i, len(h)-8)
		x := binary.LittleEndian.Uint64(h[i:])
		punct := ^(x | high - 0x30*ones) & high // '.' or '-', as high bits
		dash := punct & (x << 7)
		// A byte's mark is its high bit; >>8 brings the next byte's onto
		// it. Two punctuation marks in a row are bad but "--".
		if punct&(punct>>8)&^(dash&(dash>>8)) != 0 {
			return true
		}
		if i == len(h)-8 {
			return false
		}
	}
}

// validIPv4 checks IPv4address = 1*3DIGIT "." 1*3DIGIT "." 1*3DIGIT "."
// 1*3DIGIT, each at most 255.
func validIPv4(h []byte) bool {
	parts, n, digits := 0, 0, 0
	for i := 0; i <= len(h); i++ {
		if i == len(h) || h[i] == '.' {
			if digits == 0 || n > 255 {
				return false
			}
			parts, n, digits = parts+1, 0, 0
			continue
		}
		c := h[i] - '0'
		if c > 9 || digits == 3 {
			return false
		}
		n, digits = n*10+int(c), digits+1
	}
	return parts == 4
}

// validIPv6Ref checks "[" IPv6address "]" (RFC 5954 4): what is inside the
// brackets parses as an IPv6 address, with no zone.
func validIPv6Ref(h []byte) bool {
	if len(h) < 4 || h[len(h)-1] != ']' {
		return false
	}
	in := h[1 : len(h)-1]
	for _, c := range in {
		if !isHex(c) && c != ':' && c != '.' {
			return false // also a zone's '%', which a SIP URI cannot carry
		}
	}
	a, err := netip.ParseAddr(unsafe.String(&in[0], len(in)))
	return err == nil && a.Is6()
}
