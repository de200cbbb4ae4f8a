package b2bua

import (
	"bytes"
	"net/netip"

	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/transport"
)

// dest is where a request sipedge sends on a leg goes (RFC 3261 12.2.1.1):
// its Request-URI, its Route header's value (empty: none) and the next hop
// on the wire. Views into the leg, or into the engine's scratch.
type dest struct {
	uri, routes []byte
	peer        *transport.Peer
}

// hopKind says how the next hop of a request to the caller was chosen,
// the label of sipedge_requests_to_caller_total.
type hopKind uint8

const (
	hopRouteSet hopKind = iota // the first URI of its route set
	hopContact                 // its remote target, the Contact
	hopNAT                     // the trunk's nat: the INVITE's source address
	hopFallback                // a URI sipedge cannot send to (a DNS name): the INVITE's source
	numHopKinds
)

var hopKindNames = [numHopKinds]string{"route_set", "contact", "nat", "fallback"}

// destOf returns where a request on leg l goes: the leg's remote target
// and route set, to its peer; on the caller's leg of call c, as the
// caller's route set and remote target say (callerDest). Its views are
// valid until the next destOf.
func (e *Engine) destOf(c *Call, l *leg) dest {
	if c != nil && l == &c.a {
		return e.callerDest(c)
	}
	return legDest(l)
}

// legDest returns where a request on leg l goes when it is not the
// caller's (the carrier's, a gateway probe's, a dialog no call keeps): its
// remote target and route set, to the peer it was set up with.
func legDest(l *leg) dest { return dest{uri: l.target, routes: l.routes, peer: &l.peer} }

// callerDest fills in d, a request to the caller, by RFC 3261 12.2.1.1 and
// 8.1.2: with a route set whose first URI is a loose router (lr), the
// Request-URI is the remote target, the route set the Route, and the next
// hop the first route; with a strict router, the Request-URI is that
// route's URI (without its headers, which a Request-URI may not carry), the
// Route the rest of the route set and then the remote target (16.12); with
// no route set the next hop is the remote target. The next hop's address
// is resolved by RFC 3263 4 as far as an edge that does no DNS on a shard
// can (nextHop): the maddr, or the host when it is an IP address. A host
// name, an unserved transport or sips (no TLS here) falls back to where
// responses to the INVITE went (txn.ReplyTo): the source address, which is
// that name's most of the time (a proxy's Record-Route, a PBX's Contact).
// A trunk with NAT sends every request to the INVITE's source address and
// port whatever the URIs say, as force_rport does for responses. A stream
// caller's connection is reused while it lives for a next hop on its
// address.
func (e *Engine) callerDest(c *Call) dest {
	A := &c.a
	d := dest{uri: A.target, routes: A.routes, peer: &e.tmp.hop}
	src := c.sourcePeer()
	hop := A.target
	kind := hopContact
	if len(A.routes) > 0 {
		var first parser.Address
		if parser.ParseAddress(A.routes[:A.firstRoute], &first) == nil {
			hop, kind = first.URI, hopRouteSet
			if _, lr := routeParam(first.URI, "lr"); !lr {
				d.uri, d.routes = e.strictRoute(A, first.URI)
			}
		}
	}
	if c.trunk != nil && c.trunk.NAT {
		e.tmp.hop, kind = src, hopNAT
	} else if peer, ok := nextHop(hop, src); ok {
		e.tmp.hop = peer
	} else {
		e.tmp.hop, kind = A.peer, hopFallback
	}
	e.m.callerHops[kind].Inc()
	return d
}

// strictRoute returns the Request-URI and Route of a request on leg l
// whose first route, first, is a strict router (RFC 3261 12.2.1.1): first
// without its headers, and the rest of the route set followed by the
// remote target, in the engine's scratch.
func (e *Engine) strictRoute(l *leg, first []byte) (uri, routes []byte) {
	if q := bytes.IndexByte(first, '?'); q >= 0 {
		first = first[:q]
	}
	b := e.tmp.routes[:0]
	if rest := l.routes[l.firstRoute:]; len(rest) > 2 { // ", " and the rest
		b = append(b, rest[2:]...)
		b = append(b, ", "...)
	}
	b = append(b, '<')
	b = append(b, l.target...)
	e.tmp.routes = append(b, '>')
	return first, e.tmp.routes
}

// routeParam returns the value of URI parameter name of uri and whether
// it is there.
func routeParam(uri []byte, name string) ([]byte, bool) {
	var u parser.URI
	if parser.ParseURI(uri, &u) != nil {
		return nil, false
	}
	return u.Param(name)
}

// nextHop resolves uri, the next hop of a request to a caller whose
// INVITE came from src, by RFC 3263 4 without DNS: the maddr parameter,
// else the host, which must be an IP address; the transport parameter,
// else UDP (4.1: a numeric address without one); the port, else the
// transport's default (RFC 3261 19.1.2). A next hop on the address of a
// stream caller goes on its connection while it lives (the shard opens a
// new one to the next hop's port once it is gone), whatever the URI's
// transport; a datagram one on the caller's transport leaves from the
// socket the caller reached. False for a URI sipedge cannot send to: not sip
// (sips needs TLS), a host name, a transport not served.
func nextHop(uri []byte, src transport.Peer) (transport.Peer, bool) {
	var u parser.URI
	if parser.ParseURI(uri, &u) != nil || u.Scheme != parser.SchemeSIP {
		return transport.Peer{}, false
	}
	host := u.Host
	if maddr, ok := u.Param("maddr"); ok && len(maddr) > 0 {
		host = maddr
	}
	if n := len(host); n > 2 && host[0] == '[' && host[n-1] == ']' {
		host = host[1 : n-1]
	}
	ip, err := netip.ParseAddr(string(host))
	if err != nil || ip.Zone() != "" {
		return transport.Peer{}, false
	}
	kind, known := transport.FromURIParam(u.Param("transport"))
	if !known || !kind.Served() {
		return transport.Peer{}, false
	}
	port := uint16(u.Port)
	if port == 0 {
		port = kind.DefaultPort()
	}
	ip = ip.Unmap()
	p := transport.Peer{Addr: netip.AddrPortFrom(ip, port), Transport: kind}
	switch {
	case src.Transport.Stream() && ip == src.Addr.Addr().Unmap():
		p.Transport, p.Conn = src.Transport, src.Conn
	case !kind.Stream() && kind == src.Transport:
		p.Conn = src.Conn
	}
	return p, true
}

// sourcePeer is where the caller's INVITE came from: its address and port,
// its transport and socket or connection.
func (c *Call) sourcePeer() transport.Peer {
	p := c.a.peer
	p.Addr = c.sourceAddr()
	return p
}
