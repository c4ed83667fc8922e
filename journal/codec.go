package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// A record's payload, and a snapshot's body, is a sequence of operations,
// each a kind byte and its fields (strings and records length-prefixed with
// uvarints; records are package state's binary records):
const (
	opResource = 1 // name, resource record
	opEntry    = 2 // resource, key, entry record
	opDelete   = 3 // resource, key
	opRev      = 4 // revision (uvarint)
)

// applier receives decoded operations.
type applier interface {
	setResource(name string, r state.Resource)
	setEntry(id state.EntryID, e state.Entry)
	deleteEntry(id state.EntryID)
	setRev(rev fence.Rev)
}

// encodeChanges appends the operations of c to b, in a fixed order (sorted),
// so that the same changes always give the same bytes.
func encodeChanges(b []byte, c *state.Changes) []byte {
	for _, name := range slices.Sorted(maps.Keys(c.Resources)) {
		b = append(b, opResource)
		b = appendString(b, name)
		b = appendBytes(b, state.EncodeResource(c.Resources[name]))
	}
	ids := slices.SortedFunc(maps.Keys(c.Entries), func(a, b state.EntryID) int {
		if a.Resource != b.Resource {
			return cmpString(a.Resource, b.Resource)
		}
		return cmpString(a.Key, b.Key)
	})
	for _, id := range ids {
		if e := c.Entries[id]; e != nil {
			b = append(b, opEntry)
			b = appendString(b, id.Resource)
			b = appendString(b, id.Key)
			b = appendBytes(b, state.EncodeEntry(*e))
		} else {
			b = append(b, opDelete)
			b = appendString(b, id.Resource)
			b = appendString(b, id.Key)
		}
	}
	if c.RevSet {
		b = append(b, opRev)
		b = binary.AppendUvarint(b, uint64(c.Rev))
	}
	return b
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// decodeOps applies every operation of p to a, or returns errCorrupt and
// applies nothing: it decodes p once to check it, then again to apply it.
// Entry values are copied: p is not kept.
func decodeOps(p []byte, a applier) error {
	if err := applyOps(p, discard{}); err != nil {
		return err
	}
	return applyOps(p, a)
}

// applyOps applies the operations of p to a as it decodes them; on
// errCorrupt, those before the corrupt one are applied.
func applyOps(p []byte, a applier) error {
	d := decoder{b: p}
	for len(d.b) > 0 && d.err == nil {
		switch kind := d.byte(); kind {
		case opResource:
			name := d.string()
			rec := d.bytes()
			if d.err != nil {
				break
			}
			r, err := state.DecodeResource(rec)
			if err != nil {
				d.err = err
				break
			}
			a.setResource(name, r)
		case opEntry:
			id := state.EntryID{Resource: d.string(), Key: d.string()}
			rec := d.bytes()
			if d.err != nil {
				break
			}
			e, err := state.DecodeEntry(rec)
			if err != nil {
				d.err = err
				break
			}
			e.Value = append(make([]byte, 0, len(e.Value)), e.Value...)
			a.setEntry(id, e)
		case opDelete:
			id := state.EntryID{Resource: d.string(), Key: d.string()}
			if d.err == nil {
				a.deleteEntry(id)
			}
		case opRev:
			rev := fence.Rev(d.uvarint())
			if d.err == nil {
				a.setRev(rev)
			}
		default:
			d.err = fmt.Errorf("operation kind %d", kind)
		}
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", errCorrupt, d.err)
	}
	return nil
}

// discard is an applier that keeps nothing.
type discard struct{}

func (discard) setResource(string, state.Resource)  {}
func (discard) setEntry(state.EntryID, state.Entry) {}
func (discard) deleteEntry(state.EntryID)           {}
func (discard) setRev(fence.Rev)                    {}

// decoder reads operations; the first failure sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return string(d.bytes()) }

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errors.New("truncated")
	}
}

// A snapshot is the whole state at a position of the log: the magic, the
// position (segment and offset, uvarints), the operations that rebuild the
// state, and a CRC-32C of all that before it. It is written to a temporary
// file, synced and renamed, so that a snapshot on disk is always complete.
var snapshotMagic = []byte("fence-journal-snapshot-1\n")

// position is a place in the log: replay starts at offset off of segment seq.
type position struct{ seq, off uint64 }

// writeSnapshot writes the state in resources, entries and rev at pos as
// snapshot number n in dir.
func writeSnapshot(dir string, n uint64, pos position, resources map[string]state.Resource, entries map[state.EntryID]state.Entry, rev fence.Rev) error {
	tmp := filepath.Join(dir, snapshotName(n)+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	var b []byte
	b = append(b, snapshotMagic...)
	b = binary.AppendUvarint(b, pos.seq)
	b = binary.AppendUvarint(b, pos.off)
	b = append(b, opRev)
	b = binary.AppendUvarint(b, uint64(rev))
	w.Write(b)
	for name, r := range resources {
		b = append(b[:0], opResource)
		b = appendString(b, name)
		b = appendBytes(b, state.EncodeResource(r))
		w.Write(b)
	}
	for id, e := range entries {
		b = append(b[:0], opEntry)
		b = appendString(b, id.Resource)
		b = appendString(b, id.Key)
		b = appendBytes(b, state.EncodeEntry(e))
		w.Write(b)
	}
	err = w.Flush()
	if err == nil {
		_, err = f.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, snapshotName(n))); err != nil {
		return err
	}
	return syncDir(dir)
}

// readSnapshot applies snapshot n of dir to a and returns its position.
func readSnapshot(dir string, n uint64, a applier) (position, error) {
	data, err := os.ReadFile(filepath.Join(dir, snapshotName(n)))
	if err != nil {
		return position{}, err
	}
	return decodeSnapshot(data, a)
}

// decodeSnapshot is readSnapshot on the snapshot's bytes; a snapshot that
// does not check out applies nothing.
func decodeSnapshot(data []byte, a applier) (position, error) {
	if len(data) < len(snapshotMagic)+4 || string(data[:len(snapshotMagic)]) != string(snapshotMagic) {
		return position{}, fmt.Errorf("%w: not a snapshot", errCorrupt)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return position{}, fmt.Errorf("%w: snapshot checksum", errCorrupt)
	}
	d := decoder{b: body[len(snapshotMagic):]}
	pos := position{seq: d.uvarint(), off: d.uvarint()}
	if d.err != nil {
		return position{}, fmt.Errorf("%w: snapshot position", errCorrupt)
	}
	return pos, applyOps(d.b, a)
}
