package main

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/fence-lock/fence/watch"
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

// lockProcs runs fence lock processes on resource "worker" of one server,
// each named by its holder, with FENCE_BIN and DIR (a temp directory) in
// their commands' environment.
type lockProcs struct {
	t        *testing.T
	url, bin string
	dir      string
}

func newLockProcs(t *testing.T) *lockProcs {
	return &lockProcs{t: t, url: fencetest.NewServer(t, nil), bin: fenceBinary(t), dir: t.TempDir()}
}

// start starts fence lock as holder name, running script under sh, and
// returns it with a function that reads its stderr so far.
func (p *lockProcs) start(name, script string, args ...string) (*exec.Cmd, func() string) {
	t := p.t
	t.Helper()
	cmd := exec.Command(p.bin, append(append([]string{"lock", "worker", "--addr", p.url, "--holder", name}, args...), "--", "sh", "-c", script)...)
	cmd.Env = append(os.Environ(), "FENCE_BIN="+p.bin, "DIR="+p.dir)
	errFile, err := os.Create(filepath.Join(p.dir, name+".stderr"))
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

// waitFor waits until cond holds, for at most 10 s, and fails t with what.
func (p *lockProcs) waitFor(what string, cond func() bool) {
	p.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatal(what)
		}
	}
}

// exists reports whether the file name exists in p.dir.
func (p *lockProcs) exists(name string) bool {
	_, err := os.Stat(filepath.Join(p.dir, name))
	return err == nil
}

// waiters waits until n fence locks wait for the resource.
func (p *lockProcs) waiters(api *client.API, n int) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%d waiters never showed", n), func() bool {
		locks, _, err := api.List(p.t.Context(), "worker", "", 1)
		return err == nil && len(locks) == 1 && locks[0].Waiters == n
	})
}

// TestLock_Handover stops a fence lock --handover with SIGTERM while another
// fence lock waits: the waiter's command starts while the first command
// still shuts down (no gap), and what the first command writes after the
// signal is fenced (no two writers). Without a waiter, --handover keeps
// the lock until the command exits.
func TestLock_Handover(t *testing.T) {
	p := newLockProcs(t)
	dir := p.dir
	api, err := client.NewAPI(p.url)
	if err != nil {
		t.Fatal(err)
	}
	// a's command shuts down slowly: on SIGTERM it writes with its token,
	// then says it is done.
	a, aErr := p.start("a", `trap '"$FENCE_BIN" put "$FENCE_RESOURCE" k from-a; echo $? > "$DIR/a.put"; touch "$DIR/a.done"; exit 0' TERM
touch "$DIR/a.started"; while :; do sleep 0.01; done`, "--handover")
	p.waitFor("a never started", func() bool { return p.exists("a.started") })
	_, bErr := p.start("b", `touch "$DIR/b.started"; while [ ! -e "$DIR/a.done" ]; do sleep 0.01; done; "$FENCE_BIN" put "$FENCE_RESOURCE" k from-b`, "--wait", "30s")
	p.waiters(api, 1)
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitFor("b never started: "+bErr(), func() bool { return p.exists("b.started") })
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
	p.waitFor("b never wrote: "+bErr(), func() bool {
		it, err := api.Get(t.Context(), "worker", "k")
		if err == nil && string(it.Value) != "from-b" {
			t.Fatalf("k = %q, want b's write alone", it.Value)
		}
		return err == nil
	})

	// Nobody waits: the SIGTERM reaches the command, and the lock is held
	// until it exits.
	c, cErr := p.start("c", `trap 'sleep 0.3; "$FENCE_BIN" put "$FENCE_RESOURCE" k from-c; echo $? > "$DIR/c.put"; exit 0' TERM
touch "$DIR/c.started"; while :; do sleep 0.01; done`, "--handover", "--wait", "30s")
	p.waitFor("c never started: "+cErr(), func() bool { return p.exists("c.started") })
	c.Process.Signal(syscall.SIGTERM)
	c.Wait()
	if rc, _ := os.ReadFile(filepath.Join(dir, "c.put")); strings.TrimSpace(string(rc)) != "0" {
		t.Errorf("c's write during its shutdown, nobody waiting, exited %q, want 0; stderr:\n%s", rc, cErr())
	}
	if !strings.Contains(cErr(), "no hand-over") {
		t.Errorf("c's stderr does not say there was no hand-over:\n%s", cErr())
	}
}

// TestLock_RollingRestart restarts three fence lock --handover workers one
// after another, as a rolling update does, each stopped by SIGTERM while
// the others wait. Each worker's command writes its token, every 10 ms,
// until 1 s after its SIGTERM (long enough for a successor to start on a loaded machine). At every hand-over the next worker's
// command must start before the stopped one's ends (no gap), and no write
// of a stopped worker may be accepted after the successor's first (no
// overlap). Without --handover the successor starts only once the old
// command has ended, and the test fails.
func TestLock_RollingRestart(t *testing.T) {
	p := newLockProcs(t)
	api, err := client.NewAPI(p.url)
	if err != nil {
		t.Fatal(err)
	}
	// A worker logs "start", its accepted writes and "end", with times, to
	// DIR/NAME.log.
	script := `log="$DIR/$FENCE_HOLDER.log"; now() { date +%s%N; }
echo "start $(now)" >> "$log"; stop=
trap 'stop=$(now)' TERM
while :; do
	if "$FENCE_BIN" put "$FENCE_RESOURCE" k "$FENCE_TOKEN" 2>/dev/null; then echo "ok $(now) $FENCE_TOKEN" >> "$log"; fi
	if [ -n "$stop" ] && [ $(( $(now) - stop )) -gt 1000000000 ]; then echo "end $(now)" >> "$log"; exit 0; fi
	sleep 0.01
done`
	procs := map[string]*exec.Cmd{}
	run := func(name string) {
		procs[name], _ = p.start(name, script, "--handover", "--wait", "5m")
	}
	// The server's own account of each hand-over: its watch stream, where
	// the old lease's end and the successor's grant are one ledger change.
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	events := make(chan watch.Event, 1024)
	go func() {
		w := api.Watch(watchCtx, "worker", "")
		defer w.Close()
		for {
			ev, err := w.Next()
			if err != nil {
				close(events)
				return
			}
			events <- ev
		}
	}()
	run("w0")
	p.waitFor("w0 never started", func() bool { return p.exists("w0.log") })
	run("w1")
	p.waiters(api, 1)
	run("w2")
	p.waiters(api, 2)
	order := []string{"w0", "w1", "w2"} // who holds, then who waits
	type handOver struct {
		old, next string // their logs' names
		term      int64  // when the old worker got SIGTERM, in ns
	}
	var hos []handOver
	wrote := func(log string) func() bool {
		return func() bool { return p.exists(log) && len(readWorkerLog(t, filepath.Join(p.dir, log)).oks) > 0 }
	}
	for round := 0; round < 3; round++ {
		old := order[0]
		// Its command runs, its trap set, before it is stopped.
		p.waitFor(old+" never wrote", wrote(old+".log"))
		term := time.Now().UnixNano()
		if err := procs[old].Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		procs[old].Wait()
		oldLog := fmt.Sprintf("%s.%d.log", old, round)
		if err := os.Rename(filepath.Join(p.dir, old+".log"), filepath.Join(p.dir, oldLog)); err != nil {
			t.Fatal(err)
		}
		if len(hos) > 0 {
			hos[len(hos)-1].next = oldLog // the last successor's log, now closed
		}
		hos = append(hos, handOver{old: oldLog, term: term})
		order = append(order[1:], old)
		run(old) // restarted, it waits behind the others
		p.waiters(api, 2)
	}
	hos[len(hos)-1].next = order[0] + ".log"
	p.waitFor("the last successor never wrote", wrote(order[0]+".log"))
	for _, h := range hos {
		o, n := readWorkerLog(t, filepath.Join(p.dir, h.old)), readWorkerLog(t, filepath.Join(p.dir, h.next))
		if len(n.oks) == 0 || len(o.oks) == 0 {
			t.Fatalf("%s → %s: %d and %d accepted writes, want some of each", h.old, h.next, len(o.oks), len(n.oks))
		}
		if n.start >= o.end {
			t.Errorf("%s → %s: the successor started %v after the old command ended: a gap", h.old, h.next, time.Duration(n.start-o.end))
		}
		lastOld, firstNew := o.oks[len(o.oks)-1], n.oks[0]
		if lastOld.at >= firstNew.at || lastOld.token >= firstNew.token {
			t.Errorf("%s → %s: the old worker's write of token %d at %d was accepted after the successor's of token %d at %d: an overlap",
				h.old, h.next, lastOld.token, lastOld.at, firstNew.token, firstNew.at)
		}
		t.Logf("%s → %s: successor's command started %v after SIGTERM, %v before the old command ended; old writes accepted after SIGTERM: %d",
			h.old, h.next, time.Duration(n.start-h.term).Round(time.Millisecond), time.Duration(o.end-n.start).Round(time.Millisecond), o.acceptedAfter(h.term))
	}
	// On the server: each hand-over's release of the old lease is followed
	// at once by the successor's grant, with no event between (no instant
	// at which another could have taken it, nor any holder beside).
	stopWatch()
	var stream []watch.Event
	for ev := range events {
		if ev.Type == watch.Granted || ev.Type == watch.Released || ev.Type == watch.Expired || ev.Type == watch.Revoked {
			stream = append(stream, ev)
		}
	}
	handed := 0
	for i, ev := range stream {
		if ev.Type != watch.Released || i+1 == len(stream) || ev.Holder == stream[i+1].Holder {
			continue
		}
		next := stream[i+1]
		if next.Type != watch.Granted || next.Token != ev.Token+1 {
			t.Errorf("after %s's lease %d ended: %s of %s token %d, want the successor's grant of token %d", ev.Holder, ev.Token, next.Type, next.Holder, next.Token, ev.Token+1)
			continue
		}
		handed++
		t.Logf("server: lease %d of %s ended and lease %d of %s granted %v apart, in one ledger change: no instant without a holder",
			ev.Token, ev.Holder, next.Token, next.Holder, next.Time.Sub(ev.Time))
	}
	if handed != len(hos) {
		t.Errorf("%d hand-overs on the server's watch stream, want %d", handed, len(hos))
	}
}

// workerLog is what a worker of TestLock_RollingRestart logged.
type workerLog struct {
	start, end int64 // ns; end 0 if it did not end
	oks        []workerWrite
}

type workerWrite struct {
	at    int64
	token uint64
}

// acceptedAfter counts the writes accepted after t.
func (l workerLog) acceptedAfter(t int64) int {
	n := 0
	for _, w := range l.oks {
		if w.at > t {
			n++
		}
	}
	return n
}

func readWorkerLog(t *testing.T, path string) workerLog {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l workerLog
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		at, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "start":
			l.start = at
		case "end":
			l.end = at
		case "ok":
			if len(f) == 3 {
				tok, _ := strconv.ParseUint(f[2], 10, 64)
				l.oks = append(l.oks, workerWrite{at, tok})
			}
		}
	}
	return l
}

// TestLock_RevokeRequested asks a fence lock's holder to let go (fence
// revoke --grace): the command gets SIGTERM and exits, and the lock is
// released long before the deadline; a command that ignores the SIGTERM
// is revoked at the deadline and fence lock exits as for a lost lease.
func TestLock_RevokeRequested(t *testing.T) {
	p := newLockProcs(t)
	api, err := client.NewAPI(p.url)
	if err != nil {
		t.Fatal(err)
	}
	a, aErr := p.start("a", `trap 'touch "$DIR/a.term"; exit 0' TERM
touch "$DIR/a.started"; while :; do sleep 0.01; done`, "--ttl", "1s")
	p.waitFor("a never started", func() bool { return p.exists("a.started") })
	code, stdout, stderr := runFence(t.Context(), "", "revoke", "worker", "--addr", p.url, "--grace", "1m")
	if code != 0 || !strings.Contains(stdout, `asked holder a`) {
		t.Fatalf("fence revoke --grace: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	a.Wait()
	if code := a.ProcessState.ExitCode(); code != 0 || !p.exists("a.term") || !strings.Contains(aErr(), "asked to let go") {
		t.Fatalf("fence lock a exited %d (term: %v), want its command's 0 after a SIGTERM; stderr:\n%s", code, p.exists("a.term"), aErr())
	}
	if st, err := api.Status(t.Context(), "worker"); err != nil || st.Held {
		t.Fatalf("worker after a let go: %+v, %v; want free", st, err)
	}

	b, bErr := p.start("b", `trap 'touch "$DIR/b.term"' TERM
touch "$DIR/b.started"; while :; do sleep 0.01; done`, "--ttl", "1s", "--kill-grace", "100ms")
	p.waitFor("b never started", func() bool { return p.exists("b.started") })
	if _, _, err := api.RequestRevoke(t.Context(), "worker", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	if code := b.ProcessState.ExitCode(); code != exitLeaseLost || !p.exists("b.term") {
		t.Fatalf("fence lock b exited %d (term: %v), want %d: revoked at the deadline; stderr:\n%s", code, p.exists("b.term"), exitLeaseLost, bErr())
	}
}
