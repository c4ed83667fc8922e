package main

import (
	"fmt"
	"os/exec"
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

// TestLock_Several runs a command under two locks taken at once: it gets
// FENCE_TOKENS; a run that finds one of them held gets neither and exits
// with the conflict code; a name with a space, or --limit beside several
// names, is refused.
func TestLock_Several(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runFence(t.Context(), "", "lock", "ledger-us", "ledger-eu", "--addr", url, "--",
		"sh", "-c", `echo "$FENCE_TOKENS|$FENCE_TOKEN|$FENCE_RESOURCE"`)
	if code != 0 || stdout != "ledger-us=1 ledger-eu=1||\n" {
		t.Fatalf("fence lock ledger-us ledger-eu: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := c.Acquire(t.Context(), "ledger-eu", "other", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runFence(t.Context(), "", "lock", "ledger-us", "ledger-eu", "--addr", url, "--", "echo", "ran")
	if code != exitNotHeld || stdout != "" || !strings.Contains(stderr, `"ledger-eu"`) {
		t.Fatalf("one of them held: exit %d, stdout %q, stderr %q; want %d naming ledger-eu", code, stdout, stderr, exitNotHeld)
	}
	if st, err := c.Status(t.Context(), "ledger-us"); err != nil || st.Held {
		t.Fatalf("ledger-us after the refused fence lock: %+v, %v; want it free", st, err)
	}
	for _, args := range [][]string{{"a b", "c"}, {"a", "b", "--limit", "2"}, {"a", "b", "--handover"}} {
		args = append([]string{"lock", "--addr", url}, args...)
		if code, _, _ := runFence(t.Context(), "", append(args, "--", "echo", "ran")...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestLock_SeveralOneLost revokes one of two locks held for a command: the
// command is stopped and fence lock exits exitLeaseLost, naming it.
func TestLock_SeveralOneLost(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		code   int
		stderr string
	}
	done := make(chan run, 1)
	// A process of its own: the command's output and fence lock's own share
	// stderr, which a buffer in this process would not take from both.
	cmd := exec.Command(fenceBinary(t), "lock", "x", "y", "--addr", url, "--ttl", "1s", "--kill-grace", "1s", "--", "sleep", "60")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		done <- run{cmd.ProcessState.ExitCode(), stderr.String()}
	}()
	for {
		if st, err := c.Status(t.Context(), "y"); err == nil && st.Held {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Revoke(t.Context(), "y"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != exitLeaseLost || !strings.Contains(r.stderr, "lock y:") {
			t.Fatalf("exit %d, stderr %q; want %d naming y", r.code, r.stderr, exitLeaseLost)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fence lock went on after one of its leases was revoked")
	}
	if st, err := c.Status(t.Context(), "x"); err != nil || st.Held {
		t.Fatalf("x after fence lock stopped: %+v, %v; want it released", st, err)
	}
}

// TestLock_Shared runs commands under a shared hold: beside another shared
// holder the command gets the group's token; beside an exclusive one it
// exits with the conflict code; --shared beside --limit, --handover or
// several names is refused.
func TestLock_Shared(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := c.AcquireShared(t.Context(), "catalog", "other", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runFence(t.Context(), "", "lock", "catalog", "--addr", url, "--shared", "--",
		"sh", "-c", `echo "$FENCE_RESOURCE $FENCE_TOKEN"`)
	if want := fmt.Sprintf("catalog %d\n", reader.Token); code != 0 || stdout != want {
		t.Fatalf("fence lock --shared beside a reader: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	if code, _, stderr := runFence(t.Context(), "", "lock", "catalog", "--addr", url, "--", "echo", "ran"); code != exitNotHeld {
		t.Fatalf("fence lock beside a reader: exit %d, stderr %q; want %d", code, stderr, exitNotHeld)
	}
	if err := c.ReleaseShared(t.Context(), "catalog", "other", reader.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(t.Context(), "catalog", "writer", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := runFence(t.Context(), "", "lock", "catalog", "--addr", url, "--shared", "--", "echo", "ran"); code != exitNotHeld || stdout != "" {
		t.Fatalf("fence lock --shared beside a writer: exit %d, stdout %q; want %d", code, stdout, exitNotHeld)
	}
	for _, args := range [][]string{{"catalog", "--shared", "--limit", "2"}, {"catalog", "--shared", "--handover"}, {"a", "b", "--shared"}} {
		args = append(append([]string{"lock"}, args...), "--addr", url, "--", "echo", "ran")
		if code, _, _ := runFence(t.Context(), "", args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
