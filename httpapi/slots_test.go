package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence/watch"
	"github.com/fence-lock/fence/wire"
)

// waitHeld polls until the server counts n waiting acquires.
func waitHeld(t *testing.T, s *slots, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		total := s.total
		s.mu.Unlock()
		if total == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slots held, want %d", total, n)
		}
	}
}

// TestHandler_WaitersCapped checks that an acquire past the cap of waiting
// acquires, per client or in all, is tried once instead of waiting: granted
// if the lock is free, lock_held at once if not; and that a slot freed lets
// the next one wait.
func TestHandler_WaitersCapped(t *testing.T) {
	for _, tt := range []struct {
		name             string
		perClient, total int
	}{{"per client", 2, 0}, {"in all", 0, 2}} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.srv.WaitersPerClient, e.srv.Waiters = tt.perClient, tt.total
			e.acquire("r", "a")
			refusedBefore := e.metricValue("fence_http_waits_refused_total")

			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			for _, holder := range []string{"b", "c"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/locks/r/acquire", strings.NewReader(`{"holder":"`+holder+`","wait_ms":300000}`))
					if resp, err := e.ts.Client().Do(req); err == nil {
						resp.Body.Close()
					}
				}()
			}
			waitHeld(t, &e.srv.waiting, 2)

			start := time.Now()
			e.do("POST", "/v1/locks/r/acquire", `{"holder":"d","wait_ms":20000}`).problem(t, 409, "lock_held")
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the acquire past the cap waited %s", d)
			}
			e.do("POST", "/v1/locks/free/acquire", `{"holder":"d","wait_ms":20000}`).ok(t)
			if got := e.metricValue("fence_http_waits_refused_total") - refusedBefore; got != 2 {
				t.Fatalf("fence_http_waits_refused_total rose by %v, want 2", got)
			}

			cancel() // the two waiters go
			wg.Wait()
			waitHeld(t, &e.srv.waiting, 0)
			start = time.Now()
			e.do("POST", "/v1/locks/r/acquire", `{"holder":"d","wait_ms":300}`).problem(t, 409, "lock_held")
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Fatalf("with the waiters gone, an acquire was answered after %s, before its wait", d)
			}
		})
	}
}

// TestHandler_WatchersCapped checks that a watch stream past the cap, per
// client or in all, is answered 429 rate_limited, and that closing one lets
// the next one open.
func TestHandler_WatchersCapped(t *testing.T) {
	for _, tt := range []struct {
		name             string
		perClient, total int
	}{{"per client", 2, 0}, {"in all", 0, 2}} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			hub := watch.NewHub()
			t.Cleanup(hub.Close)
			e.srv.Events = hub
			e.srv.WatchersPerClient, e.srv.Watchers = tt.perClient, tt.total

			open := func() (*http.Response, context.CancelFunc) {
				t.Helper()
				ctx, cancel := context.WithCancel(t.Context())
				req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/watch", nil)
				resp, err := e.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cancel(); resp.Body.Close() })
				return resp, cancel
			}
			var cancels []context.CancelFunc
			for range 2 {
				resp, cancel := open()
				if resp.StatusCode != 200 {
					t.Fatalf("watch stream: %d", resp.StatusCode)
				}
				cancels = append(cancels, cancel)
			}
			p := e.do("GET", "/v1/watch", "").problem(t, 429, "rate_limited")
			if !strings.Contains(p["detail"].(string), "too many watch streams") {
				t.Fatalf("detail %q does not say which limit", p["detail"])
			}
			if got := e.metricValue("fence_http_watches_refused_total"); got < 1 {
				t.Fatalf("fence_http_watches_refused_total = %v", got)
			}
			cancels[0]()
			waitHeld(t, &e.srv.watching, 1)
			if resp, _ := open(); resp.StatusCode != 200 {
				t.Fatalf("watch stream after one closed: %d", resp.StatusCode)
			}
		})
	}
}

// TestHandler_ForwardedWaitersCountInTotal checks that acquires a standby
// forwarded without credentials, all from its address, are held to the
// total cap only, not to the cap of one client.
func TestHandler_ForwardedWaitersCountInTotal(t *testing.T) {
	e := newEnv(t)
	e.srv.WaitersPerClient, e.srv.Waiters = 1, 0
	e.acquire("r", "a")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/locks/r/acquire", strings.NewReader(`{"holder":"b","wait_ms":300000}`))
		if resp, err := e.ts.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitHeld(t, &e.srv.waiting, 1)
	start := time.Now()
	e.do("POST", "/v1/locks/r/acquire", `{"holder":"c","wait_ms":300}`, wire.ForwardedHeader, "http://standby:7700").problem(t, 409, "lock_held")
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a forwarded acquire past one client's cap was answered after %s, before its wait", d)
	}
}
