package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/parser"
	"github.com/sipedge/sipedge/shard"
	"github.com/sipedge/sipedge/transport"
)

// supportedOptionTags are the option tags sipedge implements. A request that
// Requires another is answered 420 (RFC 3261 8.2.2.3).
var supportedOptionTags = b2bua.OptionTags()

// checkMsgCmd implements `sipedge check-msg`: each file is one received
// message, run through what the server runs on receipt.
func checkMsgCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-msg", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("transport", "udp", "transport the messages arrived on: udp or tcp")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tp, err := transport.Parse(*name)
	if err != nil {
		fmt.Fprintf(stderr, "check-msg: -transport must be udp or tcp, not %q\n", *name)
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "check-msg: no files\n")
		return 2
	}
	status := 0
	for _, name := range fs.Args() {
		buf, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "check-msg: %v\n", err)
			return 2
		}
		v, ok := checkMessage(buf, tp.Stream())
		fmt.Fprintf(stdout, "%s: %s\n", name, v)
		if !ok {
			status = 1
		}
	}
	return status
}

// checkMessage returns the verdict on one received message: "ok METHOD",
// "ok CODE", "reject CODE REASON" or "drop REASON", as the server decides
// it (shard.Inspect, shard.Reply) with the default limits. Over TCP the
// message is framed first, past the CRLF keep-alives before it (RFC 5626
// 4.4.1, RFC 3261 7.5), as the server frames a stream.
func checkMessage(buf []byte, stream bool) (string, bool) {
	switch {
	case !stream && len(buf) > parser.DefaultLimits.MaxMessageSize:
		return "drop Message Too Large (an oversize datagram is dropped unanswered: RFC 3261 18.1.1 sends it over TCP)", false
	case !stream && shard.IsKeepAlive(buf):
		return "ok keep-alive", true
	}
	if stream {
		for {
			kind, n, err := parser.Frame(buf, parser.DefaultLimits.MaxMessageSize)
			switch {
			case err != nil:
				return "drop " + err.(*parser.Error).Reason + " (framing error: the connection is closed)", false
			case kind == parser.FrameNeedMore && allCRLF(buf):
				return "ok keep-alive", true // nothing but keep-alives
			case kind == parser.FrameNeedMore:
				return "drop Incomplete Message (the server waits for more, then closes the connection)", false
			case kind == parser.FrameMessage:
				buf = buf[:n]
			default: // a keep-alive before the message
				buf = buf[n:]
				continue
			}
			break
		}
	}
	var m parser.Message
	if err := shard.Inspect(&m, buf, &parser.DefaultLimits, supportedOptionTags); err != nil {
		code, reason, reply := shard.Reply(&m, err)
		if !reply {
			return "drop " + reason + dropWhy(&m), false
		}
		return fmt.Sprintf("reject %d %s", code, reason), false
	}
	if m.IsResponse() {
		return fmt.Sprintf("ok %d", m.StatusCode()), true
	}
	return "ok " + string(m.MethodBytes()), true
}

// allCRLF reports whether b holds nothing but CR and LF bytes.
func allCRLF(b []byte) bool {
	return len(bytes.Trim(b, "\r\n")) == 0
}

// dropWhy says why a malformed message the server drops gets no answer.
func dropWhy(m *parser.Message) string {
	var via parser.Via
	switch {
	case m.IsResponse():
		return " (a response is never answered: RFC 3261 18.1.2)"
	case m.IsAck():
		return " (an ACK is never answered: RFC 3261 17.1.1.3)"
	case m.Get(parser.HeaderVia) == nil || m.TopVia(&via) != nil:
		return " (no readable Via to answer to: RFC 3261 18.2.2)"
	}
	return " (the answer would echo a control character)"
}
