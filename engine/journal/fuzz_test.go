package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// recorder is an applier that keeps what it was given.
type recorder struct {
	resources map[string]state.Resource
	entries   map[state.EntryID]state.Entry
	deleted   []state.EntryID
	rev       fence.Rev
	revSet    bool
}

func newRecorder() *recorder {
	return &recorder{resources: map[string]state.Resource{}, entries: map[state.EntryID]state.Entry{}}
}

func (r *recorder) setResource(name string, res state.Resource) { r.resources[name] = res }
func (r *recorder) setEntry(id state.EntryID, e state.Entry)    { r.entries[id] = e }
func (r *recorder) deleteEntry(id state.EntryID)                { r.deleted = append(r.deleted, id) }
func (r *recorder) setRev(rev fence.Rev)                        { r.rev, r.revSet = rev, true }

func sampleChanges() *state.Changes {
	v := []byte("value")
	return &state.Changes{
		Resources: map[string]state.Resource{
			"orders": {LastToken: 7, LastFence: 7, LeaseToken: 7, Holder: "w-ä", TTL: time.Second, Expires: 1_900_000_000_000_000_000},
			"idle":   {LastToken: 3, LastFence: 2, Delay: 5 * time.Second},
		},
		Entries: map[state.EntryID]*state.Entry{
			{Resource: "orders", Key: "a/b"}:  {Value: v, Rev: 9, Token: 7},
			{Resource: "orders", Key: "gone"}: nil,
		},
		Rev: 9, RevSet: true,
	}
}

// FuzzDecodeOps checks that decoding a record's payload never panics, that
// a payload it refuses applies nothing, and that encoded changes decode to
// themselves.
func FuzzDecodeOps(f *testing.F) {
	f.Add(encodeChanges(nil, sampleChanges()))
	f.Add([]byte{opRev, 0x80})
	f.Add([]byte{opResource, 1, 'a', 2, 2, 1})
	f.Add([]byte{9})
	f.Fuzz(func(t *testing.T, p []byte) {
		r := newRecorder()
		if err := decodeOps(p, r); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeOps: err=%v, want ErrCorrupt", err)
			}
			if len(r.resources)+len(r.entries)+len(r.deleted) != 0 || r.revSet {
				t.Fatalf("decodeOps applied part of a corrupt payload")
			}
			return
		}
		// What decodes re-encodes to the same operations.
		c := &state.Changes{Resources: r.resources, Entries: map[state.EntryID]*state.Entry{}, Rev: r.rev, RevSet: r.revSet}
		for id, e := range r.entries {
			c.Entries[id] = &e
		}
		for _, id := range r.deleted {
			if _, ok := r.entries[id]; !ok {
				c.Entries[id] = nil
			}
		}
		again := newRecorder()
		if err := decodeOps(encodeChanges(nil, c), again); err != nil {
			t.Fatalf("re-encoded changes do not decode: %v", err)
		}
	})
}

func TestEncodeChanges_RoundTrip(t *testing.T) {
	c := sampleChanges()
	r := newRecorder()
	if err := decodeOps(encodeChanges(nil, c), r); err != nil {
		t.Fatal(err)
	}
	if len(r.resources) != 2 || !reflect.DeepEqual(r.resources["orders"], c.Resources["orders"]) || !reflect.DeepEqual(r.resources["idle"], c.Resources["idle"]) {
		t.Fatalf("resources %+v", r.resources)
	}
	e := r.entries[state.EntryID{Resource: "orders", Key: "a/b"}]
	if !bytes.Equal(e.Value, []byte("value")) || e.Rev != 9 || e.Token != 7 || len(r.deleted) != 1 || !r.revSet || r.rev != 9 {
		t.Fatalf("entries %+v deleted %v rev %d", r.entries, r.deleted, r.rev)
	}
	if !bytes.Equal(encodeChanges(nil, c), encodeChanges(nil, c)) {
		t.Fatal("the same changes encode differently")
	}
}

// FuzzScanRecords checks that scanning a segment never panics, stops at the
// first record that does not check out, and finds every record appended.
func FuzzScanRecords(f *testing.F) {
	var seg []byte
	for _, p := range [][]byte{[]byte("one"), []byte("two"), bytes.Repeat([]byte("x"), 300)} {
		seg = appendRecord(seg, 5, p)
	}
	f.Add(seg, uint64(5), 0)
	f.Add(seg[:len(seg)-1], uint64(5), 0)
	f.Add(append(seg, make([]byte, 64)...), uint64(4), 0)
	f.Fuzz(func(t *testing.T, data []byte, seq uint64, cut int) {
		n := 0
		end, err := scanRecords(bytes.NewReader(data), seq, 0, func(p []byte) error { n++; return nil })
		if err != nil || end < 0 || end > int64(len(data)) {
			t.Fatalf("scanRecords: end %d of %d, err %v", end, len(data), err)
		}
		// Records appended after the valid part are all found, and a cut
		// into the last one hides only it.
		var tail []byte
		tail = appendRecord(tail, seq, []byte("a"))
		tail = appendRecord(tail, seq, []byte("bb"))
		all := append(append([]byte{}, data[:end]...), tail...)
		m := 0
		if _, err := scanRecords(bytes.NewReader(all), seq, 0, func(p []byte) error { m++; return nil }); err != nil || m != n+2 {
			t.Fatalf("%d records after appending 2 to %d, want %d", m, n, n+2)
		}
		if cut > 0 && cut < len(tail)-recordHeader-len("a") {
			m = 0
			scanRecords(bytes.NewReader(all[:len(all)-cut]), seq, 0, func(p []byte) error { m++; return nil })
			if m != n+1 {
				t.Fatalf("%d records with the last one cut by %d, want %d", m, cut, n+1)
			}
		}
	})
}

// FuzzDecodeSnapshot checks that a snapshot that does not check out is
// refused (ErrCorrupt) without a panic, and that a good one decodes to what
// was written.
func FuzzDecodeSnapshot(f *testing.F) {
	dir := f.TempDir()
	c := sampleChanges()
	entries := map[state.EntryID]state.Entry{{Resource: "orders", Key: "a/b"}: *c.Entries[state.EntryID{Resource: "orders", Key: "a/b"}]}
	if err := writeSnapshot(osDir(dir), 1, position{seq: 3, off: 99}, c.Resources, entries, 9); err != nil {
		f.Fatal(err)
	}
	var good []byte
	if r := newRecorder(); true {
		pos, err := readSnapshot(osDir(dir), 1, r)
		if err != nil || pos != (position{3, 99}) || len(r.resources) != 2 || len(r.entries) != 1 || r.rev != 9 {
			f.Fatalf("readSnapshot=%v, %v, %+v", pos, err, r)
		}
		good, _ = readFile(dir, 1)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte("fence-journal-snapshot-1\n\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRecorder()
		if _, err := decodeSnapshot(bytes.NewReader(data), int64(len(data)), r); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeSnapshot: err=%v, want ErrCorrupt", err)
		}
	})
}

func readFile(dir string, n uint64) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, snapshotName(n)))
}
