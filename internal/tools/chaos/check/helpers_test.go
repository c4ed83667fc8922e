package check_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// builder makes small histories by hand; ids count from 1 in order of add.
type builder struct{ ops []history.Op }

func (b *builder) add(op history.Op) int64 {
	op.ID = int64(len(b.ops) + 1)
	b.ops = append(b.ops, op)
	return op.ID
}

func (b *builder) acquire(c int, r string, tok uint64, call, ret int64) int64 {
	return b.add(history.Op{Client: c, Kind: history.KindAcquire, Resource: r, Token: tok, Call: call, Return: ret, Outcome: history.OK})
}

func (b *builder) release(c int, r string, tok uint64, call, ret int64) int64 {
	return b.add(history.Op{Client: c, Kind: history.KindRelease, Resource: r, Token: tok, Call: call, Return: ret, Outcome: history.OK})
}

func (b *builder) read(c int, r, k, v string, rev uint64, call, ret int64) int64 {
	return b.add(history.Op{Client: c, Kind: history.KindRead, Resource: r, Key: k, Value: v, Rev: rev, Call: call, Return: ret, Outcome: history.OK})
}

// write adds a write; ret is ignored when out is Unknown.
func (b *builder) write(c int, r, k, v string, tok, rev uint64, call, ret int64, out history.Outcome) int64 {
	if out == history.Unknown {
		ret = 0
	}
	if out != history.OK {
		rev = 0
	}
	return b.add(history.Op{Client: c, Kind: history.KindWrite, Resource: r, Key: k, Value: v, Token: tok, Rev: rev, Call: call, Return: ret, Outcome: out})
}

func (b *builder) txn(c int, ws []history.Write, rev uint64, call, ret int64, out history.Outcome) int64 {
	if out == history.Unknown {
		ret = 0
	}
	return b.add(history.Op{Client: c, Kind: history.KindTxn, Writes: ws, Rev: rev, Call: call, Return: ret, Outcome: out})
}

// classic is the scenario of the design: A holds token 1 and writes, pauses;
// B gets token 2, reads A's value and writes; A wakes and is fenced; the
// harness reads the final value.
func classic() *builder {
	b := &builder{}
	b.acquire(0, "r", 1, 0, 10)
	b.read(0, "r", "x", "", 0, 11, 20)
	b.write(0, "r", "x", "a", 1, 1, 21, 30, history.OK)
	b.acquire(1, "r", 2, 40, 50)
	b.read(1, "r", "x", "a", 1, 51, 60)
	b.write(1, "r", "x", "b", 2, 2, 61, 70, history.OK)
	b.write(0, "r", "x", "a2", 1, 0, 80, 90, history.Fenced)
	b.release(1, "r", 2, 91, 95)
	b.read(-1, "r", "x", "b", 2, 100, 110)
	return b
}

// run checks ops and fails t unless exactly the checkers in failing fail.
func run(t *testing.T, ops []history.Op, failing ...string) check.Report {
	t.Helper()
	rep := check.Check(ops, nil, check.Options{})
	for _, c := range rep.Checkers {
		want := !slices.Contains(failing, c.Name)
		if c.OK != want {
			t.Errorf("checker %s: OK=%v, want %v; violations: %s", c.Name, c.OK, want, violations(c))
		}
		if c.OK != (c.Count == 0) || len(c.Violations) != c.Count {
			t.Errorf("checker %s: OK=%v Count=%d len(Violations)=%d", c.Name, c.OK, c.Count, len(c.Violations))
		}
	}
	if rep.OK != (len(failing) == 0) {
		t.Errorf("Report.OK=%v, want %v", rep.OK, len(failing) == 0)
	}
	return rep
}

func violations(c check.Result) string {
	var s []string
	for _, v := range c.Violations {
		s = append(s, fmt.Sprintf("%s %v", v.Message, v.Ops))
	}
	return "[" + strings.Join(s, " | ") + "]"
}

// wantViolation fails t unless checker name reports a violation whose ops
// start with culprit and whose message contains every one of words.
func wantViolation(t *testing.T, rep check.Report, name string, culprit int64, words ...string) {
	t.Helper()
	c := rep.Result(name)
	if c == nil {
		t.Fatalf("no checker %s", name)
	}
	for _, v := range c.Violations {
		if v.Checker != name || len(v.Ops) == 0 || v.Ops[0] != culprit {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(v.Message, w)
		}
		if ok {
			return
		}
	}
	t.Fatalf("%s: no violation naming op %d first with %q; got %s", name, culprit, words, violations(*c))
}
