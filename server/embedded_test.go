package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/server"
)

// TestOpenEmbedded_Import checks that a data directory of an older fence
// (a bbolt file) is imported into the journal the first time, with its
// tokens, fences, leases and values, and that the old file is not read
// again.
func TestOpenEmbedded_Import(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	old, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := old.Grant(ctx, "orders", "A", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "orders", "total", []byte("42"), tok, fence.Cond{}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	db, err := server.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if last, err := db.LastToken(ctx, "orders"); err != nil || last != tok {
			t.Fatalf("LastToken=%d, %v; want %d", last, err, tok)
		}
		if item, err := db.Get(ctx, "orders", "total"); err != nil || string(item.Value) != "42" || item.Token != tok {
			t.Fatalf("Get=%+v, %v", item, err)
		}
		if leases, _, err := db.Leases(ctx); err != nil || len(leases) != 1 || leases[0].Token != tok {
			t.Fatalf("Leases=%+v, %v", leases, err)
		}
	}
	check()
	if _, err := os.Stat(filepath.Join(dir, bolt.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, bolt.FileName+".imported")); err != nil {
		t.Fatalf("the old file was not kept as .imported: %v", err)
	}
	next, err := db.Grant(ctx, "orders", "B", time.Minute, time.Now().Add(time.Minute))
	if err != nil || next != tok+1 {
		t.Fatalf("Grant after the import=%d, %v; want %d", next, err, tok+1)
	}
	db.Close()
	// Reopened: the journal, not a second import.
	if db, err = server.OpenEmbedded(dir); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if last, _ := db.LastToken(ctx, "orders"); last != tok+1 {
		t.Fatalf("LastToken after reopen=%d, want %d", last, tok+1)
	}
}

// TestOpenEmbedded_InUse checks that a data directory in use is refused.
func TestOpenEmbedded_InUse(t *testing.T) {
	dir := t.TempDir()
	db, err := server.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db2, err := server.OpenEmbedded(dir); err == nil {
		db2.Close()
		t.Fatal("a second OpenEmbedded of a directory in use succeeded")
	}
}
