package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// lwwStore is storage without fencing: a last-writer-wins key-value store
// that speaks the same PUT and GET /v1/kv/{resource}/{key} as fence's
// storage, so that both runs of the demo have the same shape, but ignores
// the Fencing-Token header. Every PUT is stored; the last one wins. It is
// safe for concurrent use.
type lwwStore struct {
	mu     sync.Mutex
	rev    uint64            // store-wide, +1 per write
	values map[string][]byte // by resource + "\x00" + key
}

// putAnswer is the answer to a PUT: the members of fence's, without a fence.
type putAnswer struct {
	Resource string `json:"resource"`
	Key      string `json:"key"`
	Revision uint64 `json:"revision"`
}

func newLWWStore() *lwwStore {
	return &lwwStore{values: make(map[string][]byte)}
}

// handler returns the store's HTTP API.
func (s *lwwStore) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/kv/{resource}/{key...}", s.put)
	mux.HandleFunc("GET /v1/kv/{resource}/{key...}", s.get)
	return mux
}

// put stores the body, whatever Fencing-Token the request carries: this is
// the store that trusts its clients to stop writing when they lose the lock.
func (s *lwwStore) put(w http.ResponseWriter, r *http.Request) {
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	resource, key := r.PathValue("resource"), r.PathValue("key")
	s.mu.Lock()
	s.rev++
	rev := s.rev
	s.values[resource+"\x00"+key] = value
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(putAnswer{resource, key, rev})
}

func (s *lwwStore) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	value, ok := s.values[r.PathValue("resource")+"\x00"+r.PathValue("key")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(value)
}

// lwwServer is a lwwStore served over HTTP on a loopback port.
type lwwServer struct {
	URL   string
	srv   *http.Server
	doneC chan struct{}
}

// startLWW starts a last-writer-wins store on 127.0.0.1 and a free port.
func startLWW() (*lwwServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: last-writer-wins store: %w", err)
	}
	s := &lwwServer{
		URL: "http://" + ln.Addr().String(),
		srv: &http.Server{
			Handler:           newLWWStore().handler(),
			ReadHeaderTimeout: 5 * time.Second,
			ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
		},
		doneC: make(chan struct{}),
	}
	go func() {
		defer close(s.doneC)
		s.srv.Serve(ln) // returns http.ErrServerClosed after Shutdown or Close
	}()
	return s, nil
}

// Close stops the server.
func (s *lwwServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.doneC
	if err != nil {
		return fmt.Errorf("demo: closing the last-writer-wins store: %w", err)
	}
	return nil
}
