package fuzz

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/sipedge/sipedge/parser"
)

// The targets keep their scratch state in package variables so that an
// execution allocates little: go test runs seeds one after the other and a
// fuzz worker calls the target serially, so nothing here runs concurrently.

// numKinds is the number of HeaderKind values, found by probing
// HeaderKind.String (which indexes a table of exactly that size) so that
// kinds added later are covered too.
var numKinds = func() int {
	n := 1
	for ; n < 64; n++ {
		if !kindExists(parser.HeaderKind(n)) {
			break
		}
	}
	return n
}()

func kindExists(k parser.HeaderKind) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = k.String()
	return true
}

// within reports whether view lies inside buf, by address. An empty view
// carries no bytes and may legitimately point anywhere (Go keeps b[i:i:i]
// at the base of b), so it is always within.
func within(buf, view []byte) bool {
	if len(view) == 0 {
		return true
	}
	if len(view) > len(buf) {
		return false
	}
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	v := uintptr(unsafe.Pointer(unsafe.SliceData(view)))
	return v >= b && v-b <= uintptr(len(buf)-len(view))
}

// offset returns where the non-empty view starts in buf, -1 for an empty view.
func offset(buf, view []byte) int {
	if len(view) == 0 {
		return -1
	}
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(view))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

// same reports whether a and b are the same view (or both empty).
func same(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b)
}

// sipError checks that err is one of the parser's errors, with a status code
// a request can be answered with.
func sipError(t *testing.T, what string, err error) *parser.Error {
	e, ok := err.(*parser.Error)
	if !ok {
		t.Fatalf("%s: error %T %v is not a *parser.Error", what, err, err)
	}
	if e.Code < 400 || e.Code > 699 || e.Reason == "" {
		t.Fatalf("%s: error %q has code %d, want 400..699 and a reason", what, e.Reason, e.Code)
	}
	return e
}

// digest appends what a parse produced, views as offsets into buf, so that
// two parses of buf can be compared without allocating.
func digest(d []int, buf []byte, m *parser.Message, err error) []int {
	resp := 0
	if m.IsResponse() {
		resp = 1
	}
	d = append(d, resp)
	if err != nil {
		return d // the rest of a failed Message is unspecified
	}
	view := func(d []int, v []byte) []int { return append(d, offset(buf, v), len(v)) }
	d = append(d, int(m.Method()), m.StatusCode(), m.ContentLength(), m.NumHeaders())
	d = view(d, m.MethodBytes())
	d = view(d, m.RequestURI())
	d = view(d, m.ReasonPhrase())
	d = view(d, m.Body())
	d = view(d, m.Bytes())
	for i := 0; i < m.NumHeaders(); i++ {
		h := m.HeaderAt(i)
		d = append(d, int(h.Kind))
		d = view(d, h.Name)
		d = view(d, h.Value)
	}
	for k := 0; k < numKinds; k++ {
		d = append(d, m.Count(parser.HeaderKind(k)))
	}
	return d
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// addFileSeeds adds the RFC 4475 torture messages and the benchmark
// messages of the parser package.
func addFileSeeds(f *testing.F) {
	n := 0
	for _, pattern := range []string{"../parser/testdata/rfc4475/*.dat", "../parser/testdata/bench/*.sip"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			f.Add(readFile(f, file))
			n++
		}
	}
	if n == 0 {
		f.Fatal("no seed files under ../parser/testdata")
	}
}

// Hand-written seeds for corners the files do not reach.
var extraSeeds = []string{
	"",
	"\r\n",
	"\r\n\r\n",
	"\r\n\r\nOPTIONS sip:a@b SIP/2.0\r\nContent-Length: 0\r\n\r\n",
	"SIP/2.0 200\r\nv: SIP/2.0/TCP h\r\nf: <sip:a@b>;tag=1\r\nt: sip:c@d\r\ni: x\r\nCSeq: 1 BYE\r\nl: 0\r\n\r\n",
	"INVITE sip:bob@biloxi.example.com SIP/2.0\r\nVia: SIP/2.0/TCP client.atlanta.example.com:5060;branch=z9hG4bK74bf9\r\n" +
		"Max-Forwards: 70\r\nFrom: Alice <sip:alice@atlanta.example.com>;tag=9fxced76sl\r\nTo: Bob <sip:bob@biloxi.example.com>\r\n" +
		"Call-ID: 3848276298220188511@atlanta.example.com\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@client.atlanta.example.com;transport=tcp>\r\n" +
		"Require: foo, bar\r\nProxy-Require: baz\r\nSupported: 100rel\r\nContent-Length: 0\r\n\r\n",
	"REGISTER sip:r SIP/2.0\r\nVia: SIP/2.0/UDP [::1]:5060;rport;branch=z9hG4bKx, SIP/2.0/TCP h;received=1.2.3.4\r\n" +
		"From: \"A \\\"q\\\"\" <sip:%61lice:pw@h;transport=tcp;lr?x=y>;tag=a\r\nTo: tel:+1-555;phone-context=x\r\n" +
		"Call-ID: c@h\r\nCSeq: 7 REGISTER\r\nContact: <sip:b@h>;expires=60, sip:c@h;q=0.5\r\n" +
		"Route: <sip:p1;lr>,<sip:p2;lr>\r\nRecord-Route: <sip:rr;lr>\r\nP-Asserted-Identity: <sip:pai@h>\r\n" +
		"P-Preferred-Identity: <sip:ppi@h>\r\nMax-Forwards: 70\r\nExpires: 3600\r\nRetry-After: 18 (soon) ;duration=60\r\n" +
		"Privacy: id; header\r\nReason: SIP ;cause=200 ;text=\"Call completed\", Q.850;cause=16\r\n" +
		"Require: 100rel, timer\r\nProxy-Require: foo\r\nSupported: a,,b\r\nAllow: INVITE, ACK\r\n" +
		"X-Custom: one\r\nx-custom: two\r\nSubject: folded\r\n  line\r\nContent-Type: text/plain;charset=utf-8\r\nContent-Length: 4\r\n\r\nbodyTRAILING",
}

func addExtraSeeds(f *testing.F) {
	for _, s := range extraSeeds {
		f.Add([]byte(s))
	}
}

// dirtyMessages are parsed into a reused Message before the input, so that
// state left over from a different message would show.
var dirtyMessages = [...][]byte{
	[]byte("SIP/2.0 486 Busy Here\r\nv: SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b\r\nf: <sip:a@b>;tag=1\r\n" +
		"t: <sip:c@d>;tag=2\r\ni: dirty@x\r\nCSeq: 99 INVITE\r\nm: <sip:x@y>, <sip:z@w>\r\nRetry-After: 5\r\n" +
		"Reason: SIP;cause=486\r\nRequire: a, b\r\nX-A: 1\r\nX-B: 2\r\nl: 5\r\nc: text/plain\r\n\r\nhello"),
	[]byte("\r\nFOO sip:x SIP/2.0\r\nRoute: <sip:r1>, <sip:r2>, <sip:r3>\r\nExpires: 10\r\nPrivacy: none\r\n" +
		"Max-Forwards: 1\r\nSupported: x\r\nContent-Length: 3\r\n\r\nabc"),
}

// smallLimits are tighter than parser.DefaultLimits in every field, so a
// message they accept the defaults must accept identically.
var smallLimits = parser.Limits{MaxMessageSize: 600, MaxHeaders: 12, MaxHeaderLine: 80, MaxVias: 2, MaxURILength: 24}

var parseState struct {
	fresh, dirty parser.Message
	d1, d2       []int
	orig         []byte
	scratch      []byte
}

// FuzzParse parses arbitrary bytes and runs Validate and every accessor on
// what parses, checking that nothing panics, that every view lies in the
// input, that errors are *parser.Error, and that reusing a Message changes
// nothing.
func FuzzParse(f *testing.F) {
	addFileSeeds(f)
	addExtraSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &parseState
		st.orig = append(st.orig[:0], data...)

		m := &st.fresh
		err := m.Parse(data)
		st.d1 = digest(st.d1[:0], data, m, err)

		// The same input into a Message that just held another message.
		dirty := &st.dirty
		_ = dirty.Parse(dirtyMessages[len(data)%len(dirtyMessages)])
		err2 := dirty.Parse(data)
		st.d2 = digest(st.d2[:0], data, dirty, err2)
		if err2 != err || !equalInts(st.d1, st.d2) {
			t.Fatalf("parse into a reused Message differs:\n fresh %v %v\n reused %v %v", err, st.d1, err2, st.d2)
		}

		// Tighter limits accept a subset, identically.
		if errS := dirty.ParseLimits(data, &smallLimits); errS != nil {
			sipError(t, "ParseLimits(small)", errS)
		} else {
			st.d2 = digest(st.d2[:0], data, dirty, errS)
			if err != nil || !equalInts(st.d1, st.d2) {
				t.Fatalf("small limits accept what default limits reject (%v), or differently", err)
			}
			checkWithin(t, dirty, &smallLimits)
		}

		if err != nil {
			checkParseError(t, data, m, err)
		} else {
			checkMessage(t, data, m)
		}

		// Parsing again into the same Message, after all the accessors ran.
		err3 := m.Parse(data)
		st.d2 = digest(st.d2[:0], data, m, err3)
		if err3 != err || !equalInts(st.d1, st.d2) {
			t.Fatalf("second parse into the same Message differs:\n first %v %v\n second %v %v", err, st.d1, err3, st.d2)
		}
		if !bytes.Equal(st.orig, data) {
			t.Fatalf("the input buffer was modified")
		}
	})
}

// startsLikeResponse reports whether buf, after the CRLFs Parse skips
// (RFC 3261 7.5), starts with a status line's "SIP/" (any case, RFC 3261 7.1).
func startsLikeResponse(buf []byte) bool {
	for len(buf) >= 2 && buf[0] == '\r' && buf[1] == '\n' {
		buf = buf[2:]
	}
	return len(buf) >= 4 && bytes.EqualFold(buf[:4], []byte("SIP/"))
}

func checkParseError(t *testing.T, data []byte, m *parser.Message, err error) {
	e := sipError(t, "Parse", err)
	code, reason, drop := parser.Answer(m, err)
	if m.IsResponse() {
		if !drop || code != 0 {
			t.Fatalf("Answer for a response: %d %q drop=%v, want dropped", code, reason, drop)
		}
	} else if ack := m.IsAck(); drop != ack || code != e.Code || reason != e.Reason {
		// An ACK is never answered (RFC 3261 17.1.1.3, 13.2.2.4).
		t.Fatalf("Answer for a request (ACK %v): %d %q drop=%v, want %d %q drop=%v", ack, code, reason, drop, e.Code, e.Reason, ack)
	}
	if startsLikeResponse(data) && !drop {
		t.Fatalf("a response (%q) failing Parse with %v would be answered %d, not dropped (RFC 3261 18.1.2)",
			trunc(data), err, code)
	}
}

// checkWithin fails the test when a message Parse accepted breaks one of
// the limits it was parsed with.
func checkWithin(t *testing.T, m *parser.Message, lim *parser.Limits) {
	if n := len(m.Bytes()); n > lim.MaxMessageSize {
		t.Fatalf("accepted %d bytes, limit %d", n, lim.MaxMessageSize)
	}
	if n := m.NumHeaders(); n > lim.MaxHeaders {
		t.Fatalf("accepted %d header values, limit %d", n, lim.MaxHeaders)
	}
	if n := m.Count(parser.HeaderVia); n > lim.MaxVias {
		t.Fatalf("accepted %d Via values, limit %d", n, lim.MaxVias)
	}
	if n := len(m.RequestURI()); n > lim.MaxURILength {
		t.Fatalf("accepted a %d-byte Request-URI, limit %d", n, lim.MaxURILength)
	}
	for i := range m.NumHeaders() {
		if h := m.HeaderAt(i); len(h.Value) > lim.MaxHeaderLine {
			t.Fatalf("accepted a %d-byte %s value, limit %d on the line", len(h.Value), h.Name, lim.MaxHeaderLine)
		}
	}
}

func trunc(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}

// in fails the test when a view lies outside the input.
func in(t *testing.T, data []byte, what string, views ...[]byte) {
	for i, v := range views {
		if !within(data, v) {
			t.Fatalf("%s: view %d (%q) lies outside the input", what, i, trunc(v))
		}
	}
}

func isLWSByte(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func trimmed(v []byte) bool {
	return len(v) == 0 || !isLWSByte(v[0]) && !isLWSByte(v[len(v)-1])
}

// addressKinds are read with Message.Address.
var addressKinds = [...]parser.HeaderKind{parser.HeaderFrom, parser.HeaderTo, parser.HeaderContact,
	parser.HeaderRoute, parser.HeaderRecordRoute, parser.HeaderPAssertedIdentity,
	parser.HeaderPPreferredIdentity, parser.HeaderReferTo, parser.HeaderReferredBy,
	parser.HeaderPath, parser.HeaderDiversion}

func checkMessage(t *testing.T, data []byte, m *parser.Message) {
	// The message as parsed is a prefix of the input, the body its tail.
	msg := m.Bytes()
	if len(msg) == 0 || unsafe.SliceData(msg) != unsafe.SliceData(data) || len(msg) > len(data) {
		t.Fatalf("Bytes() is not a non-empty prefix of the input")
	}
	body := m.Body()
	in(t, msg, "Body", body)
	if len(body) > 0 && offset(msg, body)+len(body) != len(msg) {
		t.Fatalf("Body() does not end the message")
	}
	if cl := m.ContentLength(); cl >= 0 {
		if len(body) != cl {
			t.Fatalf("len(Body()) = %d, Content-Length %d", len(body), cl)
		}
	} else if len(msg) != len(data) {
		t.Fatalf("no Content-Length, yet %d bytes of %d parsed", len(msg), len(data))
	}

	// Start line.
	in(t, msg, "start line", m.MethodBytes(), m.RequestURI(), m.ReasonPhrase())
	if m.IsResponse() != startsLikeResponse(data) {
		t.Fatalf("IsResponse() = %v for a start line %q", m.IsResponse(), trunc(data))
	}
	if m.IsResponse() {
		if c := m.StatusCode(); c < 100 || c > 699 || len(m.MethodBytes()) != 0 || m.Method() != parser.MethodOther {
			t.Fatalf("response: status %d, method %q", c, m.MethodBytes())
		}
	} else {
		if m.StatusCode() != 0 || len(m.MethodBytes()) == 0 || len(m.RequestURI()) == 0 {
			t.Fatalf("request: status %d, method %q, URI %q", m.StatusCode(), m.MethodBytes(), m.RequestURI())
		}
		if m.Method() != parser.LookupMethod(m.MethodBytes()) {
			t.Fatalf("Method() %v for %q", m.Method(), m.MethodBytes())
		}
		var u parser.URI
		if err := parser.ParseURI(m.RequestURI(), &u); err != nil {
			sipError(t, "ParseURI(Request-URI)", err)
		} else {
			checkURI(t, msg, "Request-URI", &u)
		}
	}

	// Headers in wire order against Count, Nth and Get.
	var counts [64]int
	others := 0
	for i := 0; i < m.NumHeaders(); i++ {
		h := m.HeaderAt(i)
		in(t, msg, "HeaderAt", h.Name, h.Value)
		if len(h.Name) == 0 || parser.LookupHeader(h.Name) != h.Kind {
			t.Fatalf("header %d: name %q has kind %v, LookupHeader says %v", i, h.Name, h.Kind, parser.LookupHeader(h.Name))
		}
		if !trimmed(h.Value) {
			t.Fatalf("header %d (%s): value %q not trimmed", i, h.Name, trunc(h.Value))
		}
		if nth := m.Nth(h.Kind, counts[h.Kind]); !same(nth, h.Value) || nth == nil {
			t.Fatalf("header %d: Nth(%v, %d) = %q, HeaderAt %q", i, h.Kind, counts[h.Kind], nth, h.Value)
		}
		counts[h.Kind]++
		checkList(t, msg, h.Value)
		if h.Kind == parser.HeaderOther && others < 4 {
			others++
			checkGetByName(t, m, h.Name)
		}
	}
	for k := 0; k < numKinds; k++ {
		kind := parser.HeaderKind(k)
		if m.Count(kind) != counts[k] {
			t.Fatalf("Count(%v) = %d, %d in HeaderAt", kind, m.Count(kind), counts[k])
		}
		if m.Nth(kind, counts[k]) != nil {
			t.Fatalf("Nth(%v, Count) not nil", kind)
		}
		if !same(m.Get(kind), m.Nth(kind, 0)) {
			t.Fatalf("Get(%v) != Nth(%v, 0)", kind, kind)
		}
		if k > 0 && !same(m.GetByName(kind.String()), m.Get(kind)) {
			t.Fatalf("GetByName(%q) != Get", kind.String())
		}
	}
	if !same(m.GetByName("v"), m.Get(parser.HeaderVia)) || !same(m.GetByName("l"), m.Get(parser.HeaderContentLength)) {
		t.Fatalf("GetByName of a compact name != Get")
	}

	checkAccessors(t, msg, m)
	checkValidate(t, msg, m)

	if m.ContentLength() >= 0 {
		// Bytes past Content-Length do not matter.
		st := &parseState
		err := st.dirty.Parse(msg)
		st.d2 = digest(st.d2[:0], data, &st.dirty, err)
		if err != nil || !equalInts(st.d1, st.d2) {
			t.Fatalf("the message without the bytes past Content-Length parses differently: %v", err)
		}
		// A stream reader frames it where Parse ends it.
		if msg[0] != '\r' {
			kind, n, err := parser.Frame(data, parser.DefaultLimits.MaxMessageSize)
			if kind != parser.FrameMessage || n != len(msg) || err != nil {
				t.Fatalf("Parse ends the message after %d bytes (Content-Length %d), Frame says %v %d %v",
					len(msg), m.ContentLength(), kind, n, err)
			}
		}
	}
}

// hasBadURI reports whether a URI Validate checks fails ParseURI, or the
// Request-URI carries headers. Contact: * has no URI to check.
func hasBadURI(m *parser.Message) bool {
	var (
		a parser.Address
		u parser.URI
	)
	for _, kind := range addressKinds[:7] {
		for i := 0; i < m.Count(kind); i++ {
			if m.Address(kind, i, &a) == nil && !a.Star && a.ParseURI(&u) != nil {
				return true
			}
		}
	}
	return m.IsRequest() && (parser.ParseURI(m.RequestURI(), &u) != nil || u.Headers != nil)
}

// checkList walks a value as a token list with NextListItem.
func checkList(t *testing.T, msg, v []byte) {
	n, max := 0, len(v)+1
	for item, rest := parser.NextListItem(v); item != nil || rest != nil; item, rest = parser.NextListItem(rest) {
		if n++; n > max {
			t.Fatalf("NextListItem does not end on %q", trunc(v))
		}
		in(t, v, "NextListItem", item, rest)
		in(t, msg, "NextListItem", item, rest)
		if !trimmed(item) {
			t.Fatalf("NextListItem item %q not trimmed", item)
		}
		if rest != nil && len(rest) >= len(v) {
			t.Fatalf("NextListItem makes no progress on %q", trunc(v))
		}
		v = rest
	}
}

func checkGetByName(t *testing.T, m *parser.Message, name []byte) {
	got := m.GetByName(string(name))
	for i := 0; i < m.NumHeaders(); i++ {
		if h := m.HeaderAt(i); h.Kind == parser.HeaderOther && bytes.EqualFold(h.Name, name) {
			if !same(got, h.Value) || got == nil {
				t.Fatalf("GetByName(%q) = %q, first such header %q", name, got, h.Value)
			}
			return
		}
	}
	t.Fatalf("GetByName(%q): header not found", name)
}

func checkURI(t *testing.T, msg []byte, what string, u *parser.URI) {
	in(t, msg, what, u.SchemeRaw, u.User, u.Password, u.Host, u.Params, u.Headers, u.Opaque)
	if u.Port < 0 || u.Port > 65535 {
		t.Fatalf("%s: port %d", what, u.Port)
	}
	for _, p := range [...]string{"transport", "lr", "user", "maddr", "method", "ttl"} {
		v, ok := u.Param(p)
		in(t, u.Params, what+" Param "+p, v)
		if !ok && v != nil {
			t.Fatalf("%s: Param(%q) absent with value %q", what, p, v)
		}
	}
	for _, b := range [...][]byte{u.User, u.Password} {
		st := &parseState
		st.scratch = parser.Unescape(st.scratch[:0], b)
		if len(st.scratch) > len(b) || bytes.IndexByte(b, '%') < 0 && !bytes.Equal(st.scratch, b) {
			t.Fatalf("%s: Unescape(%q) = %q", what, b, st.scratch)
		}
	}
}

func checkAddress(t *testing.T, msg []byte, what string, a *parser.Address) {
	in(t, msg, what, a.Display, a.URI, a.Params, a.Tag)
	if a.Star {
		return
	}
	var u parser.URI
	if err := a.ParseURI(&u); err != nil {
		sipError(t, what+" ParseURI", err)
	} else {
		checkURI(t, msg, what, &u)
	}
	if a.Tag != nil {
		// checkParams (which found Tag) and Param (paramLookup) must agree.
		if v, ok := a.Param("tag"); !ok || !same(v, a.Tag) {
			t.Fatalf("%s: Tag %q but Param(\"tag\") = %q, %v (params %q)", what, a.Tag, v, ok, a.Params)
		}
	}
	for _, p := range [...]string{"expires", "q", "lr"} {
		v, _ := a.Param(p)
		in(t, a.Params, what+" Param "+p, v)
	}
}

func checkAccessors(t *testing.T, msg []byte, m *parser.Message) {
	var v, top parser.Via
	for i := 0; i <= m.Count(parser.HeaderVia); i++ {
		err := m.Via(i, &v)
		if i == m.Count(parser.HeaderVia) {
			if err != parser.ErrMissingVia {
				t.Fatalf("Via(Count) = %v", err)
			}
			break
		}
		if err != nil {
			sipError(t, "Via", err)
			continue
		}
		in(t, msg, "Via", v.Transport, v.Host, v.Params, v.Branch, v.Received, v.Maddr, v.RPort)
		if v.Port < 0 || v.Port > 65535 || len(v.Transport) == 0 || len(v.Host) == 0 {
			t.Fatalf("Via %d: transport %q host %q port %d", i, v.Transport, v.Host, v.Port)
		}
		_ = v.IsRFC3261Branch()
		if i == 0 {
			if err := m.TopVia(&top); err != nil || !same(top.Branch, v.Branch) || !same(top.Host, v.Host) {
				t.Fatalf("TopVia differs from Via(0): %v", err)
			}
		}
	}

	var a parser.Address
	if err := m.From(&a); err == nil {
		checkAddress(t, msg, "From", &a)
	} else {
		sipError(t, "From", err)
	}
	if err := m.To(&a); err == nil {
		checkAddress(t, msg, "To", &a)
	} else {
		sipError(t, "To", err)
	}
	for i := 0; i < m.Count(parser.HeaderContact); i++ {
		if err := m.Contact(i, &a); err == nil {
			checkAddress(t, msg, "Contact", &a)
		} else {
			sipError(t, "Contact", err)
		}
	}
	for _, kind := range addressKinds {
		for i := 0; i <= m.Count(kind); i++ {
			err := m.Address(kind, i, &a)
			switch {
			case i == m.Count(kind):
				if err != parser.ErrNoHeader {
					t.Fatalf("Address(%v, Count) = %v", kind, err)
				}
			case err == nil:
				checkAddress(t, msg, kind.String(), &a)
			default:
				sipError(t, kind.String(), err)
			}
		}
	}

	if c, err := m.CSeq(); err == nil {
		in(t, msg, "CSeq", c.MethodRaw)
		if len(c.MethodRaw) == 0 || c.Method != parser.LookupMethod(c.MethodRaw) {
			t.Fatalf("CSeq method %q / %v", c.MethodRaw, c.Method)
		}
	} else {
		sipError(t, "CSeq", err)
	}
	if n, present, err := m.MaxForwards(); err != nil {
		sipError(t, "MaxForwards", err)
	} else if n < 0 || n > 255 || present != (m.Count(parser.HeaderMaxForwards) > 0) {
		t.Fatalf("MaxForwards %d present=%v", n, present)
	}
	if _, present, err := m.Expires(); err != nil {
		sipError(t, "Expires", err)
	} else if present != (m.Count(parser.HeaderExpires) > 0) {
		t.Fatalf("Expires present=%v", present)
	}
	if r, _, err := m.RetryAfter(); err != nil {
		sipError(t, "RetryAfter", err)
	} else {
		in(t, msg, "RetryAfter", r.Comment, r.Params)
	}
	if _, err := m.Privacy(); err != nil {
		sipError(t, "Privacy", err)
	}
	for i := 0; i <= m.Count(parser.HeaderReason); i++ {
		r, err := m.Reason(i)
		switch {
		case i == m.Count(parser.HeaderReason):
			if err != parser.ErrNoHeader {
				t.Fatalf("Reason(Count) = %v", err)
			}
		case err == nil:
			in(t, msg, "Reason", r.Protocol, r.Text, r.Params)
			if r.Cause < -1 || r.Cause > 65535 {
				t.Fatalf("Reason cause %d", r.Cause)
			}
		default:
			sipError(t, "Reason", err)
		}
	}
	in(t, msg, "ContentType", m.ContentType())
	if !same(m.CallID(), m.Get(parser.HeaderCallID)) {
		t.Fatalf("CallID() != Get(HeaderCallID)")
	}
	_ = m.HasOptionTag(parser.HeaderRequire, "100rel")
}

func checkValidate(t *testing.T, msg []byte, m *parser.Message) {
	st := &parseState
	st.scratch = parser.AppendUnsupported(st.scratch[:0], m, nil)
	unsupported := len(st.scratch) > 0
	err := m.Validate(nil)
	if err != nil {
		e := sipError(t, "Validate", err)
		code, _, drop := parser.Answer(m, err)
		// Responses and ACKs are never answered (RFC 3261 18.1.2, 17.1.1.3).
		if unanswerable := m.IsResponse() || m.Method() == parser.MethodAck; drop != unanswerable || !drop && code != e.Code {
			t.Fatalf("Answer(%v) = %d drop=%v for a response=%v, method %s", err, code, drop, m.IsResponse(), m.MethodBytes())
		}
		if err == parser.ErrBadExtension {
			// The value of the 420's Unsupported: option-tag *(COMMA option-tag).
			if !unsupported {
				t.Fatalf("Validate says 420 Bad Extension, AppendUnsupported lists nothing")
			}
			for tag, rest := parser.NextListItem(st.scratch); tag != nil || rest != nil; tag, rest = parser.NextListItem(rest) {
				if len(tag) == 0 {
					t.Fatalf("AppendUnsupported lists an empty option tag: %q", st.scratch)
				}
			}
		}
		if err == parser.ErrBadURI && !hasBadURI(m) {
			t.Fatalf("Validate says Bad URI, yet the Request-URI and every address URI parse")
		}
		return
	}
	// What Validate passed, the accessors read without error.
	var (
		a parser.Address
		u parser.URI
		v parser.Via
	)
	if m.TopVia(&v) != nil {
		t.Fatalf("Validate passed; the top Via fails")
	}
	for _, kind := range addressKinds[:7] {
		if kind <= parser.HeaderTo && m.Count(kind) != 1 {
			t.Fatalf("Validate passed with %d %v", m.Count(kind), kind)
		}
		for i := 0; i < m.Count(kind); i++ {
			if err := m.Address(kind, i, &a); err != nil {
				t.Fatalf("Validate passed; %v %d fails: %v", kind, i, err)
			}
			// A response's From and To URIs are its request's echoed,
			// never read, and Validate leaves them unparsed.
			echoed := m.IsResponse() && (kind == parser.HeaderFrom || kind == parser.HeaderTo)
			if err := a.ParseURI(&u); !a.Star && !echoed && err != nil {
				t.Fatalf("Validate passed; the URI of %v %d fails: %v", kind, i, err)
			}
		}
	}
	c, err := m.CSeq()
	if err != nil {
		t.Fatalf("Validate passed; CSeq fails: %v", err)
	}
	if _, _, err := m.MaxForwards(); err != nil {
		t.Fatalf("Validate passed; Max-Forwards fails: %v", err)
	}
	if _, _, err := m.Expires(); err != nil {
		t.Fatalf("Validate passed; Expires fails: %v", err)
	}
	if m.IsResponse() {
		if !utf8.Valid(m.ReasonPhrase()) {
			t.Fatalf("Validate passed a reason phrase that is not UTF-8")
		}
		return
	}
	if !bytes.Equal(c.MethodRaw, m.MethodBytes()) {
		t.Fatalf("Validate passed; CSeq method %q, request method %q", c.MethodRaw, m.MethodBytes())
	}
	if err := parser.ParseURI(m.RequestURI(), &u); err != nil || u.Scheme == parser.SchemeOther {
		t.Fatalf("Validate passed; Request-URI %q: %v scheme %v", m.RequestURI(), err, u.Scheme)
	}
	if unsupported && m.Method() != parser.MethodAck && m.Method() != parser.MethodCancel {
		t.Fatalf("Validate(nil) passed, AppendUnsupported(nil) lists %q", st.scratch)
	}
}

func readFile(f *testing.F, name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// supportedTags are the option tags FuzzRoundTrip's Validate accepts, as
// the conformance test does, so that messages with Require still qualify.
var supportedTags = []string{"100rel", "timer", "replaces"}

// rebuildLimits parse rebuilt messages. Rebuilding writes canonical names
// ("Via" for "v"), one line per list element and a Content-Length, so a
// message at a default limit may grow past it; the round trip checks the
// builder, not the limits.
var rebuildLimits = parser.Limits{
	MaxMessageSize: 1 << 20,
	MaxHeaders:     parser.DefaultLimits.MaxHeaders + 1,
	MaxHeaderLine:  1 << 20,
	MaxVias:        parser.DefaultLimits.MaxVias,
	MaxURILength:   parser.DefaultLimits.MaxURILength,
}

var roundTripState struct {
	m1, m2, m3, r parser.Message
	b1, b2, resp  []byte
}

// rebuild appends m as AppendStartLine, AppendHeaders and AppendBody write it.
func rebuild(dst []byte, m *parser.Message) []byte {
	dst = parser.AppendStartLine(dst, m)
	dst = parser.AppendHeaders(dst, m, 0)
	return parser.AppendBody(dst, "", m.Body())
}

// FuzzRoundTrip rebuilds every message that parses and validates and checks
// that the rebuilt message parses to the same start line, headers and body,
// that rebuilding is a fixed point after one step, and that a response built
// for a request parses with its Call-ID and CSeq.
func FuzzRoundTrip(f *testing.F) {
	addFileSeeds(f)
	addExtraSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &roundTripState
		m1, m2, m3 := &st.m1, &st.m2, &st.m3
		if m1.Parse(data) != nil || m1.Validate(supportedTags) != nil {
			return
		}
		st.b1 = rebuild(st.b1[:0], m1)
		if err := m2.ParseLimits(st.b1, &rebuildLimits); err != nil {
			t.Fatalf("rebuilt message does not parse: %v\n%q", err, st.b1)
		}
		sameMessage(t, m1, m2, st.b1)
		st.b2 = rebuild(st.b2[:0], m2)
		if !bytes.Equal(st.b1, st.b2) {
			t.Fatalf("rebuilding is not a fixed point:\nfirst  %q\nsecond %q", st.b1, st.b2)
		}
		if err := m3.ParseLimits(st.b2, &rebuildLimits); err != nil {
			t.Fatalf("second rebuild does not parse: %v", err)
		}
		sameMessage(t, m2, m3, st.b2)
		if m1.IsRequest() {
			checkResponse(t, m1)
		}
	})
}

// sameMessage compares the start line, the headers but Content-Length
// (kind, value, and the name of unknown headers) and the body of a and b.
func sameMessage(t *testing.T, a, b *parser.Message, rebuilt []byte) {
	t.Helper()
	if a.IsResponse() != b.IsResponse() || a.StatusCode() != b.StatusCode() ||
		!bytes.Equal(a.MethodBytes(), b.MethodBytes()) || !bytes.Equal(a.RequestURI(), b.RequestURI()) ||
		!bytes.Equal(a.ReasonPhrase(), b.ReasonPhrase()) {
		t.Fatalf("start line differs after rebuilding: %q %q %d %q vs %q %q %d %q\n%q",
			a.MethodBytes(), a.RequestURI(), a.StatusCode(), a.ReasonPhrase(),
			b.MethodBytes(), b.RequestURI(), b.StatusCode(), b.ReasonPhrase(), rebuilt)
	}
	if !bytes.Equal(a.Body(), b.Body()) {
		t.Fatalf("body differs after rebuilding: %q vs %q", trunc(a.Body()), trunc(b.Body()))
	}
	i, j := 0, 0
	for {
		for i < a.NumHeaders() && a.HeaderAt(i).Kind == parser.HeaderContentLength {
			i++
		}
		for j < b.NumHeaders() && b.HeaderAt(j).Kind == parser.HeaderContentLength {
			j++
		}
		if i == a.NumHeaders() || j == b.NumHeaders() {
			break
		}
		ha, hb := a.HeaderAt(i), b.HeaderAt(j)
		if ha.Kind != hb.Kind || !bytes.Equal(ha.Value, hb.Value) ||
			ha.Kind == parser.HeaderOther && !bytes.Equal(ha.Name, hb.Name) {
			t.Fatalf("header %d differs after rebuilding: %q: %q vs %q: %q\n%q", i, ha.Name, ha.Value, hb.Name, hb.Value, rebuilt)
		}
		i++
		j++
	}
	if i != a.NumHeaders() || j != b.NumHeaders() {
		t.Fatalf("header count differs after rebuilding: %d vs %d\n%q", a.NumHeaders(), b.NumHeaders(), rebuilt)
	}
	if b.ContentLength() != len(b.Body()) {
		t.Fatalf("rebuilt Content-Length %d, body %d", b.ContentLength(), len(b.Body()))
	}
}

func checkResponse(t *testing.T, req *parser.Message) {
	st := &roundTripState
	st.resp = parser.AppendResponse(st.resp[:0], req, 200, "OK", []byte("tag1"))
	st.resp = parser.AppendBody(st.resp, "", nil)
	r := &st.r
	if err := r.ParseLimits(st.resp, &rebuildLimits); err != nil {
		t.Fatalf("response does not parse: %v\n%q", err, st.resp)
	}
	if !r.IsResponse() || r.StatusCode() != 200 || string(r.ReasonPhrase()) != "OK" {
		t.Fatalf("response start line: %d %q", r.StatusCode(), r.ReasonPhrase())
	}
	if !bytes.Equal(r.CallID(), req.CallID()) || !bytes.Equal(r.Get(parser.HeaderCSeq), req.Get(parser.HeaderCSeq)) {
		t.Fatalf("response Call-ID %q CSeq %q, request %q %q", r.CallID(), r.Get(parser.HeaderCSeq),
			req.CallID(), req.Get(parser.HeaderCSeq))
	}
	if r.Count(parser.HeaderVia) != req.Count(parser.HeaderVia) {
		t.Fatalf("response has %d Via, request %d", r.Count(parser.HeaderVia), req.Count(parser.HeaderVia))
	}
	for i := 0; i < r.Count(parser.HeaderVia); i++ {
		if !bytes.Equal(r.Nth(parser.HeaderVia, i), req.Nth(parser.HeaderVia, i)) {
			t.Fatalf("response Via %d %q, request %q", i, r.Nth(parser.HeaderVia, i), req.Nth(parser.HeaderVia, i))
		}
	}
	if err := r.Validate(nil); err != nil {
		t.Fatalf("response to a valid request does not validate: %v\n%q", err, st.resp)
	}
	var to, reqTo parser.Address
	if r.To(&to) != nil || req.To(&reqTo) != nil {
		t.Fatalf("To does not parse")
	}
	switch {
	case reqTo.Tag != nil && !bytes.Equal(to.Tag, reqTo.Tag):
		t.Fatalf("response To tag %q, request To tag %q", to.Tag, reqTo.Tag)
	case reqTo.Tag == nil && string(to.Tag) != "tag1":
		t.Fatalf("response To tag %q, want tag1 (To %q)", to.Tag, r.Get(parser.HeaderTo))
	}
}

// frameSizes are the maxSize values FuzzFrame tries: tiny, around typical
// messages, and the parser's default message limit.
var frameSizes = [...]int{1, 16, 300, 1024, parser.DefaultLimits.MaxMessageSize}

var frameState struct {
	m parser.Message
}

// FuzzFrame frames arbitrary bytes as a stream and checks that Frame makes
// progress, that framing a prefix agrees with framing the whole, and that
// a framed message parses with the Content-Length the framer used.
func FuzzFrame(f *testing.F) {
	addFileSeeds(f)
	addExtraSeeds(f)
	inv := readFile(f, "../parser/testdata/bench/invite.sip")
	ok := readFile(f, "../parser/testdata/bench/ok200.sip")
	f.Add(append(append(append([]byte("\r\n\r\n"), inv...), "\r\n"...), ok...))
	f.Add(append(append([]byte{}, inv...), inv[:len(inv)/2]...))
	f.Add([]byte("\r\n\r\n\r\n\r\n\r\n\r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range frameSizes {
			checkFrame(t, data, max)
		}
	})
}

func checkFrame(t *testing.T, data []byte, max int) {
	kind, n, err := frame(t, data, max)

	// Framing the stream unit by unit ends, with progress on every call.
	rest := data
	for i := 0; ; i++ {
		if i > len(data) {
			t.Fatalf("max %d: framing %q does not end", max, trunc(data))
		}
		k, n, err := frame(t, rest, max)
		if err != nil || k == parser.FrameNeedMore {
			break
		}
		if k == parser.FrameMessage {
			checkFramedMessage(t, rest[:n], max)
		}
		rest = rest[n:]
	}

	// Frame on a prefix: a unit found in the whole is found identically as
	// soon as its bytes are there and not before (a pong once the byte after
	// it shows it does not start a ping); nothing else is found; an error on
	// a prefix is the error on the whole.
	enough := n
	if kind == parser.FramePong {
		enough = n + 1
	}
	checkPrefix := func(p int) {
		k, pn, perr := frame(t, data[:p], max)
		switch {
		case perr != nil:
			if perr != err {
				t.Fatalf("max %d: prefix %d: error %v, whole %d bytes: %v %d %v\n%q",
					max, p, perr, len(data), kind, n, err, trunc(data))
			}
		case k != parser.FrameNeedMore:
			if err != nil || k != kind || pn != n {
				t.Fatalf("max %d: prefix %d: %v %d, whole %d bytes: %v %d %v\n%q",
					max, p, k, pn, len(data), kind, n, err, trunc(data))
			}
		case err == nil && kind != parser.FrameNeedMore && p >= enough:
			t.Fatalf("max %d: prefix %d needs more, whole: %v of %d bytes\n%q", max, p, kind, n, trunc(data))
		}
	}
	if len(data) <= 256 {
		for p := 0; p < len(data); p++ {
			checkPrefix(p)
		}
		return
	}
	// Long inputs: the start, the edges of the unit and of max, and a sample.
	for p := 0; p < 64; p++ {
		checkPrefix(p)
	}
	for _, edge := range [...]int{n, max} {
		for p := edge - 2; p <= edge+2; p++ {
			if p >= 0 && p < len(data) {
				checkPrefix(p)
			}
		}
	}
	for p := 64; p < len(data); p += len(data)/64 + 1 {
		checkPrefix(p)
	}
}

// frame calls parser.Frame and checks what any result must satisfy.
func frame(t *testing.T, b []byte, max int) (parser.FrameKind, int, error) {
	kind, n, err := parser.Frame(b, max)
	switch {
	case n < 0 || n > len(b):
		t.Fatalf("Frame(%d bytes, %d) = %v, %d", len(b), max, kind, n)
	case err != nil:
		sipError(t, "Frame", err)
		if kind != parser.FrameNeedMore || n != 0 {
			t.Fatalf("Frame error %v with %v, %d", err, kind, n)
		}
	case kind == parser.FrameNeedMore:
		if n != 0 {
			t.Fatalf("Frame needs more, yet n = %d", n)
		}
	case n == 0:
		t.Fatalf("Frame returned %v without progress", kind)
	case kind == parser.FramePing && string(b[:n]) != "\r\n\r\n",
		kind == parser.FramePong && string(b[:n]) != "\r\n":
		t.Fatalf("Frame: %v is %q", kind, b[:n])
	case kind == parser.FrameMessage && n > max:
		t.Fatalf("Frame: message of %d bytes, max %d", n, max)
	}
	return kind, n, err
}

// checkFramedMessage parses a message Frame delimited: if it parses, its
// body is what the framer's Content-Length said.
func checkFramedMessage(t *testing.T, b []byte, max int) {
	m := &frameState.m
	if m.Parse(b) != nil {
		return
	}
	body := m.Body()
	headerLen := len(b) - len(body)
	if len(m.Bytes()) != len(b) || m.ContentLength() != len(b)-headerLen ||
		!bytes.Equal(b[headerLen-4:headerLen], []byte("\r\n\r\n")) ||
		bytes.Index(b, []byte("\r\n\r\n")) != headerLen-4 {
		t.Fatalf("max %d: Frame took %d bytes, Parse: Content-Length %d, header section %d, parsed %d\n%q",
			max, len(b), m.ContentLength(), headerLen, len(m.Bytes()), b)
	}
}
