package client_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/wire"
)

// Gate modes: how the test server treats requests.
const (
	pass     = iota // serve them
	blackout        // hold them until the client gives up, answering nothing
	reset           // serve them, then drop the connection before the answer
)

// server is a real fence server (lock service and bolt storage behind the
// HTTP API) on a loopback port, behind a gate that can fail requests.
type server struct {
	URL  string
	mode atomic.Int32
	srv  *httptest.Server
	seen sync.Map // "METHOD /path" to the last Fence-Sequencer header received
}

func newServer(t testing.TB) *server {
	t.Helper()
	return newSignedServer(t, nil)
}

// newSignedServer is newServer with a lock service that signs its grants
// with signer (nil: none).
func newSignedServer(t testing.TB, signer *fence.SigningKey) *server {
	t.Helper()
	db, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	locks := lock.NewService(db)
	locks.Logger = logger
	locks.Signer = signer
	if err := locks.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	api := httpapi.NewHandler(locks, db)
	api.Logger = logger
	if signer != nil {
		api.Keys = []fence.PublicKey{signer.Public()}
	}
	s := &server{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.seen.Store(r.Method+" "+r.URL.Path, r.Header.Get(wire.SequencerHeader))
		switch s.mode.Load() {
		case blackout:
			// Reading the body lets net/http watch the connection, so the
			// request's context ends when the client gives up.
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		case reset:
			api.ServeHTTP(httptest.NewRecorder(), r) // the change happens ...
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // ... but its answer is lost
			}
			s.mode.Store(pass)
			return
		}
		api.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.mode.Store(pass)
		s.srv.CloseClientConnections()
		s.srv.Close()
		locks.Close()
		db.Close()
	})
	return s
}

// newHTTPServer runs h on a loopback port and returns its URL.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
