package httpapi

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestHandler_ListFences checks GET /v1/fences: every resource with a token
// issued, held or released, with its last token and last fence, paged
// like GET /v1/locks; with auth, only the resources the caller may read.
func TestHandler_ListFences(t *testing.T) {
	e := newEnv(t)
	if got := e.do("GET", "/v1/fences", "").ok(t); fmt.Sprint(got["fences"]) != "[]" || got["next"] != nil {
		t.Fatalf("empty store: %v, want no fences and no next", got)
	}
	e.acquire("orders", "A")
	tok := e.acquire("stock", "A")
	e.do("POST", "/v1/locks/stock/release", fmt.Sprintf(`{"token":%d}`, tok)).ok(t)
	e.acquire("stock", "B") // released and granted again: last token 2
	e.acquire("orders-archive", "C")

	checkBody(t, e.do("GET", "/v1/fences", "").ok(t), map[string]any{"fences": []any{
		map[string]any{"resource": "orders", "last_token": json.Number("1"), "last_fence": json.Number("1")},
		map[string]any{"resource": "orders-archive", "last_token": json.Number("1"), "last_fence": json.Number("1")},
		map[string]any{"resource": "stock", "last_token": json.Number("2"), "last_fence": json.Number("2")},
	}})
	first := e.do("GET", "/v1/fences?prefix=orders&limit=1", "").ok(t)
	if fmt.Sprint(first["next"]) != "orders" || len(first["fences"].([]any)) != 1 {
		t.Fatalf("first page of 1: %v, want orders and next orders", first)
	}
	second := e.do("GET", "/v1/fences?prefix=orders&limit=1&after=orders", "").ok(t)
	if got := second["fences"].([]any); len(got) != 1 || got[0].(map[string]any)["resource"] != "orders-archive" || second["next"] != nil {
		t.Fatalf("second page of 1: %v, want orders-archive and no next", second)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?after=a%00", "?sort=asc"} {
		e.do("GET", "/v1/fences"+q, "").problem(t, 400, "bad_request")
	}
	if r := e.do("HEAD", "/v1/fences", ""); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("HEAD /v1/fences = %d %q", r.status, r.body)
	}
	e.do("POST", "/v1/fences", "").problem(t, 405, "method_not_allowed")
}

// TestHandler_ListFencesAuth checks that a listing shows only what the
// caller may read, fills its pages with those, and needs a valid token.
func TestHandler_ListFencesAuth(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.acquire(fmt.Sprintf("a%d", i), "A")
		e.acquire(fmt.Sprintf("orders%%2F%d", i), "A")
	}
	e.srv.Authenticate = testAuth(map[string][]string{"orders": {"read:orders/"}, "nobody": {"lock:x"}})
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	e.do("GET", "/v1/fences", "").problem(t, 401, "unauthorized")
	if got := e.do("GET", "/v1/fences", "", bearer("nobody")...).ok(t); fmt.Sprint(got["fences"]) != "[]" {
		t.Fatalf("a token that reads nothing lists %v", got)
	}
	page := e.do("GET", "/v1/fences?limit=3", "", bearer("orders")...).ok(t)
	got := page["fences"].([]any)
	if len(got) != 3 || got[0].(map[string]any)["resource"] != "orders/0" || page["next"] != "orders/2" {
		t.Fatalf("first page of 3 for read:orders/ = %v, want orders/0..2 and next orders/2", page)
	}
}
