// Package bolt is the embedded engine of fence before the journal (package
// engine/journal), kept to read and import older data directories: one bbolt
// file holding the lock service's ledger (last token and current lease per resource)
// and the fenced key-value store, side by side, so that a grant raises the
// resource's fence in the same atomic commit that issues its token.
//
// Every change is fsynced before its method returns. Concurrent changes share
// commits: the group commit of package state takes every change waiting when
// a commit starts, and this package applies them in one bbolt transaction
// with one fsync, so throughput grows with concurrency instead of being
// capped at one fsync per request. The rules are package state's.
//
// It is not a general database: keys and values follow the limits of package fence.
package bolt
