package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/httpapi"
)

// TestRequireFence puts the middleware in front of a plain handler, with
// fence's in-memory storage as the place where fences live.
func TestRequireFence(t *testing.T) {
	db := memory.New()
	for range 3 { // tokens 1..3 issued for "acct"
		if _, err := db.Grant(t.Context(), "acct", "h", time.Minute, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := httpapi.TokenFrom(r.Context())
		seen = append(seen, fmt.Sprintf("%s %d %v", r.Method, tok, ok))
		w.WriteHeader(http.StatusNoContent)
	})
	h := httpapi.RequireFence(httpapi.StoreFencer(db), func(r *http.Request) string {
		return strings.TrimPrefix(r.URL.Path, "/accounts/")
	})(inner)
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, tc := range []struct {
		method, token string
		status        int
		code          string
	}{
		{"GET", "", 204, ""},
		{"POST", "", 428, "fence_required"},
		{"PUT", "abc", 400, "invalid_token"},
		{"PUT", "3", 204, ""},
		{"DELETE", "3", 204, ""}, // the same holder again
		{"PATCH", "2", 409, "fenced"},
		{"POST", "9", 409, "token_not_issued"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/accounts/acct", nil)
		if tc.token != "" {
			req.Header.Set("Fencing-Token", tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Code      string `json:"code"`
			Presented uint64 `json:"presented"`
			LastFence uint64 `json:"last_fence"`
		}
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != tc.status || p.Code != tc.code {
			t.Fatalf("%s with token %q: %d %q, want %d %q", tc.method, tc.token, resp.StatusCode, p.Code, tc.status, tc.code)
		}
		if tc.code == "fenced" && (p.Presented != 2 || p.LastFence != 3) {
			t.Fatalf("fenced body %+v, want presented 2, last_fence 3", p)
		}
		if tc.status != 204 && resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
		}
	}
	want := []string{"GET 0 false", "PUT 3 true", "DELETE 3 true"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("handler saw %v, want %v (rejected requests never reach it)", seen, want)
	}
	if f, _ := db.Fence(t.Context(), "acct"); f != 3 {
		t.Fatalf("Fence=%d, want 3", f)
	}
}

// TestRequireFenceWith_Unfenced checks that a best-effort resource's write
// without a token passes unfenced, that one with a stale token is still
// fenced, and that other resources still need a token.
func TestRequireFenceWith_Unfenced(t *testing.T) {
	db := memory.New()
	for _, res := range []string{"cache/a", "cache/a", "acct"} {
		if _, err := db.Grant(t.Context(), res, "h", time.Minute, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Claim(t.Context(), "cache/a", 2); err != nil {
		t.Fatal(err)
	}
	var seen []string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := httpapi.TokenFrom(r.Context())
		seen = append(seen, fmt.Sprintf("%d %v", tok, ok))
		w.WriteHeader(http.StatusNoContent)
	})
	h := httpapi.RequireFenceWith(httpapi.StoreFencer(db), func(r *http.Request) string {
		return strings.TrimPrefix(r.URL.Path, "/")
	}, httpapi.FenceOptions{Unfenced: []string{"cache/"}})(inner)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/cache/a", "", 204},  // best effort: passes, unfenced
		{"/cache/a", "1", 409}, // a stale token is still fenced
		{"/cache/a", "2", 204},
		{"/acct", "", 428}, // not best effort
	} {
		req, _ := http.NewRequest("PUT", srv.URL+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Fencing-Token", tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("PUT %s token %q: %d, want %d", tc.path, tc.token, resp.StatusCode, tc.status)
		}
	}
	if got := strings.Join(seen, ","); got != "0 false,2 true" {
		t.Errorf("the handler saw %q, want an unfenced request then token 2", got)
	}
}
