package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
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
	// opEnd ends a record's payload, so that the last byte of a record
	// written whole is never zero: one whose last byte reads as zero was
	// cut short by a crash (see tornTail). Records written before it was
	// added end without it.
	opEnd = 0xff
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
	return append(b, opEnd)
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

// decodeOps applies every operation of p to a, or returns ErrCorrupt and
// applies nothing: it decodes p once to check it, then again to apply it.
// Entry values are copied: p is not kept.
func decodeOps(p []byte, a applier) error {
	if err := applyOps(p, discard{}); err != nil {
		return err
	}
	return applyOps(p, a)
}

// applyOps applies the operations of p to a as it decodes them; on
// ErrCorrupt, those before the corrupt one are applied.
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
		case opEnd:
			if len(d.b) > 0 {
				d.err = errors.New("data after the end of a record")
			}
		default:
			d.err = fmt.Errorf("operation kind %d", kind)
		}
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, d.err)
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
func writeSnapshot(d dir, n uint64, pos position, resources map[string]state.Resource, entries map[state.EntryID]state.Entry, rev fence.Rev) error {
	tmp := d.join(snapshotName(n) + ".tmp")
	f, err := d.fs.Create(tmp)
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
		d.fs.Remove(tmp)
		return err
	}
	if err := d.fs.Rename(tmp, d.join(snapshotName(n))); err != nil {
		return err
	}
	return d.fs.SyncDir(d.path)
}

// readSnapshot applies snapshot n of dir to a and returns its position.
func readSnapshot(d dir, n uint64, a applier) (position, error) {
	f, err := d.fs.Open(d.join(snapshotName(n)))
	if err != nil {
		return position{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return position{}, err
	}
	return decodeSnapshot(f, fi.Size(), a)
}

// decodeSnapshot reads a snapshot of size bytes from r as a stream and
// applies it to a. The checksum is at the end: when it does not check out
// (or the snapshot does not decode), a has been given part of it, and the
// caller must drop a.
func decodeSnapshot(r io.Reader, size int64, a applier) (position, error) {
	if size < int64(len(snapshotMagic))+4 {
		return position{}, fmt.Errorf("%w: not a snapshot", ErrCorrupt)
	}
	crc := crc32.New(castagnoli)
	br := bufio.NewReaderSize(io.TeeReader(io.LimitReader(r, size-4), crc), 1<<20)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(snapshotMagic) {
		return position{}, fmt.Errorf("%w: not a snapshot", ErrCorrupt)
	}
	seq, err1 := binary.ReadUvarint(br)
	off, err2 := binary.ReadUvarint(br)
	if err1 != nil || err2 != nil {
		return position{}, fmt.Errorf("%w: snapshot position", ErrCorrupt)
	}
	if err := streamOps(br, a); err != nil {
		return position{}, err
	}
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil || crc.Sum32() != binary.BigEndian.Uint32(sum[:]) {
		return position{}, fmt.Errorf("%w: snapshot checksum", ErrCorrupt)
	}
	return position{seq: seq, off: off}, nil
}

// streamOps applies the operations read from r until its end.
func streamOps(r *bufio.Reader, a applier) error {
	bad := func(what string) error { return fmt.Errorf("%w: snapshot %s", ErrCorrupt, what) }
	readBytes := func(buf []byte) ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > maxRecord {
			return nil, bad("length")
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, bad("truncated")
		}
		return buf, nil
	}
	var b1, b2, b3 []byte
	for {
		kind, err := r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return bad("truncated")
		}
		switch kind {
		case opResource:
			if b1, err = readBytes(b1); err != nil {
				return err
			}
			if b3, err = readBytes(b3); err != nil {
				return err
			}
			res, err := state.DecodeResource(b3)
			if err != nil {
				return fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
			}
			a.setResource(string(b1), res)
		case opEntry:
			if b1, err = readBytes(b1); err != nil {
				return err
			}
			if b2, err = readBytes(b2); err != nil {
				return err
			}
			if b3, err = readBytes(b3); err != nil {
				return err
			}
			e, err := state.DecodeEntry(b3)
			if err != nil {
				return fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
			}
			e.Value = append(make([]byte, 0, len(e.Value)), e.Value...)
			a.setEntry(state.EntryID{Resource: string(b1), Key: string(b2)}, e)
		case opRev:
			rev, err := binary.ReadUvarint(r)
			if err != nil {
				return bad("revision")
			}
			a.setRev(fence.Rev(rev))
		default:
			return bad(fmt.Sprintf("operation kind %d", kind))
		}
	}
}
