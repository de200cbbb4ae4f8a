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

// Source is a trunk source: a CIDR and, when Port is not 0, a source port.
type Source struct {
	Prefix netip.Prefix // masked
	Port   uint16       // 0 = any
}

// Contains reports whether ap is within the source.
func (s Source) Contains(ap netip.AddrPort) bool {
	return s.Prefix.Contains(ap.Addr().Unmap()) && (s.Port == 0 || s.Port == ap.Port())
}

// String returns "cidr" or "cidr:port" (IPv6 with a port in brackets).
func (s Source) String() string {
	if s.Port == 0 {
		return s.Prefix.String()
	}
	if s.Prefix.Addr().Is6() {
		return "[" + s.Prefix.String() + "]:" + strconv.Itoa(int(s.Port))
	}
	return s.Prefix.String() + ":" + strconv.Itoa(int(s.Port))
}

// MarshalText implements encoding.TextMarshaler.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Accepted forms:
// "10.0.0.0/8", "10.0.0.0/8:5060", "2001:db8::/32", "[2001:db8::/32]:5060",
// and a bare address ("127.0.0.1", "[::1]:5060") for a single host.
func (s *Source) UnmarshalText(b []byte) error {
	text := string(b)
	cidr, portText, hasPort := text, "", false
	if rest, ok := strings.CutPrefix(text, "["); ok {
		inner, after, ok := strings.Cut(rest, "]")
		if !ok {
			return fmt.Errorf("%q: missing ']'", text)
		}
		cidr = inner
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return fmt.Errorf("%q: want [cidr]:port", text)
			}
			portText, hasPort = p, true
		}
	} else if slash := strings.IndexByte(text, '/'); slash >= 0 {
		if c := strings.IndexByte(text[slash:], ':'); c >= 0 {
			cidr, portText, hasPort = text[:slash+c], text[slash+c+1:], true
		}
	} else if strings.Count(text, ":") == 1 { // IPv4 address with a port
		cidr, portText, hasPort = text[:strings.IndexByte(text, ':')], text[strings.IndexByte(text, ':')+1:], true
	}
	var port uint16
	if hasPort {
		p, err := parsePort(portText)
		if err != nil {
			return fmt.Errorf("%q: %v", text, err)
		}
		if p == 0 {
			return fmt.Errorf("%q: port must not be 0", text)
		}
		port = p
	}
	var prefix netip.Prefix
	if strings.Contains(cidr, "/") {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return fmt.Errorf("%q: invalid CIDR", text)
		}
		prefix = p.Masked()
	} else {
		a, err := netip.ParseAddr(cidr)
		if err != nil || a.Zone() != "" {
			return fmt.Errorf("%q: invalid CIDR or address", text)
		}
		prefix = netip.PrefixFrom(a, a.BitLen())
	}
	if prefix.Addr().Is4In6() {
		return fmt.Errorf("%q: write an IPv4 prefix as IPv4", text)
	}
	*s = Source{Prefix: prefix, Port: port}
	return nil
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
