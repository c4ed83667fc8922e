package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/internal/tools/testserver"
)

// TestDB_CommitFailure fills the disk: the commit that fails is answered with
// an error (never as a rejection), the store refuses every change after it
// and fails Check, and reopened, it holds every write acknowledged before.
func TestDB_CommitFailure(t *testing.T) {
	dir := testserver.TinyDisk(t, "2m")
	db, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	token, err := db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 100<<10)
	acked := map[string]fence.Rev{}
	var failure error
	for i := 0; i < 100 && failure == nil; i++ {
		key := fmt.Sprintf("k%d", i)
		res, err := db.Put(ctx, "r", key, value, token, fence.Cond{})
		if err != nil {
			failure = err
			break
		}
		acked[key] = res.Rev
	}
	if failure == nil {
		t.Fatal("10 MB of writes fit on a 2 MB disk")
	}
	for _, sentinel := range []error{fence.ErrFenced, fence.ErrTokenNotIssued, fence.ErrPreconditionFailed, fence.ErrNotFound} {
		if errors.Is(failure, sentinel) {
			t.Fatalf("disk full reported as %v: %v", sentinel, failure)
		}
	}
	if _, err := db.Put(ctx, "r", "small", []byte("v"), token, fence.Cond{}); err == nil {
		t.Fatal("a change was accepted after a failed commit")
	}
	if err := db.Check(); err == nil {
		t.Fatal("Check passed after a failed commit")
	}
	db.Close()

	db, err = bolt.Open(dir)
	if err != nil {
		t.Fatalf("reopen after disk full: %v", err)
	}
	defer db.Close()
	for key, rev := range acked {
		item, err := db.Get(ctx, "r", key)
		if err != nil || item.Rev != rev || !bytes.Equal(item.Value, value) {
			t.Fatalf("%s after reopen: rev %d err %v, want the acknowledged rev %d", key, item.Rev, err, rev)
		}
	}
	if f, _ := db.Fence(ctx, "r"); f != token {
		t.Fatalf("Fence=%d after reopen, want %d", f, token)
	}
	t.Logf("%d writes acknowledged before the disk filled: %v", len(acked), failure)
}
