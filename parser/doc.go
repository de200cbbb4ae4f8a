// Package parser is sipedge's SIP message parser and builder: hand-written,
// allocation-free in steady state, and strict where two readings of one
// message could differ.
//
// # Contract
//
// Message.Parse reads a message from a caller-owned buffer and records
// offsets into it; it never copies and never modifies the buffer. Every
// []byte returned by a Message or a typed accessor is a view of that buffer,
// valid until the buffer is reused or the Message is parsed again: copy what
// must live longer. A Message reuses its storage across Parse calls, so a
// shard that keeps one Message per loop parses without allocating. Messages
// are not safe for concurrent use.
//
// Parse checks framing and the start line and splits headers; the typed
// accessors (Via, Address, CSeq, ...) parse a header on demand and return
// values holding views. Validate makes the checks a server makes before acting
// on a request (mandatory headers, single-value headers, CSeq, top Via, ...).
// Every error is an *Error carrying the status code to answer a request with;
// Answer turns it into a verdict, dropping responses (RFC 3261 18.1.2).
//
// Frame finds message boundaries on stream transports (RFC 3261 18.3) and
// recognises RFC 5626 keep-alives. Parse alone applies datagram rules.
//
// The Append functions build responses and requests into a caller-owned
// slice, strconv style.
//
// This package imports only the standard library; a test enforces it.
package parser

//go:generate go run mktables.go
