package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/bolt"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
)

// serveConfig is the configuration of fence serve.
type serveConfig struct {
	Listen            string        // address to listen on
	Data              string        // directory of the durable state
	LogLevel          slog.Level    // minimum level logged
	ReadHeaderTimeout time.Duration // to read a request's headers
	ReadTimeout       time.Duration // to read a whole request
	WriteTimeout      time.Duration // to write a response (acquires extend it by their wait)
	IdleTimeout       time.Duration // to keep an idle keep-alive connection
	ShutdownGrace     time.Duration // for requests in flight at shutdown
	LockDelay         time.Duration // no grant for this long after a lease expires; 0 none
	SigningKey        string        // file of the key that signs sequencers; "" none
}

// loadSigningKey reads a key file written by fence keygen.
func loadSigningKey(file string) (*fence.SigningKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	var k fence.SigningKey
	if err := k.UnmarshalText(b); err != nil {
		return nil, fmt.Errorf("--signing-key %s: %w (write one with fence keygen)", file, err)
	}
	return &k, nil
}

// Validate reports a configuration that cannot work.
func (c *serveConfig) Validate() error {
	if c.Listen == "" {
		return errors.New("--listen is empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if c.Data == "" {
		return errors.New("--data is empty")
	}
	for name, d := range map[string]time.Duration{
		"--read-header-timeout": c.ReadHeaderTimeout, "--read-timeout": c.ReadTimeout,
		"--write-timeout": c.WriteTimeout, "--idle-timeout": c.IdleTimeout,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, not %s", name, d)
		}
	}
	if c.LockDelay < 0 || c.LockDelay > lock.MaxLockDelay {
		return fmt.Errorf("--lock-delay must be between 0 and %s, not %s", lock.MaxLockDelay, c.LockDelay)
	}
	if c.ShutdownGrace < 0 {
		return fmt.Errorf("--shutdown-grace must not be negative, not %s", c.ShutdownGrace)
	}
	return nil
}

func serveFlags(cfg *serveConfig, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7700", "`address` to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.Data, "data", "./fence-data", "`directory` of the durable state (created if missing)")
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "minimum `level` logged: debug, info, warn, error")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 5*time.Second, "time to read a request's headers")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 30*time.Second, "time to read a whole request, body included")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", 30*time.Second, "time to write a response; an acquire adds its wait_ms")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 120*time.Second, "time an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 10*time.Second, "time for requests in flight to finish at shutdown")
	fs.DurationVar(&cfg.LockDelay, "lock-delay", 0, "after a lease expires (not after a release), nobody gets the lock for this long (at most 60s)")
	fs.StringVar(&cfg.SigningKey, "signing-key", "", "key `file` (from fence keygen) that signs a sequencer for every grant; its public key is served at GET /v1/keys")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: fence serve [flags]

Runs the lock service and the fenced storage behind the v1 HTTP API, with the
state in a bbolt file under --data. Logs are JSON lines on stderr. SIGINT or
SIGTERM stops it gracefully.

Examples:
  fence serve
  fence serve --listen 127.0.0.1:7700 --data /var/lib/fence
  FENCE_DATA=/var/lib/fence fence serve
  fence serve --lock-delay 5s   # a holder that paused past its TTL gets 5s to notice
  fence keygen --out /etc/fence/signing.key && fence serve --signing-key /etc/fence/signing.key

Flags (each has an environment twin FENCE_<FLAG>, e.g. FENCE_READ_TIMEOUT):
`)
		fs.PrintDefaults()
	}
	return fs
}

// serve runs the service until ctx is cancelled (SIGINT, SIGTERM).
func serve(ctx context.Context, args []string, stdio stdio) error {
	stderr := stdio.err
	var cfg serveConfig
	if err := parseFlags(serveFlags(&cfg, stderr), args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{fmt.Errorf("serve: %w", err)}
	}
	var signer *fence.SigningKey
	if cfg.SigningKey != "" {
		k, err := loadSigningKey(cfg.SigningKey)
		if err != nil {
			return &usageError{fmt.Errorf("serve: %w", err)}
		}
		signer = k
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))

	db, err := bolt.Open(cfg.Data)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer db.Close()
	locks := lock.NewService(db)
	locks.Logger = logger
	locks.LockDelay = cfg.LockDelay
	locks.Signer = signer
	if err := locks.Open(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer locks.Close()

	api := httpapi.NewServer(locks, db)
	api.Logger = logger
	api.Ready = db.Check
	keyID := ""
	if signer != nil {
		api.Keys = []fence.PublicKey{signer.Public()}
		keyID = signer.ID
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Long-polling acquires would hold Shutdown for up to their wait: closing
	// the lock service answers them at once (503), and stops new lock calls.
	srv.RegisterOnShutdown(func() { locks.Close() })

	logger.Info("fence serving", "addr", ln.Addr().String(), "data", cfg.Data,
		"lock_delay", cfg.LockDelay.String(), "signing_key_id", keyID, "version", version())
	errC := make(chan error, 1)
	go func() { errC <- srv.Serve(ln) }()
	select {
	case err := <-errC:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("fence shutting down", "grace", cfg.ShutdownGrace.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("shutdown grace ran out; closing connections", "error", err)
		srv.Close()
	}
	logger.Info("fence stopped")
	return nil
}
