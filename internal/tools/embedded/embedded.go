// Package embedded runs a fence server inside the calling process, on the
// embedded store in a temporary directory, for the tools that need one when
// the user gave no server: fence demo and fence bench.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fence-lock/fence/server"
)

// Server is a fence server embedded in this process (server.Open, the
// embedded store in a new temporary directory), behind the v1 HTTP API on a
// loopback port. It logs nothing. Close stops it and removes the directory.
type Server struct {
	// URL is the server's base URL, e.g. "http://127.0.0.1:40123".
	URL string

	dir   string
	fence *server.Server
	srv   *http.Server
	doneC chan struct{} // closed when Serve has returned
}

// Start starts an embedded fence server. The caller must Close it.
func Start(ctx context.Context) (*Server, error) {
	dir, err := os.MkdirTemp("", "fence-embedded-")
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	s := &Server{dir: dir, doneC: make(chan struct{})}
	fail := func(err error) (*Server, error) {
		return nil, errors.Join(fmt.Errorf("embedded server: %w", err), s.Close())
	}
	if s.fence, err = server.Open(ctx, server.Config{Data: dir, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s.fence,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}
	go func() {
		defer close(s.doneC)
		s.srv.Serve(ln) // returns http.ErrServerClosed after Shutdown or Close
	}()
	return s, nil
}

// Close stops the server, closes its state and removes its directory. It
// must be called once.
func (s *Server) Close() error {
	var errs []error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close() // requests still in flight after the grace period: cut them
		}
		cancel()
		<-s.doneC
	}
	if s.fence != nil {
		errs = append(errs, s.fence.Close())
	}
	errs = append(errs, os.RemoveAll(s.dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing the embedded server: %w", err)
	}
	return nil
}
