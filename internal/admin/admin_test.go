package admin_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/internal/admin"
	"github.com/fence-lock/fence/state"
)

// source returns an embedded store with 100 resources, some leased, some
// with values, one in a lock-delay.
func source(t *testing.T) *bolt.DB {
	t.Helper()
	ctx := t.Context()
	db, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i := range 100 {
		res := fmt.Sprint("r", i)
		var tok fence.Token
		for range i%3 + 1 {
			if tok, err = db.Grant(ctx, res, "h", time.Minute, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Put(ctx, res, "k/"+res, []byte("v"+res), tok, fence.Cond{}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := db.End(ctx, res, tok); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.SetDelay(ctx, "r0", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestMigrate(t *testing.T) {
	ctx := t.Context()
	src := source(t)
	dst := memory.New()
	n, err := admin.Migrate(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if n.Resources != 100 || n.Leases != 50 || n.Entries != 100 || n.Rev != 100 {
		t.Fatalf("Counts=%+v, want 100 resources, 50 leases, 100 entries, revision 100", n)
	}
	for i := range 100 {
		res := fmt.Sprint("r", i)
		la, _ := src.LastToken(ctx, res)
		lb, _ := dst.LastToken(ctx, res)
		if la != lb {
			t.Fatalf("%s: LastToken %d in the copy, %d in the source", res, lb, la)
		}
		fa, _ := src.Fence(ctx, res)
		fb, _ := dst.Fence(ctx, res)
		ia, _ := src.Get(ctx, res, "k/"+res)
		ib, err := dst.Get(ctx, res, "k/"+res)
		if fa != fb || err != nil || string(ib.Value) != string(ia.Value) || ib.Rev != ia.Rev || ib.Token != ia.Token {
			t.Fatalf("%s: copy fence %d item %+v %v; source fence %d item %+v", res, fb, ib, err, fa, ia)
		}
	}
	leasesA, da, _ := src.Leases(ctx)
	lb, db, _ := dst.Leases(ctx)
	if len(leasesA) != len(lb) || len(da) != 1 || len(db) != 1 || db[0] != da[0] {
		t.Fatalf("leases %d / delays %v in the copy, %d / %v in the source", len(lb), db, len(leasesA), da)
	}
	// Tokens go on from the last issued.
	last, _ := src.LastToken(ctx, "r1")
	if tok, err := dst.Grant(ctx, "r1", "x", time.Second, time.Now()); err != nil || tok <= last {
		t.Fatalf("Grant in the copy=%d, %v; want > %d", tok, err, last)
	}

	if _, err := admin.Migrate(ctx, src, dst); !errors.Is(err, admin.ErrNotEmpty) {
		t.Fatalf("Migrate into a non-empty store: err=%v, want ErrNotEmpty", err)
	}
}

func TestBump(t *testing.T) {
	ctx := t.Context()
	db := source(t)
	highest := fence.Token(0)
	for i := range 100 {
		last, _ := db.LastToken(ctx, fmt.Sprint("r", i))
		highest = max(highest, last)
	}
	floor, n, err := admin.Bump(ctx, db, 1000)
	if err != nil || n != 100 || floor != highest+1000 {
		t.Fatalf("Bump=%d, %d, %v; want the floor %d over 100 resources", floor, n, err, highest+1000)
	}
	// Every resource, recorded or not, is at the floor: every token issued
	// before is fenced, and the next grant gets a greater one.
	for _, res := range []string{"r0", "r1", "r99", "created-after-the-backup"} {
		if got, _ := db.LastToken(ctx, res); got != floor {
			t.Fatalf("%s: LastToken=%d, want the floor %d", res, got, floor)
		}
		if f, _ := db.Fence(ctx, res); f != floor {
			t.Fatalf("%s: Fence=%d, want the floor %d: every token issued before is fenced", res, f, floor)
		}
		if _, err := db.Put(ctx, res, "k", []byte("stale"), highest, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("%s: Put with the old token %d: err=%v, want ErrFenced", res, highest, err)
		}
		if _, err := db.Refresh(ctx, res, highest, time.Minute, time.Now().Add(time.Minute)); !errors.As(err, new(*fence.LeaseLostError)) {
			t.Fatalf("%s: Refresh of a lease from before: err=%v, want a LeaseLostError", res, err)
		}
		if tok, err := db.Grant(ctx, res, "new", time.Minute, time.Now().Add(time.Minute)); err != nil || tok != floor+1 {
			t.Fatalf("%s: Grant after the bump=%d, %v; want %d", res, tok, err, floor+1)
		}
	}
	if leases, delays, _ := db.Leases(ctx); len(leases) != 4 || len(delays) != 0 {
		t.Fatalf("leases %v, delays %v after a bump and 4 grants; want those 4 only", leases, delays)
	}
	var rev fence.Rev
	db.View(ctx, func(tx state.Tx) (err error) { rev, err = tx.Rev(); return err })
	if rev != 1100 {
		t.Fatalf("revision %d after a bump of 1000, want 1100", rev)
	}
	if _, _, err := admin.Bump(ctx, db, uint64(fence.MaxToken)); !errors.Is(err, state.ErrTokensExhausted) {
		t.Fatalf("Bump past MaxToken: err=%v, want ErrTokensExhausted", err)
	}
	if tok, _ := db.LastToken(ctx, "r2"); tok != floor {
		t.Fatalf("a refused bump changed LastToken to %d", tok)
	}
	// A second bump goes above the first and above every grant since.
	if floor2, _, err := admin.Bump(ctx, db, 10); err != nil || floor2 != floor+1+10 {
		t.Fatalf("second Bump=%d, %v; want %d", floor2, err, floor+1+10)
	}
}

// TestMigrateCopiesTheFloor checks that a migration carries the token floor
// of a bumped store: the resources it does not record stay above it.
func TestMigrateCopiesTheFloor(t *testing.T) {
	ctx := t.Context()
	src := source(t)
	floor, _, err := admin.Bump(ctx, src, 1000)
	if err != nil {
		t.Fatal(err)
	}
	dst := memory.New()
	n, err := admin.Migrate(ctx, src, dst)
	if err != nil || n.Resources != 100 {
		t.Fatalf("Migrate=%+v, %v; want 100 resources (the floor is not one)", n, err)
	}
	if tok, err := dst.Grant(ctx, "unrecorded", "h", time.Minute, time.Now().Add(time.Minute)); err != nil || tok != floor+1 {
		t.Fatalf("Grant of an unrecorded resource after the migration=%d, %v; want %d", tok, err, floor+1)
	}
}
