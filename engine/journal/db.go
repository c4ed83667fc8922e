package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/journal/vfs"
	"github.com/fence-lock/fence/state"
)

// segmentBlock divides the size of every segment.
const segmentBlock = 4096

// Defaults of Options.
const (
	DefaultSegmentSize   = 64 << 20
	DefaultSnapshotEvery = 64 << 20
)

// Options tune a journal; the zero value of a field is its default.
type Options struct {
	// SegmentSize is the size of a log segment, rounded up to whole blocks
	// of 4 KiB. Default DefaultSegmentSize.
	SegmentSize int64
	// SnapshotEvery is how many bytes of log written since the last
	// snapshot start the next one; older segments are then removed.
	// Default DefaultSnapshotEvery.
	SnapshotEvery int64
	// Synced, if not nil, is told how far the log is durable: the
	// writer's segment and offset when the journal opens, then after
	// every record synced, and at every new segment. A test harness uses
	// it to drop what was written past it, as a power cut would. It runs
	// on the writer's goroutine.
	Synced func(segment string, off int64)
	// FS is the file system the journal runs on; nil, the default, is the
	// operating system's (vfs.Default). Tests put faults between the
	// journal and the disk with vfs.WithFaults.
	FS vfs.FS
	// UnsafeAckBeforeSync makes commits skip the log's fdatasync: a change
	// is acknowledged before it is durable, and a power cut loses it. It
	// exists only so that tests can show what the sync prevents: never
	// set it elsewhere.
	UnsafeAckBeforeSync bool
}

// stateDB is package state's DB: the operations' rules and the group
// commit over this engine. The alias embeds it as an unexported field, so
// that its methods are the DB's and the field is not.
type stateDB = state.DB

// DB is fence's durable state: in memory, with every commit appended to a
// log on disk and fdatasynced before it is applied (one sync per group
// commit), and snapshots that bound the log. It implements fence.Store and
// fence.Ledger with the rules and the group commit of package state, and is
// safe for concurrent use.
type DB struct {
	*stateDB
	e *engine
}

var (
	_ fence.Store  = (*DB)(nil)
	_ fence.Ledger = (*DB)(nil)
)

// Open opens or creates the journal in directory dir with the default
// options. It fails if another process has the directory open.
func Open(dir string) (*DB, error) { return OpenOptions(dir, Options{}) }

// OpenOptions is Open with options.
func OpenOptions(dir string, opts Options) (*DB, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	// Whole blocks, so that a segment cut short shows in its size.
	opts.SegmentSize = (opts.SegmentSize + segmentBlock - 1) / segmentBlock * segmentBlock
	if opts.SnapshotEvery <= 0 {
		opts.SnapshotEvery = DefaultSnapshotEvery
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	e, err := openEngine(dir, opts)
	if err != nil {
		return nil, err
	}
	db := &DB{e: e}
	db.stateDB = state.NewDB("journal", e)
	return db, nil
}

// Close finishes the changes already queued, waits for a snapshot in
// progress, and closes the journal. Later calls return fence.ErrClosed; a
// second Close returns when the first is done.
func (db *DB) Close() error {
	db.stateDB.Close()
	return db.e.close()
}

// Check reports whether the journal takes changes, for readiness probes:
// not once it has failed, nor while its last write to the log failed for
// want of space and there is still not enough free.
func (db *DB) Check() error {
	if err := db.Err(); err != nil {
		return err
	}
	return db.e.check()
}

// engine implements state.Engine, state.Viewer and state.Limiter.
type engine struct {
	d    dir
	opts Options
	lock io.Closer // the directory's lock, held while open

	mu        sync.RWMutex // guards the state and closed
	resources map[string]state.Resource
	entries   map[state.EntryID]state.Entry
	rev       fence.Rev
	closed    bool
	closeOnce sync.Once
	closeErr  error

	// The writer's state: used by Update, which the DB runs one at a time.
	seg       *segment
	payload   []byte
	record    []byte
	sinceSnap int64

	spareWG sync.WaitGroup // the spare segment being made
	snapWG  sync.WaitGroup // the snapshot being written

	bgMu     sync.Mutex // guards what follows: the background work's results
	spare    uint64     // a made segment not used yet, 0 if none
	spareErr error
	snapping bool
	snapN    uint64 // the number of the last snapshot
	snapErr  error
	writeErr *writeError // the failure of the last append, nil if it succeeded
}

func openEngine(path string, opts Options) (*engine, error) {
	d := dir{fs: opts.FS, path: path}
	if err := d.fs.MkdirAll(path); err != nil {
		return nil, fmt.Errorf("journal: create data directory: %w", err)
	}
	lock, err := d.fs.Lock(d.join("LOCK"))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("journal: open %s: in use by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: lock: %w", path, err)
	}
	e := &engine{d: d, opts: opts, lock: lock,
		resources: map[string]state.Resource{}, entries: map[state.EntryID]state.Entry{}}
	if err := e.recover(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	return e, nil
}

// recover loads the newest snapshot, replays the log after it, and goes on
// writing at the end of the log's last record. The only damage it mends is
// the one a crash leaves: a record cut short at the very end of the log,
// never acknowledged, which it cuts (see tornTail). Anything else (a record
// that does not check out with more after it, a segment cut short or
// missing) is refused with a *CorruptError: replaying around it would lose
// acknowledged changes and issue tokens again.
func (e *engine) recover() error {
	names, err := e.d.fs.ReadDir(e.d.path)
	if err != nil {
		return err
	}
	for _, de := range names {
		if strings.HasSuffix(de.Name(), ".tmp") {
			e.d.fs.Remove(e.d.join(de.Name())) // half made before a crash
		}
	}
	snaps, err := listFiles(e.d, "snap-", ".bin")
	if err != nil {
		return err
	}
	pos := position{seq: 1} // the log starts with segment 1
	if len(snaps) > 0 {
		e.snapN = snaps[len(snaps)-1]
		if pos, err = readSnapshot(e.d, e.snapN, e); err != nil {
			if errors.Is(err, ErrCorrupt) {
				return &CorruptError{File: snapshotName(e.snapN), Offset: -1, Reason: err.Error()}
			}
			return fmt.Errorf("snapshot %s: %w", snapshotName(e.snapN), err)
		}
	}
	live, last, strict, err := e.logSegments(pos)
	if err != nil {
		return err
	}
	writer := pos // where the next record goes
	replayed := int64(0)
	for i, seq := range live {
		off := int64(0)
		if seq == pos.seq {
			off = int64(pos.off)
		}
		end, err := readSegment(e.d, seq, off, func(p []byte) error { return decodeOps(p, e) })
		if err != nil {
			return &CorruptError{File: segmentName(seq), Offset: end, Reason: err.Error()}
		}
		replayed += end - off
		if end > off || seq == pos.seq {
			writer = position{seq: seq, off: uint64(end)}
		}
		torn, err := e.checkTail(seq, end, live[i+1:], strict)
		if err != nil {
			return err
		}
		if torn && strict {
			break // the segments after it hold nothing
		}
	}
	if len(live) == 0 {
		if err := createSegment(e.d, pos.seq, e.opts.SegmentSize); err != nil {
			return fmt.Errorf("new log segment: %w", err)
		}
		last = pos.seq
	}
	if e.seg, err = openSegment(e.d, writer.seq, int64(writer.off)); err != nil {
		return err
	}
	e.seg.noSync = e.opts.UnsafeAckBeforeSync
	// What was replayed may be in the page cache only (written whole, not
	// yet synced, when the last process died): sync it before serving it.
	if !e.opts.UnsafeAckBeforeSync {
		if err := e.seg.f.Datasync(); err != nil {
			return fmt.Errorf("sync %s: %w", segmentName(writer.seq), err)
		}
	}
	if e.opts.Synced != nil {
		e.opts.Synced(segmentName(writer.seq), int64(writer.off))
	}
	// The segment after the writer's, if one was made, is the spare; any
	// after it hold nothing (checked above) and go.
	spare := writer.seq + 1
	if last > spare || !strict {
		if err := writeLast(e.d, max(writer.seq, min(last, spare))); err != nil {
			return fmt.Errorf("record the log's last segment: %w", err)
		}
	}
	for _, seq := range live {
		if seq > spare {
			e.d.fs.Remove(e.d.join(segmentName(seq)))
		}
	}
	if err := e.d.fs.SyncDir(e.d.path); err != nil {
		return err
	}
	if slices.Contains(live, spare) {
		e.spare = spare
	} else {
		e.makeSpare(spare)
	}
	e.sinceSnap = replayed
	if e.sinceSnap >= e.opts.SnapshotEvery {
		e.snapshot()
	}
	return nil
}

// logSegments returns the segments of the log from the snapshot at pos on,
// refusing a log with one missing, and the newest segment lastName names.
// strict is false for a journal written before lastName was kept, whose
// segments before the last may end with a record cut short by a crash.
func (e *engine) logSegments(pos position) (live []uint64, last uint64, strict bool, err error) {
	segs, err := listFiles(e.d, "log-", ".seg")
	if err != nil {
		return nil, 0, false, err
	}
	last, strict, err = readLast(e.d)
	if err != nil {
		return nil, 0, false, err
	}
	want := pos.seq
	for _, seq := range segs {
		if seq < pos.seq {
			continue // before the snapshot: left over by a crash during the removal
		}
		if seq != want {
			return nil, 0, false, &CorruptError{File: segmentName(want), Missing: true, Offset: -1, Reason: fmt.Sprintf("the log goes on in %s", segmentName(seq))}
		}
		live = append(live, seq)
		want++
	}
	switch {
	case strict && want <= last:
		return nil, 0, false, &CorruptError{File: segmentName(want), Missing: true, Offset: -1, Reason: fmt.Sprintf("the log was written up to %s (%s)", segmentName(last), lastName)}
	case len(live) == 0 && pos.off > 0:
		return nil, 0, false, &CorruptError{File: segmentName(pos.seq), Missing: true, Offset: -1, Reason: fmt.Sprintf("the snapshot %s goes on in it at offset %d", snapshotName(e.snapN), pos.off)}
	}
	if len(live) > 0 {
		last = max(last, live[len(live)-1])
	}
	return live, last, strict, nil
}

// checkTail checks what follows the valid records of segment seq, from
// end: nothing but zeros, or a record a crash cut short (see tornTail),
// which it cuts, so that the log reads on from end. With strict, the later
// segments must hold nothing after such a record. Anything else is a
// *CorruptError.
func (e *engine) checkTail(seq uint64, end int64, later []uint64, strict bool) (torn bool, err error) {
	f, err := e.d.fs.OpenReadWrite(e.d.join(segmentName(seq)))
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	first, last, err := nonZero(f, end, fi.Size())
	if err != nil {
		return false, err
	}
	if first < 0 {
		if fi.Size()%segmentBlock != 0 {
			return false, &CorruptError{File: segmentName(seq), Offset: fi.Size(),
				Reason: fmt.Sprintf("the file is %d bytes, not whole blocks of %d as segments are made: it was cut short", fi.Size(), segmentBlock)}
		}
		return false, nil
	}
	torn, why, err := tornTail(f, seq, end, first, last, fi.Size())
	if err != nil {
		return false, err
	}
	if !torn {
		return false, &CorruptError{File: segmentName(seq), Offset: end, Reason: why}
	}
	if strict {
		for _, next := range later {
			g, err := e.d.fs.Open(e.d.join(segmentName(next)))
			if err != nil {
				return false, err
			}
			gi, err := g.Stat()
			var data int64 = -1
			if err == nil {
				data, _, err = nonZero(g, 0, gi.Size())
			}
			g.Close()
			if err != nil {
				return false, err
			}
			if data >= 0 {
				return false, &CorruptError{File: segmentName(seq), Offset: end,
					Reason: fmt.Sprintf("a record that does not check out, and the log goes on after it in %s", segmentName(next))}
			}
		}
	}
	if err := zeroRange(f, end, fi.Size()-end); err != nil {
		return false, fmt.Errorf("cut the record a crash left short in %s at %d: %w", segmentName(seq), end, err)
	}
	return true, f.Datasync()
}

// The engine applies replayed and committed changes to its state.
func (e *engine) setResource(name string, r state.Resource) { e.resources[name] = r }

func (e *engine) setEntry(id state.EntryID, en state.Entry) { e.entries[id] = en }

func (e *engine) deleteEntry(id state.EntryID) { delete(e.entries, id) }

func (e *engine) setRev(rev fence.Rev) { e.rev = rev }

// makeSpare makes segment seq in the background, for the next roll.
func (e *engine) makeSpare(seq uint64) {
	e.spareWG.Add(1)
	go func() {
		defer e.spareWG.Done()
		err := createSegment(e.d, seq, e.opts.SegmentSize)
		e.bgMu.Lock()
		defer e.bgMu.Unlock()
		if err != nil {
			e.spareErr = err
			return
		}
		e.spare = seq
	}()
}

// Limits implements state.Limiter: a batch fits in a segment.
func (e *engine) Limits() (maxChanges, maxBytes int) {
	return state.DefaultMaxBatch, int(e.opts.SegmentSize / 4)
}

// Update implements state.Engine: fn runs on an overlay of the state; its
// changes are appended to the log and synced, then applied. A failed write
// or sync (a full disk) may have left the record on disk, to be replayed at
// the next open, so the record is punched out of the log and the log synced:
// then the change was certainly not applied (an error wrapping
// state.ErrNotApplied and fence.ErrClosed: 503 unavailable), the journal
// goes on taking changes, which succeed again once there is space, and
// Check reports the failure until one does. Only if that fails too is the
// outcome unknown, and the DB stops taking changes.
func (e *engine) Update(ctx context.Context, fn func(tx state.Tx) error) error {
	if e.isClosed() {
		return fmt.Errorf("%w: %w", state.ErrNotApplied, fence.ErrClosed)
	}
	o := state.NewOverlay(base{e})
	if err := fn(o); err != nil {
		return err
	}
	c, err := o.Changes()
	if err != nil {
		return err
	}
	if c.Empty() {
		return nil // reads and rejections only
	}
	e.payload = encodeChanges(e.payload[:0], c)
	if !e.seg.fits(len(e.payload)) {
		if int64(len(e.payload)+recordHeader) > e.opts.SegmentSize {
			return fmt.Errorf("journal: a commit of %d bytes does not fit in a log segment of %d: %w: %w",
				len(e.payload), e.opts.SegmentSize, state.ErrNotApplied, fence.ErrTooLarge)
		}
		if err := e.roll(); err != nil {
			// Nothing of the record was written.
			werr := &writeError{fmt.Errorf("start a new log segment: %w", err), int64(len(e.payload) + recordHeader)}
			e.setWriteErr(werr)
			return werr
		}
	}
	if e.record, err = e.seg.append(e.record, e.payload); err != nil {
		if !outOfSpace(err) {
			// An I/O error: after a failed sync the kernel may have
			// dropped pages it had reported written, so the journal
			// cannot vouch for what it wrote before either. It stops.
			return fmt.Errorf("journal: write the log: %w", err)
		}
		if cerr := e.seg.clear(e.seg.off, int64(len(e.record))); cerr != nil {
			return fmt.Errorf("journal: write the log: %w (and the partial record could not be removed: %v)", err, cerr)
		}
		werr := &writeError{err, int64(len(e.record))}
		e.setWriteErr(werr)
		return werr
	}
	e.setWriteErr(nil)
	if e.opts.Synced != nil && !e.opts.UnsafeAckBeforeSync {
		e.opts.Synced(segmentName(e.seg.seq), e.seg.off)
	}
	e.mu.Lock()
	maps.Copy(e.resources, c.Resources)
	for id, en := range c.Entries {
		if en == nil {
			delete(e.entries, id)
		} else {
			e.entries[id] = *en
		}
	}
	if c.RevSet {
		e.rev = c.Rev
	}
	e.mu.Unlock()
	e.sinceSnap += int64(len(e.record))
	if e.sinceSnap >= e.opts.SnapshotEvery {
		e.snapshot()
	}
	return nil
}

// roll moves the writer to the next segment.
func (e *engine) roll() error {
	next := e.seg.seq + 1
	e.spareWG.Wait() // the spare, if it is being made
	e.bgMu.Lock()
	spare, spareErr := e.spare, e.spareErr
	e.spare, e.spareErr = 0, nil
	e.bgMu.Unlock()
	if spare != next {
		if err := createSegment(e.d, next, e.opts.SegmentSize); err != nil {
			return fmt.Errorf("new log segment (after %v): %w", spareErr, err)
		}
	}
	seg, err := openSegment(e.d, next, 0)
	if err != nil {
		return err
	}
	e.seg.f.Close()
	e.seg = seg
	e.seg.noSync = e.opts.UnsafeAckBeforeSync
	if e.opts.Synced != nil && !e.opts.UnsafeAckBeforeSync {
		e.opts.Synced(segmentName(seg.seq), 0)
	}
	e.makeSpare(next + 1)
	return nil
}

// snapshot writes the state as of the end of the log in the background,
// then removes the segments and snapshots it replaces. Commits go on
// meanwhile: the maps are copied (not their values) under the read lock.
func (e *engine) snapshot() {
	e.bgMu.Lock()
	if e.snapping {
		e.bgMu.Unlock()
		return
	}
	e.snapping = true
	e.snapN++
	n := e.snapN
	e.bgMu.Unlock()
	pos := position{seq: e.seg.seq, off: uint64(e.seg.off)}
	e.mu.RLock()
	resources, entries, rev := maps.Clone(e.resources), maps.Clone(e.entries), e.rev
	e.mu.RUnlock()
	e.sinceSnap = 0
	e.snapWG.Add(1)
	go func() {
		defer e.snapWG.Done()
		err := writeSnapshot(e.d, n, pos, resources, entries, rev)
		if err == nil {
			err = e.removeBefore(n, pos.seq)
		}
		e.bgMu.Lock()
		defer e.bgMu.Unlock()
		e.snapping = false
		if err != nil {
			e.snapErr = err // the log goes on; the next snapshot retries
		}
	}()
}

// removeBefore removes the snapshots before n and the segments before seq.
func (e *engine) removeBefore(n, seq uint64) error {
	snaps, err := listFiles(e.d, "snap-", ".bin")
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if s < n {
			e.d.fs.Remove(e.d.join(snapshotName(s)))
		}
	}
	segs, err := listFiles(e.d, "log-", ".seg")
	if err != nil {
		return err
	}
	for _, s := range segs {
		if s < seq {
			e.d.fs.Remove(e.d.join(segmentName(s)))
		}
	}
	return e.d.fs.SyncDir(e.d.path)
}

func (e *engine) isClosed() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.closed
}

func (e *engine) check() error {
	if e.isClosed() {
		return fence.ErrClosed
	}
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	if e.writeErr == nil {
		return nil
	}
	// Ready again once the record that did not fit would, with room to
	// spare, so that a server kept from writes while it is not ready can
	// become ready again: the next change then finds the space.
	if free, err := e.d.fs.FreeSpace(e.d.path); err == nil && free >= e.writeErr.size+spaceMargin {
		e.writeErr = nil
		return nil
	}
	return e.writeErr
}

// spaceMargin is the free space, beyond a record that did not fit, that
// makes Check report the journal ready again.
const spaceMargin = 1 << 20

// writeError is a write to the log that failed for want of space and was
// removed from it: the change was certainly not applied.
type writeError struct {
	err  error
	size int64 // of the record that did not fit
}

// outOfSpace reports whether err means the file system is full (or the
// user's quota), which freeing space cures.
func outOfSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func (e *writeError) Error() string {
	return "writing the log failed, so the change was not applied; changes succeed again once the write does (free space if the disk is full): " + e.err.Error()
}

func (e *writeError) Unwrap() []error { return []error{e.err, state.ErrNotApplied, fence.ErrClosed} }

// setWriteErr records the failure of the last append, or its success (nil).
func (e *engine) setWriteErr(err *writeError) {
	e.bgMu.Lock()
	e.writeErr = err
	e.bgMu.Unlock()
}

func (e *engine) close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		e.spareWG.Wait()
		e.snapWG.Wait()
		e.closeErr = errors.Join(e.seg.f.Close(), e.lock.Close())
	})
	return e.closeErr
}

// View implements state.Viewer: fn reads the state under the read lock.
func (e *engine) View(ctx context.Context, fn func(tx state.Tx) error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return fence.ErrClosed
	}
	return fn(view{e})
}

// base is the engine's state as an Overlay reads it, under the read lock.
type base struct{ e *engine }

func (b base) Resource(name string) (state.Resource, error) {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.resources[name], nil
}

func (b base) Entry(resource, key string) (state.Entry, bool, error) {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	en, ok := b.e.entries[state.EntryID{Resource: resource, Key: key}]
	return en, ok, nil
}

func (b base) Rev() (fence.Rev, error) {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.rev, nil
}

func (b base) Resources(fn func(name string, r state.Resource) error) error {
	b.e.mu.RLock()
	all := maps.Clone(b.e.resources)
	b.e.mu.RUnlock()
	for name, r := range all {
		if err := fn(name, r); err != nil {
			return err
		}
	}
	return nil
}

// view is the read-only Tx of View; the caller holds the read lock.
type view struct{ e *engine }

var errReadOnly = errors.New("journal: write in a read-only transaction")

func (v view) Resource(name string) (state.Resource, error) { return v.e.resources[name], nil }

func (v view) SetResource(string, state.Resource) error { return errReadOnly }

func (v view) Entry(resource, key string) (state.Entry, bool, error) {
	en, ok := v.e.entries[state.EntryID{Resource: resource, Key: key}]
	return en, ok, nil
}

func (v view) SetEntry(string, string, state.Entry) error { return errReadOnly }

func (v view) DeleteEntry(string, string) error { return errReadOnly }

func (v view) Rev() (fence.Rev, error) { return v.e.rev, nil }

func (v view) SetRev(fence.Rev) error { return errReadOnly }

func (v view) Resources(fn func(name string, r state.Resource) error) error {
	for name, r := range v.e.resources {
		if err := fn(name, r); err != nil {
			return err
		}
	}
	return nil
}

// Export calls resource for every resource with state and entry for every
// entry, from one consistent view, and returns the store revision: what
// fence migrate copies into a shared store. Values passed to entry are the
// journal's: the callee must not change them.
func (db *DB) Export(ctx context.Context, resource func(name string, r state.Resource) error, entry func(resource, key string, e state.Entry) error) (fence.Rev, error) {
	var rev fence.Rev
	err := db.e.View(ctx, func(tx state.Tx) error {
		rev = db.e.rev
		for name, r := range db.e.resources {
			if err := resource(name, r); err != nil {
				return err
			}
		}
		for id, en := range db.e.entries {
			if err := entry(id.Resource, id.Key, en); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("journal: export: %w", err)
	}
	return rev, nil
}

// Import copies everything from src (another engine's export, such as
// bolt's) into a new journal in dir, which must not exist yet, as one
// snapshot: it is written in a temporary directory next to dir, synced, and
// renamed to dir at the end, so that an import cut short leaves no journal
// behind.
func Import(path string, src func(ctx context.Context, resource func(string, state.Resource) error, entry func(string, string, state.Entry) error) (fence.Rev, error)) error {
	files := vfs.Default
	tmp := dir{fs: files, path: path + ".import"}
	if err := files.RemoveAll(tmp.path); err != nil {
		return fmt.Errorf("journal: import: %w", err)
	}
	if err := files.MkdirAll(tmp.path); err != nil {
		return fmt.Errorf("journal: import: %w", err)
	}
	resources := map[string]state.Resource{}
	entries := map[state.EntryID]state.Entry{}
	rev, err := src(context.Background(), func(name string, r state.Resource) error {
		resources[name] = r
		return nil
	}, func(resource, key string, e state.Entry) error {
		e.Value = slices.Clone(e.Value)
		entries[state.EntryID{Resource: resource, Key: key}] = e
		return nil
	})
	if err == nil {
		// The log starts after it, at segment 1; recover makes the segment.
		err = writeSnapshot(tmp, 1, position{seq: 1}, resources, entries, rev)
	}
	if err == nil {
		err = files.Rename(tmp.path, path)
	}
	if err != nil {
		files.RemoveAll(tmp.path)
		return fmt.Errorf("journal: import: %w", err)
	}
	return files.SyncDir(filepath.Dir(path))
}
