package parser

// ResponsePort returns the port a response to a request with this top Via
// goes to (RFC 3261 18.2.2, RFC 3581 4), for a request that came from port
// source: over an unreliable transport with rport, the source port; else
// the sent-by port, or the transport's default when the Via names none
// (5061 for TLS, 5060 otherwise). On a reliable transport the response
// goes back on the request's connection; the port is for a new one when
// that connection is gone.
func (v *Via) ResponsePort(source uint16, reliable bool) uint16 {
	switch {
	case v.HasRPort && !reliable:
		return source
	case v.Port != 0:
		return uint16(v.Port)
	case equalFold(v.Transport, "TLS"):
		return 5061
	}
	return 5060
}
