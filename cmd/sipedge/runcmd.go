package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/cmd/sipedge/internal/server"
)

// loadConfig reads -config, or the embedded example when it is empty.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Parse([]byte(config.Example), os.LookupEnv)
	}
	return config.Load(path)
}

func checkConfigCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: the embedded example)")
	redact := fs.Bool("redact", false, "mask the secrets (tokens, passwords, URL passwords): for sharing the output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *redact {
		cfg = cfg.Redacted()
	}
	if err := cfg.Print(stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// runCmd runs the server until SIGTERM or SIGINT, then drains; SIGHUP
// reopens the CDR and log files.
//
// The signals are taken over before anything else: starting can take
// seconds (Redis, DNS, binding), and a SIGHUP from logrotate in that window
// would otherwise take Go's default action and kill the process. Signals
// that arrive while starting wait (relaySignals) and are handled once the
// server runs.
func runCmd(args []string, stderr io.Writer) int {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sig)
	done := make(chan struct{})
	defer close(done)
	relayed := relaySignals(sig, done)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: the embedded example)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	logs, err := openLog(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "log.file: %v\n", err)
		return 1
	}
	slog.SetDefault(logs.logger)
	srv, err := server.New(cfg, logs.logger)
	if err != nil {
		logs.logger.Error("cannot start", "err", err)
		return 1
	}
	srv.SetConfigFile(*path)
	if err := srv.Start(); err != nil {
		logs.logger.Error("cannot start", "err", err)
		return 1
	}
	reopen := func() {
		logs.logger.Info("SIGHUP: reopening the CDR and log files")
		if err := srv.Reopen(); err != nil {
			logs.logger.Error("cannot reopen the CDR file", "err", err)
		}
		if err := logs.reopen(); err != nil {
			logs.logger.Error("cannot reopen the log file", "err", err)
		}
	}
	err = handleSignals(relayed, logs.logger, reopen, srv.Shutdown)
	if err != nil {
		logs.logger.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// relaySignals reads sig from the first moment and passes its signals on,
// in order, to the channel it returns, holding those not taken yet; a
// signal already held is not held twice. Nothing reads the returned
// channel while sipedge starts, and os/signal drops what a full channel
// cannot take: left in sig, a few SIGHUPs (logrotate signals once per
// rotated file) would fill it and a SIGTERM behind them would be lost.
func relaySignals(sig <-chan os.Signal, done <-chan struct{}) <-chan os.Signal {
	out := make(chan os.Signal)
	go func() {
		var held []os.Signal
		for {
			var send chan<- os.Signal
			var next os.Signal
			if len(held) > 0 {
				send, next = out, held[0]
			}
			select {
			case s := <-sig:
				if !slices.Contains(held, s) {
					held = append(held, s)
				}
			case send <- next:
				held = held[1:]
			case <-done:
				return
			}
		}
	}()
	return out
}

// handleSignals reopens on SIGHUP until SIGTERM or SIGINT, then runs
// shutdown. Signals keep their meaning while shutdown drains (up to its
// timeout and linger): a logrotate SIGHUP reopens, and a second SIGTERM or
// SIGINT cancels shutdown's context, which stops at once (the calls still
// up ended, one BYE each, and the CDRs flushed: nothing more is waited
// for). Not received, either would take Go's default action, killing the
// process and losing the CDRs still queued.
func handleSignals(sig <-chan os.Signal, log *slog.Logger, reopen func(), shutdown func(context.Context) error) error {
	for s := range sig {
		if s == syscall.SIGHUP {
			reopen()
			continue
		}
		log.Info("signal: stopping (send it again to stop at once)", "signal", s.String())
		break
	}
	ctx, hurry := context.WithCancel(context.Background())
	defer hurry()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		for {
			select {
			case s := <-sig:
				if s == syscall.SIGHUP {
					reopen()
					continue
				}
				log.Warn("signal: stopping at once", "signal", s.String())
				hurry()
			case <-stopped:
				return
			}
		}
	}()
	return shutdown(ctx)
}

// logFile is the log destination, reopenable on SIGHUP.
type logFile struct {
	logger *slog.Logger
	path   string
	w      *reopenWriter
}

func openLog(cfg config.Log, stderr io.Writer) (*logFile, error) {
	lf := &logFile{path: cfg.File, w: &reopenWriter{w: stderr}}
	if cfg.File != "" {
		if err := lf.reopen(); err != nil {
			return nil, err
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(cfg.Level))); err != nil {
		level = slog.LevelInfo
	}
	lf.logger = slog.New(slog.NewTextHandler(lf.w, &slog.HandlerOptions{Level: level}))
	return lf, nil
}

func (lf *logFile) reopen() error {
	if lf.path == "" {
		return nil
	}
	f, err := os.OpenFile(lf.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	lf.w.swap(f)
	return nil
}
