package bolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// TestDB_Corrupt checks that a corrupt record fails the operations that read
// it with an error that is not a fence rejection, without panicking, and
// without failing the other changes that share its commit.
func TestDB_Corrupt(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	exp := time.Now().Add(time.Minute)
	good := map[string]fence.Token{}
	for _, res := range []string{"bad", "badkey", "g0", "g1", "g2", "g3"} {
		tok, err := db.Grant(ctx, res, "h", time.Minute, exp)
		if err != nil {
			t.Fatalf("Grant: %v", err)
		}
		good[res] = tok
		if _, err := db.Put(ctx, res, "k", []byte("v"), tok, fence.Cond{}); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	bdb, err := bbolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketResources).Put([]byte("bad"), []byte{1, 0x80}); err != nil {
			return err
		}
		return tx.Bucket(bucketEntries).Put(state.EntryKey("badkey", "k"), []byte{7, 1, 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	wantCorrupt := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, state.ErrCorrupt) {
			t.Fatalf("%s: err=%v, want state.ErrCorrupt", what, err)
		}
		if state.IsRejection(err) {
			t.Fatalf("%s: err=%v is a fence rejection, want a failure", what, err)
		}
	}
	_, err = db.Fence(ctx, "bad")
	wantCorrupt("Fence", err)
	_, err = db.Get(ctx, "badkey", "k")
	wantCorrupt("Get", err)
	_, _, err = db.Leases(ctx)
	wantCorrupt("Leases", err)
	_, err = db.Grant(ctx, "bad", "h", time.Minute, exp)
	wantCorrupt("Grant", err)
	_, err = db.Claim(ctx, "bad", 1)
	wantCorrupt("Claim", err)
	_, err = db.Put(ctx, "badkey", "k", []byte("x"), good["badkey"], fence.Cond{IfExists: true})
	wantCorrupt("Put", err)

	// A corrupt record fails its own change, not those it shares a commit with.
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 12)
		for i := range errs {
			wg.Go(func() {
				switch i % 3 {
				case 0:
					_, errs[i] = db.Put(ctx, "bad", "k", []byte("x"), 1, fence.Cond{})
				case 1:
					_, errs[i] = db.Txn(ctx, &fence.Txn{Fences: map[string]fence.Token{"g0": good["g0"], "bad": 1}})
				default:
					res := fmt.Sprintf("g%d", i%4)
					_, errs[i] = db.Put(ctx, res, "k", []byte(fmt.Sprint(round, i)), good[res], fence.Cond{})
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if i%3 == 2 {
				if err != nil {
					t.Fatalf("Put beside a corrupt record: %v", err)
				}
			} else {
				wantCorrupt("Put", err)
			}
		}
	}
}
