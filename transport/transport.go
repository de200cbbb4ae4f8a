package transport

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Kind is a transport SIP travels on.
type Kind uint8

// Transports. UDP and TCP are served (Served); TLS is named for the
// transaction layer, which treats it as any reliable transport, and has no
// listener or dial yet.
const (
	UDP Kind = iota + 1
	TCP
	TLS
	numKinds
)

// URIDefault is the transport of a sip: URI with a numeric host and no
// transport parameter (RFC 3263 4.1).
const URIDefault = UDP

// NumKinds is one more than the largest Kind: the length of an array
// indexed by Kind.
const NumKinds = int(numKinds)

var (
	viaNames    = [numKinds]string{"", "UDP", "TCP", "TLS"}
	configNames = [numKinds]string{"", "udp", "tcp", "tls"}
	uriParams   = [numKinds]string{"", ";transport=udp", ";transport=tcp", ";transport=tls"}
)

// Valid reports whether k is a transport (the zero Kind is none).
func (k Kind) Valid() bool { return k != 0 && k < numKinds }

// Served reports whether sipedge listens and dials on k.
func (k Kind) Served() bool { return k == UDP || k == TCP }

// String returns the name a Via writes (RFC 3261 20.42): "UDP", "TCP".
func (k Kind) String() string {
	if !k.Valid() {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return viaNames[k]
}

// Name returns the name a URI's transport parameter (RFC 3261 19.1.1) and
// the configuration write: "udp", "tcp".
func (k Kind) Name() string {
	if !k.Valid() {
		return k.String()
	}
	return configNames[k]
}

// Stream reports whether k carries messages on a connection, framed by
// their Content-Length (RFC 3261 18.3): TCP, and TLS over it. A Peer's
// Conn on one is the connection's id. The others carry one message a
// datagram (RFC 3261 18.1.1), and a Peer's Conn is the index of the
// listening socket replies leave from.
func (k Kind) Stream() bool { return k == TCP || k == TLS }

// Network returns the network k's sockets are, as package net names it:
// "tcp" for a stream Kind (TLS runs over TCP), else "udp".
func (k Kind) Network() string {
	if k.Stream() {
		return "tcp"
	}
	return "udp"
}

// URIParam returns what a sip: URI of sipedge's own (a Contact, a next
// hop's Request-URI) adds to name k: nothing for the transport a URI with
// a numeric host and no parameter means (URIDefault, RFC 3263 4.1), else
// ";transport=" and k's name (RFC 3261 19.1.1).
func (k Kind) URIParam() string {
	if k == URIDefault || !k.Valid() {
		return ""
	}
	return uriParams[k]
}

// Reliable reports whether the transport delivers by itself: on one the
// transaction layer neither retransmits nor lingers (RFC 3261 17.1.1.2,
// 17.1.2.2, 17.2.1, 17.2.2). UDP alone is unreliable.
func (k Kind) Reliable() bool { return k != UDP }

// DefaultPort is the port of a URI or Via that names none (RFC 3261
// 19.1.2, 18.2.2): 5061 for TLS, else 5060.
func (k Kind) DefaultPort() uint16 {
	if k == TLS {
		return 5061
	}
	return 5060
}

// Parse reads a served transport as the configuration writes it: "udp" or
// "tcp". Its error is worded for the configuration's reader, who sees it
// after the field's path.
func Parse(s string) (Kind, error) {
	for k := UDP; k < numKinds; k++ {
		if k.Served() && s == configNames[k] {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%q: want one of %s", s, servedNames(`"`, `"`, ", "))
}

// servedNames lists the served transports' configuration names, each
// between before and after, separated by sep: for errors.
func servedNames(before, after, sep string) string {
	var names []string
	for k := UDP; k < numKinds; k++ {
		if k.Served() {
			names = append(names, before+configNames[k]+after)
		}
	}
	return strings.Join(names, sep)
}

// FromParam reads the value of a URI's transport parameter, whose case does
// not matter (RFC 3261 19.1.4): any Kind, served or not.
func FromParam(v []byte) (Kind, bool) {
	for k := UDP; k < numKinds; k++ {
		if len(v) == len(configNames[k]) && strings.EqualFold(string(v), configNames[k]) {
			return k, true
		}
	}
	return 0, false
}

// FromURIParam reads a URI's transport parameter as parser.URI.Param
// returns it, value and presence: URIDefault when it is absent (RFC 3263
// 4.1), FromParam's reading when present.
func FromURIParam(v []byte, present bool) (Kind, bool) {
	if !present {
		return URIDefault, true
	}
	return FromParam(v)
}

// MarshalText writes k as the configuration does; the zero Kind, unset,
// is empty.
func (k Kind) MarshalText() ([]byte, error) {
	switch {
	case k == 0:
		return nil, nil
	case !k.Valid():
		return nil, fmt.Errorf("cannot marshal transport %v", k)
	}
	return []byte(k.Name()), nil
}

// UnmarshalText reads a served transport (Parse); empty is the zero Kind,
// unset, for the reader's default to apply.
func (k *Kind) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*k = 0
		return nil
	}
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// Peer is the other end of a message: where it came from, or where it
// goes. Conn says which socket: the index of the listening socket on UDP
// (replies leave from the port the request came to), the connection's id
// on a stream, 0 for a new connection to Addr. The runtime gives Conn its
// meaning; everyone else only stores it and hands it back.
type Peer struct {
	Addr      netip.AddrPort
	Transport Kind
	Conn      uint64
}

// Listen is a listening socket: "udp://host:port" or "tcp://host:port",
// the host an IP address (IPv6 in brackets), the port not 0.
type Listen struct {
	Transport Kind
	Addr      netip.AddrPort
}

// String returns the socket as written in the configuration, e.g.
// "udp://127.0.0.1:5060".
func (l Listen) String() string { return l.Transport.Name() + "://" + l.Addr.String() }

// MarshalText implements encoding.TextMarshaler.
func (l Listen) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (ParseListen).
func (l *Listen) UnmarshalText(b []byte) error {
	v, err := ParseListen(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseListen parses "udp://host:port" or "tcp://host:port": the one
// reading of a listen address, for the configuration and the runtime.
func ParseListen(s string) (Listen, error) {
	scheme, hostport, ok := strings.Cut(s, "://")
	if !ok {
		return Listen{}, fmt.Errorf("%q: want %s", s, servedNames("", "://host:port", " or "))
	}
	k, err := Parse(scheme)
	if err != nil {
		return Listen{}, fmt.Errorf("%q: transport %q is not %s", s, scheme, servedNames("", "", " or "))
	}
	host, port, err := splitHostPort(s, hostport)
	if err != nil {
		return Listen{}, err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return Listen{}, fmt.Errorf("%q: host %q is not an IP address", s, host)
	}
	if port == 0 {
		return Listen{}, fmt.Errorf("%q: port must not be 0", s)
	}
	return Listen{Transport: k, Addr: netip.AddrPortFrom(addr, port)}, nil
}
