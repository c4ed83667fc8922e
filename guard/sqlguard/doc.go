// Package sqlguard is the fencing guard for database/sql: it enforces
// fencing tokens inside the user's own PostgreSQL or MySQL/MariaDB database,
// in the same *sql.Tx as the user's own statements, with any driver (for
// PostgreSQL github.com/jackc/pgx/v5/stdlib or github.com/lib/pq, for MySQL
// and MariaDB github.com/go-sql-driver/mysql), so that sqlc, sqlx and GORM
// users, who hold a *sql.Tx and not a pgx.Tx, are fenced too. A holder that
// paused past its lease cannot overwrite what a newer holder wrote.
//
// Each resource has one row in a fence table (DDL in Dialect.Schema, created
// by Guard.CreateTable) holding its last fence. Guard.Run begins a
// transaction, checks and raises the resource's fence, runs the caller's
// statements, and commits; Guard.Check does the check-and-raise inside a
// transaction the caller already has. A token is accepted when it is >= the
// last fence (an equal token is a retry, or the same holder's next write),
// and the fence is then raised to it; a lower token returns
// *fence.FencedError, and the transaction must be rolled back (Run does), so
// nothing changes.
//
// The guarantee: per resource, the guarded transactions that commit do so in
// order of non-decreasing token. The check is one statement that takes the
// fence row's lock (an upsert: PostgreSQL's INSERT ... ON CONFLICT DO
// UPDATE, MySQL's INSERT ... ON DUPLICATE KEY UPDATE, on InnoDB) and compares
// against the row's latest committed version, whatever the transaction's
// snapshot; the lock is held until the transaction ends, so the guarded
// writers of one resource serialize: a writer with any token waits for the
// holder of the row, then sees its raise if it committed. The check and the
// user's writes commit or roll back together. An error that is not a
// *fence.FencedError (a lost connection, a deadlock, a context done during
// the commit) is never reported as fence.ErrFenced; when it comes from the
// commit, the transaction may or may not have committed.
//
// The cost: one more statement in the user's transaction (Run adds BEGIN and
// COMMIT only around fn's own statements), and one more, a read of the fence
// row (SELECT ... FOR UPDATE on MySQL), when the token is rejected. On MySQL
// that read is also needed when the first statement's rows affected do not
// prove acceptance: on a resource's first fence and when the token equals
// the fence (the same holder's second write); raising the fence never needs
// it. The fence row's lock serializes the writers of one resource for the
// length of their transactions: keep them short.
//
// What it is not: it is not a lock (it does not keep two holders from
// running at once, it keeps the stale one from committing). It protects only
// the statements run in the transactions that Run runs or that passed
// Check: writes made to the same data outside them (another *sql.Tx, the
// *sql.DB itself) are not fenced. Autocommit mode is not safe: without a
// transaction the check would commit alone and release the lock before the
// write, which is why Check needs a *sql.Tx. It does not know which tokens the
// lock service issued, it does not implement fence.Store, and it logs only
// through Rejections.
package sqlguard
