package parser

import "testing"

func BenchmarkTmpAcc(b *testing.B) {
	buf := benchMessage(b, "invite.sip")
	var m Message
	if err := m.Parse(buf); err != nil {
		b.Fatal(err)
	}
	var via Via
	var a Address
	var u URI
	b.Run("via", func(b *testing.B) {
		for b.Loop() {
			m.TopVia(&via)
		}
	})
	b.Run("from", func(b *testing.B) {
		for b.Loop() {
			m.From(&a)
		}
	})
	b.Run("to", func(b *testing.B) {
		for b.Loop() {
			m.To(&a)
		}
	})
	b.Run("cseq", func(b *testing.B) {
		for b.Loop() {
			m.CSeq()
		}
	})
	b.Run("contact", func(b *testing.B) {
		for b.Loop() {
			m.Contact(0, &a)
		}
	})
	m.Contact(0, &a)
	b.Run("uri", func(b *testing.B) {
		for b.Loop() {
			a.ParseURI(&u)
		}
	})
}
