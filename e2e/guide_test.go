package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// guideStep is a sh block of a guide, and the text block after it, if any:
// what its output shows.
type guideStep struct {
	line   int      // of the sh block's opening fence in the guide, from 1
	script string   // the sh block
	want   []string // the text block's lines; "..." stands for any text
}

var guideFence = regexp.MustCompile("^( *)```(\\S*)")

// guideSteps returns the steps of the section of a Markdown file that holds
// the line that starts with marker: from the heading before it to the next
// heading of its level or above.
func guideSteps(t *testing.T, file, marker string) (section string, steps []guideStep) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, marker) {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatalf("%s has no line starting with %q: the test does not know which blocks to run", file, marker)
	}
	start := at
	for start > 0 && !strings.HasPrefix(lines[start], "## ") {
		start--
	}
	end := at + 1
	for end < len(lines) && !strings.HasPrefix(lines[end], "## ") && !strings.HasPrefix(lines[end], "# ") {
		end++
	}
	section = strings.Join(lines[start:end], "\n")
	lastWasSh := false
	for i := start; i < end; i++ {
		m := guideFence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		open := i
		var body []string
		for i++; i < end && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], m[1]))
		}
		switch lang := m[2]; {
		case lang == "sh":
			steps = append(steps, guideStep{line: open + 1, script: strings.Join(body, "\n")})
			lastWasSh = true
			continue
		case lang == "text" && lastWasSh:
			steps[len(steps)-1].want = body
		}
		lastWasSh = false
	}
	if len(steps) == 0 {
		t.Fatalf("%s: no sh block in the section of %q", file, marker)
	}
	return section, steps
}

// matchOutput reports the first line of want that is not among the lines of
// out, in order; "" if all are. In want, "..." stands for any text.
func matchOutput(out string, want []string) string {
	lines := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		parts := strings.Split(w, "...")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for i < len(lines) && !re.MatchString(strings.TrimRight(lines[i], " ")) {
			i++
		}
		if i == len(lines) {
			return w
		}
		i++
	}
	return ""
}

// walkThroughPorts are the fixed ports of the cluster guide's walk-through:
// etcd's client and peer ports, and the fence servers'.
var walkThroughPorts = []int{12379, 12380, 22379, 22380, 32379, 32380, 7701, 7702, 7703}

// clusterLine is the first line of fence cluster.
var clusterLine = regexp.MustCompile(`(?m)^store etcd, epoch (\d+), leader (http://127\.0\.0\.1:\d+);`)

// TestGuide_ClusterWalkThrough runs the cluster guide's "Try it on one
// machine" as a reader would: its sh blocks in order, as they are, in one
// bash -euo pipefail in an empty directory, with the fence binary under test
// first on the PATH. The text block after a sh block must match its output,
// the failover must bring another leader in a later epoch, and the guide's
// last block must stop every process it started. A guide that no longer
// works fails here.
//
// The walk-through uses fixed ports, which the reader can read and type: the
// test skips when one of them is taken. Its processes stay in the process
// group of the bash that runs the blocks, which the test kills when it ends,
// whatever happened.
func TestGuide_ClusterWalkThrough(t *testing.T) {
	for _, tool := range []string{"etcd", "jq", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testserver.Require(t, fmt.Errorf("the cluster guide's walk-through needs %s on the PATH: %w", tool, testserver.ErrNotInstalled))
		}
	}
	section, steps := guideSteps(t, "../docs/guides/cluster.md", "<!-- e2e: TestGuide_ClusterWalkThrough")
	for _, p := range walkThroughPorts {
		if !strings.Contains(section, strconv.Itoa(p)) {
			t.Fatalf("the walk-through no longer names port %d: update walkThroughPorts", p)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Skipf("port %d of 127.0.0.1 is taken, and the walk-through uses it: %v", p, err)
		}
		l.Close()
	}

	// One script, the blocks in order, each followed by a marker line, so
	// that the output of each block can be told apart.
	const marker = "@@ guide step done @@"
	var script strings.Builder
	for _, s := range steps {
		script.WriteString(s.script)
		script.WriteString("\nprintf '\\n%s\\n' '" + marker + "'\n")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(guideEnv(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &stampWriter{marker: []byte(marker)}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, nothing the guide started outlives the test.
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	work := filepath.Join(dir, "fence-cluster")
	runErr := cmd.Wait()
	for i, at := range out.times {
		t.Logf("the block at cluster.md:%d ended after %v", steps[i].line, at.Sub(start).Round(time.Millisecond))
	}
	outputs := strings.Split(out.String(), marker+"\n")
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		t.Logf("output:\n%s", out.String())
		logTails(t, work)
		t.FailNow()
	}
	if runErr != nil || len(outputs) != len(steps)+1 {
		fail("the walk-through failed after %d of %d blocks: %v", len(outputs)-1, len(steps), runErr)
	}

	var before, after []string // fence cluster's first line, before and after the failover
	for i, s := range steps {
		if missing := matchOutput(outputs[i], s.want); missing != "" {
			fail("the block at cluster.md:%d did not print %q", s.line, missing)
		}
		switch {
		case strings.Contains(s.script, "kill -9"):
			after = clusterLine.FindStringSubmatch(outputs[i])
		case before == nil && strings.Contains(s.script, "fence cluster"):
			before = clusterLine.FindStringSubmatch(outputs[i])
		}
	}
	if before == nil || after == nil {
		fail("no fence cluster output before the leader's kill -9 and after it (%q, %q)", before, after)
	}
	epochBefore, _ := strconv.Atoi(before[1])
	epochAfter, _ := strconv.Atoi(after[1])
	if after[2] == before[2] || epochAfter <= epochBefore {
		fail("after the leader's kill -9: leader %s in epoch %d, before: %s in epoch %d; want another leader in a later epoch", after[2], epochAfter, before[2], epochBefore)
	}

	// The guide's last block stopped every server: each pid file names a
	// process that exits.
	pids, err := filepath.Glob(filepath.Join(work, "*.pid"))
	if err != nil || len(pids) != 6 {
		fail("pid files %q, %v; want 6: three etcd members, three fence servers", pids, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for processRuns(pid) {
			if time.Now().After(deadline) {
				fail("%s (pid %d) still runs 30 s after the guide stopped everything", filepath.Base(f), pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// stampWriter keeps what is written to it, and when each marker came.
type stampWriter struct {
	marker []byte
	mu     sync.Mutex
	buf    bytes.Buffer
	times  []time.Time // of each marker written so far
}

func (w *stampWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for n := bytes.Count(w.buf.Bytes(), w.marker); len(w.times) < n; {
		w.times = append(w.times, time.Now())
	}
	return len(p), nil
}

func (w *stampWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// guideEnv is the test's environment without fence's variables, which
// would change what the guide's commands do.
func guideEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCE_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// processRuns reports whether process pid runs: it exists and is not a
// zombie (the guide's processes outlive the bash that started them, and
// are then reaped by whoever adopted them).
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) || !dirExists("/proc/self")
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// logTails logs the end of every log file of the walk-through.
func logTails(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("%s, last lines:\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
}
