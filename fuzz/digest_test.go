package fuzz

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	// fuzz_test.go has a func digest.
	auth "github.com/sipedge/sipedge/dialog/digest"
)

var challengeState struct {
	again auth.Challenge
	out   []byte
}

// FuzzChallenge parses arbitrary bytes as a WWW-Authenticate value. Parsing
// never panics, is deterministic and returns views inside the input; a
// challenge that parses is answered by AppendAuthorization, whose value has
// no line break, parses with a parser of its own (parseDigestCredentials)
// and with ParseChallenge, and carries realm, nonce and opaque exactly as
// the challenge held them.
func FuzzChallenge(f *testing.F) {
	for _, s := range []string{
		`Digest realm="atlanta.com", domain="sip:boxesbybob.com", qop="auth", nonce="f84f1cec41e6cbe5aea9c8e88d359", opaque="", stale=FALSE, algorithm=MD5`,
		"Digest\r\n    realm=\"http-auth@example.org\",\r\n    qop=\"auth, auth-int\",\r\n    algorithm=SHA-256,\r\n" +
			"    nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\",\r\n    opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"",
		`digest REALM=r,NONCE=n,,qop="auth-int",algorithm="sha-512-256-SESS",stale=TRUE,`,
		`Digest realm="a\"b\\c", nonce="\n\"", opaque="\\", qop=" x , auth ", userhash=true`,
		`Digest realm="r", nonce="n", algorithm=MD5-sess`,
		`Digest realm="r", nonce="n", qop="x-new"`,
		`Digest realm="r", nonce="n", realm="s"`,
		`Digest realm="r", nonce="a\`,
		"Digest realm=\"\r\", nonce=\"a\r\n b\"", // a line break must not reach the request
		`Basic realm="r"`,
		"",
	} {
		f.Add([]byte(s))
	}
	cr := auth.Credentials{Username: `al"ice\`, Password: "s3cr3t"}
	method, uri, body, cnonce := []byte("INVITE"), []byte("sip:bob@example.com"), []byte("v=0\r\n"), []byte("0a4f113b")
	f.Fuzz(func(t *testing.T, in []byte) {
		var c auth.Challenge
		err := auth.ParseChallenge(in, &c)
		st := &challengeState
		a := &st.again
		if err2 := auth.ParseChallenge(in, a); err2 != err || err == nil && (!same(c.Realm, a.Realm) ||
			!same(c.Nonce, a.Nonce) || !same(c.Opaque, a.Opaque) || c.HasOpaque != a.HasOpaque ||
			c.Algorithm != a.Algorithm || c.Qop != a.Qop || c.Stale != a.Stale) {
			t.Fatalf("two parses of %q differ", in)
		}
		if err != nil {
			return
		}
		if !within(in, c.Realm) || !within(in, c.Nonce) || !within(in, c.Opaque) {
			t.Fatalf("%q: a view lies outside the input", in)
		}
		st.out = auth.AppendAuthorization(st.out[:0], &c, cr, method, uri, body, cnonce, 7)
		out := string(st.out)
		if strings.ContainsAny(out, "\r\n") {
			t.Fatalf("%q: the value has a line break: %q", in, out)
		}
		p, err := parseDigestCredentials(out)
		if err != nil {
			t.Fatalf("%q: %v in %q", in, err, out)
		}
		check := func(name, want string) {
			t.Helper()
			if p[name] != want {
				t.Fatalf("%q: %s is %q, want %q, in %q", in, name, p[name], want, out)
			}
		}
		check("username", `"al\"ice\\"`)
		check("realm", `"`+string(c.Realm)+`"`)
		check("nonce", `"`+string(c.Nonce)+`"`)
		check("uri", `"sip:bob@example.com"`)
		check("algorithm", c.Algorithm.String())
		hexLen := 64
		if c.Algorithm <= auth.MD5Sess {
			hexLen = 32
		}
		if r := p["response"]; len(r) != hexLen+2 || strings.Trim(r[1:len(r)-1], "0123456789abcdef") != "" {
			t.Fatalf("%q: response %s is not %d lower-case hex digits", in, r, hexLen)
		}
		if _, ok := p["opaque"]; ok != c.HasOpaque {
			t.Fatalf("%q: opaque written %v, in the challenge %v", in, ok, c.HasOpaque)
		}
		if c.HasOpaque {
			check("opaque", `"`+string(c.Opaque)+`"`)
		}
		switch {
		case c.Qop&auth.QopAuth != 0:
			check("qop", "auth")
		case c.Qop&auth.QopAuthInt != 0:
			check("qop", "auth-int")
		}
		if _, ok := p["qop"]; ok != (c.Qop != 0) {
			t.Fatalf("%q: qop written %v, offered %v", in, ok, c.Qop)
		}
		if c.Qop != 0 {
			check("nc", "00000007")
		}
		if sess := strings.HasSuffix(c.Algorithm.String(), "-sess"); c.Qop != 0 || sess {
			check("cnonce", `"0a4f113b"`)
		} else if _, ok := p["cnonce"]; ok {
			t.Fatalf("%q: cnonce without qop: %q", in, out)
		}

		// The value is itself a list of auth-params: ParseChallenge reads it
		// back the same.
		var back auth.Challenge
		if err := auth.ParseChallenge(st.out, &back); err != nil {
			t.Fatalf("%q: ParseChallenge(%q): %v", in, out, err)
		}
		if !bytes.Equal(back.Realm, c.Realm) || !bytes.Equal(back.Nonce, c.Nonce) || !bytes.Equal(back.Opaque, c.Opaque) ||
			back.HasOpaque != c.HasOpaque || back.Algorithm != c.Algorithm {
			t.Fatalf("%q: %q reads back as %+v", in, out, back)
		}
	})
}

// parseDigestCredentials is a test-only parser of what AppendAuthorization
// writes: "Digest " then name=value params joined by ", ", no duplicates.
// Values are returned as written, quotes included.
func parseDigestCredentials(s string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(s, "Digest ")
	if !ok {
		return nil, errors.New("no Digest scheme")
	}
	m := map[string]string{}
	for {
		name, after, ok := strings.Cut(rest, "=")
		if !ok || name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, errors.New("bad param name")
		}
		end := 0
		if strings.HasPrefix(after, `"`) {
			for end = 1; end < len(after) && after[end] != '"'; end++ {
				if after[end] == '\\' {
					end++
				}
			}
			if end >= len(after) {
				return nil, errors.New("unterminated quoted-string")
			}
			end++
		} else {
			if end = strings.Index(after, ", "); end < 0 {
				end = len(after)
			}
			if end == 0 || strings.ContainsAny(after[:end], " \t\"\\,") {
				return nil, errors.New("bad token")
			}
		}
		if _, dup := m[name]; dup {
			return nil, errors.New("duplicate " + name)
		}
		m[name], rest = after[:end], after[end:]
		if rest == "" {
			return m, nil
		}
		if rest, ok = strings.CutPrefix(rest, ", "); !ok {
			return nil, errors.New("no comma after " + name)
		}
	}
}
