package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// TestLock_Limit runs commands under the permits of a semaphore: the command
// gets its permit's slot as FENCE_RESOURCE with the slot's token, a run that
// finds every permit taken exits with the conflict code, and another limit or
// --handover beside --limit are refused.
func TestLock_Limit(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.AcquirePermit(t.Context(), "jobs", "other", 2, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runFence(t.Context(), "", "lock", "jobs", "--addr", url, "--limit", "2", "--",
		"sh", "-c", `echo "$FENCE_RESOURCE $FENCE_TOKEN"`)
	if code != 0 || stdout != "jobs/permit-2-of-2 1\n" {
		t.Fatalf("fence lock --limit 2 beside %s: exit %d, stdout %q, stderr %q; want the second permit's slot and token", first.Resource, code, stdout, stderr)
	}
	if _, err := c.AcquirePermit(t.Context(), "jobs", "another", 2, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runFence(t.Context(), "", "lock", "jobs", "--addr", url, "--limit", "2", "--", "echo", "ran")
	if code != exitNotHeld || stdout != "" || !strings.Contains(stderr, `"jobs"`) {
		t.Fatalf("both permits taken: exit %d, stdout %q, stderr %q; want %d and the semaphore named", code, stdout, stderr, exitNotHeld)
	}
	code, stdout, stderr = runFence(t.Context(), "", "lock", "jobs", "--addr", url, "--limit", "3", "--", "echo", "ran")
	if code == 0 || stdout != "" || !strings.Contains(stderr, "limit 3 differs from 2") {
		t.Fatalf("another limit: exit %d, stdout %q, stderr %q; want it refused, saying why", code, stdout, stderr)
	}
	for _, args := range [][]string{{"--limit", "-1"}, {"--limit", "1001"}, {"--limit", "2", "--handover"}} {
		args = append([]string{"lock", "jobs", "--addr", url}, args...)
		if code, _, _ := runFence(t.Context(), "", append(args, "--", "echo", "ran")...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
