package fencetest

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/bolt"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
)

// NewServer runs a fence server in the test's process, as fence serve would:
// the lock service and bolt storage in t.TempDir(), behind the v1 HTTP API on
// a loopback port, logging nothing. It returns the server's base URL and
// stops the server when the test ends. wrap, if not nil, wraps the storage
// the API serves (to make a server that misbehaves, say).
func NewServer(t testing.TB, wrap func(fence.Store) fence.Store) string {
	t.Helper()
	db, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	locks := lock.NewService(db)
	locks.Logger = slog.New(slog.DiscardHandler)
	if err := locks.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	var store fence.Store = db
	if wrap != nil {
		store = wrap(db)
	}
	api := httpapi.NewServer(locks, store)
	api.Logger = slog.New(slog.DiscardHandler)
	api.Ready = db.Check
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		locks.Close()
		db.Close()
	})
	return srv.URL
}
