package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is the database a Guard uses: usually a *pgxpool.Pool. A *pgx.Conn works
// too, but is not safe for concurrent use. With a pgx.Tx, everything happens
// inside that transaction (Run in a savepoint), and commits only with it.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// querier is what the fence statements need: a DB or a pgx.Tx.
type querier interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Guard enforces fencing tokens in a PostgreSQL database, in a fence table
// (see Schema). It is safe for concurrent use once configured.
//
// Run, Check and Claim return *fence.FencedError when the token is lower than
// the resource's last fence; then nothing changed. They return an error
// wrapping fence.ErrInvalidToken for a token out of 1..fence.MaxToken, and one
// wrapping fence.ErrBadRequest for an invalid resource name. Any other error
// is the database's (wrapped): it is never reported as fence.ErrFenced, and
// when it comes from Run's commit (other than a *pgconn.PgError or
// pgx.ErrTxCommitRollback, which mean the transaction was rolled back), or
// from Claim, the outcome is unknown. An accepted write is as durable as the
// database's commit (synchronous_commit).
type Guard struct {
	// Table is the fence table: a lowercase name, optionally schema-qualified
	// ("app.fences"), quoted in every statement. Default: DefaultTable. Set it
	// before the first call.
	Table string

	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write and claim (Run, Check, Claim)
	// requires a valid sequencer for its resource and token in ctx
	// (fence.WithSequencer), checked before anything is sent to the database;
	// otherwise it returns an error wrapping fence.ErrInvalidSequencer and
	// changes nothing. A valid sequencer never makes a stale token acceptable.
	// Set it before the first call.
	Keys fence.KeySet

	// Rejections, if not nil, logs and counts every write the guard
	// refuses (stale token, missing or forged sequencer, bad token or
	// name), as fence's own storage does. Set it before the first call.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): Run and
	// Check with token 0 on one of them run without the fence, neither
	// checked nor raised. Set it before the first call.
	Unfenced fence.Unfenced

	db DB
}

// NewGuard returns a Guard that uses db and the fence table DefaultTable.
func NewGuard(db DB) *Guard {
	return &Guard{Table: DefaultTable, db: db}
}

// CreateTable creates the Guard's fence table if it does not exist, with the
// same definition as Schema.
func (g *Guard) CreateTable(ctx context.Context) error {
	table, err := quoteTable(g.Table)
	if err != nil {
		return err
	}
	if _, err := g.db.Exec(ctx, createTable(table)); err != nil {
		return fmt.Errorf("postgres: create table %s: %w", g.Table, err)
	}
	return nil
}

// Run runs fn in a new transaction that first checks and raises resource's
// fence to token, and commits it if fn returns nil. If the token is stale,
// fn is not called and Run returns *fence.FencedError. If fn returns an
// error, the transaction, the fence's raise included, is rolled back and Run
// returns fn's error as it is. fn must neither commit nor roll back tx.
//
// The fence row stays locked until the transaction ends, so the writers of
// one resource run one at a time: keep fn short. The transaction has the
// database's default isolation level; for another, begin the transaction
// yourself and call Check.
func (g *Guard) Run(ctx context.Context, resource string, token fence.Token, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return g.Rejections.Observe(ctx, "run", resource, token, g.run(ctx, resource, token, fn))
}

func (g *Guard) run(ctx context.Context, resource string, token fence.Token, fn func(ctx context.Context, tx pgx.Tx) error) error {
	unfenced := token == 0 && g.Unfenced.Has(resource)
	if unfenced {
		token = 1 // validated as a token below, never used
	}
	table, err := g.prepare(resource, token)
	if err != nil {
		return fmt.Errorf("postgres: run %q: %w", resource, err)
	}
	if !unfenced {
		if err := g.Keys.Check(ctx, resource, token); err != nil {
			return fmt.Errorf("postgres: run %q: %w", resource, err)
		}
	}
	tx, err := g.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: run %q: begin: %w", resource, err)
	}
	// Unless committed (then it does nothing), roll back, also if fn panics.
	// If the rollback fails, pgx closes the connection, which rolls back too.
	defer tx.Rollback(ctx)
	if !unfenced {
		if err := raise(ctx, tx, table, resource, token); err != nil {
			return wrap("run", resource, err)
		}
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: run %q: commit: %w", resource, err)
	}
	return nil
}

// Check checks and raises resource's fence to token inside tx, a transaction
// of the caller, who commits it. It returns *fence.FencedError if the token
// is stale: the caller must then roll tx back (tx is still usable), and the
// fence is unchanged even if it does not.
//
// Call it before the transaction's other statements: from then on the fence
// row is locked until tx ends, so the statements that follow see every write
// committed by earlier holders. In a REPEATABLE READ or SERIALIZABLE
// transaction, a fence raised concurrently since tx's snapshot returns a
// serialization failure (SQLSTATE 40001) instead: roll back and retry.
func (g *Guard) Check(ctx context.Context, tx pgx.Tx, resource string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "check", resource, token, g.check(ctx, tx, resource, token))
}

func (g *Guard) check(ctx context.Context, tx pgx.Tx, resource string, token fence.Token) error {
	if token == 0 && g.Unfenced.Has(resource) {
		if err := fence.ValidateResource(resource); err != nil {
			return fmt.Errorf("postgres: check %q: %w", resource, err)
		}
		return nil // best effort: no fence
	}
	table, err := g.prepare(resource, token)
	if err != nil {
		return fmt.Errorf("postgres: check %q: %w", resource, err)
	}
	if err := g.Keys.Check(ctx, resource, token); err != nil {
		return fmt.Errorf("postgres: check %q: %w", resource, err)
	}
	return wrap("check", resource, raise(ctx, tx, table, resource, token))
}

// Claim raises resource's fence to token, in a transaction of its own (one
// statement), without another write: from then on, writes with a lower token
// are rejected. It returns *fence.FencedError if the token is stale; then
// nothing changed. After another error, the fence may or may not have been raised.
func (g *Guard) Claim(ctx context.Context, resource string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "claim", resource, token, g.claim(ctx, resource, token))
}

func (g *Guard) claim(ctx context.Context, resource string, token fence.Token) error {
	table, err := g.prepare(resource, token)
	if err != nil {
		return fmt.Errorf("postgres: claim %q: %w", resource, err)
	}
	if err := g.Keys.Check(ctx, resource, token); err != nil {
		return fmt.Errorf("postgres: claim %q: %w", resource, err)
	}
	return wrap("claim", resource, raise(ctx, g.db, table, resource, token))
}

// Fence returns resource's last fence, 0 if it was never fenced.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	table, err := g.prepare(resource, 1)
	if err != nil {
		return 0, fmt.Errorf("postgres: fence %q: %w", resource, err)
	}
	last, err := lastFence(ctx, g.db, table, resource)
	if err != nil {
		return 0, fmt.Errorf("postgres: fence %q: %w", resource, err)
	}
	return last, nil
}

// prepare validates the arguments and returns the quoted table name.
func (g *Guard) prepare(resource string, token fence.Token) (table string, err error) {
	if err := fence.ValidateResource(resource); err != nil {
		return "", err
	}
	if !token.Valid() {
		return "", fmt.Errorf("%w: %d", fence.ErrInvalidToken, token)
	}
	return quoteTable(g.Table)
}

// raise checks and raises the fence in one statement, which locks the fence
// row (inserted, updated or not) until the transaction ends. Only when it
// changed no row, the token is stale, and a second query reads the fence
// for the error.
func raise(ctx context.Context, q querier, table, resource string, token fence.Token) error {
	tag, err := q.Exec(ctx, `INSERT INTO `+table+` AS f (resource, last_fence) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET last_fence = EXCLUDED.last_fence
WHERE f.last_fence <= EXCLUDED.last_fence`, resource, int64(token))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// Rejected. In a transaction, the row is locked by the statement above,
	// and this statement's snapshot (read committed: a newer one; repeatable
	// read: the same, since a newer version would have failed above) sees the
	// version that rejected the token.
	last, err := lastFence(ctx, q, table, resource)
	if err != nil {
		return fmt.Errorf("reading the fence after a rejection: %w", err)
	}
	if last <= token {
		// Only outside a transaction (Claim), when someone deletes the row in between.
		return fmt.Errorf("token %d was rejected, but the fence is now %d", token, last)
	}
	return &fence.FencedError{Resource: resource, Presented: token, LastFence: last}
}

func lastFence(ctx context.Context, q querier, table, resource string) (fence.Token, error) {
	var last int64
	err := q.QueryRow(ctx, `SELECT last_fence FROM `+table+` WHERE resource = $1`, resource).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fence.Token(last), nil
}

// wrap adds the package, operation and resource to err, but returns a
// *fence.FencedError as it is: it names the resource already.
func wrap(op, resource string, err error) error {
	var fe *fence.FencedError
	if err == nil || errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("postgres: %s %q: %w", op, resource, err)
}
