package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/watch"
)

// BenchmarkRequest measures the request path of each step of the cycle,
// acquire -> fenced PUT -> release, in process (no network, state in
// memory, the logs formatted and dropped): its CPU time and allocations per
// request, which is what the server pays beyond the network and the disk.
//
//	go test -run '^$' -bench Request -benchmem ./httpapi/
//
// The watchers=N variants publish every change to a hub, as fence serve
// does, with N watchers streaming it over loopback HTTP (GET /v1/watch):
// watchers=0 is the hub alone, next to the baseline without one.
func BenchmarkRequest(b *testing.B) {
	b.Run("cycle", func(b *testing.B) { benchCycle(b, -1) })
	for _, n := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("cycle/watchers=%d", n), func(b *testing.B) { benchCycle(b, n) })
	}
}

// benchCycle runs the cycle with a hub and watchers watching (-1: no hub).
func benchCycle(b *testing.B, watchers int) {
	db := memory.New()
	locks := lock.NewService(db)
	locks.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	srv := httpapi.NewHandler(locks, db)
	srv.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	if watchers >= 0 {
		hub := watch.NewHub()
		defer hub.Close()
		locks.Events, srv.Events = hub, hub
	}
	if err := locks.Open(b.Context()); err != nil {
		b.Fatal(err)
	}
	defer locks.Close()
	var received atomic.Int64
	if watchers > 0 {
		ts := httptest.NewServer(srv)
		defer ts.Close()
		api, err := client.NewAPI(ts.URL)
		if err != nil {
			b.Fatal(err)
		}
		for range watchers {
			w := api.Watch(b.Context(), "", "")
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			go func() {
				for {
					if _, err := w.Next(); err != nil {
						return
					}
					received.Add(1)
				}
			}()
		}
	}
	do := func(method, path, body string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	{
		b.ReportAllocs()
		for i := range b.N {
			res := fmt.Sprintf("/v1/locks/r%d", i%64)
			w := do("POST", res+"/acquire", `{"holder":"h","ttl_ms":10000}`)
			if w.Code != http.StatusOK {
				b.Fatalf("acquire: %d %s", w.Code, w.Body)
			}
			tok := tokenOf(w.Body.String())
			if w := do("PUT", fmt.Sprintf("/v1/kv/r%d/k", i%64), "value", "Fencing-Token", tok); w.Code != http.StatusOK {
				b.Fatalf("put: %d %s", w.Code, w.Body)
			}
			if w := do("POST", res+"/release", `{"token":`+tok+`}`); w.Code != http.StatusOK {
				b.Fatalf("release: %d %s", w.Code, w.Body)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(3*b.N), "ns/request")
		if watchers > 0 {
			b.ReportMetric(float64(received.Load())/float64(watchers*b.N), "events/cycle/watcher")
		}
	}
}

// tokenOf returns the token of a lease's JSON, as text.
func tokenOf(body string) string {
	_, rest, _ := strings.Cut(body, `"token":`)
	tok, _, _ := strings.Cut(rest, ",")
	return tok
}
