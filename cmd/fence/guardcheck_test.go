package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// TestGuardCheck runs fence guard-check against SeaweedFS, which passes
// every case, and through a proxy that drops the conditional headers (the
// negative control), which fails, named, with exit 7; a location that is
// not one is a usage error.
func TestGuardCheck(t *testing.T) {
	s, err := testserver.StartSeaweedFS(testserver.TempDir(t))
	testserver.Require(t, err)
	t.Cleanup(func() { s.Close() })
	if err := s.CreateBucket("checked"); err != nil {
		t.Fatal(err)
	}
	fenceBinary(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	code, stdout, stderr := runFence(t.Context(), "", "guard-check", "s3://checked/app?endpoint="+s.S3)
	if code != exitOK || !strings.Contains(stdout, "every case passed") {
		t.Fatalf("guard-check on SeaweedFS: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("%s", stdout)

	dropper := testserver.DropHeaders(t, s.S3)
	code, stdout, stderr = runFence(t.Context(), "", "guard-check", "-o", "json", "s3://checked/app?endpoint="+dropper)
	var rep struct {
		OK    bool `json:"ok"`
		Cases []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("guard-check -o json: %v\n%s", err, stdout)
	}
	if code != exitViolation || rep.OK || !strings.Contains(stderr, "create-exists") {
		t.Fatalf("guard-check through a proxy that drops the conditional headers: exit %d, %+v\n%s", code, rep, stderr)
	}
	failed := 0
	for _, c := range rep.Cases {
		if !c.OK {
			failed++
		}
	}
	if failed == 0 || len(rep.Cases) != 9 {
		t.Fatalf("%d of %d cases failed: %+v", failed, len(rep.Cases), rep.Cases)
	}

	if code, _, stderr := runFence(t.Context(), "", "guard-check", "s3://No_Bucket"); code != exitUsage || !strings.Contains(stderr, "bucket") {
		t.Fatalf("a bad location: exit %d, %q; want %d", code, stderr, exitUsage)
	}
}
