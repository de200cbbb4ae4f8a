// Package digest is the UAC side of SIP Digest authentication (RFC 3261 22,
// with the hashes of RFC 2617, RFC 7616 and RFC 8760): when a carrier
// answers a request with 401 (WWW-Authenticate) or 407 (Proxy-Authenticate),
// ParseChallenge reads the challenge and AppendAuthorization builds the
// Authorization or Proxy-Authorization value the request is re-sent with.
// sipedge only answers challenges; it never challenges, so there is no server
// side here.
//
// # Contract
//
// ParseChallenge never copies and never modifies its input: Realm, Nonce and
// Opaque of a Challenge are views of the header value passed to it, valid
// until that buffer is reused. Copy what must live longer (a Challenge kept
// for a later request, to count nonces, needs its own copies). A quoted
// value is viewed as received, quoted-pairs included; AppendAuthorization
// copies it back unchanged and hashes its unescaped form (RFC 7616 3.4.5).
//
// Supported: MD5, SHA-256 and SHA-512-256 (RFC 8760 2), each with its
// -sess variant, and qop auth and auth-int; a challenge without qop gets an
// RFC 2069 response. A challenge this package cannot answer correctly
// (another scheme, an unknown algorithm, a qop offering only unknown values)
// is an error, so sipedge never sends credentials the server cannot check.
// Not supported: userhash (RFC 7616 3.4.4), username* and charset (RFC
// 7616 4): the username is sent as is, which RFC 7616 allows.
//
// Neither function allocates once dst has room (the hash inputs are built in
// dst past the value), both are safe for concurrent use, and neither panics
// on any input. This package imports only the standard library; a test
// enforces it.
package digest
