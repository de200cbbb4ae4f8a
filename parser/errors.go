package parser

import "errors"

// Error is a parse or validation failure. Code is the status a server answers
// a request with (RFC 3261 21); a response that fails is dropped instead
// (RFC 3261 18.1.2), see Answer.
//
// Every Error the package returns is one of the package-level values below, so
// returning one never allocates and callers may compare with errors.Is.
type Error struct {
	Code   int
	Reason string
}

func (e *Error) Error() string { return "sip: " + e.Reason }

func newError(code int, reason string) *Error { return &Error{Code: code, Reason: reason} }

// Start line.
var (
	ErrEmpty          = newError(400, "Empty Message")
	ErrBadRequestLine = newError(400, "Bad Request-Line")
	ErrBadMethod      = newError(400, "Bad Method")
	ErrBadStatusLine  = newError(400, "Bad Status-Line")
	ErrBadStatusCode  = newError(400, "Bad Status Code")
	ErrBadVersion     = newError(400, "Bad SIP-Version")
	ErrVersion        = newError(505, "Version Not Supported")
	ErrURITooLong     = newError(414, "Request-URI Too Long")
	ErrBadReason      = newError(400, "Bad Reason-Phrase")
)

// Headers and framing.
var (
	ErrBadHeader           = newError(400, "Bad Header")
	ErrBadHeaderName       = newError(400, "Bad Header Name")
	ErrHeaderTooLong       = newError(400, "Header Too Long")
	ErrAddressURITooLong   = newError(400, "URI Too Long") // in an address header; 414 is the Request-URI's
	ErrTooManyHeaders      = newError(400, "Too Many Headers")
	ErrTooManyVias         = newError(400, "Too Many Via Headers")
	ErrEmptyListElement    = newError(400, "Empty List Element")
	ErrUnterminatedHeaders = newError(400, "Unterminated Header Section")
	ErrMessageTooLarge     = newError(513, "Message Too Large")
	ErrBodyTooLarge        = newError(413, "Request Entity Too Large")
	ErrBadContentLength    = newError(400, "Bad Content-Length")
	ErrDupContentLength    = newError(400, "Duplicate Content-Length")
	ErrNoContentLength     = newError(400, "Missing Content-Length")
	ErrShortBody           = newError(400, "Body Shorter Than Content-Length")
)

// Header values (typed accessors).
var (
	ErrBadURI         = newError(400, "Bad URI")
	ErrBadAddress     = newError(400, "Bad Address")
	ErrBadParams      = newError(400, "Bad Parameters")
	ErrBadVia         = newError(400, "Bad Via")
	ErrBadBranch      = newError(400, "Bad Via Branch")
	ErrBadCSeq        = newError(400, "Bad CSeq")
	ErrBadCallID      = newError(400, "Bad Call-ID")
	ErrBadMaxForwards = newError(400, "Bad Max-Forwards")
	ErrBadExpires     = newError(400, "Bad Expires")
	ErrBadRetryAfter  = newError(400, "Bad Retry-After")
	ErrBadPrivacy     = newError(400, "Bad Privacy")
	ErrBadReasonHdr   = newError(400, "Bad Reason Header")
	ErrBadTag         = newError(400, "Bad Tag")
	ErrNoHeader       = newError(400, "Missing Header")
)

// Validate.
var (
	ErrMissingVia     = newError(400, "Missing Via")
	ErrMissingFrom    = newError(400, "Missing From")
	ErrMissingTo      = newError(400, "Missing To")
	ErrMissingCallID  = newError(400, "Missing Call-ID")
	ErrMissingCSeq    = newError(400, "Missing CSeq")
	ErrDupHeader      = newError(400, "Duplicate Single-Value Header")
	ErrCSeqMismatch   = newError(400, "CSeq Method Mismatch")
	ErrURIScheme      = newError(416, "Unsupported URI Scheme")
	ErrBadExtension   = newError(420, "Bad Extension")
	ErrDupTag         = newError(400, "Duplicate Tag")
	ErrReasonNotUTF8  = newError(400, "Reason-Phrase Not UTF-8")
	ErrStatusOutRange = newError(400, "Status Code Out Of Range")
)

// Answer tells how a server answers a message that failed Parse or Validate:
// a request is answered with code and reason; a response cannot be answered
// and is dropped (RFC 3261 18.1.2), as is anything whose start line did not
// even say which of the two it is when it arrived in a response's shape.
// An ACK is dropped too, with the code it would have had: an ACK is never
// answered (RFC 3261 17.1.1.3: the ACK to a non-2xx belongs to the INVITE
// transaction; 13.2.2.4: the ACK to a 2xx has no response).
func Answer(m *Message, err error) (code int, reason string, drop bool) {
	var e *Error
	if !errors.As(err, &e) {
		return 500, "Server Internal Error", m.IsResponse() || m.IsAck()
	}
	if m.IsResponse() {
		return 0, e.Reason, true
	}
	return e.Code, e.Reason, m.IsAck()
}

// IsAck reports whether m is an ACK: by its method, or by its CSeq when
// the Request-Line failed before its method was read.
func (m *Message) IsAck() bool {
	if m.method == MethodAck {
		return true
	}
	if m.methodS.end != 0 {
		return false
	}
	c, err := m.CSeq()
	return err == nil && c.Method == MethodAck
}
