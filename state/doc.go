// Package state is the heart of fence: the rules of its state, written once
// for every engine that stores it. The token check of fenced storage
// (LastFence <= token <= LastToken), the conditions of writes and
// transactions, and the ledger of grants are functions over a small
// transactional interface, Tx; DB runs them on an Engine and implements
// fence.Store and fence.Ledger, so that every engine answers exactly alike.
// Each operation is in one place, its rule and then its DB method: those
// of fence.Store in storage.go, those of fence.Ledger in ledger.go; the
// vocabulary they share (Resource, Entry, Tx, the token check) in rules.go,
// the group commit in db.go.
//
// DB batches the changes of concurrent callers into one engine transaction
// (group commit): one fsync for the embedded store, one Txn for etcd, one
// transaction for PostgreSQL. An engine provides one atomic, durable
// transaction (Engine) and, if it can read committed state linearizably
// without one, reads (Viewer):
//
//   - the journal, memory (and bolt, kept to import older data) are engines
//     on one machine;
//   - LeaderEngine is the engine of a leader on a replicated store (etcd,
//     PostgreSQL): the state in memory for one writer epoch, each batch
//     committed to a Remote only if that epoch is still current, reads
//     confirmed by the same epoch check.
//
// A store has a token floor (FloorName, RaiseFloor): every resource reads
// as if its last token and its fence were at the floor at least, so that
// raising it after a restore fences every older token on every resource,
// even those the store has no record of.
//
// Every rule checks everything before it changes anything, so a rejection
// (an error for which IsRejection is true) leaves the Tx untouched and the
// engine may commit the other work of the same transaction. Any other error
// may leave partial changes: the engine must roll the transaction back.
//
// It is not a database: it has no query language, and names, values and
// tokens follow the limits of package fence.
package state
