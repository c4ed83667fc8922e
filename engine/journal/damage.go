package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/fence-lock/fence/engine/journal/vfs"
)

// ErrCorrupt means the journal's files are damaged in a way that no crash
// leaves: a record that does not check out with records after it, a
// segment cut short or missing, a snapshot that does not check out. Open
// refuses to serve from such a directory rather than drop what follows the
// damage: that would lose acknowledged changes and issue tokens again.
var ErrCorrupt = errors.New("journal: corrupt data")

// CorruptError says where the damage Open refused is. It wraps ErrCorrupt.
type CorruptError struct {
	File    string // the damaged or missing file, in the journal's directory
	Missing bool   // File is not there
	Offset  int64  // where in File the damage starts; -1 if that is not known
	Reason  string // what is wrong there
}

func (e *CorruptError) Error() string {
	switch {
	case e.Missing:
		return fmt.Sprintf("%s is missing: %s", e.File, e.Reason)
	case e.Offset < 0:
		return fmt.Sprintf("%s is damaged: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("%s is damaged at offset %d: %s", e.File, e.Offset, e.Reason)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// sector is the unit a disk writes whole: a write cut short by a crash
// leaves whole sectors of it unwritten, reading as zeros in a segment.
const sector = 512

// tornTail reports whether what follows the valid records of segment seq,
// from end, is a record that a crash cut short: the one write the journal
// had not yet synced, never acknowledged, which recovery may cut. first
// and last are the first and last non-zero bytes after end. Anything else
// is damage: the reason is returned.
//
// A cut-short record is the last thing in the segment, and part of it was
// never written: its last byte (never zero in a record written whole,
// which ends with opEnd) is zero, or a whole sector inside it is, or its
// header is. A record written whole whose checksum fails (a flipped byte),
// or anything after the record, is damage; so is a header whose length was
// damaged, found by its checksum matching a shorter or longer record, or
// by a valid record inside the extent it claims.
func tornTail(f vfs.File, seq uint64, end, first, last, size int64) (bool, string, error) {
	var h [recordHeader]byte
	n := 0
	if end < size {
		var err error
		if n, err = f.ReadAt(h[:min(int64(recordHeader), size-end)], end); err != nil && err != io.EOF {
			return false, "", err
		}
	}
	if n < recordHeader {
		return false, "the file ends inside a record header: it was cut short", nil
	}
	length := int64(binary.BigEndian.Uint32(h[0:4]))
	headerSeq := binary.BigEndian.Uint64(h[8:16])
	cutHeader := h == [recordHeader]byte{} || tornHeader(h, end, seq)
	extent := last + 1
	if length > 0 && length <= maxRecord && headerSeq == seq {
		if end+recordHeader+length > size {
			return false, fmt.Sprintf("a record of %d bytes runs past the end of the file (%d bytes): the file was cut short", length, size), nil
		}
		extent = end + recordHeader + length
	}
	if last >= extent {
		return false, fmt.Sprintf("a record that does not check out is followed by more data (up to offset %d): damage, not a write cut short by a crash", last), nil
	}
	body := make([]byte, extent-end)
	if _, err := f.ReadAt(body, end); err != nil && err != io.EOF {
		return false, "", err
	}
	if len(body) > recordHeader && crcMatchesPrefix(seq, binary.BigEndian.Uint32(h[4:8]), body[recordHeader:]) {
		return false, "a record written whole whose length field is damaged", nil
	}
	if at := validRecordIn(body[1:], seq); at >= 0 {
		return false, fmt.Sprintf("a record that does not check out is followed by a valid one at offset %d: damage, not a write cut short by a crash", end+1+int64(at)), nil
	}
	if cutHeader || body[len(body)-1] == 0 || hasZeroSector(body, end) {
		return true, "", nil
	}
	return false, "a record written whole that does not check out (a damaged byte): damage, not a write cut short by a crash", nil
}

// tornHeader reports whether the header h of a record of segment seq, at
// offset end of its file, spans two sectors of which one reads as zeros
// where a header written whole cannot: the write that was cut short
// reached the disk in the other only. The first sector's part is zero in
// no header written whole once it holds the length field (never zero);
// the second's, where it holds non-zero bytes of seq.
func tornHeader(h [recordHeader]byte, end int64, seq uint64) bool {
	split := int((sector - end%sector) % sector) // bytes of h in its first sector
	if split == 0 || split >= recordHeader {
		return false // in one sector: written whole or not at all
	}
	var want [recordHeader]byte
	binary.BigEndian.PutUint64(want[8:16], seq)
	return split >= 4 && isZero(h[:split]) || isZero(h[split:]) && !isZero(want[max(split, 8):])
}

// crcMatchesPrefix reports whether the record checksum want, over seq and
// some prefix of payload other than the whole, matches: the record was
// written whole, and its length field is what was damaged.
func crcMatchesPrefix(seq uint64, want uint32, payload []byte) bool {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	crc := crc32.Update(0, castagnoli, s[:])
	for i := range len(payload) - 1 {
		crc = crc32.Update(crc, castagnoli, payload[i:i+1])
		if crc == want {
			return true
		}
	}
	return false
}

// validRecordIn returns the offset of the first valid record of segment
// seq that b holds at any offset, or -1: a record written after the one at
// the start of b, which was then synced before it.
func validRecordIn(b []byte, seq uint64) int {
	for i := 0; i+recordHeader <= len(b); i++ {
		if binary.BigEndian.Uint64(b[i+8:i+16]) != seq {
			continue
		}
		n := int(binary.BigEndian.Uint32(b[i : i+4]))
		if n == 0 || i+recordHeader+n > len(b) {
			continue
		}
		crc := crc32.Update(0, castagnoli, b[i+8:i+16])
		if crc32.Update(crc, castagnoli, b[i+recordHeader:i+recordHeader+n]) == binary.BigEndian.Uint32(b[i+4:i+8]) {
			return i
		}
	}
	return -1
}

// hasZeroSector reports whether b, which starts at offset off of its file,
// holds a whole sector of zeros: one that a write cut short left unwritten.
func hasZeroSector(b []byte, off int64) bool {
	start := (sector - off%sector) % sector
	for i := start; i+sector <= int64(len(b)); i += sector {
		if isZero(b[i : i+sector]) {
			return true
		}
	}
	return false
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// nonZero returns the offsets of the first and the last non-zero byte of f
// in [from, to), or -1, -1 if there is none. It skips the holes of a
// sparse file where the system says where they are.
func nonZero(f vfs.File, from, to int64) (first, last int64, err error) {
	first, last = -1, -1
	buf := make([]byte, 1<<20)
	for off := from; off < to; {
		data, err := f.NextData(off)
		if err != nil {
			return 0, 0, err
		}
		if data < 0 || data >= to {
			break
		}
		off = data
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-off)], off)
		if n == 0 && err != nil {
			if err == io.EOF {
				break
			}
			return 0, 0, err
		}
		for i, c := range buf[:n] {
			if c != 0 {
				if first < 0 {
					first = off + int64(i)
				}
				last = off + int64(i)
			}
		}
		off += int64(n)
	}
	return first, last, nil
}

// zeroRange makes n bytes of f from off read as zeros: punched out where
// the system can, written over with zeros where it cannot.
func zeroRange(f vfs.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	if err := f.Punch(off, n); err == nil {
		return nil
	}
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		w, err := f.WriteAt(zeros[:min(n, int64(len(zeros)))], off)
		if err != nil {
			return err
		}
		off, n = off+int64(w), n-int64(w)
	}
	return nil
}

// lastName is the file that names the newest segment ever made, so that a
// log whose last segments were removed is told from one that ends there.
const lastName = "log.last"

// readLast returns the newest segment lastName names; ok is false where the
// file does not exist (a journal written before it was kept).
func readLast(d dir) (seq uint64, ok bool, err error) {
	f, err := d.fs.Open(d.join(lastName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	b, err := io.ReadAll(f)
	if err = errors.Join(err, f.Close()); err != nil {
		return 0, false, err
	}
	seq, err = strconv.ParseUint(strings.TrimSpace(string(b)), 16, 64)
	if err != nil || seq == 0 {
		return 0, false, &CorruptError{File: lastName, Offset: 0, Reason: fmt.Sprintf("not a segment number: %q", b)}
	}
	return seq, true, nil
}

// writeLast records that seq is the newest segment: written aside, synced,
// renamed over lastName; the caller syncs the directory.
func writeLast(d dir, seq uint64) error {
	tmp := d.join(lastName + ".tmp")
	f, err := d.fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%016x\n", seq)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		d.fs.Remove(tmp)
		return err
	}
	return d.fs.Rename(tmp, d.join(lastName))
}
