package e2e

import (
	"net/http"
	"testing"
)

// TestDashboard_BasicAuth checks that with auth on, a browser's HTTP Basic
// credentials (the token as the password) open the dashboard and the API
// routes it reads, and that bad ones do not.
func TestDashboard_BasicAuth(t *testing.T) {
	authFile := writeAuthFile(t, t.TempDir(), map[string]string{"viewer": "read:*"})
	srv := startQuiet(t, t.TempDir(), "--auth-file", authFile)
	get := func(path, user, password string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if password != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, user, password string
		want                 int
	}{
		{"/ui/", "", "", 401},
		{"/ui/", "anyone", "viewer-secret", 200},
		{"/ui/", "viewer", "wrong", 401},
		{"/v1/locks", "anyone", "viewer-secret", 200},
		{"/v1/fences/orders", "anyone", "viewer-secret", 200},
		{"/v1/locks/orders/revoke", "anyone", "viewer-secret", 405},
	} {
		if got := get(c.path, c.user, c.password); got != c.want {
			t.Errorf("GET %s as %q:%q = %d, want %d", c.path, c.user, c.password, got, c.want)
		}
	}
}
