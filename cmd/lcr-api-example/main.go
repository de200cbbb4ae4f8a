// Command lcr-api-example is a reference routing API for sipedge's LCR: it
// reads a CSV rate deck (prefix, carrier_id, gateway_group, rate[, currency])
// and answers POST /route (the JSON contract of docs/lcr-api.md) with the
// carriers of the longest matching prefix, cheapest first, and an empty
// route list when no prefix matches.
//
//	go run ./cmd/lcr-api-example -deck cmd/lcr-api-example/deck.csv
//	curl -s -d '{"version":1,"dialed_number":"+12025550123","source":{"trunk_group":"cust-trunks"}}' \
//	    http://127.0.0.1:8080/route
//
// Then point sipedge at it with lcr.api_url: "http://127.0.0.1:8080/route".
// Without -deck it serves the example deck built into the binary.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

//go:embed deck.csv
var exampleDeck []byte

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lcr-api-example:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("lcr-api-example", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address to listen on")
	deckPath := fs.String("deck", "", "CSV rate deck: prefix,carrier_id,gateway_group,rate[,currency] (default: the built-in example deck)")
	ttl := fs.Int("ttl", 300, "cache_ttl_secs of every answer (0 = sipedge does not cache)")
	auth := fs.String("auth", "", "Authorization header value every request must carry (sipedge's lcr.auth_header); empty = none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ttl < 0 {
		return errors.New("-ttl must not be negative")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	deck, name := exampleDeck, "built-in example deck"
	if *deckPath != "" {
		b, err := os.ReadFile(*deckPath)
		if err != nil {
			return err
		}
		deck, name = b, *deckPath
	}
	table, rows, err := parseDeck(bytes.NewReader(deck))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           (&server{table: table, ttl: *ttl, auth: *auth, log: log}).routes(),
		ReadHeaderTimeout: 5 * time.Second,
	}
	log.Info("serving POST /route", "listen", ln.Addr().String(), "deck", name,
		"rows", rows, "prefixes", table.Len(), "ttl_secs", *ttl)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
