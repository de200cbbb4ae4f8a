package digest

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The RFC 3261 20.44 example, and the same with the folds of 22.4.
const (
	rfc3261Challenge = `Digest realm="atlanta.com", domain="sip:boxesbybob.com", qop="auth", ` +
		`nonce="f84f1cec41e6cbe5aea9c8e88d359", opaque="", stale=FALSE, algorithm=MD5`
	rfc3261Folded = "Digest\r\n       realm=\"atlanta.com\",\r\n       domain=\"sip:boxesbybob.com\", qop=\"auth\",\r\n" +
		"       nonce=\"f84f1cec41e6cbe5aea9c8e88d359\",\r\n       opaque=\"\", stale=FALSE, algorithm=MD5"
)

func parse(t *testing.T, value string) *Challenge {
	t.Helper()
	c := new(Challenge)
	if err := ParseChallenge([]byte(value), c); err != nil {
		t.Fatalf("ParseChallenge(%q): %v", value, err)
	}
	return c
}

func TestParseChallenge(t *testing.T) {
	type want struct {
		realm, nonce, opaque string
		hasOpaque            bool
		alg                  Algorithm
		qop                  Qop
		stale                bool
	}
	atlanta := want{"atlanta.com", "f84f1cec41e6cbe5aea9c8e88d359", "", true, MD5, QopAuth, false}
	f := func(in string, wantErr error, w want) {
		t.Helper()
		var c Challenge
		err := ParseChallenge([]byte(in), &c)
		if !errors.Is(err, wantErr) {
			t.Errorf("ParseChallenge(%q): err %v, want %v", in, err, wantErr)
			return
		}
		if err != nil {
			return
		}
		got := want{string(c.Realm), string(c.Nonce), string(c.Opaque), c.HasOpaque, c.Algorithm, c.Qop, c.Stale}
		if got != w {
			t.Errorf("ParseChallenge(%q) = %+v, want %+v", in, got, w)
		}
	}
	// RFC 3261 20.44, 22.4, 20.27.
	f(rfc3261Challenge, nil, atlanta)
	f(rfc3261Folded, nil, atlanta)
	f(`Digest realm="atlanta.com", domain="sip:ss1.carrier.com", qop="auth", nonce="f84f1cec41e6cbe5aea9c8e88d359", opaque="", stale=FALSE, algorithm=MD5`, nil, atlanta)
	// Case: scheme, names, algorithm, stale; values keep theirs.
	f(`DIGEST REALM="Atlanta.com", Nonce="AbC", QOP="AUTH", Algorithm=md5-SESS, STALE=TRUE`, nil,
		want{"Atlanta.com", "AbC", "", false, MD5Sess, QopAuth, true})
	f(`digest realm="r",nonce="n",stale=true`, nil, want{"r", "n", "", false, MD5, 0, true})
	f(`Digest realm="r",nonce="n",stale="True"`, nil, want{"r", "n", "", false, MD5, 0, true})
	f(`Digest realm="r",nonce="n",stale=FALSE`, nil, want{"r", "n", "", false, MD5, 0, false})
	f(`Digest realm="r",nonce="n",stale=yes`, nil, want{"r", "n", "", false, MD5, 0, false}) // RFC 7616 3.3: not true is false
	// LWS everywhere, folds included; empty list elements.
	f(" \tDigest \t realm \t= \t\"r\" \t, \r\n nonce=\"n\"\t,opaque =\"o\" ,\t", nil, want{"r", "n", "o", true, MD5, 0, false})
	f(`Digest , realm="r",, nonce="n",`, nil, want{"r", "n", "", false, MD5, 0, false})
	// Every algorithm, quoted or not.
	for a := MD5; a <= SHA512_256Sess; a++ {
		f(`Digest realm="r", nonce="n", algorithm=`+a.String(), nil, want{"r", "n", "", false, a, 0, false})
		f(`Digest realm="r", nonce="n", algorithm="`+strings.ToLower(a.String())+`"`, nil, want{"r", "n", "", false, a, 0, false})
	}
	f(`Digest realm="r", nonce="n", algorithm=AKAv1-MD5`, ErrAlgorithm, want{})
	f(`Digest realm="r", nonce="n", algorithm=SHA-1`, ErrAlgorithm, want{})
	f(`Digest realm="r", nonce="n", algorithm=MD5X`, ErrAlgorithm, want{})
	// qop lists.
	f(`Digest realm="r", nonce="n", qop="auth-int,auth"`, nil, want{"r", "n", "", false, MD5, QopAuth | QopAuthInt, false})
	f(`Digest realm="r", nonce="n", qop="auth, auth-int"`, nil, want{"r", "n", "", false, MD5, QopAuth | QopAuthInt, false})
	f(`Digest realm="r", nonce="n", qop=" auth-int , x-new "`, nil, want{"r", "n", "", false, MD5, QopAuthInt, false})
	f(`Digest realm="r", nonce="n", qop=auth`, nil, want{"r", "n", "", false, MD5, QopAuth, false})
	f(`Digest realm="r", nonce="n", qop="x-new"`, ErrQop, want{})
	f(`Digest realm="r", nonce="n", qop="auth-conf, authx"`, ErrQop, want{})
	f(`Digest realm="r", nonce="n", qop=""`, ErrQop, want{})
	// Escapes stay in the views.
	f(`Digest realm="a\"b\\c", nonce="\n\"", opaque="\\"`, nil, want{`a\"b\\c`, `\n\"`, `\\`, true, MD5, 0, false})
	f(`Digest realm="é", nonce="n\	"`, nil, want{"é", `n\	`, "", false, MD5, 0, false})
	// Unquoted values; unknown params, quoted commas included.
	f(`Digest realm=r, nonce=n, opaque=o`, nil, want{"r", "n", "o", true, MD5, 0, false})
	f(`Digest userhash=true, domain="sip:a, sip:b", realm="r", charset=UTF-8, nonce="n", x="realm=\"z\""`, nil, want{"r", "n", "", false, MD5, 0, false})
	// Missing.
	f(`Digest nonce="n"`, ErrNoRealm, want{})
	f(`Digest realm="r"`, ErrNoNonce, want{})
	f(`Digest`, ErrNoRealm, want{})
	f(`Digest `, ErrNoRealm, want{})
	// Other schemes.
	f(`Basic realm="r"`, ErrNotDigest, want{})
	f(`Bearer realm="r", nonce="n"`, ErrNotDigest, want{})
	f(`Digestx realm="r", nonce="n"`, ErrNotDigest, want{})
	f(`Diges realm="r", nonce="n"`, ErrNotDigest, want{})
	f(``, ErrNotDigest, want{})
	f(`"Digest" realm="r", nonce="n"`, ErrNotDigest, want{})
	// Duplicates, whatever the case.
	f(`Digest realm="r", nonce="n", realm="s"`, ErrDuplicate, want{})
	f(`Digest realm="r", nonce="n", NONCE="n"`, ErrDuplicate, want{})
	f(`Digest realm="r", nonce="n", opaque="", opaque=""`, ErrDuplicate, want{})
	f(`Digest realm="r", nonce="n", qop="auth", qop="auth"`, ErrDuplicate, want{})
	f(`Digest realm="r", nonce="n", algorithm=MD5, Algorithm=MD5`, ErrDuplicate, want{})
	f(`Digest realm="r", nonce="n", stale=true, stale=true`, ErrDuplicate, want{})
	f(`Digest realm="r", nonce="n", domain="a", domain="b"`, nil, want{"r", "n", "", false, MD5, 0, false}) // unread
	// Syntax.
	for _, in := range []string{
		`Digest,realm="r", nonce="n"`,
		`Digest realm="r" nonce="n"`,
		`Digest realm="r", nonce="n`,
		`Digest realm="r", nonce="n\"`,
		`Digest realm="r", nonce="n\`,
		`Digest realm="r", nonce=`,
		`Digest realm="r", nonce= , x=1`,
		`Digest realm="r", nonce`,
		`Digest realm="r", nonce="n", =x`,
		`Digest realm="r", nonce="n", x="1"y`,
		`Digest realm="r", nonce=n/1`,
		`Digest realm="r", nonce="n"x`,
		`Digest realm="r", nonce="a` + "\r\n" + ` b"`, // a fold inside a quoted value
		`Digest realm="r", nonce="a\` + "\r" + `"`,
		`Digest realm="r", nonce="a` + "\x00" + `"`,
		`Digest realm="r", nonce="a` + "\x7f" + `"`,
		`Digest realm="r", nonce="a\` + "\xc3\xa9" + `"`,
		`Digest realm="r", nonce="n"; opaque="o"`,
		`Digest realm="r", "nonce"="n"`,
	} {
		f(in, ErrSyntax, want{})
	}
}

// TestParseChallengeTruncated parses every prefix of valid values: no
// panic, and a prefix that parses agrees with the whole on what it holds.
func TestParseChallengeTruncated(t *testing.T) {
	for _, full := range []string{
		rfc3261Challenge, rfc3261Folded,
		`Digest realm="a\"b", nonce="x\\y", qop="auth-int, auth", opaque=o, algorithm="SHA-512-256-sess", stale=true`,
	} {
		whole := parse(t, full)
		for k := 0; k <= len(full); k++ {
			b := []byte(full[:k]) // its own array: a read past k would fail
			var c, again Challenge
			err := ParseChallenge(b, &c)
			if err2 := ParseChallenge(b, &again); err2 != err || (err == nil && !equalChallenges(&c, &again)) {
				t.Fatalf("%q: two parses differ", b)
			}
			if err != nil {
				continue
			}
			if !bytes.Equal(c.Realm, whole.Realm) || !bytes.Equal(c.Nonce, whole.Nonce) {
				t.Errorf("%q parses realm %q nonce %q, the whole %q %q", b, c.Realm, c.Nonce, whole.Realm, whole.Nonce)
			}
		}
	}
}

func equalChallenges(a, b *Challenge) bool {
	return bytes.Equal(a.Realm, b.Realm) && bytes.Equal(a.Nonce, b.Nonce) && bytes.Equal(a.Opaque, b.Opaque) &&
		a.HasOpaque == b.HasOpaque && a.Algorithm == b.Algorithm && a.Qop == b.Qop && a.Stale == b.Stale
}

// The views are capped at their end, so appending to one cannot overwrite
// the rest of the header value.
func TestParseChallengeViewsCapped(t *testing.T) {
	c := parse(t, rfc3261Challenge)
	for _, v := range [][]byte{c.Realm, c.Nonce, c.Opaque} {
		if cap(v) != len(v) {
			t.Errorf("view %q has cap %d", v, cap(v))
		}
	}
}

func TestAlgorithmString(t *testing.T) {
	want := []string{"MD5", "MD5-sess", "SHA-256", "SHA-256-sess", "SHA-512-256", "SHA-512-256-sess"}
	for a, s := range want {
		if got := Algorithm(a).String(); got != s {
			t.Errorf("Algorithm(%d).String() = %q, want %q", a, got, s)
		}
	}
	if got := Algorithm(6).String(); got != "Algorithm(6)" {
		t.Errorf("Algorithm(6).String() = %q", got)
	}
}

func authorization(c *Challenge, cr Credentials, method, uri, body, cnonce string, nc uint32) string {
	return string(AppendAuthorization(nil, c, cr, []byte(method), []byte(uri), []byte(body), []byte(cnonce), nc))
}

// RFC 2617 3.5, the whole Authorization value.
func TestRFC2617(t *testing.T) {
	c := parse(t, `Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"`)
	got := authorization(c, Credentials{"Mufasa", "Circle Of Life"}, "GET", "/dir/index.html", "", "0a4f113b", 1)
	want := `Digest username="Mufasa", realm="testrealm@host.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", ` +
		`uri="/dir/index.html", response="6629fae49393a05397450978507c4ef1", algorithm=MD5, cnonce="0a4f113b", ` +
		`opaque="5ccc069c403ebaf9f0171e9517f40e41", qop=auth, nc=00000001`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 7616 3.9.1: the same request answered with SHA-256 and with MD5.
func TestRFC7616(t *testing.T) {
	for _, tc := range []struct{ alg, response string }{
		{"SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"},
		{"MD5", "8ca523f5e9506fed4657c9700eebdbec"},
	} {
		c := parse(t, "Digest\r\n    realm=\"http-auth@example.org\",\r\n    qop=\"auth, auth-int\",\r\n    algorithm="+tc.alg+
			",\r\n    nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\",\r\n    opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"")
		got := authorization(c, Credentials{"Mufasa", "Circle of Life"}, "GET", "/dir/index.html", "", "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", 1)
		want := `Digest username="Mufasa", realm="http-auth@example.org", nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", ` +
			`uri="/dir/index.html", response="` + tc.response + `", algorithm=` + tc.alg + `, cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", ` +
			`opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS", qop=auth, nc=00000001`
		if got != want {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.alg, got, want)
		}
	}
}

// hexHash is an independent H for the by-hand cases.
func hexHash(alg Algorithm, s string) string {
	switch alg &^ 1 {
	case SHA256:
		return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))
	case SHA512_256:
		return fmt.Sprintf("%x", sha512.Sum512_256([]byte(s)))
	}
	return fmt.Sprintf("%x", md5.Sum([]byte(s)))
}

// SIP cases computed by hand from the RFC 7616 3.4 formulas, each checked
// field by field with the test parser below.
func TestSIPByHand(t *testing.T) {
	const (
		pass   = "s3cr3t"
		uri    = "sip:+15551234567@carrier.example.net;user=phone"
		body   = "v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
		cnonce = "4f1b9c2d"
	)
	type tc struct {
		name, challenge    string
		user, realm, nonce string // as hashed; user "" is "alice"
		alg                Algorithm
		qop                string
		nc                 uint32
		// As written; "" for the hashed value, wantOpaque "-" when absent.
		wantUser, wantRealm, wantNonce, wantOpaque string
	}
	for _, c := range []tc{
		{name: "rfc2069", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b"`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: MD5, nc: 1, wantOpaque: "-"},
		{name: "auth-int", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b", qop="auth-int", opaque=""`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: MD5, qop: "auth-int", nc: 0x1a2b, wantOpaque: ""},
		{name: "md5-sess", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b", qop="auth", algorithm=MD5-sess, opaque="xyz"`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: MD5Sess, qop: "auth", nc: 2, wantOpaque: "xyz"},
		{name: "md5-sess-no-qop", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b", algorithm=MD5-sess`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: MD5Sess, nc: 1, wantOpaque: "-"},
		{name: "sha-256", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b", algorithm=SHA-256`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: SHA256, nc: 1, wantOpaque: "-"},
		{name: "sha-512-256-sess auth-int", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b", qop="auth-int", algorithm=SHA-512-256-sess`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: SHA512_256Sess, qop: "auth-int", nc: 0xffffffff, wantOpaque: "-"},
		{name: "sha-256-sess", challenge: `Digest realm="carrier.example.net", nonce="5f3a9b", qop="auth", algorithm=SHA-256-sess`,
			realm: "carrier.example.net", nonce: "5f3a9b", alg: SHA256Sess, qop: "auth", nc: 1, wantOpaque: "-"},
		{name: "escapes", challenge: `Digest realm="Carrier \"A\" \\ B", nonce="n\o\"nce", qop="auth", opaque="o\"p"`,
			user: `al"ice\`, realm: `Carrier "A" \ B`, nonce: `no"nce`, alg: MD5, qop: "auth", nc: 1,
			wantUser: `al\"ice\\`, wantRealm: `Carrier \"A\" \\ B`, wantNonce: `n\o\"nce`, wantOpaque: `o\"p`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.user == "" {
				c.user = "alice"
			}
			if c.wantUser == "" {
				c.wantUser = c.user
			}
			if c.wantRealm == "" {
				c.wantRealm, c.wantNonce = c.realm, c.nonce
			}
			const method = "INVITE"
			got := authorization(parse(t, c.challenge), Credentials{c.user, pass}, method, uri, body, cnonce, c.nc)

			H := func(s string) string { return hexHash(c.alg, s) }
			ha1 := H(c.user + ":" + c.realm + ":" + pass)
			if c.alg&1 != 0 {
				ha1 = H(ha1 + ":" + c.nonce + ":" + cnonce)
			}
			a2 := method + ":" + uri
			if c.qop == "auth-int" {
				a2 += ":" + H(body)
			}
			ncHex := fmt.Sprintf("%08x", c.nc)
			response := H(ha1 + ":" + c.nonce + ":" + H(a2))
			if c.qop != "" {
				response = H(ha1 + ":" + c.nonce + ":" + ncHex + ":" + cnonce + ":" + c.qop + ":" + H(a2))
			}

			p, err := parseCredentials(got)
			if err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			want := map[string]authParam{
				"username":  {raw: c.wantUser, val: c.user, quoted: true},
				"realm":     {raw: c.wantRealm, val: c.realm, quoted: true},
				"nonce":     {raw: c.wantNonce, val: c.nonce, quoted: true},
				"uri":       {raw: uri, val: uri, quoted: true},
				"response":  {raw: response, val: response, quoted: true},
				"algorithm": {raw: c.alg.String(), val: c.alg.String()},
			}
			if c.qop != "" || c.alg&1 != 0 {
				want["cnonce"] = authParam{raw: cnonce, val: cnonce, quoted: true}
			}
			if c.qop != "" {
				want["qop"] = authParam{raw: c.qop, val: c.qop}
				want["nc"] = authParam{raw: ncHex, val: ncHex}
			}
			if c.wantOpaque != "-" {
				want["opaque"] = authParam{raw: c.wantOpaque, val: strings.ReplaceAll(c.wantOpaque, `\`, ""), quoted: true}
			}
			for k, w := range want {
				if p[k] != w {
					t.Errorf("%s = %+v, want %+v", k, p[k], w)
				}
			}
			for k := range p {
				if _, ok := want[k]; !ok {
					t.Errorf("unexpected param %s in %s", k, got)
				}
			}
		})
	}
}

// A username with CR or LF cannot be quoted: it is written with SP, so the
// request stays well-formed.
func TestUsernameLineBreak(t *testing.T) {
	c := parse(t, `Digest realm="r", nonce="n"`)
	got := authorization(c, Credentials{"a\r\nVia: x", "p"}, "INVITE", "sip:b", "", "c", 1)
	if strings.ContainsAny(got, "\r\n") || !strings.HasPrefix(got, `Digest username="a  Via: x", `) {
		t.Errorf("got %q", got)
	}
}

// A hand-built Challenge with an algorithm out of range is answered as MD5.
func TestAlgorithmOutOfRange(t *testing.T) {
	c := parse(t, `Digest realm="r", nonce="n"`)
	want := authorization(c, Credentials{"u", "p"}, "INVITE", "sip:b", "", "c", 1)
	c.Algorithm = 200
	if got := authorization(c, Credentials{"u", "p"}, "INVITE", "sip:b", "", "c", 1); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// AppendAuthorization appends: what dst holds stays, and its tail, used as
// scratch, is not part of the result.
func TestAppendKeepsPrefix(t *testing.T) {
	c := parse(t, rfc3261Challenge)
	alone := authorization(c, Credentials{"u", "p"}, "INVITE", "sip:b", "", "c", 1)
	dst := make([]byte, 0, 4096)
	dst = append(dst, "Proxy-Authorization: "...)
	got := string(AppendAuthorization(dst, c, Credentials{"u", "p"}, []byte("INVITE"), []byte("sip:b"), nil, []byte("c"), 1))
	if got != "Proxy-Authorization: "+alone {
		t.Errorf("got %q", got)
	}
	small := []byte("X: ")
	got = string(AppendAuthorization(small[:3:3], c, Credentials{"u", "p"}, []byte("INVITE"), []byte("sip:b"), nil, []byte("c"), 1))
	if got != "X: "+alone {
		t.Errorf("got %q", got)
	}
}

// authParam is one param of an Authorization value: raw as written, val
// with its quoted-pairs undone.
type authParam struct {
	raw, val string
	quoted   bool
}

// parseCredentials is a test-only parser of what AppendAuthorization
// writes: "Digest " then name=value params joined by ", ", no duplicates.
// It shares no code with the package.
func parseCredentials(s string) (map[string]authParam, error) {
	rest, ok := strings.CutPrefix(s, "Digest ")
	if !ok {
		return nil, errors.New("no Digest scheme")
	}
	m := map[string]authParam{}
	for {
		name, after, ok := strings.Cut(rest, "=")
		if !ok || name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, fmt.Errorf("bad name in %q", rest)
		}
		var p authParam
		if strings.HasPrefix(after, `"`) {
			var val []byte
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' {
					if i++; i == len(after) {
						return nil, errors.New("quoted-pair at the end")
					}
				}
				val = append(val, after[i])
			}
			if i == len(after) {
				return nil, fmt.Errorf("unterminated %s", name)
			}
			p, rest = authParam{raw: after[1:i], val: string(val), quoted: true}, after[i+1:]
		} else {
			end := strings.Index(after, ", ")
			if end < 0 {
				end = len(after)
			}
			if end == 0 || strings.ContainsAny(after[:end], " \t\"\\,") {
				return nil, fmt.Errorf("bad token for %s", name)
			}
			p, rest = authParam{raw: after[:end], val: after[:end]}, after[end:]
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("duplicate %s", name)
		}
		m[name] = p
		if rest == "" {
			return m, nil
		}
		if rest, ok = strings.CutPrefix(rest, ", "); !ok {
			return nil, fmt.Errorf("no comma before %q", rest)
		}
	}
}
