// Package fuzz holds the go test -fuzz targets over sipedge's public parsing
// API (package parser, fuzz_test.go), the B2BUA engine (engine_test.go) and
// the Digest challenge parser (digest_test.go); it has no code of its own:
//
//   - FuzzParse parses arbitrary bytes and runs Validate and every accessor
//     on what parses: no panic, every returned view inside the input,
//     Body() as long as Content-Length, errors that are *parser.Error with a
//     400-699 code, Answer dropping responses, a reused Message and tighter
//     Limits giving the same result, Frame agreeing with where Parse ends a
//     message, Validate's verdicts explained by the accessors.
//   - FuzzRoundTrip rebuilds every message that parses and validates with
//     AppendStartLine, AppendHeaders and AppendBody, parses it again, and
//     checks the same start line, headers and body, a fixed point after one
//     rebuild, and that AppendResponse builds a response that parses with
//     the request's Call-ID, CSeq and Vias.
//   - FuzzFrame frames arbitrary bytes as a stream with several maxSize
//     values: progress on every unit, framing that ends, every prefix
//     agreeing with the whole, and Parse seeing the framer's Content-Length.
//   - FuzzEngine drives one b2bua.Engine with scripts of caller and carrier
//     messages (challenges included) in any order and at any time: no
//     panic, every message sipedge sends parses and validates, and once
//     every timer has fired no call and no transaction is left.
//   - FuzzChallenge parses arbitrary WWW-Authenticate values with
//     dialog/digest: no panic, views inside the input, and every challenge
//     that parses answered with credentials that parse back to the same
//     realm, nonce and opaque, with no line break.
//
// Run one with, for example,
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s ./fuzz/
//
// or all of them with make fuzz FUZZTIME=30s (fuzz/run.sh each). On go1.26
// a run may end in a bare "context deadline exceeded" with no failing input
// written: that is the fuzz coordinator's shutdown race (go.dev/issue/75804),
// not a finding, and run.sh runs the target again (three runs at most); it
// red CI once before.
//
// # Seeds
//
// Every target adds, when it starts, the RFC 4475 torture messages and the
// benchmark messages of ../parser/testdata (rfc4475/*.dat, bench/*.sip) and
// a few hand-written messages. The committed corpus under testdata/fuzz/
// holds real SIPp traffic: testdata/capture-sipp.sh runs a SIPp UAS (the
// built-in uas scenario plus a 100 Trying) and SIPp's built-in UAC on
// loopback for a few calls over UDP and over TCP and, with sippcorpus.go,
// writes each distinct message as sent (INVITE, 100, 180, 200, ACK, BYE,
// 200) to testdata/fuzz/FuzzParse/sipp-[tcp-]NAME, a few to FuzzRoundTrip,
// and two consecutive messages of one TCP direction as one stream to
// FuzzFrame/sipp-tcp-stream-*. Regenerate them with
//
//	fuzz/testdata/capture-sipp.sh
//
// Any other file under testdata/fuzz/ is an input that once failed a target:
// keep it as a regression seed. The fuzzer's own new interesting inputs stay
// in $GOCACHE/fuzz and are not committed.
package fuzz
