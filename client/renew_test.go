package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/wire"
)

// recordDeadlines puts a proxy in front of a real server that records the
// Fence-Deadline of every request ("" for none), and returns its URL.
func recordDeadlines(t *testing.T) (string, func() []string) {
	t.Helper()
	target, err := url.Parse(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var sent []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get(wire.DeadlineHeader))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), sent...)
	}
}

// TestAPI_RenewSendsDeadline checks that a renewal carries its context's
// deadline, on the server's clock as the client learnt it from its grant,
// in Fence-Deadline; none without a deadline; and that a refusal of a
// deadline the client has not reached (a wrong estimate of the server's
// clock) sends the renewal again without one.
func TestAPI_RenewSendsDeadline(t *testing.T) {
	u, sent := recordDeadlines(t)
	api, err := NewAPI(u)
	if err != nil {
		t.Fatal(err)
	}
	l, err := api.Acquire(t.Context(), "orders", "A", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	if _, err := api.Renew(ctx, "orders", l.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Renew(t.Context(), "orders", l.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := sent()
	if len(got) != 3 || got[0] != "" || got[2] != "" {
		t.Fatalf("%s of acquire, renew with a deadline, renew without = %q; want one on the second only", wire.DeadlineHeader, got)
	}
	d, err := time.Parse(time.RFC3339Nano, got[1])
	if err != nil || d.Before(deadline) || d.After(deadline.Add(maxClockRTT)) {
		t.Fatalf("%s = %q (%v), want the context's deadline %s on this machine's clock, at most %s later",
			wire.DeadlineHeader, got[1], err, deadline.UTC().Format(time.RFC3339Nano), maxClockRTT)
	}

	// An estimate an hour off: the server refuses the deadline, the client,
	// still waiting, sends the renewal again without one, and learns anew.
	api.clock.mu.Lock()
	api.clock.ahead = -time.Hour
	api.clock.mu.Unlock()
	if _, err := api.Renew(ctx, "orders", l.Token, time.Minute); err != nil {
		t.Fatalf("renewal with a wrong estimate of the server's clock: %v", err)
	}
	if got := sent()[3:]; len(got) != 2 || got[0] == "" || got[1] != "" {
		t.Fatalf("%s of the renewal and its resend = %q; want one, then none", wire.DeadlineHeader, got)
	}
	if at, known := api.clock.toServer(deadline); !known || at.Sub(deadline) > maxClockRTT || at.Before(deadline) {
		t.Fatalf("after the resend the estimate is %v (known %v), want this machine's clock again", at.Sub(deadline), known)
	}
}
