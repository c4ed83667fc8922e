// Package postgres is the fencing guard for PostgreSQL: it enforces fencing
// tokens inside the user's own database, in the same transaction as the
// user's own statements, so that a holder that paused past its lease cannot
// overwrite what a newer holder wrote.
//
// Each resource has one row in a fence table (DDL in Schema, created by
// CreateTable) holding its last fence. Guard.Run begins a transaction, checks
// and raises the resource's fence in one statement, runs the caller's
// statements, and commits; Guard.Check does the check-and-raise inside a
// transaction the caller already has. A token is accepted when it is >= the
// last fence (an equal token is a retry of the same holder), and the fence is
// then raised to it; a lower token returns *fence.FencedError and the
// transaction is rolled back, so nothing changes.
//
// The guarantee: per resource, the guarded transactions that commit do so in
// order of non-decreasing token. A transaction commits only if its token is
// >= the token of every guarded transaction that committed before it on that
// resource, because the check takes the fence row's lock and holds it until
// the transaction ends: a writer with any token waits for it, and then sees
// its raise. A rejected transaction changes nothing. An error that is not a
// *fence.FencedError (a lost connection, a context done during the commit) is
// never reported as fence.ErrFenced; when it comes from the commit, the
// transaction may or may not have committed.
//
// It is not a lock: it does not keep two holders from running at once, it
// keeps the stale one from committing. It protects only the statements of
// the transactions that Run runs or that passed Check: writes made to the
// same data by other paths are not fenced. It does not know which tokens the lock
// service issued (there is no fence.ErrTokenNotIssued here), it does not
// implement fence.Store, and it does not log.
package postgres
