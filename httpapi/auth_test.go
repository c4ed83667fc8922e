package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/auth"
	"github.com/fence-lock/fence/client"
)

// testCaller is a caller of testAuth's table, named by its token.
type testCaller struct {
	name   string
	grants []string // "perm:prefix"
}

func (c testCaller) Name() string { return c.name }

func (c testCaller) Allowed(perm, resource string) bool {
	for _, g := range c.grants {
		p, prefix, _ := strings.Cut(g, ":")
		if p == perm && (prefix == "*" || resource != "" && strings.HasPrefix(resource, prefix)) {
			return true
		}
	}
	return false
}

// testAuth authenticates against a small token table: token → "perm:prefix"
// grants; the caller is named as its token, sent as a bearer token or as
// the password of HTTP Basic, as fence serve takes them.
func testAuth(table map[string][]string) func(r *http.Request) (Caller, error) {
	return func(r *http.Request) (Caller, error) {
		tok := auth.RequestToken(r.Header.Get("Authorization"))
		grants, known := table[tok]
		if tok == "" || !known {
			return nil, fmt.Errorf("%w: bad token", fence.ErrUnauthorized)
		}
		return testCaller{tok, grants}, nil
	}
}

func newAuthEnv(t *testing.T, protectMetrics bool) *env {
	e := newEnv(t)
	e.srv.Authenticate = testAuth(map[string][]string{
		"orders": {"lock:orders", "write:orders", "read:*"},
		"reader": {"read:*"},
		"admin":  {"admin:*"},
	})
	e.srv.ProtectMetrics = protectMetrics
	return e
}

func TestHandler_Auth(t *testing.T) {
	e := newAuthEnv(t, false)
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	// Open endpoints.
	for _, p := range []string{"/healthz", "/readyz", "/v1/keys", "/metrics"} {
		if r := e.do("GET", p, ""); r.status != 200 {
			t.Errorf("GET %s without token: %d", p, r.status)
		}
	}

	r := e.do("POST", "/v1/locks/orders/acquire", `{"holder":"a"}`)
	r.problem(t, 401, "unauthorized")
	if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate = %q", got)
	}
	e.do("POST", "/v1/locks/orders/acquire", `{"holder":"a"}`, bearer("nope")...).problem(t, 401, "unauthorized")
	e.do("POST", "/v1/locks/orders/acquire", `{"holder":"a"}`, bearer("reader")...).problem(t, 403, "forbidden")
	e.do("POST", "/v1/locks/stock/acquire", `{"holder":"a"}`, bearer("orders")...).problem(t, 403, "forbidden")
	b := e.do("POST", "/v1/locks/orders/acquire", `{"holder":"a"}`, bearer("orders")...).ok(t)
	tok := string(b["token"].(interface{ String() string }).String())

	// "orders" is a string prefix: it also covers "orders-archive".
	e.do("POST", "/v1/locks/orders-archive/acquire", `{"holder":"a"}`, bearer("orders")...).ok(t)

	e.do("GET", "/v1/locks/orders", "", bearer("reader")...).ok(t)
	e.do("GET", "/v1/locks/orders", "").problem(t, 401, "unauthorized")
	e.do("PUT", "/v1/kv/orders/k", "v", append(bearer("reader"), "Fencing-Token", tok)...).problem(t, 403, "forbidden")
	e.do("PUT", "/v1/kv/orders/k", "v", append(bearer("orders"), "Fencing-Token", tok)...).ok(t)
	if r := e.do("GET", "/v1/kv/orders/k", "", bearer("reader")...); r.status != 200 {
		t.Errorf("GET kv as reader: %d %s", r.status, r.body)
	}
	e.do("GET", "/v1/fences/orders", "", bearer("reader")...).ok(t)
	e.do("POST", "/v1/fences/orders", `{"token":`+tok+`}`, bearer("reader")...).problem(t, 403, "forbidden")
	e.do("POST", "/v1/locks/orders/revoke", "", bearer("orders")...).problem(t, 403, "forbidden")
	if r := e.do("POST", "/v1/locks/orders/revoke", "", bearer("admin")...); r.status == 401 || r.status == 403 {
		t.Errorf("revoke as admin: %d %s", r.status, r.body)
	}

	// Txn: unauthenticated is 401 before the body is read; each resource is checked.
	e.do("POST", "/v1/txn", `not json`).problem(t, 401, "unauthorized")
	e.do("POST", "/v1/txn", `not json`, bearer("reader")...).problem(t, 400, "bad_request")
	e.do("POST", "/v1/txn", `{"fences":{"orders":`+tok+`}}`, bearer("reader")...).problem(t, 403, "forbidden")
	e.do("POST", "/v1/txn", `{"fences":{"orders":`+tok+`,"stock":1}}`, bearer("orders")...).problem(t, 403, "forbidden")
	// forbidden comes before fence_required and invalid_token: a write to a
	// resource the caller may not write, whose fence is missing or invalid.
	e.do("POST", "/v1/txn", `{"fences":{"orders":`+tok+`},"then":[{"op":"put","resource":"stock","key":"x","value":"v"}]}`, bearer("orders")...).problem(t, 403, "forbidden")
	e.do("POST", "/v1/txn", `{"fences":{"stock":0}}`, bearer("orders")...).problem(t, 403, "forbidden")
	e.do("POST", "/v1/txn", `{"fences":{"orders":0}}`, bearer("orders")...).problem(t, 400, "invalid_token")
	e.do("POST", "/v1/txn", `{"then":[{"op":"put","resource":"orders","key":"x","value":"v"}]}`, bearer("orders")...).problem(t, 428, "fence_required")
	// The revoke above fenced the token: authorised, then fenced.
	e.do("POST", "/v1/txn", `{"fences":{"orders":`+tok+`}}`, bearer("orders")...).problem(t, 409, "fenced")
}

func TestHandler_AuthProtectMetrics(t *testing.T) {
	e := newAuthEnv(t, true)
	e.do("GET", "/metrics", "").problem(t, 401, "unauthorized")
	e.do("GET", "/metrics", "", "Authorization", "Bearer reader").problem(t, 403, "forbidden")
	if r := e.do("GET", "/metrics", "", "Authorization", "Bearer admin"); r.status != 200 {
		t.Fatalf("GET /metrics as admin: %d", r.status)
	}
	if r := e.do("GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("GET /healthz: %d", r.status)
	}
}

func TestClient_AuthToken(t *testing.T) {
	e := newAuthEnv(t, false)
	c, err := client.NewAPI(e.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.Retries = 0
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "orders", "a", 10*time.Second, 0); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("Acquire without token: %v, want ErrUnauthorized", err)
	}
	c.AuthToken = "reader"
	if _, err := c.Acquire(ctx, "orders", "a", 10*time.Second, 0); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Acquire as reader: %v, want ErrForbidden", err)
	}
	c.AuthToken = "orders"
	if _, err := c.Acquire(ctx, "orders", "a", 10*time.Second, 0); err != nil {
		t.Fatalf("Acquire as orders: %v", err)
	}
}

// TestHandler_AuthDashboard checks that the dashboard needs valid
// credentials when auth is on, and that its 401 asks browsers for them
// (HTTP Basic) besides the bearer challenge the API's 401s carry.
func TestHandler_AuthDashboard(t *testing.T) {
	e := newAuthEnv(t, false)
	r := e.do("GET", "/ui/", "")
	r.problem(t, 401, "unauthorized")
	if got := r.header.Values("WWW-Authenticate"); len(got) != 2 || !strings.HasPrefix(got[0], "Basic") || !strings.HasPrefix(got[1], "Bearer") {
		t.Fatalf("WWW-Authenticate = %q, want a Basic and a Bearer challenge", got)
	}
	if r := e.do("GET", "/ui/", "", "Authorization", "Bearer reader"); r.status != 200 || !strings.Contains(string(r.body), "<html") {
		t.Fatalf("GET /ui/ with a token: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/locks/x/acquire", `{"holder":"a"}`); len(r.header.Values("WWW-Authenticate")) != 1 {
		t.Fatalf("an API 401 has %q, want the bearer challenge only", r.header.Values("WWW-Authenticate"))
	}

}
