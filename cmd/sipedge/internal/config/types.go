package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// HostPort is "host:port" where host is an IP address (IPv6 in brackets) or
// a DNS name. The zero value is empty.
type HostPort struct {
	Host string // without brackets
	Port uint16
}

// IsZero reports whether hp is empty.
func (hp HostPort) IsZero() bool { return hp == HostPort{} }

// String returns "host:port", or "" for the zero value.
func (hp HostPort) String() string {
	if hp.IsZero() {
		return ""
	}
	return net.JoinHostPort(hp.Host, strconv.Itoa(int(hp.Port)))
}

// AddrPort returns the address when the host is an IP address.
func (hp HostPort) AddrPort() (netip.AddrPort, bool) {
	a, err := netip.ParseAddr(hp.Host)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, hp.Port), true
}

// MarshalText implements encoding.TextMarshaler.
func (hp HostPort) MarshalText() ([]byte, error) { return []byte(hp.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Port 0 is accepted
// here; fields that need a real port check it.
func (hp *HostPort) UnmarshalText(b []byte) error {
	s := string(b)
	if s == "" {
		*hp = HostPort{}
		return nil
	}
	host, port, err := splitHostPort(s, s)
	if err != nil {
		return err
	}
	if _, err := netip.ParseAddr(host); err != nil && !validDNSName(host) {
		return fmt.Errorf("%q: host %q is neither an IP address nor a DNS name", s, host)
	}
	*hp = HostPort{Host: host, Port: port}
	return nil
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
	p, err := parsePort(port)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %v", whole, err)
	}
	return host, p, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("missing port")
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, errors.New("invalid port")
	}
	return uint16(n), nil
}

// validDNSName reports whether s is a syntactically valid DNS name.
func validDNSName(s string) bool {
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

// AdvertiseAddr returns the address sipedge advertises for a socket
// listening on port: Advertise, with that port when it names none. An
// empty Advertise is an error; the caller uses the listen address then.
func (c *Config) AdvertiseAddr(port uint16) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(c.Advertise); err == nil {
		if ap.Port() == 0 {
			return netip.AddrPort{}, errors.New("port must not be 0")
		}
		if ap.Addr().IsUnspecified() || ap.Addr().Zone() != "" {
			return netip.AddrPort{}, errors.New("want the address peers send to: not unspecified, no zone")
		}
		return ap, nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(c.Advertise, "["), "]"))
	if err != nil {
		return netip.AddrPort{}, errors.New(`want an IP address, "IP:port" or "[IPv6]:port"`)
	}
	if a.IsUnspecified() || a.Zone() != "" {
		return netip.AddrPort{}, errors.New("want the address peers send to: not unspecified, no zone")
	}
	return netip.AddrPortFrom(a, port), nil
}
