// Package transport names the transports SIP travels on and the peers at
// their other end: the one model of a transport (Kind), of a peer (Peer)
// and of a listening socket (Listen) that the runtime (shard), the
// transaction layer (dialog/txn), the call core (dialog/b2bua), gateway
// health (health), the carrier plane (carrier) and the configuration share.
//
// # Contract
//
// Everything here is a value: safe to copy and to use from any goroutine,
// and nothing allocates but the parsers' errors. A Kind has its names as
// SIP writes them in a Via (RFC 3261 18, 20.42: "UDP", "TCP") and as URIs
// and the configuration write them (RFC 3261 19.1.1: transport=udp), and
// its default port (RFC 3261 19.1.2). The zero Kind is no transport, so
// that a field left unset is never silently UDP.
//
// A Kind's properties are what everyone else reads of it, so that no other
// package names a transport to decide: Reliable (the transaction layer),
// Stream and Network (the runtime's listeners, sockets and paths),
// URIParam and FromURIParam (the URIs sipedge writes and reads), Served
// (which the configuration accepts). Adding a transport (TLS) is a Kind
// here, its keys in the configuration and its dial rules in the carrier
// plane (carrier); ARCHITECTURE.md ("A transport") says what TLS would
// still need of the runtime.
//
// SplitHostPort is the one reading of "host:port", for the configuration,
// gateway health and the listen addresses (ParseListen).
package transport
