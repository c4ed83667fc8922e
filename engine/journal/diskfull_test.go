package journal

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/journal/vfs"
	"github.com/fence-lock/fence/state"
)

// TestUpdate_SyncOutOfSpace makes the sync of a whole, written record fail
// for want of space, the case a record could survive on disk although its
// change was answered as failed: the record is cut out of the log, the
// change is answered not applied, the journal goes on, and reopened it
// does not have the change.
func TestUpdate_SyncOutOfSpace(t *testing.T) {
	dir := t.TempDir()
	var fail atomic.Bool
	outOfSpace := vfs.WithFaults(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpDatasync && strings.HasSuffix(name, ".seg") && fail.CompareAndSwap(true, false) {
			return &os.PathError{Op: "sync", Path: name, Err: syscall.ENOSPC}
		}
		return nil
	})
	db := openT(t, dir, Options{FS: outOfSpace})
	ctx := t.Context()
	tok, err := db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(ctx, "r", "before", []byte("v"), tok, fence.Cond{}); err != nil {
		t.Fatal(err)
	}

	fail.Store(true) // the next record's sync
	_, err = db.Put(ctx, "r", "lost", []byte("v"), tok, fence.Cond{})
	if !errors.Is(err, state.ErrNotApplied) || !errors.Is(err, fence.ErrClosed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put with the sync out of space: %v, want not applied (ErrNotApplied, ErrClosed, ENOSPC)", err)
	}
	if _, err := db.Get(ctx, "r", "lost"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get of the refused key: %v, want not found", err)
	}
	// This file system has room: Check finds it, so the journal is ready
	// again before any write succeeds.
	if err := db.Check(); err != nil {
		t.Fatalf("Check with space free again: %v", err)
	}
	// Reopened before anything else is written over it, the log does not
	// have the refused change.
	db.Close()
	db = openT(t, dir, Options{})
	want := func(key string, wantErr error) {
		t.Helper()
		if _, err := db.Get(ctx, "r", key); !errors.Is(err, wantErr) && !(wantErr == nil && err == nil) {
			t.Errorf("reopened, Get(%s): %v, want %v", key, err, wantErr)
		}
	}
	want("before", nil)
	want("lost", fence.ErrNotFound)
	if _, err := db.Put(ctx, "r", "after", []byte("v"), tok, fence.Cond{}); err != nil {
		t.Fatalf("Put after the failure: %v", err)
	}
	db.Close()
	db = openT(t, dir, Options{})
	want("before", nil)
	want("after", nil)
	want("lost", fence.ErrNotFound)
}

// TestUpdate_SyncIOError makes the sync fail otherwise (EIO): the journal
// cannot vouch for what it wrote and takes no more changes.
func TestUpdate_SyncIOError(t *testing.T) {
	var fail atomic.Bool
	ioError := vfs.WithFaults(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpDatasync && fail.Load() {
			return &os.PathError{Op: "sync", Path: name, Err: syscall.EIO}
		}
		return nil
	})
	db := openT(t, t.TempDir(), Options{FS: ioError})
	ctx := t.Context()
	tok, err := db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := db.Put(ctx, "r", "k", []byte("v"), tok, fence.Cond{}); errors.Is(err, state.ErrNotApplied) || err == nil {
		t.Fatalf("Put with the sync failing with EIO: %v, want an error of unknown outcome", err)
	}
	fail.Store(false) // the disk is well again; the journal must not trust it
	if _, err := db.Put(ctx, "r", "k2", []byte("v"), tok, fence.Cond{}); err == nil {
		t.Fatal("a change was accepted after an I/O error")
	}
	if err := db.Check(); err == nil {
		t.Fatal("Check passed after an I/O error")
	}
}
