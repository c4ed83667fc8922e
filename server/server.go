package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/journal"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/watch"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is the configuration of a fence server. The zero value of every
// field but Data (or Store) is a sensible default.
type Config struct {
	// Store is the URL of a replicated engine that several servers share:
	// "etcd://host:port[,host:port...]/prefix" or "postgres://..." (see
	// OpenEngine). "", the default, means the embedded store in Data.
	Store string
	// Data is the directory of the embedded store (created if missing; see
	// OpenEmbedded); used only when Store is "".
	Data string
	// Journal are the options of the embedded store; the zero value is
	// its defaults.
	Journal journal.Options
	// Advertise is the base URL at which clients and the other servers
	// reach this one ("http://10.0.0.1:7700"). Required with Store.
	Advertise string
	// ElectionTTL is how long the leadership of a dead server lasts before
	// another takes over, with Store. Default: the engine's (2s).
	ElectionTTL time.Duration
	// PeerTransport sends the requests a standby forwards to the leader.
	// Default: a clone of http.DefaultTransport.
	PeerTransport http.RoundTripper
	// UnsafeSkipEpochCheck makes the engine's commits skip the writer-epoch
	// check, with Store. Only tests set it: it shows what the check prevents.
	UnsafeSkipEpochCheck bool

	// Logger receives the server's logs. Default: slog.Default().
	Logger *slog.Logger
	// LockDelay, Signer and MaxWaiters configure the lock service (see
	// lock.Service).
	LockDelay  time.Duration
	Signer     *fence.SigningKey
	MaxWaiters int
	// LockClock, if not nil, times the leases instead of the monotonic
	// clock: for the negative control of a test only (see lock.Service.Clock).
	LockClock func() time.Time
	// Unfenced are the prefixes of best-effort resources, whose writes may
	// come without a token (see httpapi.Handler.Unfenced).
	Unfenced []string
	// API, if not nil, configures every httpapi.Handler the server builds
	// (authorisation, rate limits, keys) after its defaults are set.
	API func(*httpapi.Handler)
	// WrapStore, if not nil, wraps the store the API serves (a test can make
	// a server that misbehaves).
	WrapStore func(fence.Store) fence.Store
	// Registry receives the server's metrics (the lock service's, the
	// commit's, the API's, fence_build_info), and GET /metrics serves it.
	// Nil, the default, is a registry of the server's own, with the Go
	// runtime's and the process's collectors: the server registers nothing
	// in prometheus.DefaultRegisterer.
	Registry *prometheus.Registry
}

// Server is a whole fence server: the store, the lock service and the v1
// HTTP API, from a Config. It is an http.Handler, safe for concurrent use.
type Server struct {
	cfg    Config
	logger *slog.Logger

	handler atomic.Pointer[http.Handler] // what serves requests now

	closeOnce sync.Once
	drainOnce sync.Once
	closeErr  error
	serving   *serving // what the embedded store serves; nil with Store
	node      *node    // with Store: campaigns, leads and stands by
}

// serving is what serves while this server leads (always, on the embedded
// store): a store, the lock service on it, and the API on both.
type serving struct {
	locks  *lock.Service
	events *watch.Hub
	api    *httpapi.Handler
	close  func() error // closes the store
}

// drain stops the lock service and ends its watch streams.
func (t *serving) drain() {
	t.locks.Close()
	t.events.Close()
}

// Open opens the store that cfg names and starts serving from it. On the
// embedded store the server leads at once; on a shared store it starts as a
// standby that forwards to the leader and campaigns to lead. The caller must
// Close the server.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Registry == nil {
		cfg.Registry = NewRegistry()
	}
	if err := RegisterMetrics(cfg.Registry); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logger: cfg.Logger}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if cfg.Store != "" {
		if err := s.openCluster(ctx); err != nil {
			return nil, err
		}
		return s, nil
	}
	if cfg.Data == "" {
		return nil, errors.New("server: no data directory")
	}
	db, err := OpenEmbeddedOptions(cfg.Data, cfg.Journal)
	if err != nil {
		return nil, err
	}
	t, err := s.newServing(ctx, db, db, db.Check, db.Close)
	if err != nil {
		return nil, err
	}
	s.serving = t
	var h http.Handler = t.api
	s.handler.Store(&h)
	return s, nil
}

// newServing starts the lock service on ledger and the API on it and store.
// On failure it closes the store with closeStore.
func (s *Server) newServing(ctx context.Context, ledger fence.Ledger, store fence.Store, ready func() error, closeStore func() error) (*serving, error) {
	events := watch.NewHub()
	locks := lock.NewService(ledger)
	locks.Events = events
	locks.Logger = s.logger
	locks.LockDelay = s.cfg.LockDelay
	locks.Signer = s.cfg.Signer
	locks.MaxWaiters = s.cfg.MaxWaiters
	locks.Clock = s.cfg.LockClock
	if err := locks.Open(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("server: %w", err), closeStore())
	}
	if s.cfg.WrapStore != nil {
		store = s.cfg.WrapStore(store)
	}
	api := httpapi.NewHandler(locks, store)
	s.configure(api)
	api.Ready = ready
	api.Events = events
	return &serving{locks: locks, events: events, api: api, close: closeStore}, nil
}

// configure sets what every API server of this server shares.
func (s *Server) configure(api *httpapi.Handler) {
	api.Logger = s.logger
	api.Gatherer = s.cfg.Registry
	api.Unfenced = s.cfg.Unfenced
	if s.cfg.Signer != nil {
		api.Keys = []fence.PublicKey{s.cfg.Signer.Public()}
	}
	if s.cfg.API != nil {
		s.cfg.API(api)
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.handler.Load()).ServeHTTP(w, r)
}

// Drain stops the lock service: acquires waiting for a lock are answered
// 503 at once, and later lock calls too, while storage requests in flight
// finish. Call it when the HTTP server starts shutting down (see
// http.Server.RegisterOnShutdown), so that long polls do not hold the
// shutdown for their whole wait.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		if s.serving != nil {
			s.serving.drain()
		}
		if s.node != nil {
			s.node.drain()
		}
	})
}

// Close drains the server and closes its store; a leader resigns, so that
// another server takes over at once. Leases stay recorded, to be restored
// by the next leader. A second Close returns the first's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.Drain()
		if s.serving != nil {
			s.closeErr = s.serving.close()
		}
		if s.node != nil {
			s.closeErr = s.node.close()
		}
	})
	return s.closeErr
}
