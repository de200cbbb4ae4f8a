package b2bua

import (
	"bytes"
	"slices"
	"strings"

	"github.com/sipedge/sipedge/parser"
)

// never are the headers no policy may copy: the B2BUA writes them itself
// (RFC 3261 dialog state, topology; Require, for the extensions sipedge
// takes part in on each leg of its own, RFC 3262, 4028), they are hop-by-hop, they are
// credentials or challenges (a carrier's is for sipedge's account), or they are
// identity from a peer sipedge does not trust (RFC 3325 5): the B-leg's
// identity is sipedge's own (appendIdentity), and trunks and carriers hear
// none of each other's, in any request or response.
var never = parser.NewHeaderSet(parser.HeaderVia, parser.HeaderFrom, parser.HeaderTo,
	parser.HeaderCallID, parser.HeaderCSeq, parser.HeaderContact, parser.HeaderRoute,
	parser.HeaderRecordRoute, parser.HeaderMaxForwards, parser.HeaderContentLength,
	parser.HeaderContentType, parser.HeaderPath, parser.HeaderRSeq, parser.HeaderRAck, parser.HeaderRequire,
	parser.HeaderAuthorization, parser.HeaderProxyAuthorization, parser.HeaderProxyRequire,
	parser.HeaderWWWAuthenticate, parser.HeaderProxyAuthenticate,
	parser.HeaderPAssertedIdentity, parser.HeaderPPreferredIdentity, parser.HeaderPrivacy)

// neverNames are headers of no parser kind that no policy may copy: the
// pre-standard identity header.
var neverNames = []string{"Remote-Party-ID"}

// headerPolicy is the compiled HeaderAllow: known kinds as a set, unknown
// names as a list.
type headerPolicy struct {
	kinds parser.HeaderSet
	names []string
	// noTimer leaves timer out of the Supported it copies: in uphold,
	// sipedge says it itself where it upholds a session timer.
	noTimer bool
}

func compilePolicy(allow []string) headerPolicy {
	var p headerPolicy
	for _, name := range allow {
		if k := parser.LookupHeader([]byte(name)); k != parser.HeaderOther {
			if !never.Has(k) {
				p.kinds |= parser.NewHeaderSet(k)
			}
			continue
		}
		if !slices.ContainsFunc(neverNames, func(n string) bool { return strings.EqualFold(n, name) }) {
			p.names = append(p.names, name)
		}
	}
	return p
}

// appendAllowed appends the headers of m the policy allows.
func (p *headerPolicy) appendAllowed(dst []byte, m *parser.Message) []byte {
	return p.appendAllowedExcept(dst, m, 0, nil)
}

// appendAllowedExcept appends the headers of m the policy allows, but for
// the kinds in skip and the unknown headers named in replaced (a route's
// headers), which the caller writes itself.
func (p *headerPolicy) appendAllowedExcept(dst []byte, m *parser.Message, skip parser.HeaderSet, replaced map[string]string) []byte {
	for i := 0; i < m.NumHeaders(); i++ {
		if k := m.KindAt(i); skip.Has(k) || k != parser.HeaderOther && !p.kinds.Has(k) {
			continue
		}
		h := m.HeaderAt(i)
		if h.Kind == parser.HeaderOther {
			if !p.allowsName(h.Name) || len(replaced) > 0 && replacedByRoute(replaced, h.Name) {
				continue
			}
			dst = append(dst, h.Name...)
		} else {
			if h.Kind == parser.HeaderSupported {
				dst = appendSupportedTags(dst, h.Value, p.noTimer)
				continue
			}
			dst = append(dst, h.Kind.String()...)
		}
		dst = append(dst, ": "...)
		dst = appendUnfolded(dst, h.Value)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// appendUnfolded appends a header value with its folds (RFC 3261 7.3.1)
// undone: each CRLF is left out and the white space after it kept, which
// is what a fold means. Parse lets CR and LF into a value only as a
// fold's. Relayed folded, a value is read two ways: a continuation line of
// white space alone ("\r\n \r\n") ends the header section for a parser
// that trims lines, and the headers after it become a body.
func appendUnfolded(dst, v []byte) []byte {
	for {
		i := bytes.IndexByte(v, '\r')
		if i < 0 {
			return append(dst, v...)
		}
		dst = append(dst, v[:i]...)
		v = v[i+1:]
		if len(v) > 0 && v[0] == '\n' {
			v = v[1:]
		}
	}
}

// appendOwnSupported appends the Supported header of sipedge's own option
// tags on a request: 100rel when it supports reliable provisionals on the
// leg (rel, offer100rel), timer when it upholds the leg's session timer.
// The relayed side's other tags follow in a Supported of their own, with
// the header policy (appendSupportedTags).
func appendOwnSupported(dst []byte, rel, timer bool) []byte {
	switch {
	case rel && timer:
		dst = append(dst, "Supported: 100rel, timer\r\n"...)
	case rel:
		dst = append(dst, "Supported: 100rel\r\n"...)
	case timer:
		dst = append(dst, "Supported: timer\r\n"...)
	}
	return dst
}

// appendSupportedTags appends a Supported header with the option tags of v
// but those the B2BUA takes part in on each leg of its own: 100rel (RFC
// 3262), which sipedge PRACKs and sends itself; relayed as is, the other
// side's reliable provisionals would go unacknowledged (rel.go); and timer
// when noTimer (uphold: sipedge writes its own). Nothing is appended when
// no tag is left.
func appendSupportedTags(dst, v []byte, noTimer bool) []byte {
	n := len(dst)
	dst = append(dst, "Supported: "...)
	first := true
	for tag, rest := parser.NextListItem(v); tag != nil; tag, rest = parser.NextListItem(rest) {
		if equalFold(tag, "100rel") || len(tag) == 0 || noTimer && equalFold(tag, "timer") {
			continue
		}
		if !first {
			dst = append(dst, ", "...)
		}
		dst = appendUnfolded(dst, tag)
		first = false
	}
	if first {
		return dst[:n]
	}
	return append(dst, "\r\n"...)
}

func (p *headerPolicy) allowsName(name []byte) bool {
	for _, n := range p.names {
		if equalFold(name, n) {
			return true
		}
	}
	return false
}

// equalFold reports whether b equals s ignoring ASCII case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
