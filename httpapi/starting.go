package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/fence-lock/fence/wire"
)

// Starting is the handler of a server that listens but does not serve
// yet: its store is opening (a journal replaying, an engine to reach). So
// that probes and clients get an answer at once rather than a connection
// that hangs, GET /healthz is 200 (the process is alive), and every other
// request, GET /readyz included, is 503 not_ready, whose detail says what
// the server waits for (waiting returns it), with Retry-After: 1.
func Starting(waiting func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			json.NewEncoder(w).Encode(wire.Health{Status: "ok"})
			return
		}
		w.Header().Set("Retry-After", "1")
		WriteProblem(w, fmt.Errorf("%w: starting: %s", wire.ErrNotReady, waiting()))
	})
}
