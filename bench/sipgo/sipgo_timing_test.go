package sipgobench

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/emiago/sipgo/sip"
)

// The messages are sipedge's own benchmark messages, so both sides parse
// exactly the same bytes.
const benchDir = "../../parser/testdata/bench/"

func benchMessage(tb testing.TB, name string) []byte {
	buf, err := os.ReadFile(benchDir + name)
	if err != nil {
		tb.Fatal(err)
	}
	return buf
}

// parser is sipgo's parser with its default header parsers, the one
// sip.ParseMessage uses; it is read-only and safe to share.
var parser = sip.NewParser()

var msgSink sip.Message

func benchParse(b *testing.B, name string) {
	buf := benchMessage(b, name)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		m, err := parser.ParseSIP(buf)
		if err != nil {
			b.Fatal(err)
		}
		msgSink = m
	}
}

func BenchmarkSipgoParseInvite(b *testing.B) { benchParse(b, "invite.sip") }

func BenchmarkSipgoParse200OK(b *testing.B) { benchParse(b, "ok200.sip") }

// accessed mirrors the fields sipedge's BenchmarkParseAndAccess reads.
type accessed struct {
	branch, fromTag, toTag, callID, contactHost string
	body                                        []byte
	cseq                                        uint32
	method                                      sip.RequestMethod
	contentLength                               int
}

var sink accessed

// contacter is implemented by *sip.Request and *sip.Response; Contact is not
// part of the sip.Message interface.
type contacter interface {
	Contact() *sip.ContactHeader
}

// parseAndAccess parses buf with sipgo and reads the top Via branch, From
// and To tags, Call-ID, CSeq, Contact host, Content-Length and body.
func parseAndAccess(buf []byte, out *accessed) error {
	m, err := parser.ParseSIP(buf)
	if err != nil {
		return err
	}
	via, from, to, callID, cseq, cl := m.Via(), m.From(), m.To(), m.CallID(), m.CSeq(), m.ContentLength()
	if via == nil || from == nil || to == nil || callID == nil || cseq == nil || cl == nil {
		return fmt.Errorf("missing header")
	}
	c, ok := m.(contacter)
	if !ok {
		return fmt.Errorf("%T has no Contact", m)
	}
	contact := c.Contact()
	if contact == nil {
		return fmt.Errorf("missing Contact")
	}
	branch, _ := via.Params.Get("branch")
	fromTag, _ := from.Params.Get("tag")
	toTag, _ := to.Params.Get("tag")
	*out = accessed{
		branch: branch, fromTag: fromTag, toTag: toTag, callID: string(*callID),
		contactHost: contact.Address.Host, body: m.Body(),
		cseq: cseq.SeqNo, method: cseq.MethodName, contentLength: int(*cl),
	}
	return nil
}

func BenchmarkSipgoParseAndAccess(b *testing.B) {
	buf := benchMessage(b, "invite.sip")
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := parseAndAccess(buf, &sink); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseAndAccess checks the baseline really parses what sipedge's
// benchmark reads.
func TestParseAndAccess(t *testing.T) {
	buf := benchMessage(t, "invite.sip")
	var got accessed
	if err := parseAndAccess(buf, &got); err != nil {
		t.Fatal(err)
	}
	body := buf[bytes.Index(buf, []byte("\r\n\r\n"))+4:]
	want := accessed{
		branch: "z9hG4bK776asdhds", fromTag: "1928301774", toTag: "",
		callID: "a84b4c76e66710@pc33.atlanta.example.com", contactHost: "pc33.atlanta.example.com",
		body: body, cseq: 314159, method: sip.INVITE, contentLength: 240,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		check  func(sip.Message) bool
		branch string
		bodyN  int
	}{
		{"invite.sip", func(m sip.Message) bool {
			r, ok := m.(*sip.Request)
			return ok && r.Method == sip.INVITE && r.Recipient.Host == "biloxi.example.com"
		}, "z9hG4bK776asdhds", 240},
		{"ok200.sip", func(m sip.Message) bool {
			r, ok := m.(*sip.Response)
			return ok && r.StatusCode == 200
		}, "z9hG4bK776asdhds", 233},
	} {
		m, err := parser.ParseSIP(benchMessage(t, tc.name))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !tc.check(m) {
			t.Errorf("%s: unexpected start line: %s", tc.name, m.(interface{ StartLine() string }).StartLine())
		}
		if n := len(m.GetHeaders("Via")); n != 2 {
			t.Errorf("%s: %d Via headers, want 2", tc.name, n)
		}
		if b, _ := m.Via().Params.Get("branch"); b != tc.branch {
			t.Errorf("%s: branch %q, want %q", tc.name, b, tc.branch)
		}
		if n := len(m.Body()); n != tc.bodyN {
			t.Errorf("%s: body %d bytes, want %d", tc.name, n, tc.bodyN)
		}
	}
}
