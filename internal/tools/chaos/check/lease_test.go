package check_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// TestLeaseExclusive checks that a grant may come after the previous
// lease's TTL from its acquire's call, or after its release was sent, or
// after a restore, and never before.
func TestLeaseExclusive(t *testing.T) {
	const ttl = time.Second
	const ms = int64(time.Millisecond)
	check1 := func(t *testing.T, b *builder, failing ...string) check.Report {
		t.Helper()
		rep := check.Check(b.ops, nil, check.Options{TTL: ttl})
		for _, c := range rep.Checkers {
			want := true
			for _, f := range failing {
				want = want && c.Name != f
			}
			if c.OK != want {
				t.Errorf("checker %s: OK=%v, want %v; violations: %s", c.Name, c.OK, want, violations(c))
			}
		}
		return rep
	}
	t.Run("after the TTL", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(1, "r", 2, 20*ms, 1000*ms)
		check1(t, b)
	})
	t.Run("after a release", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.release(0, "r", 1, 20, 30)
		b.acquire(1, "r", 2, 25, 40)
		check1(t, b)
	})
	t.Run("the same holder again", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(0, "r", 1, 20, 30)
		check1(t, b)
	})
	t.Run("after a restore", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.add(history.Op{Client: -1, Kind: history.KindRestore, Resource: "r", Token: 1000, Call: 20, Return: 30, Outcome: history.OK})
		b.acquire(1, "r", 1001, 40, 50)
		check1(t, b)
	})
	t.Run("early", func(t *testing.T) {
		b := &builder{}
		prev := b.acquire(0, "r", 1, 0, 10)
		id := b.acquire(1, "r", 2, 20*ms, 900*ms) // 900 ms into a 1 s lease
		rep := check1(t, b, check.LeaseExclusive)
		wantViolation(t, rep, check.LeaseExclusive, id, "could run until")
		if v := rep.Result(check.LeaseExclusive).Violations[0]; v.Ops[1] != prev {
			t.Fatalf("the violation names %v, not the earlier grant %d", v.Ops, prev)
		}
	})
	// A lease in a session ends with the session: at its Until, which may
	// be before a TTL from its acquire's call, and not before.
	t.Run("in a session, after its Until", func(t *testing.T) {
		b := &builder{}
		b.add(history.Op{Client: 0, Kind: history.KindAcquire, Resource: "r", Token: 1, Call: 500 * ms, Return: 510 * ms, Until: 700 * ms, Outcome: history.OK})
		b.acquire(1, "r", 2, 600*ms, 800*ms)
		check1(t, b)
	})
	t.Run("in a session, before its Until", func(t *testing.T) {
		b := &builder{}
		b.add(history.Op{Client: 0, Kind: history.KindAcquire, Resource: "r", Token: 1, Call: 500 * ms, Return: 510 * ms, Until: 700 * ms, Outcome: history.OK})
		id := b.acquire(1, "r", 2, 600*ms, 650*ms)
		wantViolation(t, check1(t, b, check.LeaseExclusive), check.LeaseExclusive, id, "could run until 700000000 ns")
	})
	// The holders of a shared group hold at once, with one token; an
	// exclusive grant must come after every one of them has ended.
	shared := func(b *builder, client int, token uint64, call, ret int64) int64 {
		return b.add(history.Op{Client: client, Kind: history.KindAcquire, Resource: "r", Token: token, Call: call, Return: ret, Shared: true, Outcome: history.OK})
	}
	t.Run("a shared group", func(t *testing.T) {
		b := &builder{}
		shared(b, 0, 1, 0, 10)
		shared(b, 1, 1, 20, 30)
		b.release(0, "r", 1, 40, 50)
		b.release(1, "r", 1, 60, 70)
		b.acquire(2, "r", 2, 65, 80) // after both releases were sent
		check1(t, b)
	})
	t.Run("exclusive beside a shared holder", func(t *testing.T) {
		b := &builder{}
		shared(b, 0, 1, 0, 10)
		late := shared(b, 1, 1, 20, 30)
		b.release(0, "r", 1, 40, 50)
		id := b.acquire(2, "r", 2, 65, 80) // the second holder never released
		rep := check1(t, b, check.LeaseExclusive)
		wantViolation(t, rep, check.LeaseExclusive, id, "the shared hold of token 1")
		if v := rep.Result(check.LeaseExclusive).Violations[0]; v.Ops[1] != late {
			t.Fatalf("the violation names %v, not the shared hold still running %d", v.Ops, late)
		}
	})
	t.Run("shared beside an exclusive lease", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		id := shared(b, 1, 2, 20, 30)
		wantViolation(t, check1(t, b, check.LeaseExclusive), check.LeaseExclusive, id, "(a shared hold)")
	})
	// A holder whose release did not reach the server (it was down) takes
	// the resource shared: a downgrade, which ends its exclusive lease in
	// the change that starts the group, which others may join at once.
	t.Run("a downgrade by its holder", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.add(history.Op{Client: 0, Kind: history.KindRelease, Resource: "r", Token: 1, Call: 20, Return: 30, Outcome: history.Fail})
		shared(b, 0, 2, 40, 50)
		shared(b, 1, 2, 60, 70)
		check1(t, b)
	})
	t.Run("shared beside an exclusive lease, its holder's newer hold later", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		id := shared(b, 1, 2, 20, 30)
		shared(b, 0, 2, 40, 50) // joined after client 1's grant returned
		wantViolation(t, check1(t, b, check.LeaseExclusive), check.LeaseExclusive, id, "(a shared hold)")
	})
	// A semaphore's permits: each slot exclusive, and never more than its
	// limit held across its slots.
	permit := func(b *builder, client int, slot string, token uint64, call, ret int64) int64 {
		return b.add(history.Op{Client: client, Kind: history.KindAcquire, Resource: slot, Token: token, Call: call, Return: ret, Outcome: history.OK})
	}
	t.Run("permits within the limit", func(t *testing.T) {
		b := &builder{}
		permit(b, 0, "s/permit-1-of-2", 1, 0, 10)
		permit(b, 1, "s/permit-2-of-2", 1, 20, 30)
		b.release(0, "s/permit-1-of-2", 1, 40, 50)
		permit(b, 2, "s/permit-1-of-2", 2, 45, 60)
		check1(t, b)
	})
	// A holder given its own permit again after a restart restored it, the
	// answer to its release lost: the release ended only the grant before.
	t.Run("a permit restored and granted again", func(t *testing.T) {
		b := &builder{}
		permit(b, 0, "s/permit-1-of-1", 1, 0, 10)
		b.add(history.Op{Client: 0, Kind: history.KindRelease, Resource: "s/permit-1-of-1", Token: 1, Call: 20, Outcome: history.Unknown})
		permit(b, 0, "s/permit-1-of-1", 1, 30*ms, 40*ms) // the restored permit, its own again
		b.release(0, "s/permit-1-of-1", 1, 50*ms, 60*ms)
		permit(b, 1, "s/permit-1-of-1", 2, 55*ms, 70*ms)
		check1(t, b)
		b2 := &builder{}
		permit(b2, 0, "s/permit-1-of-1", 1, 0, 10)
		b2.add(history.Op{Client: 0, Kind: history.KindRelease, Resource: "s/permit-1-of-1", Token: 1, Call: 20, Outcome: history.Unknown})
		permit(b2, 0, "s/permit-1-of-1", 1, 30*ms, 40*ms)
		id := permit(b2, 1, "s/permit-1-of-1", 2, 55*ms, 70*ms) // the first release does not end the second grant
		wantViolation(t, check1(t, b2, check.LeaseExclusive), check.LeaseExclusive, id, "could run until")
	})
	// A holder given its own permit again, its release lost: one hold.
	t.Run("a permit granted again to its holder", func(t *testing.T) {
		b := &builder{}
		permit(b, 0, "s/permit-1-of-2", 1, 0, 10)
		b.add(history.Op{Client: 0, Kind: history.KindRelease, Resource: "s/permit-1-of-2", Token: 1, Call: 20, Outcome: history.Fail})
		permit(b, 1, "s/permit-2-of-2", 1, 30, 40)
		permit(b, 0, "s/permit-1-of-2", 1, 50, 60) // its own permit back
		check1(t, b)
	})
	t.Run("permits beyond the limit", func(t *testing.T) {
		b := &builder{}
		permit(b, 0, "s/permit-1-of-1", 1, 0, 10)
		id := permit(b, 1, "s/permit-1-of-1", 2, 20, 30) // the slot exclusive broken too
		rep := check1(t, b, check.LeaseExclusive)
		wantViolation(t, rep, check.LeaseExclusive, id, "more than its limit 1")
	})
	// A refused multi-acquire holds nothing: the probe after it must not
	// find its client holding a token it was never granted.
	probe := func(b *builder, client int, token uint64, call int64) int64 {
		return b.add(history.Op{Client: client, Kind: history.KindProbe, Resource: "r", Value: "client-" + strconv.Itoa(client), Token: token,
			Call: call, Return: call + 1, Outcome: history.OK})
	}
	t.Run("a refused multi-acquire holding a resource", func(t *testing.T) {
		b := &builder{}
		b.add(history.Op{Client: 0, Kind: history.KindAcquire, Resource: "r", Call: 0, Return: 10, Outcome: history.Rejected})
		id := probe(b, 0, 3, 20)
		wantViolation(t, check1(t, b, check.LeaseExclusive), check.LeaseExclusive, id, "after its multi-acquire was refused")
	})
	t.Run("a probe finding an earlier lease", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 3, 0, 10) // its own, granted before, not yet ended
		b.add(history.Op{Client: 0, Kind: history.KindAcquire, Resource: "r", Call: 20, Return: 30, Outcome: history.Rejected})
		probe(b, 0, 3, 40)
		check1(t, b)
	})
	t.Run("no TTL, not checked", func(t *testing.T) {
		b := &builder{}
		b.acquire(0, "r", 1, 0, 10)
		b.acquire(1, "r", 2, 20, 30)
		run(t, b.ops)
	})
}
