package s3_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fence-lock/fence/guard/object"
	s3guard "github.com/fence-lock/fence/guard/s3"
)

// TestCheck_HeadersDropped: through an endpoint that drops the conditional
// headers (the negative control), the conformance check fails, naming the
// cases, and the guard writes nothing through it.
func TestCheck_HeadersDropped(t *testing.T) {
	_, bucket, prefix := newBucket(t)
	g := s3guard.NewGuard(headerDropper(t), bucket)
	g.Prefix = prefix
	rep, err := g.Check(t.Context())
	if !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("Check on an endpoint that drops If-Match and If-None-Match: %v, want ErrEndpoint", err)
	}
	failed := map[string]bool{}
	for _, c := range rep.Failed() {
		failed[c.Name] = true
	}
	for _, name := range []string{"create-exists", "create-race", "match-missing", "match-stale", "match-race", "version-forms", "delete-stale"} {
		if !failed[name] {
			t.Errorf("case %s passed on an endpoint that drops the conditional headers", name)
		}
	}
	if !strings.Contains(err.Error(), "create-exists") {
		t.Errorf("the error does not name the first failed case: %v", err)
	}
	t.Logf("refused: %v", err)

	for range 2 { // the verdict is kept
		if err := g.PutObject(t.Context(), "k", []byte("v"), 1); !errors.Is(err, object.ErrEndpoint) {
			t.Fatalf("PutObject through it: %v, want ErrEndpoint", err)
		}
	}
	if _, err := g.Write(t.Context(), "r", 1, object.Change{Key: "k", Value: []byte("v")}); !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("Write through it: %v, want ErrEndpoint", err)
	}
	direct := newGuard(t)
	direct.Prefix = prefix
	if _, _, ok, err := direct.GetObject(t.Context(), "k"); ok || err != nil {
		t.Fatalf("the object was written through an untrusted endpoint (%v)", err)
	}
}
