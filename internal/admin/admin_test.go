package admin_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/bolt"
	"github.com/fence-lock/fence/internal/admin"
	"github.com/fence-lock/fence/memory"
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
	before := map[string]fence.Token{}
	for i := range 100 {
		res := fmt.Sprint("r", i)
		before[res], _ = db.LastToken(ctx, res)
	}
	if n, err := admin.Bump(ctx, db, 1000); err != nil || n != 100 {
		t.Fatalf("Bump=%d, %v; want 100 resources", n, err)
	}
	for res, last := range before {
		if got, _ := db.LastToken(ctx, res); got != last+1000 {
			t.Fatalf("%s: LastToken=%d, want %d", res, got, last+1000)
		}
		if f, _ := db.Fence(ctx, res); f != last+1000 {
			t.Fatalf("%s: Fence=%d, want %d: every token issued before is fenced", res, f, last+1000)
		}
		// A holder from before the restore is fenced.
		if _, err := db.Put(ctx, res, "k", []byte("stale"), last, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("%s: Put with the old token %d: err=%v, want ErrFenced", res, last, err)
		}
	}
	if leases, delays, _ := db.Leases(ctx); len(leases) != 0 || len(delays) != 0 {
		t.Fatalf("leases %v, delays %v after a bump; want none", leases, delays)
	}
	var rev fence.Rev
	db.View(ctx, func(tx state.Tx) (err error) { rev, err = tx.Rev(); return err })
	if rev != 1100 {
		t.Fatalf("revision %d after a bump of 1000, want 1100", rev)
	}
	if _, err := admin.Bump(ctx, db, uint64(fence.MaxToken)); !errors.Is(err, state.ErrTokensExhausted) {
		t.Fatalf("Bump past MaxToken: err=%v, want ErrTokensExhausted", err)
	}
	if tok, _ := db.LastToken(ctx, "r1"); tok != before["r1"]+1000 {
		t.Fatalf("a refused bump changed LastToken to %d", tok)
	}
}
