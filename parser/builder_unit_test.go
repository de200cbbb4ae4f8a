package parser

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// bReq is a request whose headers a response copies (RFC 3261 8.2.6.2).
var bReq = []string{
	"Via: SIP/2.0/UDP p1.example.com;branch=z9hG4bK1, SIP/2.0/TCP p2.example.com;branch=z9hG4bK2",
	"Max-Forwards: 69",
	"t: Bob <sip:bob@biloxi.example.com>",
	"Subject: hi",
	"f: Alice <sip:alice@atlanta.example.com>;tag=1928301774",
	"v: SIP/2.0/UDP\r\n pc33.atlanta.example.com;branch=z9hG4bK3;received=192.0.2.1",
	"i: a84b4c76e66710@pc33.atlanta.example.com",
	"CSeq: 314159 INVITE",
	"Timestamp: 54.2 0.5",
	"Contact: <sip:alice@pc33.atlanta.example.com>",
	"Content-Length: 0",
}

// bSet returns bReq with the header named name replaced by line.
func bSet(name, line string) []string {
	h := append([]string(nil), bReq...)
	for i, l := range h {
		if strings.HasPrefix(l, name+":") {
			h[i] = line
		}
	}
	return h
}

// RFC 3261 8.2.6: a response copies every Via in order, From, To (adding the
// UAS tag when there is none), Call-ID and CSeq, and Timestamp in a 100
// (8.2.6.1). Checked on the parsed result: the order of different headers is
// not significant (RFC 3261 7.3.1), the order of the Vias is.
func TestUnitAppendResponse(t *testing.T) {
	f := func(headers []string, code int, reason, toTag, wantTo, wantTag string) {
		t.Helper()
		req := unitParse(t, "INVITE sip:bob@biloxi.example.com SIP/2.0", headers, "")
		out := AppendResponse([]byte("prefix"), req, code, reason, []byte(toTag))
		if !strings.HasPrefix(string(out), "prefix") {
			t.Errorf("AppendResponse overwrote dst: %q", out)
			return
		}
		out = AppendBody(out[len("prefix"):], "", nil)
		var r Message
		if err := r.Parse(out); err != nil {
			t.Errorf("response does not parse: %v\n%s", err, out)
			return
		}
		if err := r.Validate(nil); err != nil {
			t.Errorf("response does not validate: %v\n%s", err, out)
		}
		if !r.IsResponse() || r.StatusCode() != code || string(r.ReasonPhrase()) != reason {
			t.Errorf("status line %d %q, want %d %q", r.StatusCode(), r.ReasonPhrase(), code, reason)
		}
		if r.Count(HeaderVia) != req.Count(HeaderVia) {
			t.Errorf("%d Vias, request had %d\n%s", r.Count(HeaderVia), req.Count(HeaderVia), out)
		}
		for i := 0; i < req.Count(HeaderVia); i++ {
			if string(r.Nth(HeaderVia, i)) != string(req.Nth(HeaderVia, i)) {
				t.Errorf("Via %d: %q, request had %q", i, r.Nth(HeaderVia, i), req.Nth(HeaderVia, i))
			}
		}
		for _, k := range []HeaderKind{HeaderFrom, HeaderCallID, HeaderCSeq} {
			if r.Count(k) != 1 || string(r.Get(k)) != string(req.Get(k)) {
				t.Errorf("%v: %d values, %q; request had %q", k, r.Count(k), r.Get(k), req.Get(k))
			}
		}
		var to Address
		if r.Count(HeaderTo) != 1 || string(r.Get(HeaderTo)) != wantTo || r.To(&to) != nil || string(to.Tag) != wantTag {
			t.Errorf("To %q (tag %q), want %q (tag %q)", r.Get(HeaderTo), to.Tag, wantTo, wantTag)
		}
		wantTS := 0
		if code == 100 {
			wantTS = req.Count(HeaderTimestamp)
		}
		if r.Count(HeaderTimestamp) != wantTS || wantTS > 0 && string(r.Get(HeaderTimestamp)) != string(req.Get(HeaderTimestamp)) {
			t.Errorf("code %d: Timestamp %q x%d, want x%d", code, r.Get(HeaderTimestamp), r.Count(HeaderTimestamp), wantTS)
		}
		if want := r.Count(HeaderVia) + 5 + wantTS; r.NumHeaders() != want { // + From To Call-ID CSeq Content-Length
			t.Errorf("%d headers, want %d\n%s", r.NumHeaders(), want, out)
		}
	}
	const to = "Bob <sip:bob@biloxi.example.com>"
	f(bReq, 180, "Ringing", "a6c85cf", to+";tag=a6c85cf", "a6c85cf")
	f(bReq, 200, "OK", "", to, "")
	f(bReq, 100, "Trying", "", to, "")
	f(bReq, 101, "Dialog Establishment", "x", to+";tag=x", "x") // Timestamp only in a 100
	f(bSet("Timestamp", "X-No-Timestamp: 1"), 100, "Trying", "", to, "")
	// A To that has a tag keeps it and gets no second one.
	f(bSet("t", "t: "+to+";tag=314"), 486, "Busy Here", "a6c85cf", to+";tag=314", "314")
	f(bSet("t", "t: <sip:bob@biloxi.example.com> ; TAG = 314"), 486, "Busy Here", "a6c85cf", "<sip:bob@biloxi.example.com> ; TAG = 314", "314")
	// ";tag=" in a quoted display name or inside the URI is no tag.
	f(bSet("t", `t: "x;tag=1" <sip:bob@biloxi.example.com>`), 180, "Ringing", "a6c85cf", `"x;tag=1" <sip:bob@biloxi.example.com>;tag=a6c85cf`, "a6c85cf")
	f(bSet("t", "t: <sip:bob@biloxi.example.com;tag=1>"), 180, "Ringing", "a6c85cf", "<sip:bob@biloxi.example.com;tag=1>;tag=a6c85cf", "a6c85cf")
}

// Lines that read as the builder writes them, one after another, are
// copied in one piece; the bytes are those of the line-by-line build but
// for the order of From and To, kept as received, and a header name's case
// (RFC 3261 7.3.1: neither is significant).
func TestUnitAppendResponseCopiesLines(t *testing.T) {
	f := func(headers []string, toTag, want string) {
		t.Helper()
		req := unitParse(t, "INVITE sip:b@c SIP/2.0", headers, "")
		got := string(AppendResponse(nil, req, 180, "Ringing", []byte(toTag)))
		if want = "SIP/2.0 180 Ringing\r\n" + want; got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	}
	vias := []string{"Via: SIP/2.0/UDP a;branch=z9hG4bK1", "Via: SIP/2.0/TCP b;branch=z9hG4bK2"}
	h := func(lines ...string) []string {
		return append(append(append([]string(nil), vias...), "Max-Forwards: 70"), lines...)
	}
	const viaOut = "Via: SIP/2.0/UDP a;branch=z9hG4bK1\r\nVia: SIP/2.0/TCP b;branch=z9hG4bK2\r\n"
	const dialog = "From: <sip:a@b>;tag=1\r\nTo: <sip:b@c>;tag=t\r\nCall-ID: x@y\r\nCSeq: 1 INVITE\r\n"
	f(h("From: <sip:a@b>;tag=1", "To: <sip:b@c>", "Call-ID: x@y", "CSeq: 1 INVITE", "Contact: <sip:a@h>"), "t", viaOut+dialog)
	f(h("From: <sip:a@b>;tag=1", "To: <sip:b@c>;tag=2", "Call-ID: x@y", "CSeq: 1 INVITE"), "t",
		viaOut+"From: <sip:a@b>;tag=1\r\nTo: <sip:b@c>;tag=2\r\nCall-ID: x@y\r\nCSeq: 1 INVITE\r\n")
	f(h("To: <sip:b@c>", "From: <sip:a@b>;tag=1", "Call-ID: x@y", "CSeq: 1 INVITE"), "t",
		viaOut+"To: <sip:b@c>;tag=t\r\nFrom: <sip:a@b>;tag=1\r\nCall-ID: x@y\r\nCSeq: 1 INVITE\r\n")
	f(h("From: <sip:a@b>;tag=1", "To: <sip:b@c>", "call-id: x@y", "CSeq: 1 INVITE"), "t",
		viaOut+"From: <sip:a@b>;tag=1\r\nTo: <sip:b@c>;tag=t\r\ncall-id: x@y\r\nCSeq: 1 INVITE\r\n")
	// Values are trimmed when read: one that is not the usual SP and
	// printable text still reads as the builder writes it.
	f(h("To: <sip:b@c>", "From: <sip:a@b>;tag=1", "Call-ID: x@y", "CSeq: \x011 INVITE"), "t",
		viaOut+"To: <sip:b@c>;tag=t\r\nFrom: <sip:a@b>;tag=1\r\nCall-ID: x@y\r\nCSeq: \x011 INVITE\r\n")
	// Lines that do not read so are written one by one, as before.
	f(h("From: <sip:a@b>;tag=1", "To:  <sip:b@c>", "i: x@y", "CSeq: 1 INVITE"), "t", viaOut+dialog)
	f(h("From: <sip:a@b>;tag=1", "To: <sip:b@c>", "Subject: s", "Call-ID: x@y", "CSeq: 1 INVITE"), "t", viaOut+dialog)
	f(h("From: <sip:a@b>;tag=1", "To: <sip:b@c> ", "Call-ID: x@y", "CSeq:1 INVITE"), "t", viaOut+dialog)
	f([]string{"Via: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/TCP b;branch=z9hG4bK2", "From: <sip:a@b>;tag=1", "To: <sip:b@c>",
		"Call-ID: x@y", "CSeq: 1 INVITE"}, "t", viaOut+dialog)
	f([]string{"Via: SIP/2.0/UDP a;branch=z9hG4bK1", "v: SIP/2.0/TCP b;branch=z9hG4bK2", "From: <sip:a@b>;tag=1", "To: <sip:b@c>",
		"Call-ID: x@y", "CSeq: 1 INVITE"}, "t", viaOut+dialog)
	// Vias apart are not a run: what is between them stays out.
	apart := []string{"Via: SIP/2.0/UDP a;branch=z9hG4bK1", "Max-Forwards: 70", "Via: SIP/2.0/TCP b;branch=z9hG4bK2",
		"Via: SIP/2.0/TCP c;branch=z9hG4bK3", "From: <sip:a@b>;tag=1", "To: <sip:b@c>", "Call-ID: x@y", "CSeq: 1 INVITE"}
	const apartOut = viaOut + "Via: SIP/2.0/TCP c;branch=z9hG4bK3\r\n" + dialog
	f(apart, "t", apartOut)
	req := unitParse(t, "INVITE sip:b@c SIP/2.0", apart, "")
	req.SetSource(netip.MustParseAddrPort("192.0.2.9:5060"))
	got := string(AppendResponse(nil, req, 180, "Ringing", []byte("t")))
	if want := "SIP/2.0 180 Ringing\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1;received=192.0.2.9\r\n" + apartOut[len(vias[0])+2:]; got != want {
		t.Errorf("stamped: got\n%s\nwant\n%s", got, want)
	}
}

// viaParams lists the parameters of a Via value as name[=value], received left out.
func viaParams(t *testing.T, via string) (params []string, received string, hasReceived bool) {
	t.Helper()
	var v Via
	if err := ParseVia([]byte(via), &v); err != nil {
		t.Errorf("ParseVia(%q): %v", via, err)
		return nil, "", false
	}
	it := paramIter{b: v.Params}
	for {
		name, value, ok, err := it.next()
		if err != nil || !ok {
			return params, string(v.Received), v.Received != nil
		}
		if strings.EqualFold(string(name), "received") {
			continue
		}
		p := string(name)
		if value != nil {
			p += "=" + string(value)
		}
		params = append(params, p)
	}
}

// RFC 3261 18.2.1 (received) and RFC 3581 4 (rport): AppendVia adds
// received=source when it differs from sent-by or rport is present, fills an
// empty rport with the source port, replaces an existing received, and keeps
// sent-by and every other parameter, in order.
func TestUnitAppendVia(t *testing.T) {
	f := func(via, srcIP string, srcPort int, wantParams, wantReceived string) {
		t.Helper()
		out := string(AppendVia([]byte("x"), []byte(via), netip.AddrPortFrom(netip.MustParseAddr(srcIP), uint16(srcPort))))
		if !strings.HasPrefix(out, "xVia: ") || !strings.HasSuffix(out, "\r\n") {
			t.Errorf("AppendVia(%q) = %q: not a Via line", via, out)
			return
		}
		value := out[len("xVia: ") : len(out)-2]
		var v1, v2 Via
		if ParseVia([]byte(via), &v1) != nil {
			if value != via {
				t.Errorf("AppendVia(%q) = %q: a Via that does not parse must be copied as it is", via, value)
			}
			return
		}
		if err := ParseVia([]byte(value), &v2); err != nil {
			t.Errorf("AppendVia(%q) = %q: %v", via, value, err)
			return
		}
		if string(v1.Transport) != string(v2.Transport) || string(v1.Host) != string(v2.Host) || v1.Port != v2.Port {
			t.Errorf("AppendVia(%q) = %q: sent-protocol or sent-by changed", via, value)
		}
		params, received, has := viaParams(t, value)
		if strings.Join(params, ";") != wantParams || received != wantReceived || has != (wantReceived != "") {
			t.Errorf("AppendVia(%q, %s:%d) = %q\n got params %q received %q\nwant params %q received %q",
				via, srcIP, srcPort, value, strings.Join(params, ";"), received, wantParams, wantReceived)
		}
		if wantReceived == "" && !strings.Contains(via, "eceived") && value != via {
			t.Errorf("AppendVia(%q) = %q: nothing to add, want the value unchanged", via, value)
		}
	}
	// Source equal to sent-by, no rport: nothing to add.
	f("SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK1", "192.0.2.1", 5060, "branch=z9hG4bK1", "")
	f("SIP/2.0/UDP 192.0.2.1:5060", "192.0.2.1", 5060, "", "")
	f("SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1;ttl=1", "192.0.2.1", 7000, "branch=z9hG4bK1;ttl=1", "")
	// Source differs, or sent-by is a name: received is added.
	f("SIP/2.0/UDP 192.0.2.1", "192.0.2.9", 5060, "", "192.0.2.9")
	f("SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK1", "192.0.2.9", 5060, "branch=z9hG4bK1", "192.0.2.9")
	f("SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK1", "192.0.2.1", 5060, "branch=z9hG4bK1", "192.0.2.1")
	f("SIP/2.0/UDP [2001:db8::1]:5060;branch=z9hG4bK1", "2001:db8::2", 5060, "branch=z9hG4bK1", "2001:db8::2")
	// An existing received is replaced, the other parameters kept in order.
	f("SIP/2.0/UDP h;received=10.0.0.1;branch=z9hG4bK1", "192.0.2.2", 5060, "branch=z9hG4bK1", "192.0.2.2")
	f(`SIP/2.0/UDP h;a=1;Received=10.0.0.1;b;c="x;y";branch=z9hG4bK1`, "192.0.2.2", 5060, `a=1;b;c="x;y";branch=z9hG4bK1`, "192.0.2.2")
	// rport without a value gets the source port, and received is added even when the address matches (RFC 3581 4).
	f("SIP/2.0/UDP 10.1.1.1:4540;rport;branch=z9hG4bKkjshdyff", "192.0.2.1", 9988, "rport=9988;branch=z9hG4bKkjshdyff", "192.0.2.1")
	f("SIP/2.0/UDP 192.0.2.1:4540;branch=z9hG4bK1;rport", "192.0.2.1", 4540, "branch=z9hG4bK1;rport=4540", "192.0.2.1")
	f("SIP/2.0/UDP 10.1.1.1;RPORT;branch=z9hG4bK1", "192.0.2.1", 1024, "RPORT=1024;branch=z9hG4bK1", "192.0.2.1")
	// rport with a value is left alone.
	f("SIP/2.0/UDP 10.1.1.1;rport=1234;branch=z9hG4bK1", "192.0.2.1", 9988, "rport=1234;branch=z9hG4bK1", "192.0.2.1")
	// LWS in the value does not lose parameters.
	f("SIP/2.0/UDP h ; branch = z9hG4bK1 ; rport", "192.0.2.1", 5, "branch=z9hG4bK1;rport=5", "192.0.2.1")
	// A Via that does not parse is copied as it is.
	f("garbage", "192.0.2.1", 5060, "", "")
	// An IPv4 source seen on an IPv6 socket is written as IPv4.
	f("SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK1;rport", "::ffff:192.0.2.7", 5062, "branch=z9hG4bK1;rport=5062", "192.0.2.7")
}

// RFC 3261 18.2.1, RFC 3581 4: a response to a request whose source is
// known has its top Via stamped with it; the other Vias and a response to a
// request of unknown source are copied as received.
func TestUnitAppendResponseStampsTopVia(t *testing.T) {
	m := unitParse(t, "OPTIONS sip:bob@biloxi.example.com SIP/2.0", []string{
		"Via: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK1;rport",
		"Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK0;rport",
		"From: <sip:a@b>;tag=1", "To: <sip:bob@biloxi.example.com>", "Call-ID: c", "CSeq: 1 OPTIONS",
	}, "")
	plain := string(AppendResponse(nil, m, 200, "OK", nil))
	if !strings.Contains(plain, "Via: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK1;rport\r\n"+
		"Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK0;rport\r\n") {
		t.Errorf("no source: want the Vias as received, got\n%s", plain)
	}
	m.SetSource(netip.MustParseAddrPort("198.51.100.7:40000"))
	got := string(AppendResponse(nil, m, 200, "OK", nil))
	if !strings.Contains(got, "Via: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK1;rport=40000;received=198.51.100.7\r\n"+
		"Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK0;rport\r\n") {
		t.Errorf("source 198.51.100.7:40000: want the top Via stamped, the next as received, got\n%s", got)
	}
	var r Message
	if err := r.Parse(append([]byte(got), "Content-Length: 0\r\n\r\n"...)); err != nil || r.Count(HeaderVia) != 2 {
		t.Fatalf("the response does not parse with its two Vias: %v\n%s", err, got)
	}
}

// AppendHeaders copies every value but the skipped kinds and Content-Length,
// known kinds under their canonical name, list elements one a line (RFC 3261 7.3.1).
func TestUnitAppendHeaders(t *testing.T) {
	m := unitParse(t, "INVITE sip:bob@biloxi.example.com SIP/2.0", []string{
		"v: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b;branch=z9hG4bK2",
		"Route: <sip:p1;lr>, <sip:p2;lr>",
		"x-custom: 1",
		"f: <sip:a@b>;tag=1",
		"Content-Length: 4",
		"Allow: INVITE, ACK",
		"Record-Route: <sip:p3;lr>",
	}, "body")
	f := func(skip HeaderSet, want string) {
		t.Helper()
		if got := string(AppendHeaders([]byte("x"), m, skip)); got != "x"+want {
			t.Errorf("AppendHeaders(%b):\n got %q\nwant %q", skip, got, "x"+want)
		}
	}
	f(0, "Via: SIP/2.0/UDP a;branch=z9hG4bK1\r\nVia: SIP/2.0/UDP b;branch=z9hG4bK2\r\n"+
		"Route: <sip:p1;lr>\r\nRoute: <sip:p2;lr>\r\nx-custom: 1\r\nFrom: <sip:a@b>;tag=1\r\n"+
		"Allow: INVITE, ACK\r\nRecord-Route: <sip:p3;lr>\r\n")
	f(NewHeaderSet(HeaderVia, HeaderRoute), "x-custom: 1\r\nFrom: <sip:a@b>;tag=1\r\nAllow: INVITE, ACK\r\nRecord-Route: <sip:p3;lr>\r\n")
	f(NewHeaderSet(HeaderOther, HeaderFrom, HeaderAllow), "Via: SIP/2.0/UDP a;branch=z9hG4bK1\r\nVia: SIP/2.0/UDP b;branch=z9hG4bK2\r\n"+
		"Route: <sip:p1;lr>\r\nRoute: <sip:p2;lr>\r\nRecord-Route: <sip:p3;lr>\r\n")
	f(NewHeaderSet(HeaderVia, HeaderRoute, HeaderOther, HeaderFrom, HeaderAllow, HeaderRecordRoute), "")

	kind := func(k HeaderKind, want string) {
		t.Helper()
		if got := string(AppendKind(nil, m, k)); got != want {
			t.Errorf("AppendKind(%v) = %q, want %q", k, got, want)
		}
	}
	kind(HeaderRoute, "Route: <sip:p1;lr>\r\nRoute: <sip:p2;lr>\r\n")
	kind(HeaderRecordRoute, "Record-Route: <sip:p3;lr>\r\n")
	kind(HeaderTo, "")
	kind(HeaderContentLength, "Content-Length: 4\r\n")
}

func TestUnitHeaderSet(t *testing.T) {
	s := NewHeaderSet(HeaderVia, HeaderDiversion, HeaderOther)
	f := func(k HeaderKind, want bool) {
		t.Helper()
		if s.Has(k) != want {
			t.Errorf("Has(%v) = %v, want %v", k, !want, want)
		}
	}
	f(HeaderVia, true)
	f(HeaderDiversion, true)
	f(HeaderOther, true)
	f(HeaderFrom, false)
	f(HeaderPath, false)
	if NewHeaderSet() != 0 {
		t.Error("empty set")
	}
}

// The line builders, and a request built from them parses and validates.
func TestUnitBuildLines(t *testing.T) {
	f := func(got []byte, want string) {
		t.Helper()
		if string(got) != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	f(AppendRequestLine([]byte("x"), "INVITE", []byte("sip:a@b")), "xINVITE sip:a@b SIP/2.0\r\n")
	f(AppendStatusLine(nil, 180, "Ringing"), "SIP/2.0 180 Ringing\r\n")
	f(AppendStatusLine(nil, 100, ""), "SIP/2.0 100 \r\n")
	f(AppendHeader(nil, "Subject", []byte("hi")), "Subject: hi\r\n")
	f(AppendHeaderString(nil, "Subject", "hi"), "Subject: hi\r\n")
	f(AppendHeaderUint(nil, "Max-Forwards", 70), "Max-Forwards: 70\r\n")
	f(AppendHeaderUint(nil, "CSeq-Num", 4294967295), "CSeq-Num: 4294967295\r\n")
	f(AppendBody(nil, "", nil), "Content-Length: 0\r\n\r\n")
	f(AppendBody(nil, "text/plain", []byte("hello")), "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")

	start := func(in, want string) {
		t.Helper()
		var m Message
		if err := m.Parse([]byte(in)); err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			return
		}
		f(AppendStartLine(nil, &m), want)
	}
	start("INVITE sip:a@b SIP/2.0\r\n\r\n", "INVITE sip:a@b SIP/2.0\r\n")
	start("NEWMETHOD sip:a@b sip/2.0\r\n\r\n", "NEWMETHOD sip:a@b SIP/2.0\r\n")
	start("SIP/2.0 183 Session Progress\r\n\r\n", "SIP/2.0 183 Session Progress\r\n")
	start("SIP/2.0 100\r\n\r\n", "SIP/2.0 100 \r\n")

	b := AppendRequestLine(nil, "OPTIONS", []byte("sip:bob@biloxi.example.com"))
	for _, h := range vSet("CSeq", "CSeq: 1 OPTIONS") {
		i := strings.IndexByte(h, ':')
		b = AppendHeaderString(b, h[:i], strings.TrimSpace(h[i+1:]))
	}
	b = AppendBody(b, "application/sdp", []byte("v=0\r\n"))
	var m Message
	if err := m.Parse(b); err != nil {
		t.Fatalf("built request does not parse: %v\n%s", err, b)
	}
	if err := m.Validate(nil); err != nil {
		t.Errorf("built request does not validate: %v\n%s", err, b)
	}
	if string(m.Body()) != "v=0\r\n" || m.ContentLength() != 5 || string(m.ContentType()) != "application/sdp" {
		t.Errorf("built request: body %q CL %d type %q", m.Body(), m.ContentLength(), m.ContentType())
	}
}

func TestUnitAppendUint(t *testing.T) {
	for _, v := range []uint64{0, 1, 9, 10, 42, 99, 100, 180, 487, 999, 1000, 65535, 1<<64 - 1} {
		if got, want := string(appendUint([]byte("x"), v)), "x"+strconv.FormatUint(v, 10); got != want {
			t.Errorf("appendUint(%d) = %q, want %q", v, got, want)
		}
	}
}
