package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// TestServe_DiskFull runs fence serve on a small tmpfs and fills it: the
// write that does not fit is answered 503 unavailable saying that it was not
// applied, reads go on, /readyz says the disk is full, and once space is
// freed (a file of the operator's removed) writes succeed again without a
// restart. After a restart, every acknowledged write is there and the
// refused one is not: it was cut out of the log.
func TestServe_DiskFull(t *testing.T) {
	disk := testserver.TinyDisk(t, "24m")
	// The space the operator frees later.
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(disk, "data")
	srv := start(t, data)
	token := apiAcquire(t, srv.URL, "orders", "writer", 600000)
	tok := http.Header{"Fencing-Token": {fmt.Sprint(token)}}
	value := []byte(strings.Repeat("v", 256<<10))

	put := func(key string) apiResp {
		return apiDo(t, "PUT", srv.URL+"/v1/kv/orders/"+key, value, tok)
	}
	var acked []string
	var refused apiResp
	var refusedKey string
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("k%d", i)
		r := put(key)
		if r.status != http.StatusOK {
			refused, refusedKey = r, key
			break
		}
		acked = append(acked, key)
	}
	if refusedKey == "" {
		t.Fatal("50 MB of writes fit on a 24 MB disk")
	}
	if refused.status != http.StatusServiceUnavailable || !strings.Contains(string(refused.body), `"code":"unavailable"`) ||
		!strings.Contains(string(refused.body), "not applied") {
		t.Fatalf("the write that did not fit: %s, want 503 unavailable saying it was not applied", refused)
	}
	t.Logf("%d writes of 256 KiB acknowledged before the disk filled; then %s", len(acked), refused)

	// Reads go on; readiness says why changes do not.
	if r := apiDo(t, "GET", srv.URL+"/v1/kv/orders/"+acked[0], nil, nil); r.status != http.StatusOK {
		t.Fatalf("a read with the disk full: %s", r)
	}
	if r := apiDo(t, "GET", srv.URL+"/v1/locks/orders", nil, nil); r.status != http.StatusOK {
		t.Fatalf("a lock's status with the disk full: %s", r)
	}
	if r := apiDo(t, "GET", srv.URL+"/readyz", nil, nil); r.status != http.StatusServiceUnavailable ||
		!strings.Contains(string(r.body), "no space left on device") {
		t.Fatalf("/readyz with the disk full: %s, want 503 not_ready naming the full disk", r)
	}
	if r := apiDo(t, "GET", srv.URL+"/healthz", nil, nil); r.status != http.StatusOK {
		t.Fatalf("/healthz with the disk full: %s", r)
	}

	// The operator frees space: the server is ready again before any
	// write (a load balancer that follows /readyz sends it none until
	// then), and changes resume, with no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := apiDo(t, "GET", srv.URL+"/readyz", nil, nil); r.status != http.StatusOK {
		t.Fatalf("/readyz after space was freed: %s", r)
	}
	if r := put("after"); r.status != http.StatusOK {
		t.Fatalf("a write after space was freed: %s", r)
	}
	acked = append(acked, "after")
	later := apiAcquire(t, srv.URL, "stock", "writer", 600000)

	// Restarted, the server has every acknowledged write.
	srv.kill()
	srv = start(t, data)
	for _, key := range acked {
		r := apiDo(t, "GET", srv.URL+"/v1/kv/orders/"+key, nil, nil)
		if r.status != http.StatusOK || len(r.body) != len(value) {
			t.Fatalf("acknowledged %s after a restart: %d, %d bytes", key, r.status, len(r.body))
		}
	}
	if r := apiDo(t, "GET", srv.URL+"/v1/kv/orders/"+refusedKey, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("the refused write after a restart: %s, want 404: it was not applied", r)
	}
	if r := apiDo(t, "GET", srv.URL+"/v1/fences/stock", nil, nil); !strings.Contains(string(r.body), fmt.Sprintf(`"last_fence":%d`, later)) {
		t.Fatalf("the grant made after space was freed, after a restart: %s", r)
	}
}
