package fencetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// kill9Env names the data directory of a TestKill9 child process. The parent
// sets it in the child's environment; a process without it is a parent.
const kill9Env = "FENCETEST_KILL9_DIR"

const (
	kill9Rounds   = 3                // children killed on one directory, one after the other
	kill9Workers  = 4                // goroutines of a child; see kill9Resource
	kill9Deadline = 30 * time.Second // a child stops by itself after this, in case it is never killed
)

// kill9Resource is the i-th (0 or 1) resource of worker w. No other worker
// uses it, so that a worker's writes are never fenced by another's grants and
// its acknowledgements of the resource come in the order they happened.
func kill9Resource(w, i int) string { return fmt.Sprintf("res-%d-%d", w, i) }

// TestKill9 checks that a durable embedded engine keeps what it acknowledged
// when its process is killed with SIGKILL (invariant 4), and that tokens and
// the revision go on from there after a restart (invariants 1 and 2). An
// engine that keeps its state in a local directory runs it from its tests:
//
//	func TestKill9(t *testing.T) { fencetest.TestKill9(t, open) }
//
// open opens the engine's state in dir, creating dir and an empty state if
// they do not exist yet, and returns it with the function that closes it. It
// must keep all the state in dir, and must not depend on the test process:
// TestKill9 calls it in a child process, kills that process, and then calls
// it again in the test's process to read what the child left. The two never
// have dir open at once: the parent closes the state before the next child
// starts.
//
// TestKill9 re-runs the test binary (os.Args[0]) as the child, with
// -test.run matching only the test that called it (t.Name()) and the
// environment variable FENCETEST_KILL9_DIR naming dir. In that process,
// TestKill9 runs the load instead of the checks, so the test must reach
// TestKill9 in the child as it does in the parent, and do nothing before it
// that the child should not do. A normal run (the variable unset) never runs
// the load in the test's own process.
//
// The child runs 4 workers for at most 30 s. Each worker owns two resources,
// on which it grants, puts, claims and commits two-resource txns in a loop,
// and prints one line per operation on stdout after the operation returned
// without error. A line the child did not finish before it was killed was not
// acknowledged, and is ignored. An error in the child fails the test.
//
// The parent kills the child after a random number (150 to 249) of
// acknowledged operations, reads the lines still in the pipe, and opens dir
// again to check that:
//   - every key holds its latest acknowledged write (value, revision and
//     token) or a newer one, with a higher revision and a token not lower;
//   - the fence of every resource is at least every acknowledged token, of
//     grants, claims, puts and txns;
//   - the last token of every resource is at least its acknowledged grants,
//     and its lease is that of the latest acknowledged grant or a newer one;
//   - the revision (an empty Txn) is at least every acknowledged one;
//   - a new Grant on every resource is greater than every token acknowledged
//     for it;
//   - the backend's Check() error method returns nil, if it has one (a
//     readiness probe).
//
// While it reads the child's lines, it checks that tokens only grow: every
// acknowledged grant is greater than every token acknowledged before on its
// resource, in this child, in the earlier ones and in the parent's checks;
// and that the revision never goes down: every acknowledged write is at a
// revision greater than the earlier writes on its resource and than the
// revision read at the last check. It runs 3 rounds of child, kill and
// check on one directory. It skips in -short mode.
func TestKill9(t *testing.T, open func(dir string) (Backend, func() error, error)) {
	if dir, ok := kill9Child(t); ok {
		runKill9Load(t, dir, open)
		return
	}
	if testing.Short() {
		t.Skip("kill -9: starts child processes")
	}
	dir := t.TempDir()
	a := &kill9Acks{
		grants: map[string]fence.Token{},
		fences: map[string]fence.Token{},
		writes: map[[2]string]kill9Write{},
		revs:   map[string]fence.Rev{},
	}
	for round := range kill9Rounds {
		n := runKill9Child(t, round, dir, a)
		t.Logf("round %d: killed after %d acknowledged operations", round, n)
		checkKill9(t, dir, open, a)
	}
}

// kill9Pattern is the -test.run pattern that matches exactly the test named
// name, and the subtests on the way to it.
func kill9Pattern(name string) string {
	elems := strings.Split(name, "/")
	for i, e := range elems {
		elems[i] = "^" + regexp.QuoteMeta(e) + "$"
	}
	return strings.Join(elems, "/")
}

// kill9Child reports whether this process is the child of a TestKill9 on t,
// and its data directory: the parent set kill9Env and runs t alone. A stray
// kill9Env in a normal run (without that -test.run) leaves it the parent.
func kill9Child(t *testing.T) (dir string, ok bool) {
	dir = os.Getenv(kill9Env)
	if dir == "" {
		return "", false
	}
	run := flag.Lookup("test.run")
	return dir, run != nil && run.Value.String() == kill9Pattern(t.Name())
}

// runKill9Load is the child: it opens dir and loads it until the parent kills
// it, printing one line per acknowledged operation, after it returned:
//
//	ack grant RES TOKEN
//	ack put RES KEY TOKEN REV VALUE
//	ack claim RES TOKEN
//	ack txn REV RES1 TOKEN1 RES2 TOKEN2 KEY VALUE   (VALUE under RES1/KEY and RES2/KEY)
//	fail MESSAGE                                    (an error: the load stops)
//
// Each line goes out in one write, so lines do not mix; the parent ignores
// one the kill cut short.
func runKill9Load(t *testing.T, dir string, open func(dir string) (Backend, func() error, error)) {
	var mu sync.Mutex
	out := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	// The testing package prints t.Errorf only when the test ends, which a
	// killed child never does: fail tells the parent at once.
	ctx, stop := context.WithTimeout(t.Context(), kill9Deadline)
	defer stop()
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		out("fail %s", strings.ReplaceAll(msg, "\n", " "))
		t.Error(msg)
		stop()
	}
	b, closeB, err := open(dir)
	if err != nil {
		fail("open %s: %v", dir, err)
		return
	}
	defer func() {
		if err := closeB(); err != nil {
			fail("close: %v", err)
		}
	}()
	// Operations run on the test's context: the load's ends the loop, and
	// must not fail an operation under way.
	opCtx := t.Context()
	var wg sync.WaitGroup
	for w := range kill9Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			holder := fmt.Sprintf("w%d", w)
			tokens := map[string]fence.Token{}
			tokenFor := func(res string) (fence.Token, bool) {
				if tok := tokens[res]; tok != 0 && rng.IntN(4) != 0 {
					return tok, true
				}
				tok, err := b.Grant(opCtx, res, holder, time.Minute, time.Now().Add(time.Minute))
				if err != nil {
					fail("Grant(%q): %v", res, err)
					return 0, false
				}
				out("ack grant %s %d", res, tok)
				tokens[res] = tok
				return tok, true
			}
			for i := 0; ctx.Err() == nil; i++ {
				res := kill9Resource(w, rng.IntN(2))
				tok, ok := tokenFor(res)
				if !ok {
					return
				}
				key := fmt.Sprintf("k%d", rng.IntN(3))
				value := fmt.Sprintf("v-%d-%d-%d", w, i, rng.Uint32())
				switch rng.IntN(5) {
				case 0:
					if _, err := b.Claim(opCtx, res, tok); err != nil {
						fail("Claim(%q, %d): %v", res, tok, err)
						return
					}
					out("ack claim %s %d", res, tok)
				case 1:
					res1, res2 := kill9Resource(w, 0), kill9Resource(w, 1)
					tok1, ok1 := tokenFor(res1)
					tok2, ok2 := tokenFor(res2)
					if !ok1 || !ok2 {
						return
					}
					rev, err := b.Txn(opCtx, &fence.Txn{
						Fences: map[string]fence.Token{res1: tok1, res2: tok2},
						Then: []fence.Op{{Kind: fence.OpPut, Resource: res1, Key: key, Value: []byte(value)},
							{Kind: fence.OpPut, Resource: res2, Key: key, Value: []byte(value)}},
					})
					if err != nil {
						fail("Txn(%q %d, %q %d): %v", res1, tok1, res2, tok2, err)
						return
					}
					out("ack txn %d %s %d %s %d %s %s", rev, res1, tok1, res2, tok2, key, value)
				default:
					r, err := b.Put(opCtx, res, key, []byte(value), tok, fence.Cond{})
					if err != nil {
						fail("Put(%q, %q, %d): %v", res, key, tok, err)
						return
					}
					out("ack put %s %s %d %d %s", res, key, tok, r.Rev, value)
				}
			}
		})
	}
	wg.Wait()
}

// runKill9Child runs one child on dir, kills it after a random number of
// acknowledged operations, and adds to a what it acknowledged, which it
// returns the number of.
func runKill9Child(t *testing.T, round int, dir string, a *kill9Acks) int {
	t.Helper()
	before := a.ops
	target := 150 + rand.IntN(100)
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run="+kill9Pattern(t.Name()), "-test.count=1", "-test.timeout="+(kill9Deadline+time.Minute).String())
	cmd.Env = append(os.Environ(), kill9Env+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	// Read every line, also those the child wrote after the kill was
	// decided: they were acknowledged too. Other lines are the testing
	// package's, kept to explain a failure.
	var other strings.Builder
	r := bufio.NewReader(stdout)
	killed := false
	var failure error
	for failure == nil {
		line, err := r.ReadString('\n')
		if err != nil {
			// The child is gone. A last line without its newline was cut
			// by the kill: that operation was not acknowledged.
			if !errors.Is(err, io.EOF) {
				failure = fmt.Errorf("read the child's output: %w", err)
			}
			if line != "" {
				t.Logf("round %d: ignored the partial last line %q", round, line)
			}
			break
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "ack "):
			failure = a.parse(line)
		case strings.HasPrefix(line, "fail "):
			failure = fmt.Errorf("child: %s", strings.TrimPrefix(line, "fail "))
		case other.Len() < 64<<10:
			other.WriteString(line + "\n")
		}
		if failure == nil && !killed && a.ops-before >= target {
			if err := cmd.Process.Kill(); err != nil {
				failure = fmt.Errorf("kill: %w", err)
			}
			killed = true
		}
	}
	if failure != nil {
		cmd.Process.Kill()
	}
	err = cmd.Wait()
	n := a.ops - before
	switch {
	case failure != nil:
		t.Fatalf("round %d, after %d acknowledged operations: %v\nstdout:\n%s\nstderr:\n%s", round, n, failure, other.String(), stderr.Bytes())
	case !killed:
		t.Fatalf("round %d: child exited after %d acknowledged operations, before it was killed: %v\nstdout:\n%s\nstderr:\n%s", round, n, err, other.String(), stderr.Bytes())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("round %d: child ended with %v, want killed by a signal\nstdout:\n%s\nstderr:\n%s", round, err, other.String(), stderr.Bytes())
	}
	return n
}

// kill9Acks is what the children acknowledged, over all rounds, and the
// tokens the parent's checks granted.
type kill9Acks struct {
	grants map[string]fence.Token   // highest acknowledged grant, by resource
	fences map[string]fence.Token   // highest token acknowledged by any operation, by resource
	writes map[[2]string]kill9Write // latest acknowledged write, by resource and key
	revs   map[string]fence.Rev     // highest acknowledged write revision, by resource
	rev    fence.Rev                // highest acknowledged revision
	floor  fence.Rev                // the revision read at the last check; later writes are above it
	ops    int                      // acknowledged operations
}

type kill9Write struct {
	rev   fence.Rev
	token fence.Token
	value string
}

func (a *kill9Acks) fence(res string, tok fence.Token) { a.fences[res] = max(a.fences[res], tok) }

// grant records an acknowledged grant; tokens only grow.
func (a *kill9Acks) grant(res string, tok fence.Token) error {
	if tok <= a.fences[res] {
		return fmt.Errorf("grant of %q: token %d, want > %d (acknowledged before)", res, tok, a.fences[res])
	}
	a.grants[res] = tok
	a.fence(res, tok)
	return nil
}

// write records an acknowledged write; the revision does not go down.
func (a *kill9Acks) write(res, key string, tok fence.Token, rev fence.Rev, value string) error {
	if low := max(a.revs[res], a.floor); rev <= low {
		return fmt.Errorf("write of %q/%q: revision %d, want > %d (acknowledged or read before)", res, key, rev, low)
	}
	a.revs[res] = rev
	a.fence(res, tok)
	a.writes[[2]string{res, key}] = kill9Write{rev: rev, token: tok, value: value}
	a.rev = max(a.rev, rev)
	return nil
}

// parse records one line of the child, "ack ...".
func (a *kill9Acks) parse(line string) error {
	f := strings.Fields(line)
	var bad error
	num := func(i int) uint64 {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("line %q: field %d: %w", line, i, err)
		}
		return n
	}
	var err error
	switch {
	case len(f) == 4 && f[1] == "grant":
		tok := fence.Token(num(3))
		if bad == nil {
			err = a.grant(f[2], tok)
		}
	case len(f) == 4 && f[1] == "claim":
		tok := fence.Token(num(3))
		if bad == nil {
			a.fence(f[2], tok)
		}
	case len(f) == 7 && f[1] == "put":
		tok, rev := fence.Token(num(4)), fence.Rev(num(5))
		if bad == nil {
			err = a.write(f[2], f[3], tok, rev, f[6])
		}
	case len(f) == 9 && f[1] == "txn":
		rev, tok1, tok2 := fence.Rev(num(2)), fence.Token(num(4)), fence.Token(num(6))
		if bad == nil {
			err = errors.Join(a.write(f[3], f[7], tok1, rev, f[8]), a.write(f[5], f[7], tok2, rev, f[8]))
		}
	default:
		bad = fmt.Errorf("unexpected line %q", line)
	}
	if bad != nil {
		return bad
	}
	a.ops++
	return err
}

// checkKill9 opens dir and checks that it holds everything acknowledged;
// then it grants every resource once more, and records those grants in a.
// It closes the backend before it returns.
func checkKill9(t *testing.T, dir string, open func(dir string) (Backend, func() error, error), a *kill9Acks) {
	t.Helper()
	ctx := t.Context()
	if len(a.fences) == 0 || len(a.writes) == 0 {
		t.Fatalf("nothing acknowledged")
	}
	b, closeB, err := open(dir)
	if err != nil {
		t.Fatalf("open after kill -9: %v", err)
	}
	defer func() {
		if err := closeB(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if c, ok := b.(interface{ Check() error }); ok {
		if err := c.Check(); err != nil {
			t.Fatalf("Check after kill -9: %v", err)
		}
	}
	for k, w := range a.writes {
		item, err := b.Get(ctx, k[0], k[1])
		if err != nil {
			t.Fatalf("Get(%q, %q): %v, want the write acknowledged at rev %d", k[0], k[1], err, w.rev)
		}
		switch {
		case item.Rev < w.rev:
			t.Fatalf("Get(%q, %q): Rev=%d, want >= %d (an acknowledged write is lost)", k[0], k[1], item.Rev, w.rev)
		case item.Rev == w.rev && (string(item.Value) != w.value || item.Token != w.token):
			t.Fatalf("Get(%q, %q) at rev %d: %q token %d, want %q token %d", k[0], k[1], w.rev, item.Value, item.Token, w.value, w.token)
		case item.Token < w.token:
			t.Fatalf("Get(%q, %q): Token=%d, want >= %d", k[0], k[1], item.Token, w.token)
		}
	}
	for res, tok := range a.fences {
		if f := fenceOf(t, b, res); f < tok {
			t.Fatalf("Fence(%q)=%d, want >= %d (acknowledged)", res, f, tok)
		}
	}
	leases, _, err := b.Leases(ctx)
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	leaseOf := map[string]fence.Token{}
	for _, l := range leases {
		leaseOf[l.Resource] = l.Token
	}
	for res, tok := range a.grants {
		if last := lastToken(t, b, res); last < tok {
			t.Fatalf("LastToken(%q)=%d, want >= %d (acknowledged grant)", res, last, tok)
		}
		if leaseOf[res] < tok {
			t.Fatalf("lease of %q: Token=%d, want >= %d (acknowledged grant)", res, leaseOf[res], tok)
		}
	}
	rev, err := b.Txn(ctx, &fence.Txn{})
	if err != nil || rev < a.rev {
		t.Fatalf("revision=%d, %v; want >= %d (acknowledged)", rev, err, a.rev)
	}
	a.floor = rev
	// Invariant 1 across crashes: a new grant is above every token acknowledged.
	for res, tok := range a.fences {
		next, err := b.Grant(ctx, res, "checker", time.Minute, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatalf("Grant(%q): %v", res, err)
		}
		if next <= tok {
			t.Fatalf("Grant(%q)=%d after kill -9, want > %d", res, next, tok)
		}
		a.grants[res] = next
		a.fence(res, next)
	}
}
