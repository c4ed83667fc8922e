package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// asFenceEnv, set to 1 in a process's environment, makes the test binary
// run fence's command line instead of the tests: see fenceBinary.
const asFenceEnv = "FENCE_TEST_AS_FENCE"

// TestMain lets the test binary stand in for the fence binary in child
// processes: as fence lock's supervisor (which fence lock starts as
// /proc/self/exe __supervise ...), and in the processes of tests that use
// fenceBinary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == superviseName || os.Getenv(asFenceEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// fenceBinary returns a fence binary for the processes that a test starts
// (itself, or through fence lock): the test binary, which TestMain turns
// into fence for the test's children.
func fenceBinary(t *testing.T) string {
	t.Helper()
	t.Setenv(asFenceEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// runFence runs the command line args in this process and returns its exit
// code, stdout and stderr.
func runFence(ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, stdio{strings.NewReader(stdin), &out, &errOut})
	return code, out.String(), errOut.String()
}
