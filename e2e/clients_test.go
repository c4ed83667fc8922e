package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// requireTool returns the path of the program name, or skips t without it
// (fails it with FENCE_REQUIRE_SERVERS=1, as CI runs).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("FENCE_REQUIRE_SERVERS") == "1" {
			t.Fatalf("%s is not installed", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return path
}

// suiteTimeout bounds a client's suite (well under a minute on 2 cores):
// one that hangs fails with what it printed, instead of holding the
// package until go test's timeout, which prints nothing of it.
const suiteTimeout = 5 * time.Minute

// runSuite runs a client's own test suite in dir against the fence binary
// of this package's tests, and fails t if it fails.
func runSuite(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FENCE_BIN="+binary)
	cmd.WaitDelay = 10 * time.Second // the suite's own children may hold its output open
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v in %s did not end within %s:\n%s", name, args, dir, suiteTimeout, out)
	}
	if err != nil {
		t.Fatalf("%s %v in %s: %v\n%s", name, args, dir, err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
}

// TestPythonClient runs the Python client's tests (standard unittest)
// against real fence servers that they start themselves.
func TestPythonClient(t *testing.T) {
	python := requireTool(t, "python3")
	runSuite(t, filepath.Join("..", "clients", "python"), python, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
}

// TestTypeScriptClient builds the TypeScript client and runs its tests
// under Node against real fence servers that they start themselves. Its
// dev dependencies (the compiler) come from the committed lockfile: npm ci
// when they are not installed yet.
func TestTypeScriptClient(t *testing.T) {
	npm := requireTool(t, "npm")
	requireTool(t, "node")
	dir := filepath.Join("..", "clients", "typescript")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		runSuite(t, dir, npm, "ci", "--no-audit", "--no-fund")
	}
	runSuite(t, dir, npm, "test")
}
