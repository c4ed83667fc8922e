package check_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

func TestCheck_Classic(t *testing.T) {
	rep := run(t, classic().ops)
	if rep.Accepted != 2 || rep.Fenced != 1 {
		t.Errorf("Accepted=%d Fenced=%d, want 2, 1", rep.Accepted, rep.Fenced)
	}
	if rep.Counts["write/ok"] != 2 || rep.Counts["write/fenced"] != 1 || rep.Counts["read/ok"] != 3 || rep.Counts["acquire/ok"] != 2 {
		t.Errorf("Counts=%v", rep.Counts)
	}
	if rep.StaleAttempts != 1 || rep.StaleRejected != 1 {
		t.Errorf("StaleAttempts=%d StaleRejected=%d, want 1, 1", rep.StaleAttempts, rep.StaleRejected)
	}
	if rep.FinalReadKeys != 1 || rep.KeysWithoutFinalRead != 0 {
		t.Errorf("FinalReadKeys=%d KeysWithoutFinalRead=%d", rep.FinalReadKeys, rep.KeysWithoutFinalRead)
	}
	lin := rep.Linearizability
	if lin.Result != "ok" || len(lin.Partitions) != 1 || lin.Partitions[0].Ops != 8 || lin.Dropped != 1 {
		t.Errorf("Linearizability=%+v", lin)
	}
	if rep.Violations() != 0 {
		t.Errorf("Violations()=%d", rep.Violations())
	}
}

func TestCheck_Empty(t *testing.T) {
	rep := run(t, nil)
	if rep.Linearizability.Result != "ok" || rep.Ops != 0 {
		t.Fatalf("%+v", rep)
	}
}

func TestTokenOrder(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		// A write with token 1 overlaps the grant of token 2; its revision
		// comes before the first write with token 2.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 20, 100, history.OK)
		b.acquire(1, "r", 2, 30, 40)
		b.write(1, "r", "y", "b", 2, 2, 50, 60, history.OK)
		run(t, b.ops)
	})
	t.Run("Violation", func(t *testing.T) {
		// Client 0's write with token 1 was invoked before token 2 was
		// granted, so it is not stale in real time, but the store gave it
		// a revision after a write with token 2.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		stale := b.write(0, "r", "x", "a", 1, 3, 21, 100, history.OK)
		b.acquire(1, "r", 2, 22, 30)
		newer := b.write(1, "r", "x", "b", 2, 2, 40, 50, history.OK)
		rep := run(t, b.ops, check.TokenOrder, check.Linearizable)
		wantViolation(t, rep, check.TokenOrder, stale, `"r"`, "token 1 at revision 3", "token 2 at revision 2")
		if v := rep.Result(check.TokenOrder).Violations[0]; len(v.Ops) != 2 || v.Ops[1] != newer {
			t.Fatalf("Ops=%v, want [%d %d]", v.Ops, stale, newer)
		}
	})
	t.Run("TxnWrites", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(1, "s", 7, 0, 10)
		b.txn(1, []history.Write{{Resource: "r", Key: "x", Value: "t", Token: 5}, {Resource: "s", Key: "y", Value: "t", Token: 7}}, 4, 20, 300, history.OK)
		culprit := b.write(0, "r", "x", "a", 1, 5, 20, 400, history.OK)
		rep := run(t, b.ops, check.TokenOrder, check.Linearizable)
		wantViolation(t, rep, check.TokenOrder, culprit, "token 1 at revision 5", "txn op 3", "token 5 at revision 4")
	})
}

func TestStaleAccepted(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		// The zombie's write is fenced; a write with the old token that
		// was invoked before the grant returned may be accepted.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 21, 30, history.OK)
		b.write(0, "r", "y", "z", 1, 2, 35, 45, history.OK)
		b.acquire(1, "r", 2, 40, 50)
		b.write(1, "r", "x", "b", 2, 3, 61, 70, history.OK)
		b.write(0, "r", "x", "a2", 1, 0, 80, 90, history.Fenced)
		b.read(-1, "r", "x", "b", 3, 100, 110)
		b.read(-1, "r", "y", "z", 2, 100, 110)
		rep := run(t, b.ops)
		if rep.StaleAttempts != 1 {
			t.Fatalf("StaleAttempts=%d, want 1", rep.StaleAttempts)
		}
	})
	t.Run("AfterGrant", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		grant := b.acquire(1, "r", 2, 20, 30)
		stale := b.write(0, "r", "x", "a", 1, 1, 31, 40, history.OK)
		rep := run(t, b.ops, check.StaleAccepted, check.Linearizable)
		wantViolation(t, rep, check.StaleAccepted, stale, "accepted with token 1", "token 2 had been granted", "grant op 2 (client 1)")
		if v := rep.Result(check.StaleAccepted).Violations[0]; v.Ops[1] != grant {
			t.Fatalf("Ops=%v", v.Ops)
		}
		if rep.StaleAttempts != 1 || rep.StaleRejected != 0 {
			t.Fatalf("StaleAttempts=%d StaleRejected=%d", rep.StaleAttempts, rep.StaleRejected)
		}
	})
	t.Run("AfterWrite", func(t *testing.T) {
		// No grant of 2 in the history (the acquire's reply was lost),
		// but a write with 2 was acknowledged.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(1, "s", "y", "q", 9, 1, 0, 5, history.OK) // another resource: irrelevant
		newer := b.write(1, "r", "x", "b", 2, 2, 20, 30, history.OK)
		stale := b.txn(0, []history.Write{{Resource: "r", Key: "x", Value: "a", Token: 1}}, 3, 31, 40, history.OK)
		rep := run(t, b.ops, check.StaleAccepted, check.TokenOrder, check.Linearizable)
		wantViolation(t, rep, check.StaleAccepted, stale, "txn op 4 (client 0)", "token 2 had been accepted by write op 3")
		if v := rep.Result(check.StaleAccepted).Violations[0]; v.Ops[1] != newer {
			t.Fatalf("Ops=%v", v.Ops)
		}
	})
}

func TestTokenMonotonic(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 5, 0, 10)
		b.acquire(0, "r", 5, 20, 30) // same holder retrying
		b.acquire(1, "r", 6, 25, 50)
		b.acquire(2, "r", 4, 0, 40) // concurrent with the first: may come first
		b.acquire(2, "s", 1, 60, 70)
		b.release(2, "s", 1, 71, 80)
		b.acquire(2, "s", 2, 81, 90)
		run(t, b.ops)
	})
	t.Run("Decrease", func(t *testing.T) {
		b := &builder{}
		first := b.acquire(0, "r", 5, 0, 10)
		lower := b.acquire(1, "r", 4, 20, 30)
		rep := run(t, b.ops, check.TokenMonotonic, check.Linearizable)
		wantViolation(t, rep, check.TokenMonotonic, lower, "got token 4 after grant op 1 (client 0) had got token 5")
		if v := rep.Result(check.TokenMonotonic).Violations[0]; v.Ops[1] != first {
			t.Fatalf("Ops=%v", v.Ops)
		}
	})
	t.Run("TwoClients", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 5, 0, 10)
		dup := b.acquire(1, "r", 5, 5, 30) // concurrent, so not a decrease
		rep := run(t, b.ops, check.TokenMonotonic)
		wantViolation(t, rep, check.TokenMonotonic, dup, "token 5 was granted to client 0 (op 1) and to client 1 (op 2)")
	})
	t.Run("AfterRelease", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 5, 0, 10)
		rel := b.release(0, "r", 5, 11, 20)
		again := b.acquire(0, "r", 5, 21, 30)
		rep := run(t, b.ops, check.TokenMonotonic)
		wantViolation(t, rep, check.TokenMonotonic, again, "got token 5 again", "release op 2")
		if v := rep.Result(check.TokenMonotonic).Violations[0]; v.Ops[1] != rel {
			t.Fatalf("Ops=%v", v.Ops)
		}
	})
}

func TestLostWrites(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		b := classic()
		b.write(1, "r", "nofinal", "v", 2, 3, 71, 75, history.OK) // key without a final read
		rep := run(t, b.ops)
		if rep.KeysWithoutFinalRead != 1 || rep.FinalReadKeys != 1 || rep.LostAckedWrites != 0 {
			t.Fatalf("KeysWithoutFinalRead=%d FinalReadKeys=%d LostAckedWrites=%d", rep.KeysWithoutFinalRead, rep.FinalReadKeys, rep.LostAckedWrites)
		}
	})
	t.Run("OlderRevision", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
		lost := b.write(0, "r", "x", "b", 1, 2, 21, 30, history.OK)
		final := b.read(-1, "r", "x", "a", 1, 100, 110) // the server lost rev 2 in a crash
		rep := run(t, b.ops, check.LostWrites, check.Linearizable)
		wantViolation(t, rep, check.LostWrites, lost, `key "x"`, "revision 2", `value "b"`, "final read (op 4) shows revision 1")
		if rep.LostAckedWrites != 1 {
			t.Fatalf("LostAckedWrites=%d, want 1", rep.LostAckedWrites)
		}
		if v := rep.Result(check.LostWrites).Violations[0]; v.Ops[1] != final {
			t.Fatalf("Ops=%v", v.Ops)
		}
	})
	t.Run("WriteAfterFinalRead", func(t *testing.T) {
		// A straggler that returned after the final read began is not
		// judged by it (linearizable still is).
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
		b.read(-1, "r", "x", "a", 1, 100, 110)
		b.write(0, "r", "x", "b", 1, 2, 90, 120, history.OK)
		rep := run(t, b.ops)
		if c := rep.Result(check.LostWrites); c.Checked != 1 || !strings.Contains(c.Note, "1 acknowledged writes that returned after") {
			t.Fatalf("Checked=%d Note=%q", c.Checked, c.Note)
		}
	})
	t.Run("SameRevisionOtherValue", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		lost := b.txn(0, []history.Write{{Resource: "r", Key: "x", Value: "a", Token: 1}, {Resource: "r", Key: "y", Value: "c", Token: 1}}, 7, 11, 20, history.OK)
		b.read(-1, "", "x", "zzz", 7, 100, 110) // no resource: found from the writes
		b.read(-1, "r", "y", "c", 7, 100, 110)
		rep := run(t, b.ops, check.LostWrites, check.Linearizable)
		wantViolation(t, rep, check.LostWrites, lost, `key "x"`, `value "zzz"`)
		if rep.LostAckedWrites != 1 || rep.FinalReadKeys != 2 {
			t.Fatalf("LostAckedWrites=%d FinalReadKeys=%d", rep.LostAckedWrites, rep.FinalReadKeys)
		}
	})
}

func TestLinearizable(t *testing.T) {
	t.Run("StaleRead", func(t *testing.T) {
		b := classic()
		stale := b.read(2, "r", "x", "a", 1, 75, 78) // after rev 2 was acknowledged
		rep := run(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, stale, `resource "r" is not linearizable`, `read "x" -> "a" @1`)
		if p := rep.Linearizability.Partitions[0]; p.Result != "illegal" || p.Resource != "r" {
			t.Fatalf("Partitions=%+v", rep.Linearizability.Partitions)
		}
	})
	t.Run("UnjustifiedFence", func(t *testing.T) {
		// The store rejected the current holder.
		b := &builder{}
		b.acquire(0, "r", 2, 0, 10)
		bad := b.write(0, "r", "x", "a", 2, 0, 20, 30, history.Fenced)
		rep := run(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, bad, "token 2 -> fenced", "fence 2")
	})
	t.Run("GrantFences", func(t *testing.T) {
		// No write with token 2, yet token 1 is fenced: the grant raised
		// the fence.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
		b.acquire(1, "r", 2, 30, 40)
		b.write(0, "r", "x", "a2", 1, 0, 50, 60, history.Fenced)
		b.read(-1, "r", "x", "a", 1, 100, 110)
		run(t, b.ops)
	})
	t.Run("RevisionsGoBack", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 5, 11, 20, history.OK)
		bad := b.write(0, "r", "y", "b", 1, 4, 21, 30, history.OK)
		rep := run(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, bad, "@4", "rev>=5")
	})
	t.Run("PartitionsAndTxn", func(t *testing.T) {
		// A txn fenced by "s" says nothing about "r"'s fence.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(0, "s", 1, 0, 10)
		b.acquire(1, "s", 2, 20, 30)
		b.write(1, "s", "k", "v", 2, 1, 31, 40, history.OK)
		b.txn(0, []history.Write{{Resource: "r", Key: "x", Value: "a", Token: 1}, {Resource: "s", Key: "k", Value: "a", Token: 1}}, 0, 50, 60, history.Fenced)
		b.read(-1, "r", "x", "", 0, 100, 110)
		b.read(-1, "s", "k", "v", 1, 100, 110)
		rep := run(t, b.ops)
		if n := len(rep.Linearizability.Partitions); n != 2 {
			t.Fatalf("partitions=%d, want 2", n)
		}
		// Named as the resource that fenced it, "r" must explain it.
		b.ops[4].Resource = "r"
		rep = run(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, 5, `resource "r"`, "txn")
	})
}

func TestUnsafeStore(t *testing.T) {
	// Last writer wins: the zombie's write is accepted after the new
	// holder's, and both survive as revisions.
	b := &builder{}
	b.acquire(0, "r", 1, 0, 10)
	b.read(0, "r", "x", "", 0, 11, 20)
	b.write(0, "r", "x", "a", 1, 1, 21, 30, history.OK)
	b.acquire(1, "r", 2, 40, 50)
	b.read(1, "r", "x", "a", 1, 51, 60)
	newer := b.write(1, "r", "x", "b", 2, 2, 61, 70, history.OK)
	zombie := b.write(0, "r", "x", "a2", 1, 3, 80, 90, history.OK)
	b.read(-1, "r", "x", "a2", 3, 100, 110)
	rep := run(t, b.ops, check.TokenOrder, check.StaleAccepted, check.Linearizable)
	wantViolation(t, rep, check.TokenOrder, zombie, "token 1 at revision 3")
	wantViolation(t, rep, check.StaleAccepted, zombie, "token 2 had been")
	wantViolation(t, rep, check.Linearizable, zombie, `write "x"="a2" token 1 -> ok @3`)
	if v := rep.Result(check.TokenOrder).Violations[0]; v.Ops[1] != newer {
		t.Fatalf("Ops=%v", v.Ops)
	}
	if rep.Violations() != 3 {
		t.Fatalf("Violations()=%d, want 3", rep.Violations())
	}
}

func TestUnknownOutcome(t *testing.T) {
	// base: client 0 holds token 1 and its write of "a" times out; client 1
	// later gets token 2.
	base := func() *builder {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 0, 20, 0, history.Unknown)
		return b
	}
	t.Run("Applied", func(t *testing.T) {
		b := base()
		b.read(1, "r", "x", "a", 4, 30, 40)
		b.acquire(1, "r", 2, 41, 50)
		b.write(1, "r", "x", "b", 2, 5, 51, 60, history.OK)
		b.read(-1, "r", "x", "b", 5, 100, 110)
		rep := run(t, b.ops)
		if p := rep.Linearizability.Partitions[0]; p.Unknown != 1 {
			t.Fatalf("Partition=%+v", p)
		}
	})
	t.Run("NotApplied", func(t *testing.T) {
		b := base()
		b.read(1, "r", "x", "", 0, 30, 40)
		b.acquire(1, "r", 2, 41, 50)
		b.read(-1, "r", "x", "", 0, 100, 110)
		run(t, b.ops)
	})
	t.Run("AppliedLate", func(t *testing.T) {
		// Still in flight when the harness read: it may land later.
		b := base()
		b.read(-1, "r", "x", "", 0, 100, 110)
		b.read(2, "r", "x", "a", 9, 120, 130)
		run(t, b.ops)
	})
	t.Run("CannotApplyAfterFence", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(1, "r", 2, 20, 30)
		b.write(0, "r", "x", "a", 1, 0, 40, 0, history.Unknown) // stale: can never apply
		bad := b.read(-1, "r", "x", "a", 3, 100, 110)
		rep := run(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, bad, `read "x" -> "a"`)
	})
	t.Run("RevisionAfterApplication", func(t *testing.T) {
		// An unknown write applied after rev 5 cannot have revision 3.
		b := base()
		b.write(0, "r", "y", "q", 1, 5, 11, 15, history.OK)
		b.ops[1].Call = 16
		bad := b.read(1, "r", "x", "a", 3, 30, 40)
		rep := run(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, bad, "@3")
		b.ops[3].Rev = 6
		run(t, b.ops)
	})
	t.Run("UnknownGrant", func(t *testing.T) {
		// The server was killed after granting token 2 to client 1 and
		// before replying; client 0's write with token 1 is fenced by it.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.add(history.Op{Client: 1, Kind: history.KindAcquire, Resource: "r", Call: 20, Outcome: history.Unknown, Error: "EOF"})
		b.write(0, "r", "x", "a", 1, 0, 30, 40, history.Fenced)
		b.acquire(1, "r", 2, 50, 60)
		b.write(1, "r", "x", "b", 2, 1, 61, 70, history.OK)
		run(t, b.ops)
	})
	t.Run("UnknownTxn", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(0, "s", 3, 0, 10)
		b.txn(0, []history.Write{{Resource: "r", Key: "x", Value: "t", Token: 1}, {Resource: "s", Key: "y", Value: "t", Token: 3}}, 0, 20, 0, history.Unknown)
		b.read(1, "r", "x", "t", 8, 30, 40) // applied, as one would see in r
		b.read(1, "s", "y", "", 0, 30, 40)  // ...and, without txn atomicity, not in s
		run(t, b.ops)
	})
}

func TestCheck_HTML(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	b := classic()
	b.read(2, "r", "x", "a", 1, 75, 78)
	faults := []history.Fault{
		{Kind: "pause", Client: 0, Start: 31, End: 79, Detail: "SIGSTOP past TTL"},
		{Kind: "kill", Client: -1, Start: 96},
	}
	rep := check.Check(b.ops, faults, check.Options{HTMLDir: dir})
	want := filepath.Join(dir, check.HTMLFile)
	if rep.Linearizability.HTML != want || rep.Linearizability.HTMLError != "" {
		t.Fatalf("HTML=%q HTMLError=%q, want %q", rep.Linearizability.HTML, rep.Linearizability.HTMLError, want)
	}
	html, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SIGSTOP past TTL", "faults: client 0", "faults: all", "op 10, client 2"} {
		if !strings.Contains(string(html), s) {
			t.Errorf("HTML lacks %q", s)
		}
	}

	// Nothing is written for a linearizable history.
	dir2 := t.TempDir()
	rep = check.Check(classic().ops, faults, check.Options{HTMLDir: dir2})
	if rep.Linearizability.HTML != "" {
		t.Fatalf("HTML=%q for a linearizable history", rep.Linearizability.HTML)
	}
	if _, err := os.Stat(filepath.Join(dir2, check.HTMLFile)); !os.IsNotExist(err) {
		t.Fatalf("Stat: %v, want not exist", err)
	}
}

func TestCheck_Timeout(t *testing.T) {
	ops := simulate(t, 1, simConfig{resources: 2, clients: 4, opsEach: 500, unknown: 0.02})
	rep := check.Check(ops, nil, check.Options{Timeout: time.Nanosecond})
	c := rep.Result(check.Linearizable)
	if c.OK || rep.Linearizability.Result != "timeout" {
		t.Fatalf("OK=%v Result=%q", c.OK, rep.Linearizability.Result)
	}
	if !strings.Contains(c.Violations[0].Message, "timed out after 1ns") {
		t.Fatalf("message %q", c.Violations[0].Message)
	}
}

func TestCheck_MaxViolations(t *testing.T) {
	b := &builder{}
	b.acquire(0, "r", 10, 0, 10)
	for i := range 5 {
		b.acquire(1, "r", uint64(i+1), int64(20+10*i), int64(25+10*i))
	}
	rep := check.Check(b.ops, nil, check.Options{MaxViolations: 2})
	c := rep.Result(check.TokenMonotonic)
	if c.Count != 5 || len(c.Violations) != 2 {
		t.Fatalf("Count=%d len(Violations)=%d, want 5, 2", c.Count, len(c.Violations))
	}
	if rep.Violations() < 5 {
		t.Fatalf("Violations()=%d", rep.Violations())
	}
}

func TestReport_JSON(t *testing.T) {
	b := classic()
	b.read(2, "r", "x", "a", 1, 75, 78)
	rep := check.Check(b.ops, nil, check.Options{})
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		OK       bool           `json:"ok"`
		Counts   map[string]int `json:"counts"`
		Checkers []struct {
			Name       string `json:"name"`
			OK         bool   `json:"ok"`
			Count      int    `json:"count"`
			Violations []struct {
				Checker, Message string
				Ops              []int64
			} `json:"violations"`
		} `json:"checkers"`
		Linearizability struct {
			Result     string `json:"result"`
			Partitions []struct {
				Resource string `json:"resource"`
				Ops      int    `json:"ops"`
			} `json:"partitions"`
		} `json:"linearizability"`
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || back.Counts["read/ok"] != 4 || len(back.Checkers) != 6 || back.Checkers[4].Name != check.Linearizable ||
		back.Checkers[4].Count != 1 || back.Checkers[4].Violations[0].Ops[0] != 10 ||
		back.Linearizability.Result != "illegal" || back.Linearizability.Partitions[0].Ops != 9 {
		t.Fatalf("JSON: %s", out)
	}
}

// TestFenceOnWrite: a guard raises a resource's fence only when it accepts
// a write: a stale holder is accepted until the newer one has written, and
// is a violation from then on.
func TestFenceOnWrite(t *testing.T) {
	runGuard := func(t *testing.T, ops []history.Op, failing ...string) check.Report {
		t.Helper()
		rep := check.Check(ops, nil, check.Options{FenceOnWrite: true})
		for _, c := range rep.Checkers {
			if want := !slices.Contains(failing, c.Name); c.OK != want {
				t.Errorf("checker %s: OK=%v, want %v; violations: %s", c.Name, c.OK, want, violations(c))
			}
		}
		return rep
	}
	// A zombie with token 1 writes after token 2 was granted, before the
	// new holder's first write.
	zombie := func() (*builder, int64) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
		b.acquire(1, "r", 2, 30, 40)
		id := b.write(0, "r", "x", "z", 1, 2, 50, 60, history.OK)
		return b, id
	}
	t.Run("StaleBeforeNewerWrite", func(t *testing.T) {
		b, _ := zombie()
		b.write(1, "r", "x", "b", 2, 3, 70, 80, history.OK)
		b.write(0, "r", "x", "z2", 1, 0, 90, 95, history.Fenced)
		b.read(-1, "r", "x", "b", 3, 100, 110)
		rep := runGuard(t, b.ops)
		if rep.StaleAttempts != 1 || rep.StaleRejected != 1 {
			t.Errorf("StaleAttempts=%d StaleRejected=%d, want 1, 1", rep.StaleAttempts, rep.StaleRejected)
		}
		// Fence's own storage fences at the grant: the same history is a bug there.
		run(t, b.ops, check.StaleAccepted, check.Linearizable)
	})
	t.Run("StaleAfterNewerWrite", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(1, "r", 2, 30, 40)
		newer := b.write(1, "r", "x", "b", 2, 1, 41, 50, history.OK)
		stale := b.write(0, "r", "x", "z", 1, 2, 60, 70, history.OK)
		b.read(-1, "r", "x", "z", 2, 100, 110)
		rep := runGuard(t, b.ops, check.StaleAccepted, check.TokenOrder, check.Linearizable)
		wantViolation(t, rep, check.StaleAccepted, stale, "token 2 had been accepted by write op 3")
		if v := rep.Result(check.StaleAccepted).Violations[0]; v.Ops[1] != newer {
			t.Fatalf("Ops=%v", v.Ops)
		}
	})
	t.Run("UnjustifiedFence", func(t *testing.T) {
		// Only a grant of 2, no write with it: the guard had no reason
		// to reject token 1.
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
		b.acquire(1, "r", 2, 30, 40)
		bad := b.write(0, "r", "x", "a2", 1, 0, 50, 60, history.Fenced)
		rep := runGuard(t, b.ops, check.Linearizable)
		wantViolation(t, rep, check.Linearizable, bad, "token 1 -> fenced", "fence 1")
	})
	t.Run("LostWrite", func(t *testing.T) {
		b, zombieWrite := zombie()
		b.read(-1, "r", "x", "a", 1, 100, 110)
		rep := runGuard(t, b.ops, check.LostWrites, check.Linearizable)
		wantViolation(t, rep, check.LostWrites, zombieWrite, "revision 2")
	})
}
