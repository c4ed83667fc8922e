package httpapi

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// TestHandler_Transfer hands a lease over HTTP to a waiter behind another:
// the named successor's waiting acquire is answered with the token the
// transfer names, the old token is lease_lost, and the refusals (nobody of
// that name waits, a stale token, a bad body) change nothing.
func TestHandler_Transfer(t *testing.T) {
	e := newEnv(t)
	tok := e.acquire("r", "old")
	p := e.do("POST", "/v1/locks/r/transfer", `{"token":`+tok.String()+`,"to":"b"}`).problem(t, 404, "not_found")
	if p["detail"] == nil {
		t.Fatal("not_found without a detail")
	}
	got := map[string]chan map[string]any{}
	for _, h := range []string{"a", "b"} { // a waits first, b behind it
		got[h] = make(chan map[string]any, 1)
		go func() {
			got[h] <- e.do("POST", "/v1/locks/r/acquire", `{"holder":"`+h+`","wait_ms":60000}`).json(t)
		}()
		waitWaiters(t, e, "r", len(got))
	}
	for _, tt := range []struct{ body, code string }{
		{`{"to":"b"}`, "bad_request"},
		{`{"token":` + (tok + 5).String() + `,"to":""}`, "lease_lost"},
		{`{"token":` + tok.String() + `,"to":"b","x":1}`, "bad_request"},
		{`{"token":` + tok.String() + `,"to":"\u0001"}`, "bad_request"},
		{`{"token":"5","to":"b"}`, "invalid_token"},
	} {
		status := map[string]int{"bad_request": 400, "invalid_token": 400, "lease_lost": 409}[tt.code]
		e.do("POST", "/v1/locks/r/transfer", tt.body).problem(t, status, tt.code)
	}
	body := e.do("POST", "/v1/locks/r/transfer", `{"token":`+tok.String()+`,"to":"b"}`).ok(t)
	b := <-got["b"]
	if body["holder"] != "b" || body["token"] != b["token"] || body["sequencer"] != nil || body["expires_at"] == nil {
		t.Fatalf("transfer answered %v, b got %v; want b's lease, without a sequencer", body, b)
	}
	e.do("POST", "/v1/locks/r/renew", `{"token":`+tok.String()+`}`).problem(t, 409, "lease_lost")
	select {
	case a := <-got["a"]:
		t.Fatalf("a was answered %v while b holds the lock", a)
	default:
	}
	// a kept its place: b's release hands the lock to it.
	e.do("POST", "/v1/locks/r/release", `{"token":`+string(b["token"].(json.Number))+`}`).ok(t)
	if a := <-got["a"]; a["holder"] != "a" {
		t.Fatalf("a got %v after b's release", a)
	}
}

// waitWaiters waits until n acquires wait on resource.
func waitWaiters(t *testing.T, e *env, resource string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, l := range e.do("GET", "/v1/locks?prefix="+resource, "").ok(t)["locks"].([]any) {
			if l.(map[string]any)["resource"] == resource && l.(map[string]any)["waiters"] == json.Number(strconv.Itoa(n)) {
				return
			}
		}
	}
	t.Fatalf("%d waiters on %s never showed", n, resource)
}
