package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
)

// check-config and run accept exactly the same configurations: what
// check-config runs (config.Parse, then it prints) and what run runs before
// it opens a socket (config.Parse, then New) come to the same verdict. A
// configuration that check-config passes and New refuses fails an operator
// at the start of a deployment that was checked.
func TestCheckConfigAcceptsWhatRunAccepts(t *testing.T) {
	group := func(extra string) string {
		return `gateway:
  groups:
    - name: carrier-a
      destinations:
        - { uri: "sip:192.0.2.10:5060", address: "192.0.2.10:5060" }
` + extra
	}
	tests := []struct {
		name   string
		yaml   string
		accept bool
	}{
		{"one group", group(""), true},
		{"group with every section", group(`      algorithm: round_robin
      transport: tcp
      probe: { enabled: true, interval_secs: 5, jitter_ms: 0 }
      passive: { outcomes: [status_503], max_retry_after_secs: 60 }
      cps: { rate: 10, burst: 2, max_wait_ms: 0, key: acct-1 }
      cps_reject: [{ code: 503, reason: "CPS exceeded" }]
      max_concurrent_calls: 30
      auth: { username: acct-1, password: s3cret }
      panic_threshold_percent: 0
`), true},
		{"duplicate destinations", group(`        - { uri: "sip:192.0.2.10:5060", address: "192.0.2.10:5060" }
`), false},
		{"same address, other uri", group(`        - { uri: "sip:gw@192.0.2.10:5060", address: "192.0.2.10:5060" }
`), true},
		{"transport not served", group("      transport: tls\n"), false},
		{"cps without a rate", group("      cps: { burst: 2 }\n"), false},
		{"cps key not printable", group("      cps: { rate: 5, key: \"a\\tb\" }\n"), false},
		{"cps max wait over an hour", group("      cps: { rate: 5, max_wait_ms: 3600001 }\n"), false},
		{"cps burst over an hour", group("      cps: { rate: 1, burst: 5000 }\n"), false},
		{"cps reject reason not printable", group("      cps_reject: [{ code: 503, reason: \"a\\nb\" }]\n"), false},
		{"auth without password", group("      auth: { username: acct-1 }\n"), false},
		{"destination host not a name", group(`        - { uri: "sip:b", address: "gw!:5060" }
`), false},
		{"destination port 0", group(`        - { uri: "sip:b", address: "192.0.2.11:0" }
`), false},
		{"duplicate group", group(`    - name: carrier-a
      destinations: [{ uri: "sip:192.0.2.11", address: "192.0.2.11:5060" }]
`), false},
		{"static route to an unknown group", group(`lcr:
  static_routes:
    - routes: [{ carrier_id: z, gateway_group: carrier-z }]
`), false},
		{"static route to the group", group(`lcr:
  static_routes:
    - routes: [{ carrier_id: a, gateway_group: carrier-a }]
`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := tt.yaml + fmt.Sprintf("cdr: { file: %q }\n", filepath.Join(t.TempDir(), "cdr.jsonl"))
			checkErr := checkConfig(yaml)
			runErr := startUpTo(yaml)
			if (checkErr == nil) != (runErr == nil) {
				t.Fatalf("check-config and run disagree:\n  check-config: %v\n  run: %v", checkErr, runErr)
			}
			if (checkErr == nil) != tt.accept {
				t.Fatalf("accepted = %v, want %v (error: %v)", checkErr == nil, tt.accept, checkErr)
			}
		})
	}
}

// checkConfig is what check-config does with a file, short of printing.
func checkConfig(yaml string) error {
	_, err := config.Parse([]byte(yaml), nil)
	return err
}

// startUpTo is what run does with a file before it opens a socket: New,
// whose parts it then releases.
func startUpTo(yaml string) error {
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		return err
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	return s.closeParts(context.Background())
}
