package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/wire"
)

// TestRequireFenceSigned: with keys, a mutating request needs a
// Fence-Sequencer that the keys verify for its resource and token; a valid
// one never makes a stale token acceptable.
func TestRequireFenceSigned(t *testing.T) {
	db := memory.New()
	for range 3 { // tokens 1..3 issued for "acct"
		if _, err := db.Grant(t.Context(), "acct", "h", time.Minute, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	key, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k fence.SigningKey, resource string, token fence.Token) string {
		s, err := k.Sign(fence.Sequencer{Resource: resource, Holder: "h", Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var seen []string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := httpapi.TokenFrom(r.Context())
		s, ok := fence.SequencerFrom(r.Context())
		seen = append(seen, fmt.Sprintf("%s %d %v", r.Method, tok, ok && s == sign(key, "acct", tok)))
		w.WriteHeader(http.StatusNoContent)
	})
	h := httpapi.RequireFenceSigned(httpapi.StoreFencer(db), fence.KeySet{key.ID: key.Public().Key}, func(r *http.Request) string {
		return strings.TrimPrefix(r.URL.Path, "/accounts/")
	})(inner)
	srv := httptest.NewServer(h)
	defer srv.Close()

	huge := fence.MaxToken.String()
	valid := sign(key, "acct", 3)
	tampered := []byte(valid)
	i := strings.IndexByte(valid, '.') + 10
	if tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	for _, tc := range []struct {
		name, method, token, seq string
		status                   int
		code                     string
	}{
		{"read", "GET", "", "", 204, ""},
		{"forged, no sequencer", "POST", huge, "", 403, "invalid_sequencer"},
		{"garbage", "PUT", huge, "x.y", 403, "invalid_sequencer"},
		{"other resource", "PUT", huge, sign(key, "other", fence.MaxToken), 403, "invalid_sequencer"},
		{"other token", "PUT", huge, valid, 403, "invalid_sequencer"},
		{"tampered", "PUT", "3", string(tampered), 403, "invalid_sequencer"},
		{"unknown key", "PUT", huge, sign(stranger, "acct", fence.MaxToken), 403, "invalid_sequencer"},
		{"no token", "POST", "", valid, 428, "fence_required"},
		{"valid", "PUT", "3", valid, 204, ""},
		{"valid, again", "DELETE", "3", valid, 204, ""},
		{"valid but stale", "PATCH", "2", sign(key, "acct", 2), 409, "fenced"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/accounts/acct", nil)
		if tc.token != "" {
			req.Header.Set("Fencing-Token", tc.token)
		}
		if tc.seq != "" {
			req.Header.Set(wire.SequencerHeader, tc.seq)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Code string `json:"code"`
		}
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != tc.status || p.Code != tc.code {
			t.Fatalf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, p.Code, tc.status, tc.code)
		}
		if f, _ := db.Fence(t.Context(), "acct"); tc.status != 204 && f > 3 {
			t.Fatalf("%s: fence raised to %d", tc.name, f)
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
