package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fence-lock/fence/auth"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// TestLock_ConflictExitCode checks --conflict-exit-code and --quiet, for
// cron jobs that find the lock taken.
func TestLock_ConflictExitCode(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	c, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(t.Context(), "billing", "other", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		env   map[string]string
		code  int
		quiet bool
	}{
		{nil, nil, exitNotHeld, false},
		{[]string{"--conflict-exit-code", "75"}, nil, 75, false},
		{[]string{"--conflict-exit-code", "0", "--quiet"}, nil, 0, true},
		{[]string{"--quiet"}, nil, exitNotHeld, true},
		{[]string{"--wait", "200ms", "--quiet"}, nil, exitNotHeld, true},
		{nil, map[string]string{"FENCE_QUIET": "true", "FENCE_CONFLICT_EXIT_CODE": "0"}, 0, true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"lock", "billing", "--addr", url}, tc.args...)
			code, stdout, stderr := runFence(t.Context(), "", append(args, "--", "echo", "ran")...)
			if code != tc.code || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and the command not run", code, stdout, tc.code)
			}
			if tc.quiet != (stderr == "") {
				t.Errorf("stderr %q; quiet %v", stderr, tc.quiet)
			}
			if !tc.quiet && !strings.Contains(stderr, `lock held by another holder: "billing"`) {
				t.Errorf("stderr %q does not say the lock is held", stderr)
			}
		})
	}
	for _, bad := range []string{"-1", "256"} {
		if code, _, _ := runFence(t.Context(), "", "lock", "billing", "--addr", url, "--conflict-exit-code", bad, "--", "true"); code != exitUsage {
			t.Errorf("--conflict-exit-code %s: exit %d, want %d", bad, code, exitUsage)
		}
	}
	// A run that gets the lock is not affected.
	if code, stdout, _ := runFence(t.Context(), "", "lock", "free", "--addr", url, "--quiet", "--conflict-exit-code", "0", "--", "sh", "-c", "echo ran; exit 7"); code != 7 || stdout != "ran\n" {
		t.Errorf("fence lock free: exit %d, stdout %q; want the command's 7", code, stdout)
	}
}

// TestLock_KilledTakesCommandAlong kills fence lock with SIGKILL, which it
// cannot catch, and checks that its command and the command's own child
// die with it.
func TestLock_KilledTakesCommandAlong(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	cmd := exec.Command(fenceBinary(t), "lock", "job", "--addr", url, "--",
		"sh", "-c", `sleep 300 & echo "$$ $!" > "$0.tmp"; mv "$0.tmp" "$0"; wait`, pidFile)
	// A file, not a pipe: the command's processes, which inherit it, must
	// not keep cmd.Wait waiting.
	stderrFile, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderrFile.Close()
	cmd.Stderr = stderrFile
	stderr := func() string { b, _ := os.ReadFile(stderrFile.Name()); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var pids []int
	for deadline := time.Now().Add(10 * time.Second); len(pids) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command never started; stderr:\n%s", stderr())
		}
		if b, err := os.ReadFile(pidFile); err == nil {
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("pid file %q", b)
				}
				pids = append(pids, pid)
			}
		}
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d (of sh and its sleep %v) is not running under fence lock", pid, pids)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d (sh, then its sleep: %v) outlived fence lock, killed 5s ago", pid, pids)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether process pid runs: it exists and is not a zombie (a
// zombie whose parent died waits for init, which in a container may never
// reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// TestLock_PassesCredentials checks that the command of fence lock gets the
// bearer token and the TLS files fence lock was given, so that fence
// commands inside it work against a server with authentication and TLS.
func TestLock_PassesCredentials(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", "127.0.0.1", true)
	clientCert, clientKey := pki.issue(t, "job", "job", false)
	authFile := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(authFile, []byte("job "+auth.HashToken("s3cret")+" lock:orders write:orders read:orders\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "https://" + startServe(t, "--tls-cert", cert, "--tls-key", key, "--client-ca", pki.caFile, "--auth-file", authFile)
	bin := fenceBinary(t)
	// Relative file names: the command changes directory, and still finds them.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel := func(f string) string {
		r, err := filepath.Rel(wd, f)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	code, stdout, stderr := runFence(t.Context(), "", "lock", "orders", "--addr", addr, "--auth-token", "s3cret",
		"--cacert", rel(pki.caFile), "--client-cert", rel(clientCert), "--client-key", rel(clientKey), "--",
		"sh", "-c", `cd / && "$0" put orders total 42 && "$0" get orders total`, bin)
	if code != 0 || !strings.HasSuffix(stdout, "\n42") {
		t.Fatalf("fence lock -- fence put: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestLock_Handover stops a fence lock --handover with SIGTERM while another
// fence lock waits: the waiter's command starts while the first command
// still shuts down (no gap), and what the first command writes after the
// signal is fenced (no two writers). Without a waiter, --handover keeps
// the lock until the command exits.
func TestLock_Handover(t *testing.T) {
	url := fencetest.NewServer(t, nil)
	bin := fenceBinary(t)
	dir := t.TempDir()
	api, err := client.NewAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	start := func(name, script string, args ...string) (*exec.Cmd, func() string) {
		t.Helper()
		cmd := exec.Command(bin, append(append([]string{"lock", "worker", "--addr", url, "--holder", name}, args...), "--", "sh", "-c", script)...)
		cmd.Env = append(os.Environ(), "FENCE_BIN="+bin, "DIR="+dir)
		errFile, err := os.Create(filepath.Join(dir, name+".stderr"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { errFile.Close() })
		cmd.Stderr = errFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, func() string { b, _ := os.ReadFile(errFile.Name()); return string(b) }
	}
	waitFile := func(name string, stderr func() string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared; stderr:\n%s", name, stderr())
			}
		}
	}
	// a's command shuts down slowly: on SIGTERM it writes with its token,
	// then says it is done.
	a, aErr := start("a", `trap '"$FENCE_BIN" put "$FENCE_RESOURCE" k from-a; echo $? > "$DIR/a.put"; touch "$DIR/a.done"; exit 0' TERM
touch "$DIR/a.started"; while :; do sleep 0.01; done`, "--handover")
	waitFile("a.started", aErr)
	_, bErr := start("b", `touch "$DIR/b.started"; while [ ! -e "$DIR/a.done" ]; do sleep 0.01; done; "$FENCE_BIN" put "$FENCE_RESOURCE" k from-b`, "--wait", "30s")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		locks, _, err := api.List(t.Context(), "worker", "", 1)
		if err == nil && len(locks) == 1 && locks[0].Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never waited; stderr:\n%s", bErr())
		}
	}
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFile("b.started", bErr)
	a.Wait()
	if code := a.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("fence lock a exited %d, want its command's 0; stderr:\n%s", code, aErr())
	}
	if !strings.Contains(aErr(), `handed over to "b"`) {
		t.Errorf("a's stderr does not say it handed over:\n%s", aErr())
	}
	rc, _ := os.ReadFile(filepath.Join(dir, "a.put"))
	if strings.TrimSpace(string(rc)) != strconv.Itoa(exitFenced) {
		t.Errorf("a's write after the hand-over exited %q, want %d (fenced)", rc, exitFenced)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if it, err := api.Get(t.Context(), "worker", "k"); err == nil {
			if string(it.Value) != "from-b" {
				t.Fatalf("k = %q, want b's write alone", it.Value)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never wrote; stderr:\n%s", bErr())
		}
	}

	// Nobody waits: the SIGTERM reaches the command, and the lock is held
	// until it exits.
	c, cErr := start("c", `trap 'sleep 0.3; "$FENCE_BIN" put "$FENCE_RESOURCE" k from-c; echo $? > "$DIR/c.put"; exit 0' TERM
touch "$DIR/c.started"; while :; do sleep 0.01; done`, "--handover", "--wait", "30s")
	waitFile("c.started", cErr)
	c.Process.Signal(syscall.SIGTERM)
	c.Wait()
	if rc, _ := os.ReadFile(filepath.Join(dir, "c.put")); strings.TrimSpace(string(rc)) != "0" {
		t.Errorf("c's write during its shutdown, nobody waiting, exited %q, want 0; stderr:\n%s", rc, cErr())
	}
	if !strings.Contains(cErr(), "no hand-over") {
		t.Errorf("c's stderr does not say there was no hand-over:\n%s", cErr())
	}
}
