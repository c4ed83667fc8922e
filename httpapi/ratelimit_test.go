package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/fake"
	"github.com/fence-lock/fence/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestServer_RateLimit(t *testing.T) {
	fk := fake.New()
	srv := NewServer(fk, fk)
	srv.Logger = slog.New(slog.DiscardHandler)
	srv.RateLimit = 0.5 // one token every 2 s
	srv.RateBurst = 2

	do := func(path, remote, authz string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}

	before := testutil.ToFloat64(rateLimitedTotal)
	for i := range 2 {
		if w := do("/v1/keys", "10.0.0.1:1234", ""); w.Code != 200 {
			t.Fatalf("request %d: %d, want 200 (within the burst)", i, w.Code)
		}
	}
	w := do("/v1/keys", "10.0.0.1:5678", "") // same IP, other port: same client
	if w.Code != 429 {
		t.Fatalf("third request: %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Fatalf("Retry-After=%q, want 2", got)
	}
	var p wire.Body
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Code != "rate_limited" || p.Status != 429 || p.RetryAfterMS == nil || *p.RetryAfterMS <= 1000 || *p.RetryAfterMS > 2000 {
		t.Fatalf("problem=%+v, want rate_limited 429 with retry_after_ms in (1000, 2000]", p)
	}
	if got := testutil.ToFloat64(rateLimitedTotal) - before; got != 1 {
		t.Fatalf("fence_http_rate_limited_total rose by %v, want 1", got)
	}
	perr := wire.ProblemError(w.Code, w.Body.Bytes())
	if !errors.Is(perr, fence.ErrRateLimited) {
		t.Fatalf("ProblemError=%v, want fence.ErrRateLimited", perr)
	}
	var pp *wire.Problem
	if !errors.As(perr, &pp) || pp.RetryAfter <= time.Second {
		t.Fatalf("Problem=%+v, want RetryAfter over 1s", pp)
	}

	// Health checks are exempt.
	for _, path := range []string{"/healthz", "/readyz"} {
		if w := do(path, "10.0.0.1:1234", ""); w.Code != 200 {
			t.Fatalf("%s: %d, want 200 (exempt)", path, w.Code)
		}
	}
	// Another IP is another client.
	if w := do("/v1/keys", "10.0.0.2:1234", ""); w.Code != 200 {
		t.Fatalf("other IP: %d, want 200", w.Code)
	}
	// A bearer token is a client of its own, whatever its address.
	for i := range 2 {
		if w := do("/v1/keys", "10.0.0.1:1234", "Bearer alice"); w.Code != 200 {
			t.Fatalf("alice request %d: %d, want 200", i, w.Code)
		}
	}
	if w := do("/v1/keys", "10.0.0.3:1234", "Bearer alice"); w.Code != 429 {
		t.Fatalf("alice from another IP: %d, want 429", w.Code)
	}
	if w := do("/v1/keys", "10.0.0.1:1234", "Bearer bob"); w.Code != 200 {
		t.Fatalf("bob: %d, want 200", w.Code)
	}
}

func TestLimiters_Evict(t *testing.T) {
	var ls limiters
	now := time.Now()
	ls.allow("a", 1, 1, now)
	ls.allow("b", 1, 1, now.Add(limiterIdle-time.Second))
	ls.allow("c", 1, 1, now.Add(limiterIdle))
	if n := ls.len(); n != 2 {
		t.Fatalf("%d clients, want 2 (a evicted)", n)
	}
	if ok, _ := ls.allow("a", 1, 1, now.Add(limiterIdle)); !ok {
		t.Fatal("an evicted client starts with a full bucket")
	}
}

func TestServer_RateLimitOff(t *testing.T) {
	fk := fake.New()
	srv := NewServer(fk, fk)
	srv.Logger = slog.New(slog.DiscardHandler)
	for i := range 50 {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/v1/keys", nil))
		if w.Code != 200 {
			t.Fatalf("request %d: %d, want 200", i, w.Code)
		}
	}
}
