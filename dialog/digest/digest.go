package digest

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strconv"
)

// Algorithm is a Digest algorithm (RFC 7616 3.3, RFC 8760 2). Each -sess
// variant follows its base, so a&1 marks -sess and a&^1 is the base.
type Algorithm uint8

const (
	MD5 Algorithm = iota // the default when the challenge names none
	MD5Sess
	SHA256
	SHA256Sess
	SHA512_256
	SHA512_256Sess
)

var algNames = [...]string{"MD5", "MD5-sess", "SHA-256", "SHA-256-sess", "SHA-512-256", "SHA-512-256-sess"}

// String returns the algorithm's name as RFC 7616 3.3 spells it.
func (a Algorithm) String() string {
	if int(a) < len(algNames) {
		return algNames[a]
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// Qop is the set of qop values a challenge offers (RFC 7616 3.3).
type Qop uint8

const (
	QopAuth Qop = 1 << iota
	QopAuthInt
)

// Challenge is a parsed Digest challenge. Realm, Nonce and Opaque are views
// of the value passed to ParseChallenge, valid while it is: the content of
// their quoted-strings as received, quoted-pairs still escaped.
type Challenge struct {
	Realm, Nonce, Opaque []byte
	HasOpaque            bool // the opaque param was present, perhaps as ""
	Algorithm            Algorithm
	Qop                  Qop  // 0: the challenge offers none (RFC 2069 compatibility)
	Stale                bool // stale=true: the nonce expired, the credentials were right
}

// Errors of ParseChallenge. They are plain values: returning one never
// allocates, and callers may compare with errors.Is.
var (
	ErrNotDigest = errors.New("digest: not a Digest challenge")
	ErrSyntax    = errors.New("digest: malformed challenge")
	ErrNoRealm   = errors.New("digest: challenge without realm")
	ErrNoNonce   = errors.New("digest: challenge without nonce")
	ErrAlgorithm = errors.New("digest: unsupported algorithm")
	ErrQop       = errors.New("digest: qop offers neither auth nor auth-int")
	ErrDuplicate = errors.New("digest: duplicate parameter")
)

// Credentials are sipedge's account with the server that challenges it.
type Credentials struct{ Username, Password string }

// The params ParseChallenge reads, by index; a bit per index spots duplicates.
var params = [...]string{"realm", "nonce", "opaque", "algorithm", "qop", "stale"}

// ParseChallenge parses one WWW-Authenticate or Proxy-Authenticate value
// into c (RFC 3261 25.1 challenge, RFC 7616 3.3):
//
//	"Digest" LWS digest-cln *(COMMA digest-cln)
//
// Params are token or quoted-string whatever the grammar says for each, as
// servers differ; unknown params are ignored. A CR or LF inside a quoted
// value (a fold) is ErrSyntax: AppendAuthorization copies realm, nonce and
// opaque into a request, which must not get a line break from a carrier.
// On error, c is unspecified.
func ParseChallenge(value []byte, c *Challenge) error {
	*c = Challenge{}
	b := value
	i := skipLWS(b, 0)
	s := i
	i = skipToken(b, i)
	if !equalFold(b[s:i], "Digest") {
		return ErrNotDigest
	}
	if i < len(b) && !isLWS(b[i]) {
		return ErrSyntax
	}
	var seen uint8
	for {
		// Empty list elements are allowed, as in HTTP (RFC 7230 7).
		for i < len(b) && (isLWS(b[i]) || b[i] == ',') {
			i++
		}
		if i == len(b) {
			break
		}
		s = i
		i = skipToken(b, i)
		name := b[s:i]
		i = skipLWS(b, i)
		if len(name) == 0 || i == len(b) || b[i] != '=' {
			return ErrSyntax
		}
		i = skipLWS(b, i+1)
		var v []byte
		if i < len(b) && b[i] == '"' {
			end := quotedEnd(b, i)
			if end < 0 {
				return ErrSyntax
			}
			v, i = b[i+1:end:end], end+1
		} else {
			s = i
			i = skipToken(b, i)
			if v = b[s:i:i]; len(v) == 0 {
				return ErrSyntax
			}
		}
		i = skipLWS(b, i)
		if i < len(b) && b[i] != ',' {
			return ErrSyntax
		}
		if err := c.set(name, v, &seen); err != nil {
			return err
		}
	}
	if seen&1 == 0 {
		return ErrNoRealm
	}
	if seen&2 == 0 {
		return ErrNoNonce
	}
	return nil
}

// set records param name = v, v unquoted.
func (c *Challenge) set(name, v []byte, seen *uint8) error {
	k := 0
	for k < len(params) && !equalFold(name, params[k]) {
		k++
	}
	if k == len(params) {
		return nil // domain, userhash, charset, ...: nothing to act on
	}
	if *seen&(1<<k) != 0 {
		return ErrDuplicate
	}
	*seen |= 1 << k
	switch params[k] {
	case "realm":
		c.Realm = v
	case "nonce":
		c.Nonce = v
	case "opaque":
		c.Opaque, c.HasOpaque = v, true
	case "algorithm":
		a := 0
		for a < len(algNames) && !equalFold(v, algNames[a]) {
			a++
		}
		if a == len(algNames) {
			return ErrAlgorithm // AKAv1-MD5 and the like
		}
		c.Algorithm = Algorithm(a)
	case "qop":
		if c.Qop = parseQop(v); c.Qop == 0 {
			return ErrQop
		}
	case "stale":
		// Anything but true is false (RFC 7616 3.3).
		c.Stale = equalFold(v, "true")
	}
	return nil
}

// parseQop reads the qop-options list, ignoring unknown values (RFC 3261
// 25.1 qop-value, RFC 7616 3.3).
func parseQop(v []byte) Qop {
	var q Qop
	for i := 0; i < len(v); {
		s := i
		for i < len(v) && v[i] != ',' {
			i++
		}
		item := trimLWS(v[s:i])
		switch {
		case equalFold(item, "auth"):
			q |= QopAuth
		case equalFold(item, "auth-int"):
			q |= QopAuthInt
		}
		i++
	}
	return q
}

// quotedEnd returns the index of the quote closing the quoted-string that
// opens at b[i], or -1 (RFC 3261 25.1: qdtext is LWS, %x21, %x23-5B,
// %x5D-7E or UTF8-NONASCII; quoted-pair is "\" then %x00-09 / %x0B-0C /
// %x0E-7F). CR and LF are refused even in a fold, see ParseChallenge.
func quotedEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i
		case c == '\\':
			if i++; i == len(b) || b[i] == '\r' || b[i] == '\n' || b[i] > 0x7f {
				return -1
			}
		case c < 0x20 && c != '\t' || c == 0x7f:
			return -1
		}
	}
	return -1
}

// AppendAuthorization appends the value of an Authorization or
// Proxy-Authorization header answering c (RFC 3261 22.2, 22.3; RFC 7616
// 3.4) for a request with method, Request-URI uri and body (hashed for
// auth-int only). cnonce is a token the caller generates (letters and
// digits) and nc the nonce count, 1 for a fresh nonce. c's views must be as
// ParseChallenge returns them: they are copied unchanged. Username, uri and
// cnonce are quoted here; they must not hold CR or LF, which a quoted-string
// cannot carry and which are written as SP (the server then rejects the
// response rather than sipedge sending a broken header).
//
// The hash inputs are built in dst past its length (overwriting whatever
// its backing array holds there), so nothing allocates once dst has room
// for them and for the value.
func AppendAuthorization(dst []byte, c *Challenge, cr Credentials, method, uri, body, cnonce []byte, nc uint32) []byte {
	alg := c.Algorithm
	if int(alg) >= len(algNames) {
		alg = MD5
	}
	// auth before auth-int: every server checks it, and it does not tie
	// the credentials to a body.
	var qop string
	switch {
	case c.Qop&QopAuth != 0:
		qop = "auth"
	case c.Qop&QopAuthInt != 0:
		qop = "auth-int"
	}
	sess := alg&1 != 0
	var ncHex [8]byte
	for k := range ncHex {
		ncHex[k] = hexDigits[nc>>(28-4*k)&0xf]
	}

	// RFC 7616 3.4.2: A1 = unq(username) ":" unq(realm) ":" passwd, and
	// for -sess H(A1) ":" unq(nonce) ":" unq(cnonce).
	var ha1, ha2, resp [64]byte
	n := len(dst)
	s := append(dst, cr.Username...)
	s = append(s, ':')
	s = appendUnquoted(s, c.Realm)
	s = append(s, ':')
	s = append(s, cr.Password...)
	h1 := sum(alg, s[n:], &ha1)
	if sess {
		s = append(s[:n], h1...)
		s = append(s, ':')
		s = appendUnquoted(s, c.Nonce)
		s = append(s, ':')
		s = append(s, cnonce...)
		h1 = sum(alg, s[n:], &ha1)
	}
	// RFC 7616 3.4.3: A2 = Method ":" request-uri [ ":" H(entity-body) ].
	s = append(s[:n], method...)
	s = append(s, ':')
	s = append(s, uri...)
	if qop == "auth-int" {
		s = append(s, ':')
		s = append(s, sum(alg, body, &ha2)...)
	}
	h2 := sum(alg, s[n:], &ha2)
	// RFC 7616 3.4.1; without qop, RFC 2069: H(A1) ":" unq(nonce) ":" H(A2).
	s = append(s[:n], h1...)
	s = append(s, ':')
	s = appendUnquoted(s, c.Nonce)
	s = append(s, ':')
	if qop != "" {
		s = append(s, ncHex[:]...)
		s = append(s, ':')
		s = append(s, cnonce...)
		s = append(s, ':')
		s = append(s, qop...)
		s = append(s, ':')
	}
	s = append(s, h2...)
	r := sum(alg, s[n:], &resp)
	dst = s[:n] // keeps the room the scratch may have grown

	// RFC 3261 25.1 credentials.
	dst = append(dst, "Digest username="...)
	dst = appendQuoted(dst, cr.Username)
	dst = append(dst, `, realm="`...)
	dst = append(dst, c.Realm...)
	dst = append(dst, `", nonce="`...)
	dst = append(dst, c.Nonce...)
	dst = append(dst, `", uri=`...)
	dst = appendQuoted(dst, uri)
	dst = append(dst, `, response="`...)
	dst = append(dst, r...)
	dst = append(dst, `", algorithm=`...)
	dst = append(dst, alg.String()...)
	if qop != "" || sess {
		// -sess without qop hashes the cnonce: send it so the server can check.
		dst = append(dst, ", cnonce="...)
		dst = appendQuoted(dst, cnonce)
	}
	if c.HasOpaque {
		dst = append(dst, `, opaque="`...)
		dst = append(dst, c.Opaque...)
		dst = append(dst, '"')
	}
	if qop != "" {
		dst = append(dst, ", qop="...)
		dst = append(dst, qop...)
		dst = append(dst, ", nc="...)
		dst = append(dst, ncHex[:]...)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// sum hashes in with alg's hash and returns the lower-case hex digest, a
// view of out.
func sum(alg Algorithm, in []byte, out *[64]byte) []byte {
	switch alg &^ 1 {
	case SHA256:
		d := sha256.Sum256(in)
		return out[:hex.Encode(out[:], d[:])]
	case SHA512_256:
		d := sha512.Sum512_256(in)
		return out[:hex.Encode(out[:], d[:])]
	}
	d := md5.Sum(in)
	return out[:hex.Encode(out[:], d[:])]
}

// appendUnquoted appends the quoted-string content v with its quoted-pairs
// undone: the value the hashes are over (RFC 7616 3.4.5).
func appendUnquoted(dst, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		dst = append(dst, v[i])
	}
	return dst
}

// appendQuoted appends s as a quoted-string, escaping '"' and '\' (RFC 3261
// 25.1).
func appendQuoted[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\r', '\n':
			dst = append(dst, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// tokenChar marks RFC 3261 25.1 token characters.
var tokenChar = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	for _, c := range []byte("-.!%*_+`'~") {
		t[c] = true
	}
	return t
}()

func skipToken(b []byte, i int) int {
	for i < len(b) && tokenChar[b[i]] {
		i++
	}
	return i
}

// isLWS reports linear white space, folds included: the parser leaves a
// folded value's CRLF in place (RFC 3261 7.3.1).
func isLWS(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipLWS(b []byte, i int) int {
	for i < len(b) && isLWS(b[i]) {
		i++
	}
	return i
}

func trimLWS(b []byte) []byte {
	b = b[skipLWS(b, 0):]
	for len(b) > 0 && isLWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold compares b with the ASCII s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}
