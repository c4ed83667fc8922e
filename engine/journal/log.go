package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fence-lock/fence/engine/journal/vfs"
)

// The log is a sequence of segments, files of SegmentSize bytes made at
// their full size (see createSegment), so that a commit never grows a file.
// A segment holds records, one per commit, never across two segments:
//
//	length  uint32  big endian, of the payload
//	crc     uint32  big endian, CRC-32C of seq and payload
//	seq     uint64  big endian, the segment's number
//	payload length bytes: the changes (see encodeChanges)
//
// A record is valid if its length is not zero, it fits in the segment, and
// its CRC matches. Reading a segment stops at the first record that is not
// valid. The writer writes one record at a time, each after the one before
// is synced, so a crash can leave one record cut short, at the very end of
// the log; what follows the valid records must be that (see tornTail) or
// zeros, or the segment is damaged. The seq in the CRC keeps a record that
// a reused file still holds from counting in another segment.
const recordHeader = 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(seq uint64) string { return fmt.Sprintf("log-%016x.seg", seq) }

func snapshotName(seq uint64) string { return fmt.Sprintf("snap-%016x.bin", seq) }

// listFiles returns the sequence numbers of the files in dir named with
// prefix and suffix, sorted.
func listFiles(d dir, prefix, suffix string) ([]uint64, error) {
	names, err := d.fs.ReadDir(d.path)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, de := range names {
		n := de.Name()
		if !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, suffix) {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(n, prefix), suffix), 16, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// segment is an open segment being written.
type segment struct {
	seq    uint64
	f      vfs.File
	off    int64 // where the next record goes
	size   int64
	noSync bool // Options.UnsafeAckBeforeSync
}

// createSegment makes segment seq in dir: a file of size bytes (that read
// as zeros), synced, named only once it is complete, so that a half-made
// segment never counts. It is sparse: measured on the machines fence was
// built on, a sync after a write into a hole costs no more than one after
// an overwrite of written zeros, and less than one after an append.
func createSegment(d dir, seq uint64, size int64) error {
	tmp := d.join(segmentName(seq) + ".tmp")
	f, err := d.fs.Create(tmp)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Truncate(size), f.Sync(), f.Close()); err != nil {
		d.fs.Remove(tmp)
		return err
	}
	if err := d.fs.Rename(tmp, d.join(segmentName(seq))); err != nil {
		return err
	}
	if err := writeLast(d, seq); err != nil {
		return err
	}
	return d.fs.SyncDir(d.path)
}

// openSegment opens segment seq of dir to write from off.
func openSegment(d dir, seq uint64, off int64) (*segment, error) {
	f, err := d.fs.OpenReadWrite(d.join(segmentName(seq)))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segment{seq: seq, f: f, off: off, size: fi.Size()}, nil
}

// clear makes sure that nothing of n bytes from off, written by a failed
// append, is in s: it punches them out and syncs, so that they read as
// zeros, the end of the log, at the next open. It needs no free space.
func (s *segment) clear(off, n int64) error {
	if err := s.f.Punch(off, n); err != nil {
		return fmt.Errorf("punch out %d bytes at %d of %s: %w", n, off, segmentName(s.seq), err)
	}
	if err := s.f.Datasync(); err != nil {
		return fmt.Errorf("sync %s: %w", segmentName(s.seq), err)
	}
	return nil
}

// fits reports whether a record with a payload of n bytes fits in s.
func (s *segment) fits(n int) bool { return s.off+recordHeader+int64(n) <= s.size }

// append writes a record with payload at the end of s and syncs it.
func (s *segment) append(buf, payload []byte) ([]byte, error) {
	buf = appendRecord(buf[:0], s.seq, payload)
	if _, err := s.f.WriteAt(buf, s.off); err != nil {
		return buf, err
	}
	if !s.noSync {
		if err := s.f.Datasync(); err != nil {
			return buf, err
		}
	}
	s.off += int64(len(buf))
	return buf, nil
}

func appendRecord(b []byte, seq uint64, payload []byte) []byte {
	var h [recordHeader]byte
	binary.BigEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint64(h[8:16], seq)
	crc := crc32.Update(0, castagnoli, h[8:16])
	crc = crc32.Update(crc, castagnoli, payload)
	binary.BigEndian.PutUint32(h[4:8], crc)
	b = append(b, h[:]...)
	return append(b, payload...)
}

// readSegment calls fn with the payload of every valid record of segment
// seq from off, and returns where the valid records end. It reads the file
// as a stream: a segment is not held in memory whole.
func readSegment(d dir, seq uint64, off int64, fn func(payload []byte) error) (int64, error) {
	f, err := d.fs.Open(d.join(segmentName(seq)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return scanRecords(bufio.NewReaderSize(f, 1<<20), seq, off, fn)
}

// scanRecords reads records from r, which is at offset off of segment seq,
// calls fn with each valid one's payload (valid until the next call), and
// returns the offset where the valid records end.
func scanRecords(r io.Reader, seq uint64, off int64, fn func(payload []byte) error) (int64, error) {
	var h [recordHeader]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return off, nil // the end of the segment
		}
		n := binary.BigEndian.Uint32(h[0:4])
		if n == 0 || binary.BigEndian.Uint64(h[8:16]) != seq || n > maxRecord {
			return off, nil
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return off, nil // cut short
		}
		crc := crc32.Update(0, castagnoli, h[8:16])
		if crc32.Update(crc, castagnoli, payload) != binary.BigEndian.Uint32(h[4:8]) {
			return off, nil
		}
		if err := fn(payload); err != nil {
			return off, err
		}
		off += recordHeader + int64(n)
	}
}

// maxRecord bounds a record's payload: a length beyond it is not a record
// (a segment is never that large), whatever the bytes say.
const maxRecord = 1 << 30

// dir is the journal's directory on its file system.
type dir struct {
	fs   vfs.FS
	path string
}

// join returns the path of name in d.
func (d dir) join(name string) string { return filepath.Join(d.path, name) }
