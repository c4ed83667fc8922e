package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
)

// Guard enforces fencing tokens in a database reached through database/sql,
// in a fence table (see Dialect.Schema). It is safe for concurrent use once
// configured.
//
// Run, Check and Claim return *fence.FencedError when the token is lower than
// the resource's last fence; then nothing changed. They return an error
// wrapping fence.ErrInvalidToken for a token out of 1..fence.MaxToken, one
// wrapping fence.ErrBadRequest for an invalid resource name, and one wrapping
// fence.ErrInvalidSequencer when Keys is set and ctx carries no valid
// sequencer. Any other error is the database's (wrapped), or a
// misconfiguration's (an unknown Dialect, a nil *sql.DB, an invalid Table):
// it is never reported as fence.ErrFenced, and when it comes from a commit
// (Run's, Claim's), the outcome is unknown. An accepted write is as durable
// as the database's commit.
type Guard struct {
	// Table is the fence table: a lowercase name, optionally qualified by a
	// schema (PostgreSQL) or a database (MySQL), "app.fences", quoted in
	// every statement. Default: DefaultTable. Set it before the first call.
	Table string

	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write and claim (Run, Check, Claim)
	// requires a valid sequencer for its resource and token in ctx
	// (fence.WithSequencer), checked before anything is sent to the database;
	// otherwise it returns an error wrapping fence.ErrInvalidSequencer and
	// changes nothing. A valid sequencer never makes a stale token acceptable.
	// Set it before the first call.
	Keys fence.KeySet

	// Rejections logs and counts the writes the Guard refuses (stale token,
	// invalid sequencer, invalid token or resource); nil records nothing. An
	// error of Run's fn is not the Guard's refusal and is not recorded. Set it
	// before the first call.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): Run and
	// Check with token 0 on one of them run without the fence, neither
	// checked nor raised. Set it before the first call.
	Unfenced fence.Unfenced

	db      *sql.DB
	dialect Dialect
}

// New returns a Guard that uses db, speaks dialect (Postgres or MySQL), and
// keeps its fences in the table DefaultTable. It checks nothing: a nil db or
// an unknown dialect makes every method return an error.
func New(db *sql.DB, dialect Dialect) *Guard {
	return &Guard{Table: DefaultTable, db: db, dialect: dialect}
}

// Dialect returns the Guard's dialect.
func (g *Guard) Dialect() Dialect { return g.dialect }

// CreateTable creates the Guard's fence table if it does not exist, with the
// definition of the dialect's Schema.
func (g *Guard) CreateTable(ctx context.Context) error {
	table, err := g.table()
	if err == nil && g.db == nil {
		err = errors.New("nil *sql.DB")
	}
	if err != nil {
		return fmt.Errorf("sqlguard: create table %s: %w", g.Table, err)
	}
	if _, err := g.db.ExecContext(ctx, g.dialect.createTable(table)); err != nil {
		return fmt.Errorf("sqlguard: create table %s: %w", g.Table, err)
	}
	return nil
}

// Run runs fn in a new transaction (db.BeginTx with the database's default
// isolation level) that first checks and raises resource's fence to token,
// and commits it if fn returns nil. If the token is stale, fn is not called
// and Run returns *fence.FencedError. If fn returns an error, the
// transaction, the fence's raise included, is rolled back and Run returns
// fn's error as it is; so it does if fn panics, and the panic goes on. fn
// must neither commit nor roll back tx, and must use tx (not the *sql.DB)
// for the statements to be fenced.
//
// The fence row stays locked until the transaction ends, so the writers of
// one resource run one at a time: keep fn short. For another isolation
// level, begin the transaction yourself and call Check.
func (g *Guard) Run(ctx context.Context, resource string, token fence.Token, fn func(ctx context.Context, tx *sql.Tx) error) error {
	fromFn, err := g.run(ctx, "run", resource, token, fn)
	if fromFn {
		return err // fn's, as it is: not the Guard's refusal
	}
	return g.Rejections.Observe(ctx, "run", resource, token, err)
}

// run is Run, and Claim with an fn that does nothing; op names it in errors.
func (g *Guard) run(ctx context.Context, op, resource string, token fence.Token, fn func(ctx context.Context, tx *sql.Tx) error) (fromFn bool, err error) {
	unfenced := op == "run" && token == 0 && g.Unfenced.Has(resource)
	if unfenced {
		token = 1 // validated as a token below, never used
	}
	table, err := g.prepare(resource, token)
	if err == nil && !unfenced {
		err = g.Keys.Check(ctx, resource, token) // before anything is sent
	}
	if err != nil {
		return false, fmt.Errorf("sqlguard: %s %q: %w", op, resource, err)
	}
	if fn == nil {
		return false, fmt.Errorf("sqlguard: %s %q: nil fn", op, resource)
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqlguard: %s %q: begin: %w", op, resource, err)
	}
	// Unless committed (then it does nothing), roll back, also if fn panics.
	// database/sql discards the connection if the rollback fails.
	defer tx.Rollback()
	if !unfenced {
		if err := g.dialect.check(ctx, tx, table, resource, token); err != nil {
			return false, wrap(op, resource, err)
		}
	}
	if err := fn(ctx, tx); err != nil {
		return true, err
	}
	if err := tx.Commit(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, sql.ErrTxDone) {
			// database/sql rolled the transaction back when ctx ended,
			// before Commit ran: say why.
			err = fmt.Errorf("%w (the transaction was rolled back)", ctxErr)
		}
		return false, fmt.Errorf("sqlguard: %s %q: commit: %w", op, resource, err)
	}
	return false, nil
}

// Check checks and raises resource's fence to token inside tx, a transaction
// of the caller, who commits it. It returns *fence.FencedError if the token
// is stale: the caller must then roll tx back, and the fence is unchanged
// even if it does not. tx must belong to a database of the Guard's dialect;
// the Guard's *sql.DB is not used.
//
// Call it before the transaction's other statements: from then on the fence
// row is locked until tx ends, so the statements that follow see every write
// committed by earlier holders. PostgreSQL, REPEATABLE READ or SERIALIZABLE:
// a fence raised concurrently since tx's snapshot returns a serialization
// failure (SQLSTATE 40001) instead: roll back and retry. MySQL, REPEATABLE
// READ (InnoDB's default): the check reads the fence's latest version
// whatever tx's snapshot, but plain SELECTs before Check fix a snapshot that
// can predate the last holder's commit; with MariaDB's
// innodb_snapshot_isolation=ON, such a transaction gets error 1020 (record
// changed since last read) instead: roll back and retry.
func (g *Guard) Check(ctx context.Context, tx *sql.Tx, resource string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "check", resource, token, g.checkTx(ctx, tx, resource, token))
}

func (g *Guard) checkTx(ctx context.Context, tx *sql.Tx, resource string, token fence.Token) error {
	if tx == nil {
		return fmt.Errorf("sqlguard: check %q: nil *sql.Tx", resource)
	}
	if token == 0 && g.Unfenced.Has(resource) {
		if _, err := g.validate(resource, 1); err != nil {
			return fmt.Errorf("sqlguard: check %q: %w", resource, err)
		}
		return nil // best effort: no fence
	}
	table, err := g.validate(resource, token)
	if err == nil {
		err = g.Keys.Check(ctx, resource, token) // before anything is sent
	}
	if err != nil {
		return fmt.Errorf("sqlguard: check %q: %w", resource, err)
	}
	return wrap("check", resource, g.dialect.check(ctx, tx, table, resource, token))
}

// Claim raises resource's fence to token without another write, in a
// transaction of its own that it commits: from then on, writes with a lower
// token are rejected. It returns *fence.FencedError if the token is stale;
// then nothing changed. After another error, the fence may or may not have
// been raised.
func (g *Guard) Claim(ctx context.Context, resource string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "claim", resource, token, g.claim(ctx, resource, token))
}

func (g *Guard) claim(ctx context.Context, resource string, token fence.Token) error {
	_, err := g.run(ctx, "claim", resource, token, func(context.Context, *sql.Tx) error { return nil })
	return err
}

// Fence returns resource's last committed fence, 0 if it was never fenced.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	table, err := g.prepare(resource, 1)
	if err != nil {
		return 0, fmt.Errorf("sqlguard: fence %q: %w", resource, err)
	}
	last, ok, err := scanFence(g.db.QueryRowContext(ctx, g.dialect.read(table), resource))
	if err != nil {
		return 0, fmt.Errorf("sqlguard: fence %q: %w", resource, err)
	}
	if !ok {
		return 0, nil
	}
	return last, nil
}

// prepare validates the arguments and the Guard, and returns the quoted
// table name.
func (g *Guard) prepare(resource string, token fence.Token) (string, error) {
	table, err := g.validate(resource, token)
	if err == nil && g.db == nil {
		err = errors.New("nil *sql.DB")
	}
	return table, err
}

// validate is prepare for Check, which uses the caller's transaction and
// not the Guard's *sql.DB.
func (g *Guard) validate(resource string, token fence.Token) (string, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return "", err
	}
	if !token.Valid() {
		return "", fmt.Errorf("%w: %d", fence.ErrInvalidToken, token)
	}
	return g.table()
}

func (g *Guard) table() (string, error) {
	return g.dialect.quoteTable(g.Table)
}

// check checks and raises the fence inside tx: one statement that locks the
// fence row (inserted, updated or not) until tx ends, and, only when its
// rows affected do not prove acceptance (see raise), a locking read of the
// fence, which decides: equal to token, accepted (the statement inserted it,
// or the fence was token already: a retry, or the holder's next write);
// higher, rejected. Since tx holds the row's lock, nobody changes the fence
// between the two statements.
func (d Dialect) check(ctx context.Context, tx *sql.Tx, table, resource string, token fence.Token) error {
	query, args, accepted := d.raise(table, resource, int64(token))
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("rows affected: %w", err)
	}
	if n == accepted {
		return nil
	}
	last, ok, err := scanFence(tx.QueryRowContext(ctx, d.lockedRead(table), resource))
	if err != nil {
		return fmt.Errorf("reading the fence after the check: %w", err)
	}
	switch {
	case ok && last > token:
		return &fence.FencedError{Resource: resource, Presented: token, LastFence: last}
	case ok && last == token && d == MySQL:
		return nil
	}
	// Not in a transaction that holds the row's lock: someone deleted the row,
	// or the driver reports rows affected unlike the dialect says.
	return fmt.Errorf("token %d: %d rows affected, but the fence is now %d (present %v)", token, n, last, ok)
}

// scanFence scans a fence; ok is false when there is no row.
func scanFence(row *sql.Row) (last fence.Token, ok bool, err error) {
	var v int64
	err = row.Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if v < 1 {
		return 0, false, fmt.Errorf("invalid fence %d in the fence table", v)
	}
	return fence.Token(v), true, nil
}

// wrap adds the package, operation and resource to err, but returns a
// *fence.FencedError as it is: it names the resource already.
func wrap(op, resource string, err error) error {
	var fe *fence.FencedError
	if err == nil || errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("sqlguard: %s %q: %w", op, resource, err)
}
