package embed

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/server"
	"github.com/sipedge/sipedge/dialog/b2bua"
)

// Config is a validated sipedge configuration.
type Config struct {
	cfg *config.Config
	// path is the file it came from, "" when parsed from bytes: the admin
	// API's POST /v1/reload reads it again, and is refused without one.
	path string
}

// LoadConfig reads and validates the YAML file at path, as
// "sipedge run -config path" does.
func LoadConfig(path string) (*Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return &Config{cfg: cfg, path: path}, nil
}

// ParseConfig validates a YAML configuration held in memory, expanded
// against the process environment as a file is.
func ParseConfig(yaml []byte) (*Config, error) {
	cfg, err := config.Parse(yaml, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return &Config{cfg: cfg}, nil
}

// String is the configuration in force as YAML, secrets included (as
// "sipedge check-config" prints it).
func (c *Config) String() string { return c.cfg.String() }

// Options are what an embedding program adds to the configuration.
type Options struct {
	// Policy's hooks run besides sipedge's own (see the package
	// documentation); the zero Policy routes as the binary does.
	Policy b2bua.Policy
	// Logger receives sipedge's log; nil means slog.Default().
	Logger *slog.Logger
}

// Server is a running sipedge.
type Server struct {
	s *server.Server
}

// Start builds sipedge from cfg and starts it: the SIP sockets, the
// health probes and the admin API when configured. On an error nothing
// is left running.
func Start(cfg *Config, opt Options) (*Server, error) {
	s, err := server.NewWithPolicy(cfg.cfg, opt.Logger, opt.Policy)
	if err != nil {
		return nil, err
	}
	s.SetConfigFile(cfg.path)
	if err := s.Start(); err != nil {
		return nil, err // Start released what NewWithPolicy built
	}
	return &Server{s: s}, nil
}

// Shutdown drains and stops the server, as SIGTERM does: new calls get
// 503, calls in progress continue until they end or
// b2bua.drain_timeout_secs passes (then sipedge ends them and waits, up to
// b2bua.drain_linger_secs, for the BYEs and CANCELs to be answered), the
// CDRs are flushed. ctx bounds the waiting, as a second SIGTERM does: once
// it ends, the calls still up are ended without waiting for the answers,
// and the CDRs are flushed all the same.
func (s *Server) Shutdown(ctx context.Context) error { return s.s.Shutdown(ctx) }

// Reopen reopens the CDR file, as SIGHUP does (after logrotate).
func (s *Server) Reopen() error { return s.s.Reopen() }

// LiveCalls counts the calls in progress.
func (s *Server) LiveCalls() int { return s.s.LiveCalls() }

// AdminAddr is the admin API's address, "" when admin.listen is unset.
func (s *Server) AdminAddr() string { return s.s.AdminAddr() }

// WriteMetrics writes every metric in Prometheus text format, as the
// admin API's GET /metrics does.
func (s *Server) WriteMetrics(w io.Writer) { s.s.WriteMetrics(w) }
