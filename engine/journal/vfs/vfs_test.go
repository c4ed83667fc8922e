package vfs

import (
	"errors"
	"io"
	"path/filepath"
	"testing"
)

// TestDefault runs the journal's calls on the operating system's files: a
// file written, synced, read back, renamed and listed; a second lock of one
// name refused while the first is held, and granted once it is let go.
func TestDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := Default.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := Default.Create(filepath.Join(dir, "f.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Datasync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if err := Default.Rename(filepath.Join(dir, "f.tmp"), filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if err := Default.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	g, err := Default.Open(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(g)
	g.Close()
	if err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v; want hello", b, err)
	}
	des, err := Default.ReadDir(dir)
	if err != nil || len(des) != 1 || des[0].Name() != "f" {
		t.Fatalf("ReadDir=%v, %v; want f alone", des, err)
	}

	lock := filepath.Join(dir, "LOCK")
	l, err := Default.Lock(lock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Default.Lock(lock); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	l.Close()
	l, err = Default.Lock(lock)
	if err != nil {
		t.Fatalf("Lock after the first was let go: %v", err)
	}
	l.Close()
}

// TestWithFaults checks that a fault fails the call it names, before the
// call does anything, and lets every other call through.
func TestWithFaults(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("boom")
	var seen []Op
	fs := WithFaults(Default, func(op Op, name string) error {
		seen = append(seen, op)
		if op == OpWrite || op == OpRename {
			return boom
		}
		return nil
	})
	f, err := fs.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); !errors.Is(err, boom) {
		t.Fatalf("Write: %v, want boom", err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatalf("Datasync: %v", err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 0 {
		t.Fatalf("size after the failed write: %v, %v; want 0", fi, err)
	}
	if err := fs.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "g")); !errors.Is(err, boom) {
		t.Fatalf("Rename: %v, want boom", err)
	}
	if _, err := Default.Open(filepath.Join(dir, "f")); err != nil {
		t.Fatalf("f after the failed rename: %v", err)
	}
	want := []Op{OpCreate, OpWrite, OpDatasync, OpRename}
	if len(seen) != len(want) {
		t.Fatalf("the fault saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("the fault saw %v, want %v", seen, want)
		}
	}
}
