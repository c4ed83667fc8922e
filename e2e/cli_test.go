package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fenceCmd returns the fence binary run with args against srv.
func fenceCmd(srv *server, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "FENCE_ADDR="+srv.URL)
	return cmd
}

type lockStatus struct {
	Held      bool   `json:"held"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	LastToken uint64 `json:"last_token"`
}

func status(t *testing.T, srv *server, resource string) lockStatus {
	t.Helper()
	var st lockStatus
	call(t, "GET", srv.URL+"/v1/locks/"+resource, "", nil, &st)
	return st
}

// TestLock_RunsCommand checks that fence lock gives the command its token in
// the environment, passes its output and exit code through, and releases.
func TestLock_RunsCommand(t *testing.T) {
	srv := start(t, t.TempDir())
	cmd := fenceCmd(srv, "lock", "orders", "--holder", "cron-1", "--",
		"sh", "-c", `echo "$FENCE_TOKEN $FENCE_RESOURCE $FENCE_HOLDER $FENCE_ADDR"; "$0" put orders total 42; exit 7`, binary)
	out, _ := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("exit %d, want the command's 7; output %q", code, out)
	}
	want := "1 orders cron-1 " + srv.URL
	if !strings.HasPrefix(string(out), want+"\n") {
		t.Fatalf("output %q, want it to start with %q", out, want)
	}
	if st := status(t, srv, "orders"); st.Held || st.LastToken != 1 {
		t.Fatalf("after the command: %+v, want released", st)
	}
	var got []byte
	call(t, "GET", srv.URL+"/v1/kv/orders/total", "", nil, &got)
	if string(got) != "42" {
		t.Fatalf("value %q, want 42 written with FENCE_TOKEN from inside the lock", got)
	}
}

// startSleepUnderLock starts fence lock orders with ttl over a shell that
// writes its pid to pidFile and sleeps, and returns the command, its
// stderr, a channel closed when it exits, and the pid file.
func startSleepUnderLock(t *testing.T, srv *server, ttl string) (cmd *exec.Cmd, stderr *bytes.Buffer, done chan struct{}, pidFile string) {
	t.Helper()
	pidFile = filepath.Join(t.TempDir(), "pid")
	cmd = fenceCmd(srv, "lock", "orders", "--ttl", ttl, "--kill-grace", "1s", "--",
		"sh", "-c", `echo $$ > "$0"; sleep 1000 & wait`, pidFile)
	stderr = &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	return cmd, stderr, done, pidFile
}

// TestLock_FrozenPastTTL freezes the fence lock process (SIGSTOP) past its
// TTL while another holder takes the lock. When it wakes it must kill its
// command's process group and exit with the lease-lost code, leaving the new
// holder's lease alone.
func TestLock_FrozenPastTTL(t *testing.T) {
	srv := start(t, t.TempDir())
	cmd, stderr, done, pidFile := startSleepUnderLock(t, srv, "1s")
	child := waitPid(t, pidFile)

	cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(1500 * time.Millisecond) // past the TTL
	b := acquireLease(t, srv.URL, "orders", "B", 30000)
	if b.Token != 2 {
		t.Fatalf("B got token %d, want 2", b.Token)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("fence lock did not exit after waking with a lost lease; stderr:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 4 {
		t.Fatalf("exit %d, want 4 (lease lost); stderr:\n%s", code, stderr.String())
	}
	if pids := liveGroup(child); len(pids) > 0 {
		t.Fatalf("the command's process group %d still has live processes %v", child, pids)
	}
	if st := status(t, srv, "orders"); !st.Held || st.Holder != "B" || st.Token != b.Token {
		t.Fatalf("after the frozen holder woke: %+v, want B's lease untouched", st)
	}
	if !strings.Contains(stderr.String(), "lost") {
		t.Fatalf("stderr does not say the lease was lost:\n%s", stderr.String())
	}
}

// TestLock_ServerFrozen freezes the server (SIGSTOP) under a fence lock
// until fence lock gives the lease up (exit 4). The renewals it sent in
// the meantime wait in the server's sockets; when the server wakes they
// carry a deadline already past (Fence-Deadline), and none may hold the
// lease for another TTL that nobody renews.
func TestLock_ServerFrozen(t *testing.T) {
	srv := start(t, t.TempDir())
	cmd, stderr, done, pidFile := startSleepUnderLock(t, srv, "2s")
	waitPid(t, pidFile)

	stopped := time.Now()
	srv.cmd.Process.Signal(syscall.SIGSTOP)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		srv.cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		t.Fatalf("fence lock did not give up under a frozen server; stderr:\n%s", stderr.String())
	}
	woke := time.Now()
	srv.cmd.Process.Signal(syscall.SIGCONT)
	if code := cmd.ProcessState.ExitCode(); code != 4 {
		t.Fatalf("exit %d, want 4 (lease lost); stderr:\n%s", code, stderr.String())
	}
	// Each renewal sent while the server was frozen is refused when it
	// wakes: wait for one refusal, then no renewal may have been applied
	// since it woke.
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(srv.logs.String(), "the client had given up on this request") {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal sent to the frozen server (%s to %s) was refused for its deadline; server log:\n%s",
				stopped.Format(time.RFC3339Nano), woke.Format(time.RFC3339Nano), srv.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, line := range strings.Split(srv.logs.String(), "\n") {
		var rec struct {
			Time time.Time
			Msg  string
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "lock renewed" && rec.Time.After(woke) {
			t.Fatalf("a renewal sent before fence lock gave up was applied after the server woke:\n%s", line)
		}
	}
}

// waitPid waits for the command under the lock to write its pid.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command never started")
	return 0
}

func TestLock_NotAcquired(t *testing.T) {
	srv := start(t, t.TempDir())
	acquireLease(t, srv.URL, "orders", "other", 30000)
	start := time.Now()
	cmd := fenceCmd(srv, "lock", "orders", "--wait", "300ms", "--", "true")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 3 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("exit %d after %v, want 3 after the wait; output %q", code, time.Since(start), out)
	}
}

// TestLock_ForwardsSignals checks that a signal sent to fence lock reaches
// the command, and that fence then releases and exits with its code.
func TestLock_ForwardsSignals(t *testing.T) {
	srv := start(t, t.TempDir())
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := fenceCmd(srv, "lock", "orders", "--",
		"sh", "-c", `trap 'echo got-term; exit 0' TERM; echo $$ > "$0"; while :; do sleep 0.05; done`, pidFile)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPid(t, pidFile)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fence lock: %v, want exit 0 (the command's); output %q", err, out.String())
	}
	if !strings.Contains(out.String(), "got-term") {
		t.Fatalf("output %q, want the command to have caught SIGTERM", out.String())
	}
	if st := status(t, srv, "orders"); st.Held {
		t.Fatalf("after the command: %+v, want released", st)
	}
}

func TestLock_Usage(t *testing.T) {
	srv := start(t, t.TempDir())
	for _, args := range [][]string{
		{"lock", "orders", "true"},
		{"lock", "--", "true"},
		{"lock", "orders", "--"},
		{"lock", "orders", "--kill-grace", "-1s", "--", "true"},
	} {
		cmd := fenceCmd(srv, args...)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("%v: exit %d, want 2; output %q", args, cmd.ProcessState.ExitCode(), out)
		}
	}
}

// TestCLI_API runs the one-call commands against a server, with their exit codes.
func TestCLI_API(t *testing.T) {
	srv := start(t, t.TempDir())
	run := func(stdin string, args ...string) (string, int) {
		cmd := fenceCmd(srv, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	for _, step := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"acquire", "orders", "--holder", "a", "--ttl", "1m", "-o", "json"}, 0, `"token":1`},
		{"", []string{"acquire", "orders", "--holder", "b"}, 3, "lock held"},
		{"", []string{"status", "orders"}, 0, "held by a with token 1"},
		{"", []string{"put", "orders", "total", "42", "--token", "1"}, 0, "revision 1, fence 1"},
		{"from stdin", []string{"put", "orders", "note", "--token", "1"}, 0, "revision 2"},
		{"", []string{"get", "orders", "note"}, 0, "from stdin"},
		{"", []string{"put", "orders", "total", "1", "--token", "9"}, 5, "never issued"},
		{"", []string{"put", "orders", "total", "1"}, 2, "--token"},
		{"", []string{"put", "orders", "total", "1", "--token", "abc"}, 2, "invalid"},
		{"", []string{"put", "orders", "total", "1", "--token", "1", "--if-match", "7"}, 6, "precondition"},
		{`{"fences":{"orders":1},"then":[{"op":"put","resource":"orders","key":"o-1","value":"paid"}]}`, []string{"txn"}, 0, "revision 3"},
		{`{"fences":{"orders":1},"bogus":1}`, []string{"txn"}, 6, "unknown member"},
		{"", []string{"delete", "orders", "o-1", "--token", "1"}, 0, "deleted at revision 4"},
		{"", []string{"get", "orders", "o-1"}, 6, "not found"},
		{"", []string{"renew", "orders", "--token", "1", "-o", "json"}, 0, `"token":1`},
		{"", []string{"fence", "orders", "--token", "1"}, 0, "last fence 1"},
		{"", []string{"release", "orders", "--token", "1"}, 0, "released"},
		{"", []string{"release", "orders", "--token", "1"}, 6, "lease"},
		{"", []string{"fence", "orders"}, 0, "last fence 1"},
		{"", []string{"version"}, 0, "fence "},
		{"", []string{"get", "orders"}, 2, "argument"},
	} {
		out, code := run(step.stdin, step.args...)
		if code != step.code || !strings.Contains(out, step.want) {
			t.Fatalf("fence %s: exit %d, output %q; want exit %d and %q", strings.Join(step.args, " "), code, out, step.code, step.want)
		}
	}
	// The token flag's environment twin is FENCE_TOKEN, which fence lock sets.
	if out, code := run("", "acquire", "orders", "--holder", "c"); code != 0 {
		t.Fatalf("acquire by c: exit %d, %q", code, out)
	}
	for token, want := range map[string]int{"1": 5, "2": 0} {
		cmd := fenceCmd(srv, "put", "orders", "x", "y")
		cmd.Env = append(cmd.Env, "FENCE_TOKEN="+token)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != want {
			t.Fatalf("put with FENCE_TOKEN=%s: exit %d (%q), want %d", token, code, out, want)
		}
	}
}

// liveGroup returns the processes of process group pgid that are not
// zombies (a zombie whose parent died waits for init, which in a container
// may never reap it).
func liveGroup(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		rest := b[bytes.LastIndexByte(b, ')')+2:]
		fields := strings.Fields(string(rest))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(fields[2]); g == pgid {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestDemo runs fence demo with no set-up: it must show the stale write
// winning on the plain store, fenced on fence storage, and exit 0.
func TestDemo(t *testing.T) {
	mermaid := filepath.Join(t.TempDir(), "demo.mmd")
	cmd := exec.Command(binary, "demo", "--ttl", "200ms", "--mermaid", mermaid)
	cmd.Env = append(os.Environ(), "FENCE_ADDR=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fence demo: %v\n%s", err, out)
	}
	for _, want := range []string{"409 fenced (presented 1, last_fence 2)", `total = "B"`, `total = "A"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(mermaid); err != nil || !bytes.HasPrefix(b, []byte("sequenceDiagram")) {
		t.Fatalf("mermaid file: %v %q", err, b)
	}
}

// TestDemo_Auth runs fence demo against a server with authentication on,
// with a token that may lock, write and read demo-* resources only.
func TestDemo_Auth(t *testing.T) {
	dir := t.TempDir()
	sum := sha256.Sum256([]byte("s3cret"))
	authFile := filepath.Join(dir, "auth")
	line := "demo " + hex.EncodeToString(sum[:]) + " lock:demo- write:demo- read:demo-\n"
	if err := os.WriteFile(authFile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, filepath.Join(dir, "data"), "--auth-file", authFile)
	for token, want := range map[string]int{"s3cret": 0, "wrong": 1} {
		cmd := exec.Command(binary, "demo", "--addr", srv.URL, "--ttl", "200ms", "--auth-token", token)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != want {
			t.Fatalf("demo with token %q: exit %d, want %d\n%s", token, code, want, out)
		}
	}
}
