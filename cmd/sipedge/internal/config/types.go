package config

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sipedge/sipedge/transport"
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
	host, port, err := transport.SplitHostPort(s)
	if err != nil {
		return err
	}
	*hp = HostPort{Host: host, Port: port}
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
