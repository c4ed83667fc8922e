package client

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestWithAuthToken(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"resource":"orders","held":false,"last_token":0}`))
	}))
	defer ts.Close()
	c, err := New(ts.URL, WithAuthToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	c.API().Status(t.Context(), "orders") // the answer's shape does not matter here
	if v, _ := got.Load().(string); v != "Bearer s3cret" {
		t.Fatalf("Authorization = %q, want %q", v, "Bearer s3cret")
	}
}
