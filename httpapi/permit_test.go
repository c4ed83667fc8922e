package httpapi

import (
	"encoding/json"
	"testing"
)

// TestHandler_Permits takes the permits of a semaphore over HTTP: each answer
// names its slot, which renew and release take; a third holder is refused
// lock_held, another limit and a slot's name as a lock bad_request.
func TestHandler_Permits(t *testing.T) {
	e := newEnv(t)
	a := e.do("POST", "/v1/locks/jobs/acquire", `{"holder":"a","limit":2}`).ok(t)
	b := e.do("POST", "/v1/locks/jobs/acquire", `{"holder":"b","limit":2}`).ok(t)
	if a["resource"] != "jobs/permit-1-of-2" || b["resource"] != "jobs/permit-2-of-2" {
		t.Fatalf("permits on %v and %v, want jobs/permit-1-of-2 and jobs/permit-2-of-2", a["resource"], b["resource"])
	}
	if p := e.do("POST", "/v1/locks/jobs/acquire", `{"holder":"c","limit":2}`).problem(t, 409, "lock_held"); p["resource"] != "jobs" {
		t.Fatalf("lock_held names %v, want the semaphore jobs", p["resource"])
	}
	e.do("POST", "/v1/locks/jobs/acquire", `{"holder":"c","limit":3}`).problem(t, 400, "bad_request")
	e.do("POST", "/v1/locks/jobs/acquire", `{"holder":"c","limit":0}`).problem(t, 400, "bad_request")
	e.do("POST", "/v1/locks/jobs%2Fpermit-1-of-2/acquire", `{"holder":"c"}`).problem(t, 400, "bad_request")

	tok := string(a["token"].(json.Number))
	e.do("POST", "/v1/locks/jobs%2Fpermit-1-of-2/renew", `{"token":`+tok+`}`).ok(t)
	e.do("POST", "/v1/locks/jobs%2Fpermit-1-of-2/release", `{"token":`+tok+`}`).ok(t)
	if c := e.do("POST", "/v1/locks/jobs/acquire", `{"holder":"c","limit":2}`).ok(t); c["resource"] != "jobs/permit-1-of-2" || c["token"] == a["token"] {
		t.Fatalf("c got %v after a released, want slot 1 with a new token", c)
	}
}
