package testserver_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// TestStartSeaweedFS starts SeaweedFS and checks the S3 conditional writes
// that the S3 guard stands on: If-None-Match: * creates once, exactly one
// of racing creates wins, If-Match with a stale ETag is 412, on a missing
// key it never succeeds, metadata is kept, and a conditional delete takes
// the current ETag only.
func TestStartSeaweedFS(t *testing.T) {
	s, err := testserver.StartSeaweedFS(testserver.TempDir(t))
	testserver.Require(t, err)
	t.Cleanup(func() { s.Close() })
	if err := s.CreateBucket("fence-test"); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	do := func(method, key, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, s.S3+"/fence-test/"+key, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", method, key, err, s.LogTail(20))
		}
		resp.Body.Close()
		return resp
	}
	want := func(resp *http.Response, status int, what string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("%s: %s, want %d", what, resp.Status, status)
		}
	}
	want(do("PUT", "k", "v1", "If-None-Match", "*", "X-Amz-Meta-Fence", "1"), 200, "a create")
	want(do("PUT", "k", "v2", "If-None-Match", "*"), 412, "a second create")
	head := do("HEAD", "k", "")
	etag := head.Header.Get("ETag")
	if etag == "" || head.Header.Get("X-Amz-Meta-Fence") != "1" {
		t.Fatalf("HEAD: ETag %q, fence %q; want an ETag and the fence 1", etag, head.Header.Get("X-Amz-Meta-Fence"))
	}
	want(do("PUT", "k", "v3", "If-Match", `"stale"`), 412, "If-Match with a stale ETag")
	want(do("PUT", "missing", "x", "If-Match", etag), 404, "If-Match on a missing key")
	want(do("PUT", "k", "v3", "If-Match", etag, "X-Amz-Meta-Fence", "2"), 200, "If-Match with the current ETag")
	want(do("DELETE", "k", "", "If-Match", etag), 412, "a delete with the old ETag")
	want(do("DELETE", "k", "", "If-Match", do("HEAD", "k", "").Header.Get("ETag")), 204, "a delete with the current ETag")
	want(do("HEAD", "k", ""), 404, "HEAD after the delete")

	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for i := range 8 {
		wg.Go(func() { codes <- do("PUT", "race", strings.Repeat("r", i+1), "If-None-Match", "*").StatusCode })
	}
	wg.Wait()
	close(codes)
	won := 0
	for c := range codes {
		switch c {
		case 200:
			won++
		case 412, 409:
		default:
			t.Errorf("a racing create: %d", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d of 8 racing creates succeeded, want exactly 1", won)
	}
}
