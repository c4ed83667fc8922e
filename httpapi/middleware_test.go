package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/memory"
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
