package b2bua

import (
	"bytes"

	"github.com/sipedge/sipedge/carrier"
	"github.com/sipedge/sipedge/parser"
)

// followRedirect sends the call on to the member of the carrier's gateway
// group that its 3xx names (gateway.groups[].follow_redirects), once per
// attempt: the INVITE again in the same B-leg dialog with the next CSeq,
// its Request-URI the first Contact that names a member of the group
// (RFC 3261 8.1.3.4), without the URI's headers, which sipedge does not
// apply. Only 300, 301 and 302 are followed: a 305's Contact is a proxy
// to go through and a 380's an alternative service (RFC 3261 21.3),
// neither a member to call. The carrier's deadline runs on from its
// dial, and the attempt keeps its channel and CPS slot: the redirect is
// the same carrier. The member left hears the 3xx as its outcome; the
// new one, its own. False when the 3xx is the attempt's failure.
func (e *Engine) followRedirect(c *Call, m *parser.Message, code int) bool {
	if code > 302 || c.attRedirected {
		return false
	}
	var contact parser.Address
	var uri parser.URI
	for i := 0; i < m.Count(parser.HeaderContact); i++ {
		if m.Contact(i, &contact) != nil || contact.Star || contact.ParseURI(&uri) != nil || uri.Scheme != parser.SchemeSIP {
			continue
		}
		e.report(c, code, 0) // the member left: a 3xx is an answer
		if !e.env.Carriers.Redirect(&c.att.dial, uri.Host, uint16(uri.Port)) {
			continue
		}
		c.att.reported, c.att.authTries, c.attRedirected = false, 0, true
		target := contact.URI
		if q := bytes.IndexByte(target, '?'); q >= 0 {
			target = target[:q]
		}
		c.b.target = append(c.b.target[:0], target...)
		c.b.peer = c.att.dial.Peer
		ainv := e.aInviteCopy(c)
		if ainv == nil || !e.sendInvite(c, ainv, nil) {
			// The new member was not dialled: its trial (if half-open)
			// goes back, and the 3xx stays the attempt's failure.
			e.report(c, carrier.OutcomeAbandoned, 0)
			return false
		}
		e.m.redirectsFollowed.Inc()
		return true
	}
	return false
}
