package s3_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/object"
	s3guard "github.com/fence-lock/fence/guard/s3"
)

// newGuard returns a guard under a prefix of its own in the tests' bucket,
// that trusts the endpoint (the suite and TestCheck check it) so that each
// test does not run the check.
func newGuard(tb testing.TB) *object.Guard {
	tb.Helper()
	api, bucket, prefix := newBucket(tb)
	g := s3guard.NewGuard(api, bucket)
	g.Prefix, g.TrustEndpoint = prefix, true
	return g
}

// TestGuard runs the object guards' conformance suite on SeaweedFS.
func TestGuard(t *testing.T) {
	fencetest.TestObjectGuard(t, "s3", newGuard)
}

// TestGuard_LostAnswerNotResent: a commit whose answer is lost (here a 503
// from a proxy that never forwarded it) is sent once, not again by the
// SDK, and returned as an error that is neither a refusal nor contention:
// its outcome is the caller's to find out.
func TestGuard_LostAnswerNotResent(t *testing.T) {
	_, bucket, prefix := newBucket(t)
	target, err := url.Parse(server.S3)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var manifestPuts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			manifestPuts.Add(1)
			http.Error(w, "SlowDown", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g := s3guard.NewGuard(newClient(srv.URL), bucket)
	g.Prefix, g.TrustEndpoint = prefix, true
	_, err = g.Write(t.Context(), "r", 1, object.Change{Key: "k", Value: []byte("v")})
	if err == nil || errors.Is(err, fence.ErrFenced) || errors.Is(err, object.ErrContended) || !errors.Is(err, object.ErrNoAnswer) {
		t.Fatalf("Write with its commit's answer lost: %v, want the endpoint's error, outcome unknown (ErrNoAnswer)", err)
	}
	if n := manifestPuts.Load(); n != 1 {
		t.Fatalf("the commit was sent %d times, want once", n)
	}
}
