package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/fake"
	"github.com/fence-lock/fence/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHandler_RateLimit(t *testing.T) {
	fk := fake.New()
	srv := NewHandler(fk, fk)
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
	// With auth, a caller is a client of its own, whatever its address.
	srv.Authenticate = testAuth(map[string][]string{"alice": {"read:*"}, "bob": {"read:*"}})
	for i := range 2 {
		if w := do("/v1/locks/x", "10.0.0.1:1234", "Bearer alice"); w.Code != 200 {
			t.Fatalf("alice request %d: %d, want 200", i, w.Code)
		}
	}
	if w := do("/v1/locks/x", "10.0.0.3:1234", "Bearer alice"); w.Code != 429 {
		t.Fatalf("alice from another IP: %d, want 429", w.Code)
	}
	if w := do("/v1/locks/x", "10.0.0.1:1234", "Bearer bob"); w.Code != 200 {
		t.Fatalf("bob: %d, want 200", w.Code)
	}
}

// TestHandler_RateLimitBadCredentials floods the server with a new bearer
// token on every request, spelled every way a header can be: requests
// that fail authentication are charged to their source address, so the
// flood is rate limited at once and the table of clients does not grow.
func TestHandler_RateLimitBadCredentials(t *testing.T) {
	fk := fake.New()
	srv := NewHandler(fk, fk)
	srv.Logger = slog.New(slog.DiscardHandler)
	srv.RateLimit, srv.RateBurst = 1, 5
	srv.Authenticate = testAuth(map[string][]string{"alice": {"read:*"}})
	spellings := []string{"Bearer %d", "bearer %d", "Bearer  %d ", "BEARER\t%d", "Basic %d", "%d"}
	codes := map[int]int{}
	start := time.Now()
	for i := range 20000 {
		r := httptest.NewRequest("GET", "/v1/locks/x", nil)
		r.RemoteAddr = "[2001:db8:1:2:" + strconv.FormatInt(int64(i%65536), 16) + "::1]:4000" // one /64
		r.Header.Set("Authorization", fmt.Sprintf(spellings[i%len(spellings)], i))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		codes[w.Code]++
	}
	// The burst, and what the bucket refilled (1/s) while the flood ran.
	allowed := 5 + int(time.Since(start).Seconds()) + 1
	if codes[401] > allowed || codes[401]+codes[429] != 20000 {
		t.Fatalf("answers %v, want at most %d of 401 (the burst and the refill) and 429 for the rest", codes, allowed)
	}
	if n := srv.limiters.len(); n != 1 {
		t.Fatalf("%d clients tracked, want 1 (the /64)", n)
	}
	// The address's limit is its own: alice, authenticated, from the same
	// network, is not held back by it.
	r := httptest.NewRequest("GET", "/v1/locks/x", nil)
	r.RemoteAddr = "[2001:db8:1:2::9]:4000"
	r.Header.Set("Authorization", "Bearer alice")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("alice: %d %s, want 200", w.Code, w.Body)
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1:80":           "10.0.0.1",
		"[::ffff:10.0.0.1]:80":  "10.0.0.1",
		"[2001:db8::1]:80":      "2001:db8::/64",
		"[2001:db8::ffff:1]:80": "2001:db8::/64",
		"[2001:db8:0:1::1]:80":  "2001:db8:0:1::/64",
		"[fe80::1%eth0]:80":     "fe80::/64",
		"not an address":        "not an address",
		"@":                     "@",
	} {
		if got := SourceOf(in); got != want {
			t.Errorf("SourceOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLimiters_Bounded fills the table of addresses: past its size, new
// addresses share one bucket, the table does not grow, and a full table is
// swept at most once a fullSweepEvery; callers are tracked all the same.
func TestLimiters_Bounded(t *testing.T) {
	ls := limiters{max: 4}
	now := time.Now()
	for i := range 4 {
		ls.allow(strconv.Itoa(i), false, 1, 1, now)
	}
	if ok, _ := ls.allow("new-1", false, 1, 1, now); !ok {
		t.Fatal("the first address past the table's size: refused, want the shared bucket's token")
	}
	if ok, _ := ls.allow("new-2", false, 1, 1, now); ok {
		t.Fatal("a second address past the table's size: allowed, want the shared bucket empty")
	}
	if ok, _ := ls.allow("alice", true, 1, 1, now); !ok {
		t.Fatal("a caller while the addresses fill the table: refused, want a bucket of its own")
	}
	if n := ls.len(); n != 5 {
		t.Fatalf("%d clients, want 4 addresses and 1 caller", n)
	}
	// Once the tracked addresses are idle, a sweep makes room; a sweep of a
	// full table happens at most once a fullSweepEvery.
	later := now.Add(limiterIdle)
	ls.lastSweep = later
	if ok, _ := ls.allow("new-3", false, 1, 1, later.Add(fullSweepEvery/2)); !ok {
		t.Fatal("new-3 in the shared bucket, refilled: refused")
	}
	if n := ls.len(); n != 5 {
		t.Fatalf("%d clients after a second within the sweep interval, want 5 (no sweep yet)", n)
	}
	if ok, _ := ls.allow("new-4", false, 1, 1, later.Add(fullSweepEvery)); !ok {
		t.Fatal("after the others went idle: refused, want a bucket of its own")
	}
	if n := ls.len(); n != 1 {
		t.Fatalf("%d clients after the sweep, want 1", n)
	}
}

func TestLimiters_Evict(t *testing.T) {
	var ls limiters
	now := time.Now()
	ls.allow("a", false, 1, 1, now)
	ls.allow("b", false, 1, 1, now.Add(limiterIdle-time.Second))
	ls.allow("c", true, 1, 1, now.Add(limiterIdle))
	if n := ls.len(); n != 2 {
		t.Fatalf("%d clients, want 2 (a evicted)", n)
	}
	if ok, _ := ls.allow("a", false, 1, 1, now.Add(limiterIdle)); !ok {
		t.Fatal("an evicted client starts with a full bucket")
	}
}

func TestHandler_RateLimitOff(t *testing.T) {
	fk := fake.New()
	srv := NewHandler(fk, fk)
	srv.Logger = slog.New(slog.DiscardHandler)
	for i := range 50 {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/v1/keys", nil))
		if w.Code != 200 {
			t.Fatalf("request %d: %d, want 200", i, w.Code)
		}
	}
}
