package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// The embedded journal's files, as the faults below damage them (package
// journal's layout: log-<seq>.seg segments, snap-<seq>.bin snapshots, and
// log.last).
const (
	journalDir  = "journal"
	syncLogName = "sync.log" // in the data directory, beside journal/: fence serve --test-sync-log
	sector      = 512
)

// journalArgs are the flags of the embedded server for the journal's
// faults: the sync log that lose-unsynced reads, and with UnsafeJournal
// a journal that acknowledges before it syncs.
func (c *Config) journalArgs(dataDir string) []string {
	var args []string
	if slices.Contains(c.Faults, FaultLoseUnsynced) {
		args = append(args, "--test-sync-log", filepath.Join(dataDir, syncLogName))
	}
	if c.UnsafeJournal {
		args = append(args, "--unsafe-ack-before-sync")
	}
	return args
}

// restarted points the proxies and the storage at the server after a
// restart, and counts it.
func (r *run) restarted() {
	for _, p := range r.proxies[:1] {
		p.SetUpstream(r.server.addr)
	}
	r.target = r.server.addr
	if !r.cfg.Unsafe {
		r.storeURL = "http://" + r.server.addr
	}
	r.restarts++
}

// waitAcked waits, for at most a TTL, until the workload has had a few
// operations answered since the server last started: what the negative
// controls must lose.
func (r *run) waitAcked(ctx context.Context, since int) {
	deadline := time.Now().Add(r.cfg.TTL)
	for time.Now().Before(deadline) && ctx.Err() == nil && r.acked() < since+3 {
		time.Sleep(5 * time.Millisecond)
	}
}

// acked returns the operations of the history that succeeded.
func (r *run) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nops - r.nerrors
}

// bitflip kills the server, flips one byte of its journal (a log segment
// where records are, or the newest snapshot) and starts it again. The
// server must start with everything acknowledged intact (the checkers
// say), or refuse to start naming the damaged file. Then the flip is
// undone, as a restore of a backup taken at the kill would, and the
// server starts. With UnsafeJournal the log is cut at the damage instead,
// as a journal that takes damage for the end of its log did, without a
// bump: the checkers must find the acknowledged changes lost and the
// tokens issued again.
func (r *run) bitflip(ctx context.Context) {
	r.waitAcked(ctx, r.opsAtStart)
	start := r.now()
	r.server.kill()
	dir := filepath.Join(r.dataDir, journalDir)
	file, off, err := flipByte(dir, r.rng.IntN, !r.cfg.UnsafeJournal)
	if err != nil {
		r.cfg.Log.Error("bitflip: no byte to flip", "error", err)
	}
	detail := fmt.Sprintf("kill -9, flip byte %d of %s", off, file)
	if err = r.server.start(); err != nil {
		said := r.server.said()
		if !strings.Contains(said, file) {
			r.badRefusals++
			r.cfg.Log.Error("bitflip: the server refused to start without naming the damaged file", "file", file, "said", said)
		}
		detail += "; refused to start, naming it"
		if r.cfg.UnsafeJournal {
			at, cerr := cutAtDamage(dir, file, said)
			detail += fmt.Sprintf("; unsafe: the log cut at %d, no bump", at)
			err = cerr
		} else {
			detail += "; the flip undone (a restore of a backup taken at the kill)"
			_, _, err = flipAt(filepath.Join(dir, file), off)
		}
		if err == nil {
			err = r.server.start()
		}
	} else {
		detail += "; started"
	}
	if err != nil {
		r.cfg.Log.Error("bitflip: restarting the server failed", "error", err)
		return
	}
	r.restarted()
	r.opsAtStart = r.acked()
	r.addFault(history.Fault{Kind: FaultBitflip, Client: -1, Start: start, End: r.now(), Detail: detail})
}

// loseUnsynced kills the server and drops what its journal wrote past the
// last sync (the sync log says where), as a power cut would: the write in
// flight keeps a few of its first sectors or none, and what follows reads
// as zeros. Nothing acknowledged may be lost. With UnsafeJournal, whose
// server acknowledges before it syncs, the checkers must find losses.
func (r *run) loseUnsynced(ctx context.Context) {
	r.waitAcked(ctx, r.opsAtStart)
	start := r.now()
	r.server.kill()
	keep := r.rng.IntN(4) // sectors of the write in flight that reached the disk
	seg, off, err := dropUnsynced(filepath.Join(r.dataDir, journalDir), filepath.Join(r.dataDir, syncLogName), keep)
	if err != nil {
		r.cfg.Log.Error("lose-unsynced", "error", err)
	}
	if err := r.server.start(); err != nil {
		r.cfg.Log.Error("lose-unsynced: restarting the server failed", "error", err)
		return
	}
	r.restarted()
	r.opsAtStart = r.acked()
	r.addFault(history.Fault{Kind: FaultLoseUnsynced, Client: -1, Start: start, End: r.now(),
		Detail: fmt.Sprintf("kill -9, everything past %s at %d lost but %d sectors", seg, off, keep)})
}

// flipByte flips one byte of the journal in dir: in the written part of a
// log segment (the one holding the most), or, with snapshots and one time
// in three, of the newest snapshot. It returns the file's name and the
// byte's offset.
func flipByte(dir string, intN func(int) int, snapshots bool) (string, int64, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, err
	}
	var segs, snaps []string
	for _, de := range names {
		switch n := de.Name(); {
		case strings.HasPrefix(n, "log-") && strings.HasSuffix(n, ".seg"):
			segs = append(segs, n)
		case strings.HasPrefix(n, "snap-") && strings.HasSuffix(n, ".bin"):
			snaps = append(snaps, n)
		}
	}
	slices.Sort(snaps)
	if snapshots && len(snaps) > 0 && intN(3) == 0 {
		name := snaps[len(snaps)-1]
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() == 0 {
			return "", 0, fmt.Errorf("snapshot %s: %v", name, err)
		}
		off := int64(intN(int(fi.Size())))
		_, _, err = flipAt(filepath.Join(dir, name), off)
		return name, off, err
	}
	best, written := "", int64(0)
	for _, name := range segs {
		end, err := writtenEnd(filepath.Join(dir, name))
		if err != nil {
			return "", 0, err
		}
		if end > written {
			best, written = name, end
		}
	}
	if best == "" {
		return "", 0, errors.New("no log segment holds records")
	}
	// In the first half of what was written, so that records follow the
	// damaged one.
	off := int64(intN(int(max(written/2, 1))))
	_, _, err = flipAt(filepath.Join(dir, best), off)
	return best, off, err
}

// writtenEnd returns the offset after the last non-zero byte of file.
func writtenEnd(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return int64(end), nil
}

// flipAt flips the low bit of the byte at off of file, and returns the
// byte before and after.
func flipAt(file string, off int64) (before, after byte, err error) {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		return 0, 0, err
	}
	before = b[0]
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		return 0, 0, err
	}
	return before, b[0], f.Sync()
}

// damagedAt finds the offset in the server's refusal: "FILE is damaged at
// offset N".
var damagedAt = regexp.MustCompile(`(log-[0-9a-f]+\.seg) is damaged at offset ([0-9]+)`)

// cutAtDamage does what a journal that takes damage for the end of its log
// did: it zeroes the segment from the damage on, removes the segments after
// it and log.last, and so serves without what followed.
func cutAtDamage(dir, file, said string) (int64, error) {
	m := damagedAt.FindStringSubmatch(said)
	if m == nil {
		return 0, fmt.Errorf("no damaged segment and offset in %q", said)
	}
	at, _ := strconv.ParseInt(m[2], 10, 64)
	if err := zeroFrom(filepath.Join(dir, m[1]), at); err != nil {
		return at, err
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return at, err
	}
	for _, de := range names {
		if n := de.Name(); strings.HasPrefix(n, "log-") && strings.HasSuffix(n, ".seg") && n > m[1] {
			os.Remove(filepath.Join(dir, n))
		}
	}
	os.Remove(filepath.Join(dir, "log.last"))
	return at, nil
}

// dropUnsynced zeroes what the journal in dir wrote past the last durable
// point its sync log names, but keep sectors of the write in flight, and
// every segment after it.
func dropUnsynced(dir, syncLog string, keep int) (string, int64, error) {
	f, err := os.Open(syncLog)
	if err != nil {
		return "", 0, err
	}
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Count(sc.Text(), " ") == 1 {
			last = sc.Text()
		}
	}
	f.Close()
	seg, offText, ok := strings.Cut(last, " ")
	off, err := strconv.ParseInt(offText, 10, 64)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("sync log %s: last line %q", syncLog, last)
	}
	from := max(off, (off/sector+int64(keep))*sector)
	if err := zeroFrom(filepath.Join(dir, seg), from); err != nil {
		return seg, off, err
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return seg, off, err
	}
	for _, de := range names {
		if n := de.Name(); strings.HasPrefix(n, "log-") && strings.HasSuffix(n, ".seg") && n > seg {
			if err := zeroFrom(filepath.Join(dir, n), 0); err != nil {
				return seg, off, err
			}
		}
	}
	return seg, off, nil
}

// zeroFrom makes file read as zeros from off to its end, its size kept.
func zeroFrom(file string, off int64) error {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if off >= fi.Size() {
		return nil
	}
	if err := errors.Join(f.Truncate(off), f.Truncate(fi.Size())); err != nil {
		return err
	}
	return f.Sync()
}
