package model

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// requireServers is the environment variable that CI sets to make a missing
// spin or C compiler fail the test instead of skipping it.
const requireServers = "FENCE_REQUIRE_SERVERS"

// A check is one run of the model: spin -a with defines, the C compiler,
// and an exhaustive search by pan.
type check struct {
	name    string
	model   string   // the model's file: fence.pml if ""
	defines []string // spin -D flags
	// fail is the outcome wanted: false, the search completes with no
	// error; true, it finds an assertion violated.
	fail bool
	// violates is, for a negative control, the assertion it must violate
	// (as pan prints it): the one that states the property the control
	// breaks, not any other.
	violates string
	what     string // what the outcome shows
}

var checks = []check{
	{name: "Protocol",
		what: "the protocol keeps every property"},

	// Negative controls: each check of the protocol is needed.
	{name: "NoFenceCheck", defines: []string{"NO_FENCE_CHECK"}, fail: true, violates: "(nlf>=store[r].lastFence)",
		what: "without the fence check (token < last_fence), a stale holder's write is accepted"},
	{name: "NoIssuedCheck", defines: []string{"NO_ISSUED_CHECK"}, fail: true, violates: "(tkn<=store[r].lastToken)",
		what: "without the issued check (token > last_token), a forged token's write is accepted"},
	{name: "HandoffKeepsOld", defines: []string{"HANDOFF_KEEPS_OLD"}, fail: true, violates: "(store[0].lastFence>=store[0].leaseToken)",
		what: "a hand-over (a release to a waiter, a transfer) that does not raise the fence leaves the old token valid beside the new lease"},
	{name: "NoEpochCheck", defines: []string{"NO_EPOCH_CHECK"}, fail: true, violates: "(term[s]==epoch)",
		what: "without the writer-epoch check, a deposed leader commits"},
	{name: "NoEpochCheckConsequences", defines: []string{"NO_EPOCH_CHECK", "CONSEQUENCES_ONLY"}, fail: true, violates: "(nlease==store[r].leaseToken)",
		what: "without the writer-epoch check, a deposed leader breaks tokens, fences or leases"},

	// Witnesses: the scenarios the properties are about do happen, so that
	// they hold for a reason and not because nothing happens.
	{name: "Reachable/DeposedCommitRefused", defines: []string{"WITNESS=1"}, fail: true,
		what: "a deposed server's commit is refused"},
	{name: "Reachable/ZombieWriteAtDeposedServer", defines: []string{"WITNESS=2"}, fail: true,
		what: "a zombie's write passes a deposed server's rule"},
	{name: "Reachable/HandOff", defines: []string{"WITNESS=3"}, fail: true,
		what: "a lease ends and goes to a waiter in one commit"},
	{name: "Reachable/LostAnswerRetried", defines: []string{"WITNESS=4"}, fail: true,
		what: "a holder whose answer was lost retries and gets its token"},
	{name: "Reachable/RevokeOfLease", defines: []string{"WITNESS=5"}, fail: true,
		what: "a revoke ends a recorded lease"},
	{name: "Reachable/WriteAfterTakeover", defines: []string{"WITNESS=6"}, fail: true,
		what: "a write is accepted after a takeover or a restart"},
	{name: "Reachable/LeaseRestored", defines: []string{"WITNESS=7"}, fail: true,
		what: "a takeover or a restart restores a recorded lease"},

	// The primitives (primitives.pml), each part on its own world.
	{name: "Primitives/Shared", model: primitives, defines: []string{"PART=1"},
		what: "shared groups keep every property beside exclusive leases, downgrades and revokes"},
	{name: "Primitives/Multi", model: primitives, defines: []string{"PART=2"},
		what: "multi-acquires keep every property"},
	{name: "Primitives/Permits", model: primitives, defines: []string{"PART=3"},
		what: "permits keep every property"},
	{name: "Primitives/Sessions", model: primitives, defines: []string{"PART=4"},
		what: "sessions keep every property"},
	{name: "Primitives/SharedTokenReused", model: primitives, defines: []string{"PART=1", "SHARED_TOKEN_REUSED"}, fail: true, violates: "(tok[((c*1)+r)]==latest[r])",
		what: "a shared group's token not raised past an exclusive one lets the paused exclusive holder write beside the group"},
	{name: "Primitives/SharedBesideExclusive", model: primitives, defines: []string{"PART=1", "SHARED_BESIDE_EXCL"}, fail: true, violates: "!(((excl[r]!=255)&&(group[r]!=0)))",
		what: "a shared acquire that does not check for an exclusive lease holds beside it"},
	{name: "Primitives/MultiHalf", model: primitives, defines: []string{"PART=2", "MULTI_HALF"}, fail: true, violates: "(excl[0]!=c)",
		what: "a multi-acquire that commits half holds a resource after it was refused"},
	{name: "Primitives/PermitAnySlot", model: primitives, defines: []string{"PART=3", "PERMIT_ANY_SLOT"}, fail: true, violates: "(n<=2)",
		what: "a permit granted on a held slot makes more than the limit of holders"},
	{name: "Primitives/SessionJoinEnded", model: primitives, defines: []string{"PART=4", "SESSION_JOIN_ENDED"}, fail: true, violates: "sessOpen[c]",
		what: "an acquire that does not check its session joins one that has ended"},
	{name: "Primitives/Reachable/GroupSharesToken", model: primitives, defines: []string{"PART=1", "WITNESS=1"}, fail: true,
		what: "a group of two holds with one token"},
	{name: "Primitives/Reachable/ExclusiveFencedByGroup", model: primitives, defines: []string{"PART=1", "WITNESS=2"}, fail: true,
		what: "a paused exclusive holder's write is refused while a group holds"},
	{name: "Primitives/Reachable/Downgrade", model: primitives, defines: []string{"PART=1", "WITNESS=3"}, fail: true,
		what: "an exclusive holder downgrades"},
	{name: "Primitives/Reachable/MultiAcquire", model: primitives, defines: []string{"PART=2", "WITNESS=4"}, fail: true,
		what: "a multi-acquire takes both resources"},
	{name: "Primitives/Reachable/TwoPermits", model: primitives, defines: []string{"PART=3", "WITNESS=5"}, fail: true,
		what: "two permits are held at once"},
	{name: "Primitives/Reachable/SessionEndsLease", model: primitives, defines: []string{"PART=4", "WITNESS=6"}, fail: true,
		what: "a session's end ends a lease in it"},
}

// primitives is the model of the primitives beyond one exclusive lease.
const primitives = "primitives.pml"

// Flags of the C compiler and of pan. SAFETY: safety properties only (no
// cycle search), with full state storage (no bitstate hashing). NOREDUCE:
// no partial-order reduction; every step of the model shares variables, so
// it would reduce nothing, and it stays out of the way of the model's own
// symmetry reduction. MEMLIM: stop, reported as incomplete, rather than
// swap. -m: the depth limit, far above the model's (run checks it). -w:
// 2^23 hash slots.
var (
	ccFlags  = []string{"-w", "-DSAFETY", "-DNOREDUCE", "-DMEMLIM=2048"}
	panFlags = []string{"-m10000", "-w23"}
)

// TestModel checks the model of the protocol with Spin: the model passes
// an exhaustive search, and each negative control and witness fails it.
// With -short, only the model itself is checked.
func TestModel(t *testing.T) {
	spin, cc := tools(t)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.fail {
				t.Skip("-short: only the models themselves are checked")
			}
			if c.model == "" {
				c.model = "fence.pml"
			}
			model, err := os.ReadFile(c.model)
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, spin, cc, model, c)
			if !c.fail {
				if r.errors != 0 {
					t.Fatalf("errors: %d, want 0: %s; the model fails %s\n%s", r.errors, c.what, r.violated, r.out)
				}
				t.Logf("%s: %d states stored, %s transitions, depth %d, %s s", c.what, r.states, r.transitions, r.depth, r.elapsed)
				return
			}
			if r.errors == 0 || r.violated == "" {
				t.Fatalf("errors: %d, want an assertion violated: it should show that %s\n%s", r.errors, c.what, r.out)
			}
			if strings.Contains(c.name, "Reachable/") {
				t.Logf("%s: reached at depth %d", c.what, r.violatedAt)
				return
			}
			if c.violates == "" || !strings.Contains(r.violated, c.violates) {
				t.Fatalf("assertion violated %s, want %q: the control should show that %s\n%s", r.violated, c.violates, c.what, r.out)
			}
			t.Logf("%s: assertion violated %s, at depth %d", c.what, r.violated, r.violatedAt)
		})
	}
}

// tools returns the paths of spin and of the C compiler, or skips t (fails
// it under FENCE_REQUIRE_SERVERS=1) if either is missing.
func tools(t *testing.T) (spin, cc string) {
	t.Helper()
	var missing []string
	spin, err := exec.LookPath("spin")
	if err != nil {
		missing = append(missing, "spin (apt-get install spin)")
	}
	cc, err = exec.LookPath("cc")
	if err != nil {
		missing = append(missing, "a C compiler as cc (apt-get install gcc libc6-dev)")
	}
	if len(missing) > 0 {
		msg := "the protocol's model needs " + strings.Join(missing, " and ") + " on PATH"
		if os.Getenv(requireServers) == "1" {
			t.Fatalf("%s (%s=1 makes this a failure)", msg, requireServers)
		}
		t.Skip(msg)
	}
	return spin, cc
}

// result is what pan reports.
type result struct {
	out         []byte
	errors      int
	states      int
	transitions string // pan writes large counts in floating point
	depth       int
	elapsed     string // seconds
	violated    string // the first assertion violated, "" if none
	violatedAt  int    // its depth
}

var (
	reErrors   = regexp.MustCompile(`depth reached (\d+), errors: (\d+)`)
	reStates   = regexp.MustCompile(`(?m)^\s*(\d+) states, stored`)
	reTrans    = regexp.MustCompile(`(?m)^\s*(\S+) transitions \(= stored\+matched\)`)
	reElapsed  = regexp.MustCompile(`pan: elapsed time (\S+) seconds`)
	reViolated = regexp.MustCompile(`pan:\d+: assertion violated (.*) \(at depth (\d+)\)`)
)

// run builds and runs the verifier of model with c's defines in a
// directory of its own, and parses what it reports. It fails t if the
// search was not exhaustive: a bitstate or partial search, a depth limit
// reached, memory exhausted, or a passing search that did not complete.
func run(t *testing.T, spin, cc string, model []byte, c check) result {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, c.model), model, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-a"}
	for _, d := range c.defines {
		args = append(args, "-D"+d)
	}
	command(t, dir, spin, append(args, c.model)...)
	opt := "-O2"
	if c.fail {
		opt = "-O0" // it stops at its first error: compiling fast matters more
	}
	command(t, dir, cc, append(append([]string{opt}, ccFlags...), "-o", "pan", "pan.c")...)
	out := command(t, dir, filepath.Join(dir, "pan"), panFlags...)

	r := result{out: out}
	for _, bad := range []string{"Bit statespace search", "max search depth too small", "-DMEMLIM bound", "out of memory"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Fatalf("pan: %q: the search was not exhaustive\n%s", bad, out)
		}
	}
	if !bytes.Contains(out, []byte("Full statespace search for:")) {
		t.Fatalf("pan did not report a full state-space search\n%s", out)
	}
	m := reErrors.FindSubmatch(out)
	if m == nil {
		t.Fatalf("pan reported no errors count\n%s", out)
	}
	r.depth, _ = strconv.Atoi(string(m[1]))
	r.errors, _ = strconv.Atoi(string(m[2]))
	if m := reStates.FindSubmatch(out); m != nil {
		r.states, _ = strconv.Atoi(string(m[1]))
	}
	if m := reTrans.FindSubmatch(out); m != nil {
		r.transitions = string(m[1])
	}
	if m := reElapsed.FindSubmatch(out); m != nil {
		r.elapsed = string(m[1])
	}
	if m := reViolated.FindSubmatch(out); m != nil {
		r.violated = string(m[1])
		r.violatedAt, _ = strconv.Atoi(string(m[2]))
	}
	if r.errors == 0 && bytes.Contains(out, []byte("Search not completed")) {
		t.Fatalf("pan: the search did not complete\n%s", out)
	}
	return r
}

// command runs name with args in dir and returns its output; it fails t if
// the command cannot run or exits non-zero.
func command(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		t.Fatal(err)
	}
	return out
}
