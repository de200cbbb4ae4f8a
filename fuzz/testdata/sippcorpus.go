//go:build ignore

// sippcorpus cuts SIPp message logs (sipp -trace_msg -message_file) into
// go test fuzz corpus files; capture-sipp.sh runs it.
//
//	go run sippcorpus.go -out DIR udp.log tcp.log
//
// Every distinct message of a log (named by method, or by status code and
// CSeq method) becomes DIR/FuzzParse/sipp-[tcp-]NAME, exactly the bytes SIPp
// put on the wire. A few UDP ones also seed FuzzRoundTrip. FuzzFrame gets a
// single stream message and, per log from a stream transport, two
// consecutive messages of one direction concatenated, as a reader of that
// connection receives them.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A log entry: "TCP message sent (509 bytes):" or
// "UDP message received [309] bytes :", an empty line, the message.
var entryRE = regexp.MustCompile(`(?m)^(UDP|TCP|TLS|SCTP) message (sent|received) (?:\((\d+) bytes\)|\[(\d+)\] bytes ?):\n\n`)

type msg struct {
	name string // invite, 200-invite, ...
	dir  string // sent or received
	raw  []byte
}

func main() {
	out := flag.String("out", "fuzz", "corpus root holding FuzzParse/, FuzzRoundTrip/, FuzzFrame/")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: go run sippcorpus.go -out DIR sipp-message.log...")
	}
	roundTrip := map[string]bool{"invite": true, "100-invite": true, "200-invite": true, "bye": true}
	for _, path := range flag.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			log.Fatal(err)
		}
		msgs, transport := parseLog(path, data)
		prefix := "sipp-"
		if transport != "UDP" {
			prefix += strings.ToLower(transport) + "-"
		}
		seen := map[string]bool{}
		for _, m := range msgs {
			if seen[m.name] {
				continue
			}
			seen[m.name] = true
			write(*out, "FuzzParse", prefix+m.name, m.raw)
			if transport == "UDP" && roundTrip[m.name] {
				write(*out, "FuzzRoundTrip", prefix+m.name, m.raw)
			}
			if transport != "UDP" && m.name == "invite" {
				write(*out, "FuzzFrame", prefix+m.name, m.raw)
			}
		}
		if transport == "UDP" {
			continue
		}
		pairs := map[string]bool{}
		for i := 0; i+1 < len(msgs); i++ {
			a, b := msgs[i], msgs[i+1]
			key := a.name + "-" + b.name
			if a.dir != b.dir || pairs[key] {
				continue
			}
			pairs[key] = true
			write(*out, "FuzzFrame", prefix+"stream-"+key, append(append([]byte{}, a.raw...), b.raw...))
		}
	}
}

func parseLog(path string, data []byte) ([]msg, string) {
	var msgs []msg
	transport := ""
	for _, loc := range entryRE.FindAllSubmatchIndex(data, -1) {
		g := 6 // "(N bytes)"
		if loc[g] < 0 {
			g = 8 // "[N] bytes"
		}
		num := data[loc[g]:loc[g+1]]
		n, _ := strconv.Atoi(string(num))
		start := loc[1]
		if start+n > len(data) {
			log.Fatalf("%s: entry at %d: %d bytes announced, %d left", path, loc[0], n, len(data)-start)
		}
		raw := data[start : start+n]
		if !bytes.Contains(raw, []byte("\r\n\r\n")) {
			log.Fatalf("%s: entry at %d: no CRLF CRLF: not a message as on the wire", path, loc[0])
		}
		transport = string(data[loc[2]:loc[3]])
		msgs = append(msgs, msg{name: name(raw), dir: string(data[loc[4]:loc[5]]), raw: raw})
	}
	if len(msgs) == 0 {
		log.Fatalf("%s: no messages", path)
	}
	return msgs, transport
}

// name is the request method, or the status code and CSeq method of a
// response, in lower case.
func name(raw []byte) string {
	line, _, _ := bytes.Cut(raw, []byte("\r\n"))
	f := strings.Fields(string(line))
	if len(f) < 2 {
		log.Fatalf("bad start line %q", line)
	}
	if f[0] != "SIP/2.0" {
		return strings.ToLower(f[0])
	}
	for _, l := range strings.Split(string(raw), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "CSeq") {
			if cf := strings.Fields(v); len(cf) == 2 {
				return f[1] + "-" + strings.ToLower(cf[1])
			}
		}
	}
	return f[1]
}

func write(root, target, name string, raw []byte) {
	dir := filepath.Join(root, target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", raw), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println(file)
}
