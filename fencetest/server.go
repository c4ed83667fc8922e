package fencetest

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/server"
)

// NewServer runs a fence server in the test's process, as fence serve would
// (server.Open, the embedded store in t.TempDir()), behind the v1 HTTP API
// on a loopback port, logging nothing. It returns the server's base URL and
// stops the server when the test ends. wrap, if not nil, wraps the storage
// the API serves (to make a server that misbehaves, say).
func NewServer(t testing.TB, wrap func(fence.Store) fence.Store) string {
	t.Helper()
	s, err := server.Open(t.Context(), server.Config{
		Data:      t.TempDir(),
		Logger:    slog.New(slog.DiscardHandler),
		WrapStore: wrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return srv.URL
}
