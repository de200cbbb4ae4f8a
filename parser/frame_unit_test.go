package parser

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

const frameMax = 4096

// frameMsg builds a message with the given header lines and body.
func frameMsg(headers []string, body string) string {
	return string(unitMsg("MESSAGE sip:bob@biloxi.example.com SIP/2.0", append(append([]string(nil), vBase...), headers...), body))
}

// RFC 3261 18.3: on a stream a message ends Content-Length bytes after the
// empty line; until then Frame asks for more, at every prefix.
func TestUnitFrameEveryPrefix(t *testing.T) {
	f := func(msg string) {
		t.Helper()
		for k := 0; k < len(msg); k++ {
			kind, n, err := Frame([]byte(msg[:k]), frameMax)
			if kind != FrameNeedMore || n != 0 || err != nil {
				t.Errorf("Frame(prefix %d of %d %.40q...) = %v %d %v, want need-more", k, len(msg), msg, kind, n, err)
				return
			}
		}
		kind, n, err := Frame([]byte(msg), frameMax)
		if kind != FrameMessage || n != len(msg) || err != nil {
			t.Errorf("Frame(%.40q...) = %v %d %v, want message %d", msg, kind, n, err, len(msg))
			return
		}
		var m Message
		if err := m.Parse([]byte(msg[:n])); err != nil || len(m.Bytes()) != n {
			t.Errorf("Parse of the framed message: %v, %d bytes", err, len(m.Bytes()))
		}
	}
	f(frameMsg([]string{"Content-Length: 0"}, ""))
	f(frameMsg([]string{"Content-Type: text/plain", "Content-Length: 11"}, "hello world"))
	f(frameMsg([]string{"l: 4"}, "\r\n\r\n")) // a body made of CRLFs
	f(frameMsg([]string{"Content-Length:\r\n 5"}, "hello"))
	f(frameMsg([]string{"Subject: a\r\n b", "Content-Length: 3"}, "abc"))
	f("SIP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
}

// Exactly one message is framed when more bytes follow it.
func TestUnitFrameExactLength(t *testing.T) {
	f := func(first, rest string) {
		t.Helper()
		kind, n, err := Frame([]byte(first+rest), frameMax)
		if kind != FrameMessage || n != len(first) || err != nil {
			t.Errorf("Frame(%.40q... + %.20q...) = %v %d %v, want message %d", first, rest, kind, n, err, len(first))
		}
	}
	a := frameMsg([]string{"Content-Length: 5"}, "hello")
	b := frameMsg([]string{"Content-Length: 0"}, "")
	f(a, b)
	f(b, a)
	f(a, a[:10])
	f(a, "\r\n\r\n")
	f(a, "\r\n")
	f(b, "garbage")
	f(frameMsg([]string{"Content-Length: 8"}, "\r\n\r\nabcd"), "INVITE")
}

// RFC 5626 4.4.1: a CRLFCRLF ping, a CRLF pong; RFC 3261 7.5: stray CRLFs.
func TestUnitFrameKeepAlive(t *testing.T) {
	f := func(in string, wantKind FrameKind, wantN int, wantErr bool) {
		t.Helper()
		kind, n, err := Frame([]byte(in), frameMax)
		if kind != wantKind || n != wantN || (err != nil) != wantErr {
			t.Errorf("Frame(%q) = %v %d %v, want %v %d err=%v", in, kind, n, err, wantKind, wantN, wantErr)
		}
		if kind != FrameNeedMore && n == 0 {
			t.Errorf("Frame(%q): a unit of 0 bytes", in)
		}
	}
	f("", FrameNeedMore, 0, false)
	f("\r", FrameNeedMore, 0, false)
	f("\r\n", FrameNeedMore, 0, false) // a pong, or the start of a ping: cannot tell yet
	f("\r\n\r", FrameNeedMore, 0, false)
	f("\r\n\r\n", FramePing, 4, false)
	f("\r\n\r\n\r\n\r\n", FramePing, 4, false)
	f("\r\n\r\nOPTIONS sip:a SIP/2.0\r\n", FramePing, 4, false)
	f("\r\nOPTIONS sip:a SIP/2.0\r\n", FramePong, 2, false)
	f("\r\nS", FramePong, 2, false)
	f("\r\n\r\n"+frameMsg([]string{"l: 0"}, ""), FramePing, 4, false)
	f("\rX", FrameNeedMore, 0, true)
	f("\r\r\n", FrameNeedMore, 0, true)
	f("\r\n\rX", FrameNeedMore, 0, true)
}

// Framing errors close the connection (RFC 3261 18.3; RFC 4475 3.1.2.3, 3.3.9).
func TestUnitFrameErrors(t *testing.T) {
	f := func(in string, maxSize int, want ...error) {
		t.Helper()
		kind, n, err := Frame([]byte(in), maxSize)
		ok := false
		for _, w := range want {
			ok = ok || errors.Is(err, w)
		}
		if !ok || kind != FrameNeedMore || n != 0 {
			t.Errorf("Frame(%.60q...) = %v %d %v, want one of %v", in, kind, n, err, want)
		}
	}
	f(frameMsg(nil, ""), frameMax, ErrNoContentLength)
	f(frameMsg(nil, "hello"), frameMax, ErrNoContentLength)
	f(frameMsg([]string{"Content-Length-X: 0"}, ""), frameMax, ErrNoContentLength)
	f(frameMsg([]string{"X-Content-Length: 0"}, ""), frameMax, ErrNoContentLength)
	// A fold between the name and the colon is no Content-Length to Parse
	// (a bad header name), so none to Frame either: its length is not used.
	f(frameMsg([]string{"Content-Length\r\n : 5"}, "hello"), frameMax, ErrNoContentLength)
	f(frameMsg([]string{"Subject: x\r\n Content-Length: 0"}, ""), frameMax, ErrNoContentLength) // a continuation line, not a header
	f(frameMsg([]string{"Content-Length: 5", "Content-Length: 5"}, "hello"), frameMax, ErrDupContentLength)
	f(frameMsg([]string{"Content-Length: 13", "l: 5"}, "hello"), frameMax, ErrDupContentLength)
	f(frameMsg([]string{"l: 0", "CONTENT-LENGTH : 0"}, ""), frameMax, ErrDupContentLength)
	f(frameMsg([]string{"Content-Length: -999"}, "hello"), frameMax, ErrBadContentLength)
	f(frameMsg([]string{"Content-Length: five"}, "hello"), frameMax, ErrBadContentLength)
	f(frameMsg([]string{"Content-Length: 5 5"}, "hello"), frameMax, ErrBadContentLength)
	f(frameMsg([]string{"Content-Length:"}, "hello"), frameMax, ErrBadContentLength)
	f(frameMsg([]string{"Content-Length: 1\r\n 0"}, "hello"), frameMax, ErrBadContentLength)
	// Too large: a Content-Length beyond maxSize, a message beyond it, no end of headers within it.
	f(frameMsg([]string{"Content-Length: 99999999999999999999999"}, "hello"), frameMax, ErrBadContentLength, ErrMessageTooLarge, ErrBodyTooLarge)
	f(frameMsg([]string{"Content-Length: " + strconv.Itoa(frameMax+1)}, "hello"), frameMax, ErrBadContentLength, ErrMessageTooLarge, ErrBodyTooLarge)
	f(frameMsg([]string{"Content-Length: " + strconv.Itoa(frameMax-10)}, "hello"), frameMax, ErrMessageTooLarge)
	f("INVITE sip:a SIP/2.0\r\nSubject: "+strings.Repeat("a", frameMax), frameMax, ErrMessageTooLarge)
}

// The size limit is inclusive and applies to the whole message.
func TestUnitFrameSizeLimit(t *testing.T) {
	f := func(size, maxSize int, wantKind FrameKind, wantErr error) {
		t.Helper()
		head := frameMsg([]string{"Content-Length: 0000"}, "")
		cl := size - len(head)
		msg := frameMsg([]string{"Content-Length: " + strconv.Itoa(10000 + cl)[1:]}, strings.Repeat("x", cl))
		if len(msg) != size {
			t.Fatalf("test bug: %d bytes, want %d", len(msg), size)
		}
		kind, n, err := Frame([]byte(msg), maxSize)
		if kind != wantKind || !errors.Is(err, wantErr) || kind == FrameMessage && n != size {
			t.Errorf("Frame(%d bytes, max %d) = %v %d %v, want %v %v", size, maxSize, kind, n, err, wantKind, wantErr)
		}
	}
	f(1000, 1000, FrameMessage, nil)
	f(1000, 1001, FrameMessage, nil)
	f(1001, 1000, FrameNeedMore, ErrMessageTooLarge)
	// Headers alone: need more below maxSize, too large at it.
	headers := "INVITE sip:a SIP/2.0\r\nSubject: " + strings.Repeat("a", 100)
	if kind, _, err := Frame([]byte(headers), len(headers)+1); kind != FrameNeedMore || err != nil {
		t.Errorf("unterminated headers under the limit: %v %v", kind, err)
	}
	if _, _, err := Frame([]byte(headers), len(headers)); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("unterminated headers at the limit: %v", err)
	}
}

// Content-Length spellings Frame must find, with the same rules as Parse (RFC 3261 7.3.1, 7.3.3).
func TestUnitFrameContentLengthForms(t *testing.T) {
	f := func(header string, body string) {
		t.Helper()
		msg := frameMsg([]string{header}, body)
		kind, n, err := Frame([]byte(msg+"NEXT"), frameMax)
		if kind != FrameMessage || n != len(msg) || err != nil {
			t.Errorf("Frame with %q = %v %d %v, want message %d", header, kind, n, err, len(msg))
			return
		}
		var m Message
		if err := m.Parse([]byte(msg)); err != nil || string(m.Body()) != body {
			t.Errorf("Parse with %q: %v body %q", header, err, m.Body())
		}
	}
	f("Content-Length: 3", "abc")
	f("content-length: 3", "abc")
	f("CONTENT-LENGTH: 3", "abc")
	f("l: 3", "abc")
	f("L:3", "abc")
	f("Content-Length  :  3  ", "abc")
	f("Content-Length\t:\t3", "abc")
	f("Content-Length:\r\n 3", "abc")
	f("Content-Length: 3\r\n ", "abc")
	f("Content-Length:\r\n\t\r\n 3", "abc")
	f("Content-Length: 003", "abc")
	f("Content-Length: 0", "")
}
