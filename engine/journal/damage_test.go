package journal

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/journal/vfs"
)

// tinySegments makes a few commits fill a segment, and never snapshots.
var tinySegments = Options{SegmentSize: 4 << 10, SnapshotEvery: 1 << 30}

// record is where one acknowledged commit lies in the log.
type record struct {
	seq        uint64
	start, end int64
}

// commits writes n acknowledged puts of values of size bytes on resource
// r, each its own commit, closes the journal, and returns where each
// record lies. The value of key k<i> is v<i>.
func commits(t testing.TB, dir string, opts Options, n, size int) []record {
	t.Helper()
	db, err := OpenOptions(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	tok, err := db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var recs []record
	for i := range n {
		v := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", size))
		seq, before := db.e.seg.seq, db.e.seg.off
		if _, err := db.Put(ctx, "r", fmt.Sprint("k", i), []byte(v), tok, fence.Cond{}); err != nil {
			t.Fatal(err)
		}
		if db.e.seg.seq != seq {
			before = 0 // rolled: the record is at the start of the new segment
		}
		recs = append(recs, record{db.e.seg.seq, before, db.e.seg.off})
	}
	return recs
}

// wantAll checks that every one of the n commits of commits is there.
func wantAll(t *testing.T, db *DB, n, size int) {
	t.Helper()
	for i := range n {
		item, err := db.Get(t.Context(), "r", fmt.Sprint("k", i))
		if want := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", size)); err != nil || string(item.Value) != want {
			t.Fatalf("k%d after reopening: %q, %v; want the acknowledged value", i, item.Value, err)
		}
	}
}

// patch changes the file name of dir with fn.
func patch(t testing.TB, dir, name string, fn func(f vfs.File)) {
	t.Helper()
	f, err := vfs.Default.OpenReadWrite(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fn(f)
}

func flip(t *testing.T, dir string, seq uint64, off int64) {
	t.Helper()
	patch(t, dir, segmentName(seq), func(f vfs.File) {
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x20
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	})
}

// digest describes every file of dir, to check that a refused Open changed none.
func digest(t *testing.T, dir string) string {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, de := range names {
		if de.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %x\n", de.Name(), sha256.Sum256(data))
	}
	return b.String()
}

// TestOpen_Damage checks that damage no crash leaves is refused, naming the
// file and the offset, and changing nothing: a byte flipped in a record
// with records after it, in the newest segment or an older one, or in the
// last record of the log (written whole and acknowledged), a damaged length,
// a segment cut short mid-record, the last segments removed. Replaying up
// to the damage dropped every acknowledged record after it and issued its
// tokens again.
func TestOpen_Damage(t *testing.T) {
	const n, size = 40, 300
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, recs []record) (file string, off int64)
	}{
		{"FlipInTheNewestSegment", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-3]
			flip(t, dir, r.seq, r.start+recordHeader+50)
			return segmentName(r.seq), r.start
		}},
		{"FlipInAnOlderSegment", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[1]
			if r.seq == recs[len(recs)-1].seq {
				t.Fatal("one segment only")
			}
			flip(t, dir, r.seq, r.start+recordHeader+7)
			return segmentName(r.seq), r.start
		}},
		{"FlipInTheLastRecord", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-1]
			flip(t, dir, r.seq, r.start+recordHeader+100)
			return segmentName(r.seq), r.start
		}},
		{"FlipInTheLastRecordsCRC", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-1]
			flip(t, dir, r.seq, r.start+5)
			return segmentName(r.seq), r.start
		}},
		{"LongerLengthOfTheLastRecord", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-1]
			flip(t, dir, r.seq, r.start+2) // +8 KiB: past the segment, or into zeros
			return segmentName(r.seq), r.start
		}},
		{"ShorterLengthOfARecord", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-1]
			flip(t, dir, r.seq, r.start+3) // a few bytes off
			return segmentName(r.seq), r.start
		}},
		{"TruncatedMidRecord", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-2]
			if err := os.Truncate(filepath.Join(dir, segmentName(r.seq)), r.start+100); err != nil {
				t.Fatal(err)
			}
			return segmentName(r.seq), r.start
		}},
		{"TruncatedAtARecordsEnd", func(t *testing.T, dir string, recs []record) (string, int64) {
			r := recs[len(recs)-3]
			if err := os.Truncate(filepath.Join(dir, segmentName(r.seq)), r.end); err != nil {
				t.Fatal(err)
			}
			return segmentName(r.seq), r.end
		}},
		{"LastSegmentsRemoved", func(t *testing.T, dir string, recs []record) (string, int64) {
			segs, _ := listFiles(osDir(dir), "log-", ".seg")
			last := recs[len(recs)-1].seq
			for _, s := range segs {
				if s >= last {
					os.Remove(filepath.Join(dir, segmentName(s)))
				}
			}
			return segmentName(last), -1
		}},
		{"SnapshotFlipped", func(t *testing.T, dir string, recs []record) (string, int64) {
			snaps, _ := listFiles(osDir(dir), "snap-", ".bin")
			if len(snaps) == 0 {
				t.Fatal("no snapshot")
			}
			name := snapshotName(snaps[len(snaps)-1])
			patch(t, dir, name, func(f vfs.File) {
				b := []byte{0}
				f.ReadAt(b, 20)
				b[0] ^= 0x10
				f.WriteAt(b, 20)
			})
			return name, -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := tinySegments
			if tc.name == "SnapshotFlipped" {
				opts.SnapshotEvery = 4 << 10
			}
			recs := commits(t, dir, opts, n, size)
			file, off := tc.damage(t, dir, recs)
			before := digest(t, dir)
			db, err := OpenOptions(dir, opts)
			if err == nil {
				db.Close()
				t.Fatalf("Open after the damage: no error, want it refused")
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want a *CorruptError", err)
			}
			if ce.File != file || ce.Offset != off {
				t.Fatalf("Open: %v; want the damage named at %s offset %d", err, file, off)
			}
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("the error %q does not name the file %s", err, file)
			}
			if after := digest(t, dir); after != before {
				t.Fatalf("a refused Open changed the directory:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// TestOpen_TornTail checks that a last record a crash cut short (whole
// sectors of it unwritten: its end, a sector inside it, its first) is cut,
// every acknowledged record before it is there, and the log goes on where
// it began, again and again.
func TestOpen_TornTail(t *testing.T) {
	const n, size = 10, 2000 // records of several sectors
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, dir string, r record)
	}{
		{"End", func(t *testing.T, dir string, r record) {
			patch(t, dir, segmentName(r.seq), func(f vfs.File) {
				keep := (r.start/sector + 2) * sector // two sectors at most written
				if err := zeroRange(f, keep, r.end-keep); err != nil {
					t.Fatal(err)
				}
			})
		}},
		{"SectorInside", func(t *testing.T, dir string, r record) {
			patch(t, dir, segmentName(r.seq), func(f vfs.File) {
				hole := (r.start/sector + 2) * sector
				if err := zeroRange(f, hole, sector); err != nil {
					t.Fatal(err)
				}
			})
		}},
		{"Header", func(t *testing.T, dir string, r record) {
			patch(t, dir, segmentName(r.seq), func(f vfs.File) {
				first := (r.start/sector + 1) * sector
				if err := zeroRange(f, r.start, first-r.start); err != nil {
					t.Fatal(err)
				}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: 64 << 10, SnapshotEvery: 1 << 30}
			recs := commits(t, dir, opts, n+1, size)
			torn := recs[n]
			if torn.seq != recs[n-1].seq {
				t.Fatal("the torn record starts a segment")
			}
			tc.tear(t, dir, torn)
			db := openT(t, dir, opts)
			wantAll(t, db, n, size)
			if _, err := db.Get(t.Context(), "r", fmt.Sprint("k", n)); !errors.Is(err, fence.ErrNotFound) {
				t.Fatalf("the torn record's key: %v, want it not found", err)
			}
			if db.e.seg.seq != torn.seq || db.e.seg.off != torn.start {
				t.Fatalf("writing on at %d/%d, want %d/%d, where the torn record began", db.e.seg.seq, db.e.seg.off, torn.seq, torn.start)
			}
			// A short record written over the start of the torn one: the
			// rest of the torn one was cut, so the log reads on.
			tok, err := db.Grant(t.Context(), "s", "h", time.Minute, time.Now().Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			db = openT(t, dir, opts)
			wantAll(t, db, n, size)
			if got, _ := db.LastToken(t.Context(), "s"); got != tok {
				t.Fatalf("the commit after the torn tail: LastToken %d, want %d", got, tok)
			}
		})
	}
}

// TestOpen_LegacyWithoutLast checks that a journal written before log.last
// was kept opens, and is checked strictly from then on.
func TestOpen_LegacyWithoutLast(t *testing.T) {
	dir := t.TempDir()
	recs := commits(t, dir, tinySegments, 20, 300)
	os.Remove(filepath.Join(dir, lastName))
	db := openT(t, dir, tinySegments)
	wantAll(t, db, 20, 300)
	db.Close()
	if _, ok, err := readLast(osDir(dir)); !ok || err != nil {
		t.Fatalf("log.last after opening a journal without it: %v, %v; want it written", ok, err)
	}
	os.Remove(filepath.Join(dir, segmentName(recs[len(recs)-1].seq)))
	if db, err := OpenOptions(dir, tinySegments); !errors.Is(err, ErrCorrupt) {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open with its last segment removed: %v, want ErrCorrupt", err)
	}
}

// TestOpen_RestartsDoNotGrow checks that restarts, clean or not, with a
// write each, leave the directory bounded: a restart goes on in the last
// segment, and the log replayed counts toward the next snapshot.
func TestOpen_RestartsDoNotGrow(t *testing.T) {
	opts := Options{SegmentSize: 64 << 10, SnapshotEvery: 32 << 10}
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			dir := t.TempDir()
			ctx := t.Context()
			var want fence.Token
			for i := range 100 {
				db, err := OpenOptions(dir, opts)
				if err != nil {
					t.Fatalf("restart %d: %v", i, err)
				}
				if want, err = db.Grant(ctx, "r", "h", time.Minute, time.Now().Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Put(ctx, "r", "k", []byte(strings.Repeat("v", 1000)), want, fence.Cond{}); err != nil {
					t.Fatal(err)
				}
				if crash {
					// What a kill leaves: the files as they are, the
					// directory's lock released.
					db.e.spareWG.Wait()
					db.e.snapWG.Wait()
					db.e.lock.Close()
				} else if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			segs, _ := listFiles(osDir(dir), "log-", ".seg")
			snaps, _ := listFiles(osDir(dir), "snap-", ".bin")
			if len(segs) > 3 || len(snaps) > 2 || len(snaps) == 0 {
				t.Fatalf("%d segments and %d snapshots after 100 restarts; want at most 3 and 1..2", len(segs), len(snaps))
			}
			db := openT(t, dir, opts)
			if got, _ := db.LastToken(ctx, "r"); got != want || got != 100 {
				t.Fatalf("LastToken=%d after 100 restarts, want %d", got, want)
			}
		})
	}
}

// FuzzOpenDamaged flips bytes of a journal's log at fuzzed offsets and
// checks the journal's promise: Open either refuses with a *CorruptError,
// or opens with every acknowledged commit intact. The one damage that
// reads as a crash is the last byte of the log turned to zero: a record
// whose end was never written.
func FuzzOpenDamaged(f *testing.F) {
	const n, size = 12, 200
	template := f.TempDir()
	recs := commits(f, template, tinySegments, n, size)
	last := recs[len(recs)-1]
	f.Add(uint16(10), byte(1), uint16(0), byte(0))
	f.Add(uint16(last.start+3), byte(0x40), uint16(0), byte(0))
	f.Add(uint16(last.end-1), byte(0x01), uint16(100), byte(0xff))
	f.Fuzz(func(t *testing.T, off1 uint16, x1 byte, off2 uint16, x2 byte) {
		dir := t.TempDir()
		copyDir(t, template, dir)
		segs, _ := listFiles(osDir(dir), "log-", ".seg")
		total := int64(len(segs)) * tinySegments.SegmentSize
		onlyLastByteZeroed := true
		for _, d := range []struct {
			off int64
			x   byte
		}{{int64(off1) % total, x1}, {int64(off2) % total, x2}} {
			if d.x == 0 {
				continue
			}
			seq, at := segs[d.off/tinySegments.SegmentSize], d.off%tinySegments.SegmentSize
			var b [1]byte
			patch(t, dir, segmentName(seq), func(f vfs.File) {
				f.ReadAt(b[:], at)
				b[0] ^= d.x
				f.WriteAt(b[:], at)
			})
			if seq != last.seq || at != last.end-1 || b[0] != 0 {
				onlyLastByteZeroed = false
			}
		}
		db, err := OpenOptions(dir, tinySegments)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt or success", err)
			}
			return
		}
		defer db.Close()
		want := n
		if onlyLastByteZeroed {
			want = n - 1
		}
		for i := range want {
			item, err := db.Get(t.Context(), "r", fmt.Sprint("k", i))
			if v := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", size)); err != nil || string(item.Value) != v {
				t.Fatalf("Open succeeded after the damage, but k%d is %q, %v: an acknowledged write lost or changed", i, item.Value, err)
			}
		}
	})
}

// TestOptions_Synced checks that Synced is told where the log is durable:
// at the open, after every commit synced and at every new segment; and with
// UnsafeAckBeforeSync, whose commits are not synced, only at the open.
func TestOptions_Synced(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run(fmt.Sprint("unsafe=", unsafe), func(t *testing.T) {
			type at struct {
				seg string
				off int64
			}
			var got []at
			opts := tinySegments
			opts.UnsafeAckBeforeSync = unsafe
			opts.Synced = func(seg string, off int64) { got = append(got, at{seg, off}) }
			recs := commits(t, t.TempDir(), opts, 20, 300)
			if got[0] != (at{segmentName(1), 0}) {
				t.Fatalf("first Synced %v, want the open position", got[0])
			}
			if unsafe {
				if len(got) != 1 {
					t.Fatalf("Synced %d times acknowledging before the sync, want once (the open): %v", len(got), got)
				}
				return
			}
			last := recs[len(recs)-1]
			if got[len(got)-1] != (at{segmentName(last.seq), last.end}) {
				t.Fatalf("last Synced %v, want %s at %d", got[len(got)-1], segmentName(last.seq), last.end)
			}
			if want := 1 + 21 + int(last.seq-1); len(got) != want {
				t.Fatalf("Synced %d times, want %d: the open, each of 21 commits, each of %d new segments", len(got), want, last.seq-1)
			}
		})
	}
}

// TestTornTail_HeaderAcrossSectors checks a last record whose header
// crosses a sector boundary and reached the disk on one side only: a tear,
// whichever side; a header written whole is not taken for one.
func TestTornTail_HeaderAcrossSectors(t *testing.T) {
	const seq = 7
	rec := appendRecord(nil, seq, []byte(strings.Repeat("p", 40)+"\xff"))
	for _, tc := range []struct {
		name string
		end  int64 // where the record starts
		keep func(b []byte, end int64)
		torn bool
	}{
		{"FirstSectorOnly", sector - 7, func(b []byte, end int64) { copy(b[end:sector], rec) }, true},
		{"SecondSectorOnly", sector - 7, func(b []byte, end int64) { copy(b[sector:], rec[sector-end:]) }, true},
		{"WholeButDamaged", sector - 7, func(b []byte, end int64) { copy(b[end:], rec); b[end+30] ^= 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, 4*sector)
			tc.keep(b, tc.end)
			file := filepath.Join(t.TempDir(), segmentName(seq))
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := vfs.Default.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			first, last, err := nonZero(f, tc.end, int64(len(b)))
			if err != nil || first < 0 {
				t.Fatalf("nonZero: %d, %d, %v", first, last, err)
			}
			torn, why, err := tornTail(f, seq, tc.end, first, last, int64(len(b)))
			if err != nil || torn != tc.torn {
				t.Fatalf("tornTail=%v (%s), %v; want %v", torn, why, err, tc.torn)
			}
		})
	}
}

// osDir is the journal directory path on the operating system's files.
func osDir(path string) dir { return dir{fs: vfs.Default, path: path} }
