package bolt_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/bolt"
)

// kill9Env names the data directory of TestDB_Kill9Child; without it the
// child test skips.
const kill9Env = "FENCE_BOLT_KILL9_DIR"

// Kill9 children run kill9Workers workers; worker w owns resources
// kill9Resource(w, 0) and kill9Resource(w, 1), so that its writes are never
// fenced by another worker's grants.
const kill9Workers = 4

func kill9Resource(w, i int) string { return fmt.Sprintf("res-%d-%d", w, i) }

// TestDB_Kill9Child is the child process of TestDB_Kill9: it grants, writes,
// claims and commits txns in a loop, and prints one line per acknowledged
// operation, after the operation returned:
//
//	ack grant RES TOKEN
//	ack put RES KEY TOKEN REV VALUE
//	ack claim RES TOKEN
//	ack txn REV RES1 TOKEN1 RES2 TOKEN2 KEY VALUE   (VALUE under RES1/KEY and RES2/KEY)
func TestDB_Kill9Child(t *testing.T) {
	dir := os.Getenv(kill9Env)
	if dir == "" {
		t.Skip("run by TestDB_Kill9 as a child process")
	}
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := t.Context()
	var mu sync.Mutex
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, "ack "+format+"\n", args...)
	}
	deadline := time.Now().Add(30 * time.Second) // in case the parent never kills us
	var wg sync.WaitGroup
	for w := range kill9Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			tokens := map[string]fence.Token{}
			tokenFor := func(res string) (fence.Token, bool) {
				if tok := tokens[res]; tok != 0 && rng.IntN(4) != 0 {
					return tok, true
				}
				tok, err := db.Grant(ctx, res, fmt.Sprintf("w%d", w), time.Minute, time.Now().Add(time.Minute))
				if err != nil {
					t.Errorf("Grant: %v", err)
					return 0, false
				}
				ack("grant %s %d", res, tok)
				tokens[res] = tok
				return tok, true
			}
			for i := 0; time.Now().Before(deadline); i++ {
				res := kill9Resource(w, rng.IntN(2))
				tok, ok := tokenFor(res)
				if !ok {
					return
				}
				key := fmt.Sprintf("k%d", rng.IntN(3))
				value := fmt.Sprintf("v-%d-%d-%d", w, i, rng.Uint32())
				switch rng.IntN(5) {
				case 0:
					if _, err := db.Claim(ctx, res, tok); err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					ack("claim %s %d", res, tok)
				case 1:
					res1, res2 := kill9Resource(w, 0), kill9Resource(w, 1)
					tok1, ok1 := tokenFor(res1)
					tok2, ok2 := tokenFor(res2)
					if !ok1 || !ok2 {
						return
					}
					rev, err := db.Txn(ctx, &fence.Txn{
						Fences: map[string]fence.Token{res1: tok1, res2: tok2},
						Then: []fence.Op{{Kind: fence.OpPut, Resource: res1, Key: key, Value: []byte(value)},
							{Kind: fence.OpPut, Resource: res2, Key: key, Value: []byte(value)}},
					})
					if err != nil {
						t.Errorf("Txn: %v", err)
						return
					}
					ack("txn %d %s %d %s %d %s %s", rev, res1, tok1, res2, tok2, key, value)
				default:
					r, err := db.Put(ctx, res, key, []byte(value), tok, fence.Cond{})
					if err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					ack("put %s %s %d %d %s", res, key, tok, r.Rev, value)
				}
			}
		})
	}
	wg.Wait()
	db.Close()
}

// acked is what the children acknowledged, over all runs.
type acked struct {
	grants map[string]fence.Token   // highest acknowledged grant, by resource
	fences map[string]fence.Token   // highest token acknowledged by any operation, by resource
	writes map[[2]string]ackedWrite // latest acknowledged write, by resource and key
	rev    fence.Rev                // highest acknowledged revision
	lines  int                      // acknowledged operations
}

type ackedWrite struct {
	rev   fence.Rev
	token fence.Token
	value string
}

func (a *acked) fence(res string, tok fence.Token) { a.fences[res] = max(a.fences[res], tok) }

func (a *acked) write(res, key string, tok fence.Token, rev fence.Rev, value string) {
	a.fence(res, tok)
	k := [2]string{res, key}
	if rev > a.writes[k].rev {
		a.writes[k] = ackedWrite{rev: rev, token: tok, value: value}
	}
	a.rev = max(a.rev, rev)
}

func (a *acked) parse(line string) error {
	f := strings.Fields(line)
	num := func(i int) uint64 {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.ParseUint(f[i], 10, 64)
		return n
	}
	switch {
	case len(f) == 4 && f[1] == "grant":
		tok := fence.Token(num(3))
		a.grants[f[2]] = max(a.grants[f[2]], tok)
		a.fence(f[2], tok)
	case len(f) == 4 && f[1] == "claim":
		a.fence(f[2], fence.Token(num(3)))
	case len(f) == 7 && f[1] == "put":
		a.write(f[2], f[3], fence.Token(num(4)), fence.Rev(num(5)), f[6])
	case len(f) == 9 && f[1] == "txn":
		rev := fence.Rev(num(2))
		a.write(f[3], f[7], fence.Token(num(4)), rev, f[8])
		a.write(f[5], f[7], fence.Token(num(6)), rev, f[8])
	default:
		return fmt.Errorf("unexpected line %q", line)
	}
	a.lines++
	return nil
}

// TestDB_Kill9 checks invariant 4: what was acknowledged survives kill -9. It
// runs TestDB_Kill9Child in a child process, kills it with SIGKILL at a random
// point after about 200 acknowledged operations, reopens the directory and
// checks every acknowledgement against it. Three times, on one directory.
func TestDB_Kill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	a := &acked{grants: map[string]fence.Token{}, fences: map[string]fence.Token{}, writes: map[[2]string]ackedWrite{}}
	for run := range 3 {
		before := a.lines
		target := 150 + rand.IntN(100)
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDB_Kill9Child$", "-test.count=1")
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
		// Read every line, also those the child wrote after it was killed:
		// they were acknowledged too.
		sc := bufio.NewScanner(stdout)
		killed := false
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "ack ") {
				continue
			}
			if err := a.parse(line); err != nil {
				cmd.Process.Kill()
				t.Fatal(err)
			}
			if !killed && a.lines-before >= target {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatalf("kill: %v", err)
				}
				killed = true
			}
		}
		err = cmd.Wait()
		if !killed {
			t.Fatalf("run %d: child exited after %d acknowledged operations: %v\n%s", run, a.lines-before, err, stderr.Bytes())
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("run %d: child ended with %v, want killed by a signal\n%s", run, err, stderr.Bytes())
		}
		t.Logf("run %d: killed after %d acknowledged operations", run, a.lines-before)
		checkAcked(t, dir, a)
	}
}

// checkAcked reopens dir and checks that it holds everything acknowledged.
func checkAcked(t *testing.T, dir string, a *acked) {
	t.Helper()
	ctx := t.Context()
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatalf("Open after kill: %v", err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for k, w := range a.writes {
		item, err := db.Get(ctx, k[0], k[1])
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
	leases, _, err := db.Leases(ctx)
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	leaseOf := map[string]fence.Token{}
	for _, l := range leases {
		leaseOf[l.Resource] = l.Token
	}
	for res, tok := range a.fences {
		f, err := db.Fence(ctx, res)
		if err != nil {
			t.Fatalf("Fence: %v", err)
		}
		if f < tok {
			t.Fatalf("Fence(%q)=%d, want >= %d (acknowledged)", res, f, tok)
		}
	}
	for res, tok := range a.grants {
		last, err := db.LastToken(ctx, res)
		if err != nil {
			t.Fatalf("LastToken: %v", err)
		}
		if last < tok {
			t.Fatalf("LastToken(%q)=%d, want >= %d (acknowledged grant)", res, last, tok)
		}
		if leaseOf[res] < tok {
			t.Fatalf("lease of %q: Token=%d, want >= %d (acknowledged grant)", res, leaseOf[res], tok)
		}
	}
	if rev, err := db.Txn(ctx, &fence.Txn{}); err != nil || rev < a.rev {
		t.Fatalf("revision=%d, %v; want >= %d (acknowledged)", rev, err, a.rev)
	}
	// Invariant 1 across crashes: a new grant is above every token acknowledged.
	for res, tok := range a.fences {
		next, err := db.Grant(ctx, res, "checker", time.Minute, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatalf("Grant: %v", err)
		}
		if next <= tok {
			t.Fatalf("Grant(%q)=%d after kill -9, want > %d", res, next, tok)
		}
		a.grants[res] = next
		a.fence(res, next)
	}
	if len(a.fences) == 0 || len(a.writes) == 0 {
		t.Fatalf("nothing acknowledged")
	}
}
