package s3_test

import (
	"errors"
	"strings"
	"testing"

	s3guard "github.com/fence-lock/fence/guard/s3"
)

// TestCheck runs the conformance check on SeaweedFS, which passes every
// case, and on an endpoint that drops the conditional headers (the
// negative control), which fails, named, and is refused by the guard.
func TestCheck(t *testing.T) {
	api, bucket, prefix := newBucket(t)
	g := s3guard.NewGuard(api, bucket)
	g.Prefix = prefix
	rep, err := g.Check(t.Context())
	if err != nil {
		t.Fatalf("Check on SeaweedFS: %v", err)
	}
	for _, c := range rep.Cases {
		t.Logf("%-15s ok  %6s  %s", c.Name, c.Took.Round(100_000), c.What)
	}
	t.Logf("the check took %s", rep.Took)

	dropped := s3guard.NewGuard(headerDropper(t), bucket)
	dropped.Prefix = prefix
	rep, err = dropped.Check(t.Context())
	if !errors.Is(err, s3guard.ErrEndpoint) {
		t.Fatalf("Check on an endpoint that drops If-Match and If-None-Match: %v, want ErrEndpoint", err)
	}
	failed := map[string]bool{}
	for _, c := range rep.Failed() {
		failed[c.Name] = true
	}
	for _, name := range []string{"create-exists", "create-race", "match-missing", "match-stale", "match-race", "etag-forms", "delete-stale"} {
		if !failed[name] {
			t.Errorf("case %s passed on an endpoint that drops the conditional headers", name)
		}
	}
	if !strings.Contains(err.Error(), "create-exists") {
		t.Errorf("the error does not name the first failed case: %v", err)
	}
	t.Logf("refused: %v", err)
}
