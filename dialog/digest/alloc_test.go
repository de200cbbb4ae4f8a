//go:build !race

package digest

import "testing"

// The race runtime allocates, so these run only without -race.

func TestParseChallengeAllocs(t *testing.T) {
	for _, in := range []string{rfc3261Challenge, rfc3261Folded, `Basic realm="r"`, `Digest realm="r", qop="x"`} {
		b := []byte(in)
		var c Challenge
		if n := testing.AllocsPerRun(100, func() { _ = ParseChallenge(b, &c) }); n != 0 {
			t.Errorf("ParseChallenge(%q) allocates %v times, want 0", in, n)
		}
	}
}

func TestAppendAuthorizationAllocs(t *testing.T) {
	method, uri, body, cnonce := []byte("INVITE"), []byte("sip:+15551234567@carrier.example.net"), []byte("v=0\r\n"), []byte("4f1b9c2d")
	dst := make([]byte, 0, 1024)
	for a := MD5; a <= SHA512_256Sess; a++ {
		for _, qop := range []string{"", `, qop="auth"`, `, qop="auth-int"`} {
			in := []byte(`Digest realm="carrier \"x\"", nonce="5f3a9b", opaque="", algorithm=` + a.String() + qop)
			var c Challenge
			if err := ParseChallenge(in, &c); err != nil {
				t.Fatal(err)
			}
			cr := Credentials{`al"ice`, "s3cr3t"}
			n := testing.AllocsPerRun(100, func() {
				dst = AppendAuthorization(dst[:0], &c, cr, method, uri, body, cnonce, 1)
			})
			if n != 0 {
				t.Errorf("%s%s: AppendAuthorization allocates %v times, want 0", a, qop, n)
			}
		}
	}
}
