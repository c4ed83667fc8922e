package client

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence/wire"
)

// TestAPI_RenewSendsDeadline checks that a renewal carries its context's
// deadline in Fence-Deadline, so that a server that reads it after the
// client gave up applies nothing; and none without a deadline.
func TestAPI_RenewSendsDeadline(t *testing.T) {
	e := newEnv(t)
	tok := e.acquire(t, "orders", "A")
	var mu sync.Mutex
	var sent []string
	e.ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get(wire.DeadlineHeader))
		mu.Unlock()
		e.srv.ServeHTTP(w, r)
	})
	api, err := NewAPI(e.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	if _, err := api.Renew(ctx, "orders", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Renew(t.Context(), "orders", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 {
		t.Fatalf("%d requests, want 2", len(sent))
	}
	got, err := time.Parse(time.RFC3339Nano, sent[0])
	if err != nil || !got.Equal(deadline) {
		t.Fatalf("%s = %q (%v), want the context's deadline %s", wire.DeadlineHeader, sent[0], err, deadline.UTC().Format(time.RFC3339Nano))
	}
	if sent[1] != "" {
		t.Fatalf("%s = %q without a deadline, want none", wire.DeadlineHeader, sent[1])
	}
}
