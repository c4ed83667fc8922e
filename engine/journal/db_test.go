package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// small are options that make every test roll segments and snapshot.
var small = Options{SegmentSize: 16 << 10, SnapshotEvery: 48 << 10}

func openT(t *testing.T, dir string, opts Options) *DB {
	t.Helper()
	db, err := OpenOptions(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// load writes n changes: grants and puts on a few resources, and returns the
// last token and value of each resource.
func load(t *testing.T, db *DB, n int) map[string]string {
	t.Helper()
	ctx := t.Context()
	last := map[string]string{}
	for i := range n {
		res := fmt.Sprint("r", i%7)
		tok, err := db.Grant(ctx, res, "h", time.Minute, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("%d-%s", i, strings.Repeat("x", i%300))
		if _, err := db.Put(ctx, res, "k", []byte(v), tok, fence.Cond{}); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			if _, err := db.Delete(ctx, res, "k", tok, fence.Cond{}); err != nil {
				t.Fatal(err)
			}
			v = ""
		}
		last[res] = fmt.Sprintf("%d %q", tok, v)
	}
	return last
}

// snapshotOf describes what db holds of the resources in last.
func snapshotOf(t *testing.T, db *DB, last map[string]string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for res := range last {
		tok, err := db.LastToken(t.Context(), res)
		if err != nil {
			t.Fatal(err)
		}
		item, err := db.Get(t.Context(), res, "k")
		switch {
		case errors.Is(err, fence.ErrNotFound):
			got[res] = fmt.Sprintf("%d %q", tok, "")
		case err != nil:
			t.Fatal(err)
		default:
			got[res] = fmt.Sprintf("%d %q", tok, item.Value)
		}
	}
	return got
}

// TestDB_Reopen checks that the state is the same after a restart, with
// snapshots taken and segments rolled and removed meanwhile, and that the
// directory does not grow with the log.
func TestDB_Reopen(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenOptions(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	last := load(t, db, 2000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, small)
	if got := snapshotOf(t, db, last); fmt.Sprint(got) != fmt.Sprint(last) {
		t.Fatalf("after reopen:\n%v\nwant\n%v", got, last)
	}
	// Bounded: the snapshots replaced what they cover.
	segs, _ := listFiles(osDir(dir), "log-", ".seg")
	snaps, _ := listFiles(osDir(dir), "snap-", ".bin")
	if len(snaps) > 2 || len(segs) > 8 {
		t.Fatalf("%d segments and %d snapshots left after 2000 commits; want the old ones removed", len(segs), len(snaps))
	}
	// And again, after more, without a clean close in between: reopen
	// after a copy of the directory (what a crash leaves).
	last2 := load(t, db, 500)
	copyDir(t, dir, dir+"-copy")
	db2 := openT(t, dir+"-copy", small)
	for res, want := range last2 {
		last[res] = want
	}
	if got := snapshotOf(t, db2, last); fmt.Sprint(got) != fmt.Sprint(last) {
		t.Fatalf("after a crash:\n%v\nwant\n%v", got, last)
	}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range names {
		if de.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, de.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDB_TornTail checks that a record cut short at the end of the log (a
// crash during a write, never acknowledged) ends the replay there, is cut,
// and that later commits go on where it began.
func TestDB_TornTail(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenOptions(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	last := load(t, db, 50)
	seq := db.e.seg.seq
	off := db.e.seg.off
	db.Close()
	// A torn record after the last one: a header that promises more than
	// was written, then garbage.
	f, err := os.OpenFile(filepath.Join(dir, segmentName(seq)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendRecord(nil, seq, []byte(strings.Repeat("z", 100)))
	if _, err := f.WriteAt(torn[:60], off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	db = openT(t, dir, Options{})
	if got := snapshotOf(t, db, last); fmt.Sprint(got) != fmt.Sprint(last) {
		t.Fatalf("after a torn tail:\n%v\nwant\n%v", got, last)
	}
	if db.e.seg.seq != seq || db.e.seg.off != off {
		t.Fatalf("writing on in segment %d at %d after a torn tail, want %d at %d, where it began", db.e.seg.seq, db.e.seg.off, seq, off)
	}
	more := load(t, db, 10)
	db.Close()
	db = openT(t, dir, Options{})
	if got := snapshotOf(t, db, more); fmt.Sprint(got) != fmt.Sprint(more) {
		t.Fatalf("after commits past a torn tail:\n%v\nwant\n%v", got, more)
	}
}

// TestDB_MissingSegment checks that a gap in the log is refused rather than
// replayed around: what followed it would be applied without what it held.
func TestDB_MissingSegment(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenOptions(dir, Options{SegmentSize: 4 << 10, SnapshotEvery: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	load(t, db, 200)
	db.Close()
	segs, _ := listFiles(osDir(dir), "log-", ".seg")
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	os.Remove(filepath.Join(dir, segmentName(segs[1])))
	if db, err := OpenOptions(dir, Options{}); err == nil || !errors.Is(err, ErrCorrupt) {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open with a segment missing: err=%v, want ErrCorrupt", err)
	}
}

// TestDB_Locked checks that a second Open of a directory in use fails with
// an error that says so.
func TestDB_Locked(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir, Options{})
	if db, err := Open(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("second Open: err=%v, want in use", err)
	}
}

// TestDB_GroupCommit checks that concurrent changes share commits: 64
// concurrent writes make far fewer records than 64.
func TestDB_GroupCommit(t *testing.T) {
	db := openT(t, t.TempDir(), Options{})
	ctx := t.Context()
	tok, err := db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	before := db.e.seg.off
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if _, err := db.Put(ctx, "r", fmt.Sprint("k", i), []byte("v"), tok, fence.Cond{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	records := 0
	data, err := os.ReadFile(filepath.Join(db.e.d.path, segmentName(db.e.seg.seq)))
	if err != nil {
		t.Fatal(err)
	}
	scanRecords(bytes.NewReader(data[before:]), db.e.seg.seq, before, func([]byte) error { records++; return nil })
	if records >= 64 || records == 0 {
		t.Fatalf("%d records for 64 concurrent puts, want fewer (group commit)", records)
	}
}

// TestDB_ReadOnlyCommit checks that a transaction that changes nothing (a
// rejection, a read) writes nothing.
func TestDB_ReadOnlyCommit(t *testing.T) {
	db := openT(t, t.TempDir(), Options{})
	ctx := t.Context()
	tok, _ := db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute))
	off := db.e.seg.off
	if _, err := db.Put(ctx, "r", "k", []byte("v"), tok+1, fence.Cond{}); !errors.Is(err, fence.ErrTokenNotIssued) {
		t.Fatal(err)
	}
	db.Update(ctx, func(tx state.Tx) error { _, err := tx.Rev(); return err })
	if db.e.seg.off != off {
		t.Fatalf("the log grew by %d bytes for a rejection and a read", db.e.seg.off-off)
	}
}
