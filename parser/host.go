package parser

import (
	"net/netip"
	"unsafe"
)

// Hostnames and IPv4 addresses are checked for their characters (classHost)
// only, not for the shape of their labels (RFC 3261 25.1 hostname), as
// Kamailio's parser does: every URI of every message holds one, the label
// rules cost some 5% of a failover call's instructions, and no peer reads
// "a..b" otherwise than sipedge does. An IPv6 reference, rarer and easier
// to get wrong, is checked whole.

// validIPv6Ref checks "[" IPv6address "]" (RFC 5954 4 corrects RFC 3261's
// ABNF): what is inside the brackets parses as an IPv6 address, with no
// zone.
func validIPv6Ref(h []byte) bool {
	if len(h) < 4 || h[0] != '[' || h[len(h)-1] != ']' {
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
