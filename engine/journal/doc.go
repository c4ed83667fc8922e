// Package journal is fence's embedded durable state: the state in memory,
// and every commit appended to a log on local disk and fdatasynced before
// it is applied and acknowledged, with snapshots that bound the log.
//
// The log is made of segments, files created at their full size, so that a
// commit never grows a file; a commit is one record (its changes, a length,
// a CRC-32C and the segment's number) written at the end of the current
// segment, then one fdatasync. Concurrent changes share commits: the group
// commit of package state takes every change waiting when a commit starts.
// When enough log has been written since the last snapshot, the state is
// written to a new snapshot in the background (its maps copied, not its
// values), and the segments and snapshots before it are removed, so the
// directory does not grow under a steady workload.
//
// Opening replays the newest snapshot and the log after it, and goes on
// writing where the log's last record ends, so that restarts add no
// segments. The one damage a crash leaves, the last record cut short (a
// write never synced, never acknowledged), is cut. Anything else (a record
// that does not check out with more after it or written whole, a segment
// cut short or missing, the last segments removed, a snapshot that does not
// check out) is refused with a *CorruptError that names the file and the
// offset: replaying around it would lose acknowledged changes and issue
// tokens again.
//
// Every call an open journal makes of the file system goes through
// Options.FS (package vfs; the operating system's by default), so that tests
// put faults between the journal and the disk: a sync out of space, an I/O
// error. Import, which writes a journal before any is open, uses the
// operating system's.
//
// It was chosen over pebble and bbolt by measuring the three in one run
// (package internal/tools/enginebench): it pays one fdatasync per group commit
// and little else. Its cost is memory: every resource and every value is in
// memory while the server runs. It is not a general database: keys and
// values follow the limits of package fence.
package journal
