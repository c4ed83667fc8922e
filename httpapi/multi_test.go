package httpapi

import (
	"testing"
)

// TestHandler_AcquireAll takes several resources at once over HTTP: the
// answer has a lease per resource in the request's order; one held refuses
// them all, lock_held naming it, and leaves the others free; bad bodies are
// bad_request.
func TestHandler_AcquireAll(t *testing.T) {
	e := newEnv(t)
	got := e.do("POST", "/v1/locks", `{"resources":["b","a"],"holder":"m","ttl_ms":60000}`).ok(t)
	ls, _ := got["leases"].([]any)
	if len(ls) != 2 {
		t.Fatalf("answer %v, want two leases", got)
	}
	for i, want := range []string{"b", "a"} {
		l, _ := ls[i].(map[string]any)
		if l["resource"] != want || l["holder"] != "m" || l["token"] == nil || l["expires_at"] == nil {
			t.Fatalf("lease %d: %v, want %s's", i, l, want)
		}
	}
	if p := e.do("POST", "/v1/locks", `{"resources":["c","a"],"holder":"x"}`).problem(t, 409, "lock_held"); p["resource"] != "a" {
		t.Fatalf("lock_held names %v, want a", p["resource"])
	}
	e.do("POST", "/v1/locks/c/acquire", `{"holder":"y"}`).ok(t) // c was given back
	for _, body := range []string{
		`{"holder":"x"}`, `{"resources":[],"holder":"x"}`, `{"resources":["d","d"],"holder":"x"}`,
		`{"resources":["d"]}`, `{"resources":["d"],"holder":"x","limit":2}`, `{"resources":"d","holder":"x"}`,
		`{"resources":["d/permit-1-of-2"],"holder":"x"}`,
	} {
		e.do("POST", "/v1/locks", body).problem(t, 400, "bad_request")
	}
	if st := e.do("GET", "/v1/locks/d", "").ok(t); st["held"] != false {
		t.Fatalf("d after refused multi-acquires: %v", st)
	}
}

// TestHandler_AcquireAllAuth needs lock on every resource: a caller
// without it on one of them is forbidden and takes none.
func TestHandler_AcquireAllAuth(t *testing.T) {
	e := newAuthEnv(t, false)
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	e.do("POST", "/v1/locks", `{"resources":["orders/1","stock"],"holder":"a"}`, as("orders")...).problem(t, 403, "forbidden")
	if st := e.do("GET", "/v1/locks/orders%2F1", "", as("reader")...).ok(t); st["held"] != false {
		t.Fatalf("orders/1 after a forbidden multi-acquire: %v", st)
	}
	e.do("POST", "/v1/locks", `{"resources":["orders/1","stock"],"holder":"a"}`, as("reader")...).problem(t, 403, "forbidden")
	e.do("POST", "/v1/locks", `{"resources":["orders/1","orders/2"],"holder":"a"}`).problem(t, 401, "unauthorized")
	got := e.do("POST", "/v1/locks", `{"resources":["orders/1","orders/2"],"holder":"a"}`, as("orders")...).ok(t)
	if ls, _ := got["leases"].([]any); len(ls) != 2 {
		t.Fatalf("answer %v, want two leases", got)
	}
}
