package check_test

import (
	"testing"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// restored adds the harness's record of r's state after a restore: its
// fence and key x's value.
func (b *builder) restored(r string, fence uint64, x string, rev uint64, call, ret int64) int64 {
	return b.add(history.Op{Client: -1, Kind: history.KindRestore, Resource: r, Token: fence, Call: call, Return: ret, Outcome: history.OK,
		Writes: []history.Write{{Resource: r, Key: "x", Value: x, Rev: rev}}})
}

// backupThenMore is a history up to a restore: A writes "a" under token 1;
// the harness reads x as the backup holds it; B is granted 2 and writes "b",
// acknowledged and then lost by the restore.
func backupThenMore() *builder {
	b := &builder{}
	b.acquire(0, "r", 1, 0, 10)
	b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
	b.read(-1, "r", "x", "a", 1, 30, 31) // the backup
	b.acquire(1, "r", 2, 40, 50)
	b.write(1, "r", "x", "b", 2, 2, 51, 60, history.OK)
	return b
}

// TestRestore checks the restore of a backup: what was acknowledged after
// the backup may be gone, nothing before it may, and after the restore the
// storage answers from the restored state with tokens above every one
// issued before. A restore without a bump issues a token again.
func TestRestore(t *testing.T) {
	t.Run("bumped", func(t *testing.T) {
		b := backupThenMore()
		b.restored("r", 1000000002, "a", 1, 70, 80)
		b.write(1, "r", "x", "b2", 2, 0, 90, 95, history.Fenced) // the holder from before
		b.acquire(2, "r", 1000000003, 100, 110)
		b.write(2, "r", "x", "c", 1000000003, 1000000003, 111, 120, history.OK)
		b.read(-1, "r", "x", "c", 1000000003, 130, 131)
		run(t, b.ops)
	})
	t.Run("not what the backup held", func(t *testing.T) {
		b := backupThenMore()
		id := b.restored("r", 1000000002, "", 0, 70, 80) // x absent
		b.read(-1, "r", "x", "", 0, 130, 131)
		rep := run(t, b.ops, check.LostWrites)
		wantViolation(t, rep, check.LostWrites, id, "brought back revision 0")
	})
	t.Run("acknowledged before the backup, missing from it", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		id := b.write(0, "r", "x", "a", 1, 1, 11, 20, history.OK)
		b.read(-1, "r", "x", "", 0, 30, 31) // the backup lacks it
		b.restored("r", 1000000001, "", 0, 70, 80)
		rep := run(t, b.ops, check.LostWrites, check.Linearizable)
		wantViolation(t, rep, check.LostWrites, id, "final read")
	})
	t.Run("rolled back value read after the restore", func(t *testing.T) {
		b := backupThenMore()
		b.restored("r", 1000000002, "a", 1, 70, 80)
		b.read(3, "r", "x", "b", 2, 90, 95) // B's lost write still visible
		run(t, b.ops, check.Linearizable)
	})
	t.Run("not bumped", func(t *testing.T) {
		b := backupThenMore()
		b.restored("r", 1, "a", 1, 70, 80)
		id := b.acquire(2, "r", 2, 100, 110) // token 2 a second time
		b.write(2, "r", "x", "c", 2, 2, 111, 120, history.OK)
		b.read(-1, "r", "x", "c", 2, 130, 131)
		rep := run(t, b.ops, check.TokenMonotonic)
		wantViolation(t, rep, check.TokenMonotonic, id)
	})
}
