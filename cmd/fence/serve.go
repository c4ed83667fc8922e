package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/auth"
	"github.com/fence-lock/fence/engine/journal"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/internal/support/gcfloor"
	"github.com/fence-lock/fence/internal/support/wallclock"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/server"
	"github.com/fence-lock/fence/wire"
)

// serveConfig is the configuration of fence serve.
type serveConfig struct {
	Listen            string        // address to listen on
	Data              string        // directory of the embedded store
	Store             string        // URL of a shared engine (etcd, PostgreSQL); "" the embedded store
	Advertise         string        // URL at which clients and the other servers reach this one
	ElectionTTL       time.Duration // with Store: how long a dead leader keeps the store; 0 the engine's
	PeerCACert        string        // PEM CA file that verifies the other servers (https advertise URLs)
	UnsafeNoEpoch     bool          // test only: commits skip the writer-epoch check
	UnsafeNoSync      bool          // test only: the journal acknowledges before it syncs
	TestSyncLog       string        // test only: a file told how far the journal's log is durable
	TestClockFile     string        // test only: a file holding the wall clock's offset (package wallclock)
	UnsafeWallLeases  bool          // test only: leases are timed by the skewed wall clock
	LogLevel          slog.Level    // minimum level logged
	ReadHeaderTimeout time.Duration // to read a request's headers
	ReadTimeout       time.Duration // to read a whole request
	WriteTimeout      time.Duration // to write a response (acquires extend it by their wait)
	IdleTimeout       time.Duration // to keep an idle keep-alive connection
	ShutdownGrace     time.Duration // for requests in flight at shutdown
	LockDelay         time.Duration // no grant for this long after a lease expires; 0 none
	SigningKey        string        // file of the key that signs sequencers; "" none
	AuthFile          string        // file of bearer tokens and their grants; "" no auth
	ProtectMetrics    bool          // GET /metrics needs admin:* when auth is on
	InsecureListen    bool          // allow a non-loopback --listen without --auth-file
	TLSCert           string        // PEM certificate file: serve HTTPS; "" plain HTTP
	TLSKey            string        // PEM private key file of TLSCert
	ClientCA          string        // PEM CA file: require client certificates it signed; "" none
	RateLimit         float64       // requests per second per client; 0 no limit
	RateBurst         int           // burst of RateLimit; 0 twice the rate, at least 1
	MaxWaiters        int           // acquires queued per resource; 0 no cap
	ClientWaiters     int           // acquires waiting per client; 0 no cap
	TotalWaiters      int           // acquires waiting in all; 0 no cap
	ClientWatchers    int           // watch streams per client; 0 no cap
	TotalWatchers     int           // watch streams in all; 0 no cap
	Unfenced          []string      // prefixes of best-effort resources
	MaxConns          int           // connections open at once; 0 no cap
}

// isLoopback reports whether the host of addr (host:port) is a loopback
// address or "localhost". An empty host (all interfaces) is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	if c.Data == "" && c.Store == "" {
		return errors.New("--data is empty")
	}
	if c.Store != "" && server.EngineName(c.Store) == "" {
		return fmt.Errorf("--store %q: want etcd://HOST:PORT[,...]/PREFIX, etcds://... or postgres://...", redactStore(c.Store))
	}
	if c.Advertise != "" && c.Store == "" {
		return errors.New("--advertise needs --store: a server on its embedded store has no peers")
	}
	if c.ElectionTTL < 0 || c.ElectionTTL > 0 && c.ElectionTTL < time.Second {
		return fmt.Errorf("--election-ttl must be at least 1s, not %s", c.ElectionTTL)
	}
	if (c.UnsafeNoSync || c.TestSyncLog != "") && c.Store != "" {
		return errors.New("--unsafe-ack-before-sync and --test-sync-log are for the embedded store, not --store")
	}
	if c.UnsafeNoEpoch && c.Store == "" {
		return errors.New("--unsafe-skip-epoch-check needs --store")
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
	if c.AuthFile == "" && !c.InsecureListen && !isLoopback(c.Listen) {
		return fmt.Errorf("--listen %q is not a loopback address and there is no --auth-file: anyone who can reach it could take locks and write; give --auth-file, or --insecure-listen to serve without auth anyway", c.Listen)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	if c.ProtectMetrics && c.AuthFile == "" {
		return errors.New("--protect-metrics needs --auth-file")
	}
	return nil
}

func serveFlags(cfg *serveConfig, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7700", "`address` to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.Data, "data", "./fence-data", "`directory` of the embedded store (created if missing); unused with --store")
	fs.StringVar(&cfg.Store, "store", "", "`URL` of a replicated engine that several servers share, instead of the embedded store: etcd://HOST:PORT[,HOST:PORT...]/PREFIX (etcds:// for TLS), or postgres://USER@HOST:PORT[,HOST:PORT...]/DB?target_session_attrs=read-write")
	fs.StringVar(&cfg.Advertise, "advertise", "", "base `URL` at which clients and the other servers reach this one, with --store (default: the listen address, if it names a host)")
	fs.DurationVar(&cfg.ElectionTTL, "election-ttl", 0, "with --store: how long the leadership of a server that died lasts before another takes over (default 2s; etcd rounds up to whole seconds)")
	fs.StringVar(&cfg.PeerCACert, "peer-cacert", "", "PEM CA `file` that verifies the other servers' certificates, for https --advertise URLs (default: the system's)")
	fs.BoolVar(&cfg.UnsafeNoEpoch, "unsafe-skip-epoch-check", false, "")
	fs.BoolVar(&cfg.UnsafeNoSync, "unsafe-ack-before-sync", false, "")
	fs.StringVar(&cfg.TestSyncLog, "test-sync-log", "", "")
	fs.StringVar(&cfg.TestClockFile, "test-clock-file", "", "")
	fs.BoolVar(&cfg.UnsafeWallLeases, "unsafe-wall-clock-leases", false, "")
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "minimum `level` logged: debug, info, warn, error")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 5*time.Second, "time to read a request's headers")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 10*time.Second, "time to read a whole request, body included")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", 30*time.Second, "time to write a response; an acquire adds its wait_ms")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 120*time.Second, "time an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 10*time.Second, "time for requests in flight to finish at shutdown")
	fs.DurationVar(&cfg.LockDelay, "lock-delay", 0, "after a lease expires (not after a release), nobody gets the lock for this long (at most 60s)")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests per second each client (its principal once authenticated, else its IP address or IPv6 /64) may send; over it, 429 rate_limited with Retry-After. 0: no limit")
	fs.IntVar(&cfg.RateBurst, "rate-burst", 0, "burst of --rate-limit; 0: twice the rate, at least 1")
	fs.IntVar(&cfg.MaxWaiters, "max-waiters", 1000, "acquires that may wait on one resource; more get lock_held at once. 0: no cap")
	fs.IntVar(&cfg.ClientWaiters, "max-client-waiters", 1000, "acquires one client (as --rate-limit counts them) may have waiting at once, over all resources; more are tried once and get lock_held at once if the lock is held. 0: no cap")
	fs.IntVar(&cfg.TotalWaiters, "max-total-waiters", 10000, "acquires that may wait at once in all; more are tried once. 0: no cap")
	fs.IntVar(&cfg.ClientWatchers, "max-client-watchers", 64, "watch streams one client may have open at once; more get 429 rate_limited. 0: no cap")
	fs.IntVar(&cfg.TotalWatchers, "max-total-watchers", 1024, "watch streams open at once in all; more get 429 rate_limited. 0: no cap")
	fs.Func("unfenced", "resource `prefix` of best-effort data (a cache fill): a PUT or DELETE there without a Fencing-Token is accepted, unfenced, and logged so; with a token it is checked. Repeatable; FENCE_UNFENCED takes a comma-separated list. Never for ledgers, inventory or bookings", func(v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return errors.New("an empty prefix would make every resource unfenced")
			}
			if err := fence.ValidateResource(p); err != nil {
				return err
			}
			cfg.Unfenced = append(cfg.Unfenced, p)
		}
		return nil
	})
	fs.IntVar(&cfg.MaxConns, "max-conns", 4096, "connections open at once, shared fairly between sources (IP addresses, IPv6 /64s); past it, a new one takes the slot of a connection of the source holding the most, if that holds at least two more (its idlest, else its oldest), else of its own source's idlest, else of one idle for 1s; else it waits up to 5s. 0: no cap")
	fs.StringVar(&cfg.SigningKey, "signing-key", "", "key `file` (from fence keygen) that signs a sequencer for every grant; its public key is served at GET /v1/keys")
	fs.StringVar(&cfg.AuthFile, "auth-file", "", "`file` of bearer tokens (hashed) and their grants; reloaded on SIGHUP. Without it there is no auth, and --listen must be loopback unless --insecure-listen")
	fs.BoolVar(&cfg.ProtectMetrics, "protect-metrics", false, "GET /metrics needs a token with admin:* (needs --auth-file)")
	fs.BoolVar(&cfg.InsecureListen, "insecure-listen", false, "allow a non-loopback --listen without --auth-file (no authentication at all)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate `file` (chain first to last): serve HTTPS, TLS 1.2 or later (with --tls-key)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key `file` of --tls-cert")
	fs.StringVar(&cfg.ClientCA, "client-ca", "", "PEM CA `file`: every client must present a certificate it signed (needs --tls-cert); with --auth-file, a request without a bearer token gets the grants of the principal named as the certificate's CommonName")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: fence serve [flags]

Runs the lock service and the fenced storage behind the v1 HTTP API, with the
state in the embedded store under --data, or with --store in etcd or PostgreSQL,
shared by several servers: one leads, the others forward to it and take over
when it fails. Logs are JSON lines on stderr. SIGINT or SIGTERM stops it
gracefully.

Examples:
  fence serve
  fence serve --listen 127.0.0.1:7700 --data /var/lib/fence
  FENCE_DATA=/var/lib/fence fence serve
  fence serve --lock-delay 5s   # a holder that paused past its TTL gets 5s to notice
  fence keygen --out /etc/fence/signing.key && fence serve --signing-key /etc/fence/signing.key
  fence serve --listen :7700 --auth-file /etc/fence/auth   # kill -HUP reloads it
  fence serve --listen :7700 --auth-file /etc/fence/auth --tls-cert server.pem --tls-key server-key.pem --client-ca ca.pem
  fence serve --listen 10.0.0.1:7700 --auth-file /etc/fence/auth --store etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/fence
  fence serve --listen 10.0.0.1:7700 --auth-file /etc/fence/auth \
      --store 'postgres://fence@db1:5432,db2:5432/fence?target_session_attrs=read-write'

The auth file has one line per token: NAME SHA256-HEX-OF-TOKEN PERM:PREFIX...
with PERM lock, write, read or admin and PREFIX a resource-name prefix ("*"
for all; "orders" also matches "orders-archive", so prefer "orders/").
Lines starting with # are comments. Hash a token with: echo -n "$TOKEN" | sha256sum

Flags (each has an environment twin FENCE_<FLAG>, e.g. FENCE_READ_TIMEOUT):
`)
		printDefaults(fs)
	}
	return fs
}

// heapFloor is the heap below which fence serve does not collect garbage.
const heapFloor = 64 << 20

// serve runs the service until ctx is cancelled (SIGINT, SIGTERM).
func serve(ctx context.Context, args []string, stdio stdio) error {
	stderr := stdio.err
	var cfg serveConfig
	if err := parseFlags(serveFlags(&cfg, stdio.out), args); err != nil {
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
	tlsConf, err := cfg.serverTLSConfig()
	if err != nil {
		return &usageError{fmt.Errorf("serve: %w", err)}
	}
	// The heap of a server is small and its garbage many small answers:
	// collecting it no sooner than at heapFloor saves most of the
	// collector's CPU, and a large heap is collected as GOGC says.
	defer gcfloor.Keep(heapFloor)()
	// Log lines are batched into few writes, off the request path; a crash
	// can lose the last logFlushInterval of them (never data).
	logOut := newLogWriter(stderr)
	defer logOut.Close()
	logger := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: cfg.LogLevel}))
	var tokens *auth.Reloader
	if cfg.AuthFile != "" {
		tokens = &auth.Reloader{}
		if err := tokens.Load(cfg.AuthFile); err != nil {
			return &usageError{fmt.Errorf("serve: --auth-file: %w", err)}
		}
	}

	registry := server.NewRegistry()
	registry.MustRegister(connMetrics()...)
	srvCfg := server.Config{
		Registry:             registry,
		Data:                 cfg.Data,
		Store:                cfg.Store,
		ElectionTTL:          cfg.ElectionTTL,
		UnsafeSkipEpochCheck: cfg.UnsafeNoEpoch,
		Logger:               logger,
		LockDelay:            cfg.LockDelay,
		Signer:               signer,
		MaxWaiters:           cfg.MaxWaiters,
		Unfenced:             cfg.Unfenced,
	}
	if cfg.TestClockFile != "" {
		wallclock.Watch(ctx, cfg.TestClockFile)
	}
	if cfg.UnsafeWallLeases {
		srvCfg.LockClock = wallclock.LeaseClock()
	}
	if srvCfg.Journal, err = cfg.journalOptions(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var hup chan os.Signal
	srvCfg.API = func(api *httpapi.Handler) {
		api.RateLimit, api.RateBurst = cfg.rateLimit()
		api.WaitersPerClient, api.Waiters = cfg.ClientWaiters, cfg.TotalWaiters
		api.WatchersPerClient, api.Watchers = cfg.ClientWatchers, cfg.TotalWatchers
		if tokens == nil {
			return
		}
		api.Authenticate = func(r *http.Request) (httpapi.Caller, error) {
			bearer := auth.RequestToken(r.Header.Get("Authorization"))
			var p *auth.Principal
			var err error
			if name := certName(r); bearer == "" && name != "" {
				// A verified client certificate (--client-ca) stands for
				// the principal named as its CommonName; but on a request
				// a standby forwarded, the certificate is the standby's.
				if r.Header.Get(wire.ForwardedHeader) != "" {
					return nil, fmt.Errorf("%w: a client certificate does not pass through a standby: send a bearer token, or send the request to the leader", fence.ErrUnauthorized)
				}
				p, err = tokens.IdentifyName(name)
			} else {
				p, err = tokens.Identify(bearer)
			}
			if err != nil {
				return nil, err
			}
			return principalCaller{p}, nil
		}
		api.ProtectMetrics = cfg.ProtectMetrics
	}
	// SIGHUP reloads the auth file; without one it does nothing, rather
	// than stop the server (its default), so that a service manager's
	// reload is always safe.
	hup = make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHUP(ctx, hup, tokens, cfg.AuthFile, logger)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	limited := limitListen(ln, cfg.MaxConns) // --max-conns
	if limited != nil {
		ln = limited
	}
	// net/http's own error answers as problems; HTTPS with --tls-cert.
	errorLog := serverErrorLog(logger) // TLS handshake failures and the like, sampled
	if tlsConf != nil {
		ln = httpapi.ProblemTLSListener(ln, tlsConf, cfg.ReadHeaderTimeout, errorLog.Printf)
	} else {
		ln = httpapi.ProblemListener(ln)
	}
	defer ln.Close()
	if cfg.Store != "" {
		if srvCfg.Advertise, err = cfg.advertise(ln.Addr(), tlsConf != nil); err != nil {
			return &usageError{fmt.Errorf("serve: %w", err)}
		}
		if srvCfg.PeerTransport, err = cfg.peerTransport(tlsConf); err != nil {
			return &usageError{fmt.Errorf("serve: %w", err)}
		}
	}
	// The port answers at once, while the store opens (a journal replays,
	// an engine may have no quorum): /healthz 200, the rest 503 not_ready
	// saying what the server waits for.
	waiting := "the embedded store in " + cfg.Data + " to open"
	if cfg.Store != "" {
		waiting = "the store " + redactStore(cfg.Store) + " to answer (an etcd without quorum, or a database that does not accept connections, keeps it waiting)"
	}
	var handler atomic.Pointer[http.Handler]
	starting := httpapi.Starting(func() string { return waiting })
	handler.Store(&starting)
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errorLog,
	}
	if limited != nil {
		srv.ConnState = limited.trackState // which connections --max-conns may close when full
	}
	errC := make(chan error, 1)
	go func() { errC <- srv.Serve(ln) }()
	// The first log line, and the serving line, say whether auth is on.
	level, authAttrs := slog.LevelInfo, []any{"auth", "off", "auth_note", "no --auth-file: loopback only"}
	switch {
	case tokens != nil:
		authAttrs = []any{"auth", "on", "auth_file", cfg.AuthFile, "auth_tokens", tokens.Table().Len(), "protect_metrics", cfg.ProtectMetrics}
	case !isLoopback(cfg.Listen):
		level = slog.LevelWarn
		authAttrs[3] = "no --auth-file and --insecure-listen: anyone who can reach this address has full access"
	}
	logger.Log(ctx, level, "fence starting", append([]any{"addr", ln.Addr().String(), "waiting_for", waiting}, authAttrs...)...)
	fenceSrv, err := openLogging(ctx, srvCfg, logger, waiting)
	if err != nil {
		srv.Close()
		if errors.Is(err, server.ErrKeyMismatch) { // --signing-key, as a bad key file is
			return &usageError{fmt.Errorf("serve: %w", err)}
		}
		return fmt.Errorf("serve: %w", err)
	}
	defer fenceSrv.Close()
	// Loading the state left garbage (the maps' tables as they grew, the
	// replay's buffers) as large as the state itself: collect it and give
	// it back before serving.
	debug.FreeOSMemory()
	keyID := ""
	if signer != nil {
		keyID = signer.ID
	}
	// Long-polling acquires would hold Shutdown for up to their wait:
	// draining answers them at once (503), and stops new lock calls.
	srv.RegisterOnShutdown(fenceSrv.Drain)

	storeAttrs := []any{"data", cfg.Data}
	if cfg.UnsafeWallLeases {
		level = slog.LevelWarn
		storeAttrs = append(storeAttrs, "unsafe_leases", "leases are timed by the wall clock: a step of it ends them early (for tests only)")
	}
	if cfg.UnsafeNoSync {
		level = slog.LevelWarn
		storeAttrs = append(storeAttrs, "unsafe", "the journal acknowledges changes before they are synced: a power cut loses them (for tests only)")
	}
	if cfg.Store != "" {
		storeAttrs = []any{"store", redactStore(cfg.Store), "advertise", srvCfg.Advertise}
		if cfg.UnsafeNoEpoch {
			level = slog.LevelWarn
			storeAttrs = append(storeAttrs, "unsafe", "the writer-epoch check is off: a replaced leader can still commit (for tests only)")
		}
	}
	attrs := append([]any{"addr", ln.Addr().String()}, storeAttrs...)
	if len(cfg.Unfenced) > 0 {
		attrs = append(attrs, "unfenced", cfg.Unfenced)
	}
	attrs = append(attrs, "lock_delay", cfg.LockDelay.String(), "signing_key_id", keyID, "version", version(),
		"tls", tlsConf != nil, "client_ca", cfg.ClientCA != "")
	var h http.Handler = fenceSrv
	handler.Store(&h)
	logger.Log(ctx, level, "fence serving", append(attrs, authAttrs...)...)
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

// principalCaller is a principal of the auth file as the API's caller.
type principalCaller struct{ p *auth.Principal }

func (c principalCaller) Name() string { return c.p.Name }

func (c principalCaller) Allowed(perm, resource string) bool {
	return c.p.Allowed(auth.Perm(perm), resource)
}

// reloadOnHUP reloads the auth file on every signal from hup until ctx is
// done. A bad file keeps the tokens loaded before; without an auth file
// (tokens nil) a signal only says so in the log.
func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, tokens *auth.Reloader, file string, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if tokens == nil {
				logger.Info("SIGHUP: nothing to reload (no --auth-file)")
				continue
			}
			if err := tokens.Load(file); err != nil {
				logger.Error("auth file reload failed; keeping the previous tokens", "auth_file", file, "error", err)
				continue
			}
			logger.Info("auth file reloaded", "auth_file", file, "tokens", tokens.Table().Len())
		}
	}
}

// printDefaults prints the flags of fs that have a usage text (the others
// are for tests).
func printDefaults(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage != "" {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.PrintDefaults()
}

// redactStore hides the password of a --store URL.
func redactStore(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// advertise returns --advertise, or the URL of the listen address ln if
// --listen names a host (not all interfaces).
func (c *serveConfig) advertise(ln net.Addr, tls bool) (string, error) {
	if c.Advertise != "" {
		return c.Advertise, nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return "", fmt.Errorf("--store needs --advertise URL: --listen %q does not say which address the other servers can reach", c.Listen)
	}
	_, port, _ := net.SplitHostPort(ln.String())
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// peerTransport returns the transport that forwards requests to the leader:
// with --tls-cert, it verifies the leader with --peer-cacert (or the
// system's CAs) and presents this server's certificate.
func (c *serveConfig) peerTransport(server *tls.Config) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if server == nil && c.PeerCACert == "" {
		return t, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.PeerCACert != "" {
		pool, err := loadCertPool("--peer-cacert", c.PeerCACert)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if server != nil {
		tc.Certificates = server.Certificates
	}
	t.TLSClientConfig = tc
	return t, nil
}

// journalOptions returns the embedded store's options of the test-only
// flags: --unsafe-ack-before-sync, and --test-sync-log, whose file is told
// "SEGMENT OFFSET" each time the log is durable further (fence chaos's
// lose-unsynced fault drops what was written past it, as a power cut).
func (c *serveConfig) journalOptions() (journal.Options, error) {
	opts := journal.Options{UnsafeAckBeforeSync: c.UnsafeNoSync}
	if c.TestSyncLog == "" {
		return opts, nil
	}
	f, err := os.OpenFile(c.TestSyncLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return opts, fmt.Errorf("--test-sync-log: %w", err)
	}
	opts.Synced = func(segment string, off int64) { fmt.Fprintf(f, "%s %d\n", segment, off) }
	return opts, nil
}

// openLogging opens the server, and logs every 5 s what it still waits for
// while that takes long.
func openLogging(ctx context.Context, cfg server.Config, logger *slog.Logger, waiting string) (*server.Server, error) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		start := time.Now()
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				logger.Warn("fence still starting", "waiting_for", waiting, "for", time.Since(start).Round(time.Second).String())
			}
		}
	}()
	return server.Open(ctx, cfg)
}
