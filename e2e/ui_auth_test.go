package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestDashboard_CrossSiteForgery opens the dashboard in Chromium with an
// admin's token as its HTTP Basic password, then a page of another origin
// that makes the browser send changes to fence: a 24 h acquire and a revoke
// by fetch, and a text/plain form posted to /v1/txn. The browser attaches
// the credentials it keeps for fence's origin; fence must refuse all three
// (the log shows they arrived, refused as cross-origin) and change nothing.
func TestDashboard_CrossSiteForgery(t *testing.T) {
	dir := t.TempDir()
	authFile := writeAuthFile(t, dir, map[string]string{"alice": "admin:* lock:* write:* read:*", "worker": "lock:*"})
	srv := start(t, filepath.Join(dir, "data"), "--auth-file", authFile)
	worker := storyClient{t: t, url: srv.URL, token: "worker-secret"}
	held := worker.acquire("orders", "worker", time.Minute, 0)

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>evil</title>
<iframe name="sink"></iframe>
<form id="f" method="POST" action="%[1]s/v1/txn" enctype="text/plain" target="sink"><input name='{"fences":{"a":1},"then":[{"op":"put","resource":"a","key":"x","value":"evil' value='"}]}'></form>
<script>
Promise.allSettled([
  fetch("%[1]s/v1/locks/evil/acquire", {method: "POST", mode: "no-cors", credentials: "include", body: '{"holder":"evil","ttl_ms":86400000}'}),
  fetch("%[1]s/v1/locks/orders/revoke", {method: "POST", mode: "no-cors", credentials: "include"}),
]).then(() => { document.getElementById("f").submit(); document.title = "sent"; });
</script>`, srv.URL)
	}))
	defer evil.Close()
	if strings.HasPrefix(evil.URL, srv.URL) {
		t.Fatalf("the page of another origin has fence's origin: %s", evil.URL)
	}

	b := newBrowser(t)
	b.open(strings.Replace(srv.URL, "http://", "http://anyone:alice-secret@", 1) + "/ui/")
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	b.open(evil.URL + "/")
	b.waitFor("the forged requests sent", `document.title === "sent"`)

	// Each forged request arrives, and is refused as cross-origin.
	routes := []string{"/v1/locks/{resource}/acquire", "/v1/locks/{resource}/revoke", "/v1/txn"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		refused := map[string]bool{}
		for _, line := range strings.Split(srv.logs.String(), "\n") {
			var rec struct{ Msg, Route, Code, Detail string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request rejected" && rec.Code == "forbidden" && strings.Contains(rec.Detail, "another origin") {
				refused[rec.Route] = true
			}
		}
		if refused[routes[0]] && refused[routes[1]] && refused[routes[2]] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every forged request was refused as cross-origin (%v of %v); the log:\n%s", refused, routes, srv.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	admin := map[string]string{"Authorization": "Bearer alice-secret"}
	var st lockStatus
	if code := call(t, "GET", srv.URL+"/v1/locks/evil", "", admin, &st); code != 200 || st.Held {
		t.Errorf("evil after the forgery: %d %+v, want it free", code, st)
	}
	st = lockStatus{}
	if code := call(t, "GET", srv.URL+"/v1/locks/orders", "", admin, &st); code != 200 || !st.Held || st.Token != held {
		t.Errorf("orders after the forgery: %d %+v, want it still held with token %d (not revoked)", code, st, held)
	}
	if code := call(t, "GET", srv.URL+"/v1/kv/a/x", "", admin, nil); code != 404 {
		t.Errorf("a/x after the forgery: %d, want 404 (never written)", code)
	}
}
