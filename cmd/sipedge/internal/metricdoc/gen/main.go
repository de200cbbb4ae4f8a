// Command gen writes docs/metrics.md from metricdoc.Families:
//
//	go generate ./cmd/sipedge/internal/metricdoc
package main

import (
	"bytes"
	"flag"
	"log"
	"os"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/metricdoc"
)

func main() {
	out := flag.String("o", "docs/metrics.md", "the file to write")
	flag.Parse()
	var b bytes.Buffer
	if err := metricdoc.Markdown(&b); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
