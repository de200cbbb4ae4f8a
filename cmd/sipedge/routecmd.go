package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/server"
)

// routeTimeout bounds a dry run: the routing API's request, a node's
// answer.
const routeTimeout = 15 * time.Second

// routeCmd implements `sipedge route`: where a call would go, and why,
// without placing it. With -admin it asks a running node (POST /v1/route:
// its live health, limits and caches); without, it routes from the
// configuration alone (server.RouteFromConfig).
func routeCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("route", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: the embedded example); with -admin, its admin.token is sent")
	var q server.RouteQuery
	fs.StringVar(&q.To, "to", "", "the dialled number, as the trunk sends it (required)")
	fs.StringVar(&q.From, "from", "", "the calling number")
	fs.StringVar(&q.Trunk, "trunk", "", "the trunk the call comes from (default: the first configured)")
	fs.StringVar(&q.CallID, "call-id", "", "a Call-ID, whose hash picks the member of a hash group")
	admin := fs.String("admin", "", "a running node's admin API, http://IP:port: ask it, with its live state")
	asJSON := fs.Bool("json", false, "print the answer as JSON, POST /v1/route's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if q.To == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "route: -to NUMBER is required, and nothing else after the flags")
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), routeTimeout)
	defer cancel()
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var a server.RouteAnswer
	if *admin != "" {
		token := ""
		if *path != "" {
			token = cfg.Admin.Token
		}
		a, err = askNode(ctx, *admin, token, q)
	} else {
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		a, err = server.RouteFromConfig(ctx, cfg, q, log)
	}
	if err != nil {
		fmt.Fprintf(stderr, "route: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(a)
	} else {
		err = server.WriteRoute(stdout, a)
	}
	if err != nil {
		fmt.Fprintf(stderr, "route: %v\n", err)
		return 1
	}
	return 0
}

// askNode asks the node whose admin API is at base for a dry run.
func askNode(ctx context.Context, base, token string, q server.RouteQuery) (server.RouteAnswer, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	body, _ := json.Marshal(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/route", bytes.NewReader(body))
	if err != nil {
		return server.RouteAnswer{}, fmt.Errorf("cannot ask %q: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return server.RouteAnswer{}, fmt.Errorf("cannot ask %q: %w", base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return server.RouteAnswer{}, fmt.Errorf("cannot read %q's answer: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return server.RouteAnswer{}, fmt.Errorf("%s answered %d: %s", base, resp.StatusCode, e.Error)
		}
		return server.RouteAnswer{}, fmt.Errorf("%s answered %d", base, resp.StatusCode)
	}
	var a server.RouteAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return server.RouteAnswer{}, errors.Join(fmt.Errorf("cannot read %q's answer", base), err)
	}
	return a, nil
}
