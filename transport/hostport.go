package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The one reading of "host:port" for the configuration, gateway health
// and the listen addresses. Its errors quote the text as written and say
// what is wrong ("missing port", "invalid port", ...); the configuration
// puts the field's path and line before them.

// SplitHostPort splits "host:port": the host an IP address (IPv6 in
// brackets) or a DNS name (ValidDNSName), the port a number up to 65535.
// Port 0 is accepted: a caller that needs a real port checks it.
func SplitHostPort(s string) (host string, port uint16, err error) {
	host, port, err = splitHostPort(s, s)
	if err != nil {
		return "", 0, err
	}
	if _, err := netip.ParseAddr(host); err != nil && !ValidDNSName(host) {
		return "", 0, fmt.Errorf("%q: host %q is neither an IP address nor a DNS name", s, host)
	}
	return host, port, nil
}

// splitHostPort splits hostport, reporting errors about whole (as written).
func splitHostPort(whole, hostport string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return "", 0, fmt.Errorf("%q: %s", whole, strings.TrimSuffix(ae.Err, " in address"))
		}
		return "", 0, fmt.Errorf("%q: %v", whole, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: missing host", whole)
	}
	p, err := ParsePort(port)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %v", whole, err)
	}
	return host, p, nil
}

// ParsePort reads a port, 0 to 65535; its errors are "missing port" and
// "invalid port", for the caller to put after what it quotes.
func ParsePort(s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("missing port")
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, errors.New("invalid port")
	}
	return uint16(n), nil
}

// ValidDNSName reports whether s is a syntactically valid DNS name: labels
// of letters, digits, '-' (not first or last) and '_', at most 63 bytes
// each and 253 in all, an optional trailing dot.
func ValidDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
