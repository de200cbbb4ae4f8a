package b2bua

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/dialog/digest"
	"github.com/sipedge/sipedge/parser"
)

var carrierAccount = digest.Credentials{Username: "acct-42", Password: "s3cret"}

// challengeTo is the carrier's 401 or 407 to req with the given challenges.
func challengeTo(req *parser.Message, code int, challenges ...string) string {
	reason, name := "Unauthorized", "WWW-Authenticate: "
	if code == 407 {
		reason, name = "Proxy Authentication Required", "Proxy-Authenticate: "
	}
	b := parser.AppendResponse(nil, req, code, reason, []byte("btag9"))
	for _, c := range challenges {
		b = append(b, name+c+"\r\n"...)
	}
	return string(parser.AppendBody(b, "", nil))
}

// digestParams reads the credentials sipedge wrote: `Digest k="v", k=v`.
func digestParams(t *testing.T, v string) map[string]string {
	t.Helper()
	rest, ok := strings.CutPrefix(v, "Digest ")
	if !ok {
		t.Fatalf("credentials %q: not Digest", v)
	}
	p := map[string]string{}
	for _, kv := range strings.Split(rest, ", ") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("credentials %q: param %q", v, kv)
		}
		p[k] = strings.Trim(val, `"`)
	}
	return p
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// checkCredentials checks that request inv answers the challenge for realm and
// nonce with carrierAccount (RFC 2617 3.2.2, qop=auth, computed here on its
// own) and returns its params.
func checkCredentials(t *testing.T, inv *parser.Message, k parser.HeaderKind, realm, nonce string) map[string]string {
	t.Helper()
	if inv.Count(k) != 1 {
		t.Fatalf("%d %v headers in\n%s", inv.Count(k), k, inv.Bytes())
	}
	p := digestParams(t, string(inv.Get(k)))
	uri := string(inv.RequestURI())
	ha1 := md5hex(carrierAccount.Username + ":" + realm + ":" + carrierAccount.Password)
	ha2 := md5hex(string(inv.MethodBytes()) + ":" + uri)
	want := md5hex(ha1 + ":" + nonce + ":" + p["nc"] + ":" + p["cnonce"] + ":auth:" + ha2)
	if p["username"] != carrierAccount.Username || p["realm"] != realm || p["nonce"] != nonce || p["uri"] != uri ||
		p["qop"] != "auth" || p["nc"] != "00000001" || p["cnonce"] == "" || p["response"] != want {
		t.Fatalf("credentials %v, want response %s for realm %q nonce %q uri %q", p, want, realm, nonce, uri)
	}
	return p
}

func cseqOf(t *testing.T, m *parser.Message) parser.CSeq {
	t.Helper()
	c, err := m.CSeq()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// viaBranch is the branch of m's top Via.
func viaBranch(t *testing.T, m *parser.Message) string {
	t.Helper()
	var v parser.Via
	if err := m.TopVia(&v); err != nil {
		t.Fatal(err)
	}
	return string(v.Branch)
}

// A carrier that challenges the INVITE gets it again in the same dialog,
// with the next CSeq and the group's credentials (RFC 3261 22.2); the call
// then runs as any other, its ACK and BYE in that dialog at the CSeq after.
func TestCarrierChallengeAnswered(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	inv1 := r.startCall()
	r.recv(carrierA, carrierResponse(inv1, 100, "Trying", ""))
	r.recv(carrierA, challengeTo(inv1, 407,
		`Basic realm="carrier.example.net"`,
		`Digest realm="carrier.example.net", nonce="n0nce-1", qop="auth", algorithm=MD5, opaque="op4que"`))
	msgs := r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller) // the challenge is sipedge's business
	inv2 := msgs[1]
	if hdr(inv2, parser.HeaderCallID) != hdr(inv1, parser.HeaderCallID) || tagOf(t, inv2, parser.HeaderFrom) != tagOf(t, inv1, parser.HeaderFrom) ||
		tagOf(t, inv2, parser.HeaderTo) != "" {
		t.Fatalf("the answer to the challenge left the dialog:\n%s\n%s", inv1.Bytes(), inv2.Bytes())
	}
	if c := cseqOf(t, inv2); c.Num != 2 || c.Method != parser.MethodInvite {
		t.Fatalf("CSeq %d %v, want 2 INVITE", c.Num, c.Method)
	}
	if viaBranch(t, inv2) == viaBranch(t, inv1) {
		t.Fatal("the second INVITE reuses the first's branch: it is a new transaction")
	}
	if string(inv2.Body()) != sdp || inv2.Count(parser.HeaderAuthorization) != 0 {
		t.Fatalf("second INVITE:\n%s", inv2.Bytes())
	}
	if p := checkCredentials(t, inv2, parser.HeaderProxyAuthorization, "carrier.example.net", "n0nce-1"); p["opaque"] != "op4que" || p["algorithm"] != "MD5" {
		t.Fatalf("credentials %v: opaque and algorithm not echoed", p)
	}

	r.recv(carrierA, carrierResponse(inv2, 180, "Ringing", ""))
	r.expect(caller, "SIP/2.0 180 Ringing")
	r.recv(carrierA, carrierResponse(inv2, 200, "OK", sdp))
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	aTag := tagOf(t, ok, parser.HeaderTo)
	r.recv(caller, ackFromCaller(aTag))
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if c := cseqOf(t, ack); c.Num != 2 {
		t.Fatalf("the ACK's CSeq is %d, want the answered INVITE's, 2", c.Num)
	}
	r.recv(caller, inDialogFromCaller("BYE", "bye", 11, aTag, ""))
	bye := r.expect(carrierA, "BYE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if c := cseqOf(t, bye); c.Num != 3 {
		t.Fatalf("the BYE's CSeq is %d, want 3", c.Num)
	}
	r.recv(carrierA, carrierResponse(bye, 200, "OK", ""))
	r.expect(caller, "SIP/2.0 200 OK")
	if s := r.summary(); s.FinalCode != 200 || len(s.Attempts) != 0 {
		t.Fatalf("final %d, attempts %+v", s.FinalCode, s.Attempts)
	}
	if got := r.e.m.authAnswered.Get(); got != 1 {
		t.Fatalf("%d challenges counted answered, want 1", got)
	}
}

// A challenge to the INVITE that carried the credentials, its nonce not
// stale, is the carrier refusing them: the attempt fails with it, and the
// caller, who cannot answer a challenge for sipedge's account, gets 403.
func TestCarrierChallengeRefused(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	inv1 := r.startCall()
	r.recv(carrierA, challengeTo(inv1, 401, `Digest realm="carrier.example.net", nonce="n1", qop="auth"`))
	inv2 := r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[1]
	checkCredentials(t, inv2, parser.HeaderAuthorization, "carrier.example.net", "n1")
	r.recv(carrierA, challengeTo(inv2, 401, `Digest realm="carrier.example.net", nonce="n2", qop="auth"`))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	f := r.expect(caller, "SIP/2.0 403 Forbidden")[0]
	if f.Count(parser.HeaderWWWAuthenticate) != 0 {
		t.Fatalf("the carrier's challenge reached the caller:\n%s", f.Bytes())
	}
	s := r.summary()
	if s.FinalCode != 403 || len(s.Attempts) != 1 || s.Attempts[0].Status != 401 || !s.Attempts[0].Dialed {
		t.Fatalf("final %d, attempts %+v", s.FinalCode, s.Attempts)
	}
	if got := r.e.m.authRefused.Get(); got != 1 {
		t.Fatalf("%d challenges counted refused, want 1", got)
	}
}

// stale=true says the nonce expired, not the credentials (RFC 7616 3.3):
// sipedge answers the new nonce once more, and no further.
func TestCarrierChallengeStale(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	inv := r.startCall()
	for i, nonce := range []string{"n1", "n2"} {
		stale := ""
		if i > 0 {
			stale = ", stale=TRUE"
		}
		r.recv(carrierA, challengeTo(inv, 407, `Digest realm="carrier.example.net", nonce="`+nonce+`", qop="auth"`+stale))
		inv = r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[1]
		checkCredentials(t, inv, parser.HeaderProxyAuthorization, "carrier.example.net", nonce)
		if c := cseqOf(t, inv); c.Num != uint32(i+2) {
			t.Fatalf("CSeq %d, want %d", c.Num, i+2)
		}
	}
	r.recv(carrierA, challengeTo(inv, 407, `Digest realm="carrier.example.net", nonce="n3", qop="auth", stale=true`))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller, "SIP/2.0 403 Forbidden")
}

// unansweredCases are the two ways sipedge holds no answer to a carrier's
// challenge, and the counter of each.
var unansweredCases = []struct {
	name  string
	creds map[string]digest.Credentials
	realm string
	count func(e *Engine) uint64
}{
	{"no credentials", nil, "", func(e *Engine) uint64 { return e.m.authNoCredentials.Get() }},
	{"another realm", map[string]digest.Credentials{"carrier-a": carrierAccount}, "other.example", func(e *Engine) uint64 { return e.m.authUnanswerable.Get() }},
}

// Without credentials for the carrier, or with none for the realm it
// names, the challenge is the attempt's failure: the caller gets 403, or
// the next carrier is tried when the route reroutes on it.
func TestCarrierChallengeUnanswered(t *testing.T) {
	challenge := `Digest realm="carrier.example.net", nonce="n1"`
	for _, tc := range unansweredCases {
		t.Run(tc.name, func(t *testing.T) {
			r := twoCarriers(t, routeA, routeB)
			r.creds, r.realm = tc.creds, tc.realm
			inv := r.startCall()
			r.recv(carrierA, challengeTo(inv, 407, challenge))
			r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
			r.expect(carrierB)
			f := r.expect(caller, "SIP/2.0 403 Forbidden")[0]
			if f.Count(parser.HeaderProxyAuthenticate) != 0 {
				t.Fatalf("the carrier's challenge reached the caller:\n%s", f.Bytes())
			}
			if s := r.summary(); len(s.Attempts) != 1 || s.Attempts[0].Status != 407 {
				t.Fatalf("attempts %+v", s.Attempts)
			}
			if tc.count(r.e) != 1 {
				t.Fatal("the challenge was not counted")
			}
		})
	}
	t.Run("rerouted", func(t *testing.T) {
		a := routeA
		a.RerouteCauses = []int{407}
		r := twoCarriers(t, a, routeB)
		inv := r.startCall()
		r.recv(carrierA, challengeTo(inv, 407, challenge))
		r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
		r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")
		r.expect(caller)
	})
}

// The header policy never relays credentials or challenges, listed or not.
func TestAuthHeadersNeverRelayed(t *testing.T) {
	for _, k := range []parser.HeaderKind{parser.HeaderWWWAuthenticate, parser.HeaderProxyAuthenticate,
		parser.HeaderAuthorization, parser.HeaderProxyAuthorization} {
		if p := compilePolicy([]string{k.String()}); p.kinds.Has(k) {
			t.Errorf("a policy may relay %v", k)
		}
	}
}

// A carrier's challenge to a relayed re-INVITE reaches the caller as 403:
// the caller could not answer it (its digest covers the B-leg's
// Request-URI), and a 407 without its challenge breaks RFC 3261 22.1.
func TestInDialogChallengeRelayedAs403(t *testing.T) {
	r := newRig(t, nil)
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	reinv := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, challengeTo(reinv, 407, `Digest realm="carrier.example.net", nonce="n1"`))
	r.take(carrierA) // the ACK
	f := r.expect(caller, "SIP/2.0 403 Forbidden")[0]
	if f.Count(parser.HeaderProxyAuthenticate) != 0 {
		t.Fatalf("the carrier's challenge reached the caller:\n%s", f.Bytes())
	}
}

// The ACK for the 2xx to the INVITE that carried credentials carries them
// too (RFC 3261 13.2.2.4: "The ACK MUST contain the same credentials as the
// INVITE"), and so does the one that answers its retransmission; the ACK
// of a later re-INVITE, which carried none, carries none, nor does another
// carrier's.
func TestCarrierChallengeACKCarriesCredentials(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	inv1 := r.startCall()
	r.recv(carrierA, challengeTo(inv1, 407, `Digest realm="carrier.example.net", nonce="n1", qop="auth"`))
	inv2 := r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[1]
	creds := hdr(inv2, parser.HeaderProxyAuthorization)
	ok2xx := carrierResponse(inv2, 200, "OK", sdp)
	r.recv(carrierA, ok2xx)
	ok := r.expect(caller, "SIP/2.0 200 OK")[0]
	aTag := tagOf(t, ok, parser.HeaderTo)
	r.recv(caller, ackFromCaller(aTag))
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if ack.Count(parser.HeaderProxyAuthorization) != 1 || hdr(ack, parser.HeaderProxyAuthorization) != creds {
		t.Fatalf("the ACK does not repeat the INVITE's credentials %q:\n%s", creds, ack.Bytes())
	}
	r.recv(carrierA, ok2xx) // the ACK was lost
	again := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if hdr(again, parser.HeaderProxyAuthorization) != creds {
		t.Fatalf("the ACK sent again lacks the credentials:\n%s", again.Bytes())
	}

	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	reinv := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(reinv, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, inDialogFromCaller("ACK", "re1ack", 11, aTag, ""))
	reack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if reack.Count(parser.HeaderProxyAuthorization) != 0 || cseqOf(t, reack).Num != cseqOf(t, reinv).Num {
		t.Fatalf("the re-INVITE's ACK:\n%s", reack.Bytes())
	}

	t.Run("another carrier", func(t *testing.T) {
		a := routeA
		a.RerouteCauses = []int{407}
		r := twoCarriers(t, a, routeB)
		r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
		inv1 := r.startCall()
		r.recv(carrierA, challengeTo(inv1, 407, `Digest realm="carrier.example.net", nonce="n1", qop="auth"`))
		inv2 := r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[1]
		r.recv(carrierA, challengeTo(inv2, 407, `Digest realm="carrier.example.net", nonce="n2", qop="auth"`))
		r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
		binv := r.expect(carrierB, "INVITE sip:15551234@198.51.100.21:5070 SIP/2.0")[0]
		r.recv(carrierB, carrierResponse(binv, 200, "OK", sdp))
		ok := r.expect(caller, "SIP/2.0 200 OK")[0]
		r.recv(caller, ackFromCaller(tagOf(t, ok, parser.HeaderTo)))
		if ack := r.expect(carrierB, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]; ack.Count(parser.HeaderProxyAuthorization) != 0 {
			t.Fatalf("carrier-a's credentials went to carrier-b:\n%s", ack.Bytes())
		}
	})
}

// A challenge whose answer cannot be sent (here the transaction table is
// full) is not counted answered: the attempt fails with the challenge.
func TestCarrierChallengeAnswerNotSent(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Txn.MaxTransactions = 2 }) // the caller's INVITE and the first B-leg INVITE
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	inv1 := r.startCall()
	r.recv(carrierA, challengeTo(inv1, 401, `Digest realm="carrier.example.net", nonce="n1", qop="auth"`))
	r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0")
	r.expect(caller, "SIP/2.0 403 Forbidden")
	if got := r.e.m.authAnswered.Get(); got != 0 {
		t.Fatalf("%d challenges counted answered, none was", got)
	}
}

// A challenge after a 180: the answer is a new early dialog, which the
// caller sees with a new To tag (as a fork, RFC 3261 12.1.1), and the
// caller's CANCEL goes to the INVITE that answered the challenge, the one
// in flight (RFC 3261 9.1).
func TestCarrierChallengeAfterRingingCancelled(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	inv := callerInvite("1", "a-call-1", "15551234")
	r.recv(caller, inv)
	r.expect(caller, "SIP/2.0 100 Trying")
	inv1 := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(inv1, 180, "Ringing", ""))
	tag1 := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo)
	r.recv(carrierA, challengeTo(inv1, 407, `Digest realm="carrier.example.net", nonce="n1", qop="auth"`))
	inv2 := r.expect(carrierA, "ACK sip:15551234@198.51.100.20:5070 SIP/2.0", "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[1]
	if tagOf(t, inv2, parser.HeaderTo) != "" {
		t.Fatalf("the INVITE answering the challenge is in the challenged INVITE's early dialog:\n%s", inv2.Bytes())
	}
	r.recv(carrierA, carrierResponse(inv2, 180, "Ringing", ""))
	if tag2 := tagOf(t, r.expect(caller, "SIP/2.0 180 Ringing")[0], parser.HeaderTo); tag2 == tag1 {
		t.Fatal("the second early dialog reached the caller with the first's To tag")
	}
	r.recv(caller, cancelOf(inv))
	r.expect(caller, "SIP/2.0 200 OK", "SIP/2.0 487 Request Terminated")
	bc := r.expect(carrierA, "CANCEL sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
	if viaBranch(t, bc) != viaBranch(t, inv2) || cseqOf(t, bc).Num != 2 {
		t.Fatalf("the CANCEL is not the second INVITE's:\n%s", bc.Bytes())
	}
}

// A challenge sipedge cannot answer fails every call to the carrier: its
// warning comes once a minute per shard, with the count it left out.
func TestCarrierChallengeWarningsPaced(t *testing.T) {
	r := newRig(t, nil)
	r.creds, r.realm = map[string]digest.Credentials{"carrier-a": carrierAccount}, "other.example"
	var logs bytes.Buffer
	r.e.env.Log = slog.New(slog.NewTextHandler(&logs, nil))
	call := func(n int) {
		r.recv(caller, callerInvite(fmt.Sprint(n), fmt.Sprintf("a-call-%d", n), "15551234"))
		r.take(caller)
		inv := r.expect(carrierA, "INVITE sip:15551234@198.51.100.20:5070 SIP/2.0")[0]
		r.recv(carrierA, challengeTo(inv, 407, `Digest realm="carrier.example.net", nonce="n1"`))
		r.take(carrierA)
		r.expect(caller, "SIP/2.0 403 Forbidden")
	}
	for n := range 3 {
		call(n)
	}
	if got := strings.Count(logs.String(), "cannot answer"); got != 1 {
		t.Fatalf("%d warnings for 3 calls within a minute, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), `challenge="Digest realm=\"carrier.example.net\", nonce=\"n1\""`) {
		t.Fatalf("the warning does not show the challenge:\n%s", logs.String())
	}
	r.advance(time.Minute)
	call(3)
	if got := strings.Count(logs.String(), "cannot answer"); got != 2 || !strings.Contains(logs.String(), "suppressed_since_last=2") {
		t.Fatalf("after a minute: %d warnings, want 2, the second counting 2 left out:\n%s", got, logs.String())
	}
}

// A carrier that challenges a request the caller sent in the dialog gets
// it again with the next CSeq and the credentials (RFC 3261 22.2), and the
// caller its answer: a re-INVITE, whose 2xx's ACK repeats the credentials
// (13.2.2.4), and an INFO; a second challenge is the carrier refusing them,
// and the caller gets 403.
func TestInDialogChallengeAnswered(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	binv, aTag := r.answerCall()
	first := cseqOf(t, binv).Num

	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.expect(caller, "SIP/2.0 100 Trying")
	re1 := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, challengeTo(re1, 407, `Digest realm="carrier.example.net", nonce="n-re", qop="auth"`))
	re2 := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[1]
	r.expect(caller)
	checkCredentials(t, re2, parser.HeaderProxyAuthorization, "carrier.example.net", "n-re")
	if c1, c2 := cseqOf(t, re1).Num, cseqOf(t, re2).Num; c1 <= first || c2 != c1+1 || viaBranch(t, re1) == viaBranch(t, re2) ||
		tagOf(t, re2, parser.HeaderTo) != "btag9" || string(re2.Body()) != sdp {
		t.Fatalf("the answered re-INVITE:\n%s", re2.Bytes())
	}
	r.recv(carrierA, carrierResponse(re2, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 11 ACK", 1))
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if cseqOf(t, ack).Num != cseqOf(t, re2).Num {
		t.Fatalf("the ACK's CSeq %d, want the answered re-INVITE's %d", cseqOf(t, ack).Num, cseqOf(t, re2).Num)
	}
	if got, want := hdr(ack, parser.HeaderProxyAuthorization), hdr(re2, parser.HeaderProxyAuthorization); got != want {
		t.Fatalf("the ACK's credentials %q, want the re-INVITE's %q", got, want)
	}

	r.recv(caller, inDialogFromCaller("INFO", "info1", 12, aTag, ""))
	info1 := r.expect(carrierA, "INFO sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, challengeTo(info1, 401, `Digest realm="carrier.example.net", nonce="n-info"`))
	info2 := r.expect(carrierA, "INFO sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	p := digestParams(t, string(info2.Get(parser.HeaderAuthorization)))
	if want := md5hex(md5hex(carrierAccount.Username+":carrier.example.net:"+carrierAccount.Password) + ":n-info:" +
		md5hex("INFO:"+string(info2.RequestURI()))); p["response"] != want {
		t.Fatalf("INFO credentials %v, want response %s", p, want)
	}
	r.recv(carrierA, challengeTo(info2, 401, `Digest realm="carrier.example.net", nonce="n-info2"`))
	r.expect(caller, "SIP/2.0 403 Forbidden")
	r.expect(carrierA)
}

// The credentials of a challenged re-INVITE whose answer failed are not
// the next re-INVITE's: its ACK carries none.
func TestInDialogChallengeCredentialsNotCarriedOver(t *testing.T) {
	r := newRig(t, nil)
	r.creds = map[string]digest.Credentials{"carrier-a": carrierAccount}
	_, aTag := r.answerCall()
	r.recv(caller, inDialogFromCaller("INVITE", "re1", 11, aTag, sdp))
	r.take(caller)
	re1 := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, challengeTo(re1, 407, `Digest realm="carrier.example.net", nonce="n1"`))
	re2 := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0", "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[1]
	r.recv(carrierA, carrierResponse(re2, 488, "Not Acceptable Here", ""))
	r.take(carrierA)
	r.expect(caller, "SIP/2.0 488 Not Acceptable Here")

	r.recv(caller, inDialogFromCaller("INVITE", "re3", 12, aTag, sdp))
	r.take(caller)
	re3 := r.expect(carrierA, "INVITE sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	r.recv(carrierA, carrierResponse(re3, 200, "OK", sdp))
	r.expect(caller, "SIP/2.0 200 OK")
	r.recv(caller, strings.Replace(ackFromCaller(aTag), "CSeq: 10 ACK", "CSeq: 12 ACK", 1))
	ack := r.expect(carrierA, "ACK sip:gw@carrier.example.net:5070 SIP/2.0")[0]
	if ack.Count(parser.HeaderProxyAuthorization) != 0 || cseqOf(t, ack).Num != cseqOf(t, re3).Num {
		t.Fatalf("the ACK of an unchallenged re-INVITE:\n%s", ack.Bytes())
	}
}
