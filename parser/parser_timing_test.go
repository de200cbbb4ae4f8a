package parser

import (
	"os"
	"testing"
)

func benchMessage(b testing.TB, name string) []byte {
	buf, err := os.ReadFile("testdata/bench/" + name)
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

func benchParse(b *testing.B, name string) {
	buf := benchMessage(b, name)
	var m Message
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := m.Parse(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseInvite(b *testing.B) { benchParse(b, "invite.sip") }

func BenchmarkParse200OK(b *testing.B) { benchParse(b, "ok200.sip") }

// accessed is what a B2BUA reads of every INVITE; sink keeps it alive.
type accessed struct {
	branch, fromTag, toTag, callID, contactHost, body []byte
	cseq                                              uint32
	method                                            Method
	contentLength                                     int
}

var sink accessed

// parseAndAccess parses buf and reads the top Via branch, From and To tags,
// Call-ID, CSeq, Contact host, Content-Length and body.
func parseAndAccess(m *Message, buf []byte, out *accessed) error {
	if err := m.Parse(buf); err != nil {
		return err
	}
	var (
		via               Via
		from, to, contact Address
		contactURI        URI
	)
	if err := m.TopVia(&via); err != nil {
		return err
	}
	if err := m.From(&from); err != nil {
		return err
	}
	if err := m.To(&to); err != nil {
		return err
	}
	cseq, err := m.CSeq()
	if err != nil {
		return err
	}
	if err := m.Contact(0, &contact); err != nil {
		return err
	}
	if err := contact.ParseURI(&contactURI); err != nil {
		return err
	}
	*out = accessed{
		branch: via.Branch, fromTag: from.Tag, toTag: to.Tag, callID: m.CallID(),
		contactHost: contactURI.Host, body: m.Body(),
		cseq: cseq.Num, method: cseq.Method, contentLength: m.ContentLength(),
	}
	return nil
}

func BenchmarkParseAndAccess(b *testing.B) {
	buf := benchMessage(b, "invite.sip")
	var m Message
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := parseAndAccess(&m, buf, &sink); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopyAndAccess is a shard's hand-off of a validated request: the
// copy to the owner's packet, then the values the dialog layer reads first.
func BenchmarkCopyAndAccess(b *testing.B) {
	buf := benchMessage(b, "invite.sip")
	var m, d Message
	if err := validateParsed(&m, buf); err != nil {
		b.Fatal(err)
	}
	var cp []byte
	var via Via
	var from, to Address
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		cp = m.CopyTo(&d, cp)
		if d.TopVia(&via) != nil || d.From(&from) != nil || d.To(&to) != nil {
			b.Fatal("copy does not parse")
		}
		if _, err := d.CSeq(); err != nil {
			b.Fatal(err)
		}
	}
}

// buildRinging builds a 180 Ringing for req into dst.
func buildRinging(dst []byte, req *Message) []byte {
	dst = AppendResponse(dst, req, 180, "Ringing", []byte("a6c85cf"))
	dst = AppendHeaderString(dst, "Contact", "<sip:sipedge@192.0.2.10:5060>")
	return AppendBody(dst, "", nil)
}

func BenchmarkBuildResponse(b *testing.B) {
	buf := benchMessage(b, "invite.sip")
	var m Message
	if err := m.Parse(buf); err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		out = buildRinging(out[:0], &m)
	}
	b.SetBytes(int64(len(out)))
}

// validateParsed parses buf and validates it: Validate on a fresh parse,
// with none of the values it reads cached yet.
func validateParsed(m *Message, buf []byte) error {
	if err := m.Parse(buf); err != nil {
		return err
	}
	return m.Validate(nil)
}

func benchValidate(b *testing.B, name string) {
	buf := benchMessage(b, name)
	var m Message
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := validateParsed(&m, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateInvite(b *testing.B) { benchValidate(b, "invite.sip") }

func BenchmarkValidate200OK(b *testing.B) { benchValidate(b, "ok200.sip") }
