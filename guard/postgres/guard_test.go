package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/postgres"
	"github.com/fence-lock/fence/guard/reject"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestGuard(t *testing.T) {
	testDB(t) // skip or fail once, not in every subtest
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded { return newGuarded(t) })
}

// guarded adapts a Guard to fencetest.Guarded: a data table of
// (resource, key, value) rows, written in Run.
type guarded struct {
	*postgres.Guard
	db   *pgxpool.Pool
	data string // the data table
}

// newGuarded returns a Guard on a fence table and a data table in a new
// schema, so that tests do not see each other's resources.
func newGuarded(t *testing.T) *guarded {
	t.Helper()
	db := testDB(t)
	schema := newSchema(t)
	g := postgres.NewGuard(db)
	g.Table = schema + ".fences"
	if err := g.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := &guarded{Guard: g, db: db, data: schema + ".data"}
	if _, err := db.Exec(t.Context(), `CREATE TABLE `+a.data+` (resource text, key text, value bytea NOT NULL, PRIMARY KEY (resource, key))`); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	return a.Run(t.Context(), resource, token, func(ctx context.Context, tx pgx.Tx) error {
		return a.apply(ctx, tx, resource, writes)
	})
}

// apply writes key to value in tx (a nil value deletes the key).
func (a *guarded) apply(ctx context.Context, tx pgx.Tx, resource string, writes map[string][]byte) error {
	for key, value := range writes {
		var err error
		if value == nil {
			_, err = tx.Exec(ctx, `DELETE FROM `+a.data+` WHERE resource = $1 AND key = $2`, resource, key)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO `+a.data+` (resource, key, value) VALUES ($1, $2, $3)
ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value`, resource, key, value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	t.Helper()
	var value []byte
	err := a.db.QueryRow(t.Context(), `SELECT value FROM `+a.data+` WHERE resource = $1 AND key = $2`, resource, key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return value, true
}

func (a *guarded) Fence(t *testing.T, resource string) fence.Token {
	t.Helper()
	f, err := a.Guard.Fence(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func kv(key, value string) map[string][]byte { return map[string][]byte{key: []byte(value)} }

func TestGuard_Check(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		a := newGuarded(t)
		tx, err := a.db.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		if err := a.Check(t.Context(), tx, "r", 5); err != nil {
			t.Fatal(err)
		}
		if err := a.apply(t.Context(), tx, "r", kv("k", "v")); err != nil {
			t.Fatal(err)
		}
		fencetest.WantState(t, a, "r", 0, "k", "") // not committed yet
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		fencetest.WantState(t, a, "r", 5, "k", "v") // committed together
	})

	t.Run("Stale", func(t *testing.T) {
		a := newGuarded(t)
		if err := a.Write(t, "r", 10, kv("k", "B")); err != nil {
			t.Fatal(err)
		}
		tx, err := a.db.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		if err := a.apply(t.Context(), tx, "r", kv("k", "A")); err != nil {
			t.Fatal(err)
		}
		fencetest.WantFenced(t, a.Check(t.Context(), tx, "r", 9), "r", 9, 10)
		var one int
		if err := tx.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("tx unusable after a stale Check: %v", err)
		}
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		fencetest.WantState(t, a, "r", 10, "k", "B")
	})

	t.Run("RepeatableRead", func(t *testing.T) {
		a := newGuarded(t)
		tx, err := a.db.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		if err := a.Check(t.Context(), tx, "r", 3); err != nil {
			t.Fatal(err)
		}
		fencetest.WantFenced(t, a.Check(t.Context(), tx, "r", 2), "r", 2, 3) // sees the transaction's own raise
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		fencetest.WantState(t, a, "r", 3, "k", "")
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		a := newGuarded(t)
		tx, err := a.db.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context())
		for _, token := range []fence.Token{0, fence.MaxToken + 1} {
			if err := a.Check(t.Context(), tx, "r", token); !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("Check(token %d): err=%v, want ErrInvalidToken", token, err)
			}
		}
	})
}

func TestGuard_Run(t *testing.T) {
	errBoom := errors.New("boom")

	t.Run("FnErrorRollsBack", func(t *testing.T) {
		a := newGuarded(t)
		if err := a.Write(t, "r", 5, kv("k", "1")); err != nil {
			t.Fatal(err)
		}
		err := a.Run(t.Context(), "r", 9, func(ctx context.Context, tx pgx.Tx) error {
			if err := a.apply(ctx, tx, "r", kv("k", "2")); err != nil {
				return err
			}
			return errBoom
		})
		if err != errBoom {
			t.Fatalf("err=%v, want fn's error as it is", err)
		}
		fencetest.WantState(t, a, "r", 5, "k", "1") // the fence's raise was rolled back too
	})

	t.Run("FnSwallowsStatementError", func(t *testing.T) {
		a := newGuarded(t)
		err := a.Run(t.Context(), "r", 5, func(ctx context.Context, tx pgx.Tx) error {
			tx.Exec(ctx, "SELECT 1/0") // aborts the transaction; the error is ignored
			return nil
		})
		if err == nil || errors.Is(err, fence.ErrFenced) || !errors.Is(err, pgx.ErrTxCommitRollback) {
			t.Fatalf("err=%v, want pgx.ErrTxCommitRollback", err)
		}
		fencetest.WantState(t, a, "r", 0, "k", "")
	})

	t.Run("FnPanicRollsBack", func(t *testing.T) {
		a := newGuarded(t)
		func() {
			defer func() {
				if r := recover(); r != errBoom {
					t.Fatalf("recovered %v, want fn's panic", r)
				}
			}()
			a.Run(t.Context(), "r", 5, func(ctx context.Context, tx pgx.Tx) error {
				if err := a.apply(ctx, tx, "r", kv("k", "v")); err != nil {
					return err
				}
				panic(errBoom)
			})
		}()
		if n := a.db.Stat().AcquiredConns(); n != 0 {
			t.Fatalf("%d connections still acquired after the panic", n)
		}
		fencetest.WantState(t, a, "r", 0, "k", "")
	})

	t.Run("StaleSkipsFn", func(t *testing.T) {
		a := newGuarded(t)
		if err := a.Claim(t.Context(), "r", 8); err != nil {
			t.Fatal(err)
		}
		err := a.Run(t.Context(), "r", 7, func(ctx context.Context, tx pgx.Tx) error {
			t.Error("fn called with a stale token")
			return nil
		})
		fencetest.WantFenced(t, err, "r", 7, 8)
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		a := newGuarded(t)
		for _, token := range []fence.Token{0, fence.MaxToken + 1} {
			err := a.Run(t.Context(), "r", token, func(ctx context.Context, tx pgx.Tx) error {
				t.Error("fn called with an invalid token")
				return nil
			})
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("Run(token %d): err=%v, want ErrInvalidToken", token, err)
			}
		}
		if err := a.Run(t.Context(), "r", fence.MaxToken, func(context.Context, pgx.Tx) error { return nil }); err != nil {
			t.Fatalf("Run(MaxToken): %v", err)
		}
		fencetest.WantState(t, a, "r", fence.MaxToken, "k", "")
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		a := newGuarded(t)
		for _, resource := range []string{"", "a\nb", string([]byte{0xff})} {
			if err := a.Run(t.Context(), resource, 1, func(context.Context, pgx.Tx) error { return nil }); !errors.Is(err, fence.ErrBadRequest) {
				t.Fatalf("Run(%q): err=%v, want ErrBadRequest", resource, err)
			}
		}
	})
}

func TestGuard_Claim(t *testing.T) {
	a := newGuarded(t)
	for _, token := range []fence.Token{3, 3, 4} {
		if err := a.Claim(t.Context(), "r", token); err != nil {
			t.Fatalf("Claim(%d): %v", token, err)
		}
	}
	fencetest.WantFenced(t, a.Claim(t.Context(), "r", 2), "r", 2, 4)
	fencetest.WantFenced(t, a.Write(t, "r", 3, kv("k", "zombie")), "r", 3, 4)
	fencetest.WantState(t, a, "r", 4, "k", "")
	if err := a.Claim(t.Context(), "r", 0); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("Claim(0): err=%v, want ErrInvalidToken", err)
	}
}

// TestGuard_RowLock checks that a writer waits for the transaction that holds
// the resource's fence row, and then decides on the fence that transaction
// left: its own, if it committed.
func TestGuard_RowLock(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     fence.Token // the fence before, 0 for a new resource
		held, next fence.Token // the token of the holding transaction, and of the waiting Run
		commit     bool        // whether the holder commits or rolls back
		wantFence  fence.Token
	}{
		{"HigherAfterCommit", 5, 6, 7, true, 7},
		{"LowerAfterCommit", 5, 10, 7, true, 10},
		{"LowerAfterCommitNewResource", 0, 10, 7, true, 10},
		{"LowerAfterRollback", 5, 10, 7, false, 7},
		{"LowerAfterRollbackNewResource", 0, 10, 7, false, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newGuarded(t)
			if tc.before != 0 {
				if err := a.Claim(t.Context(), "r", tc.before); err != nil {
					t.Fatal(err)
				}
			}
			holder, err := a.db.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(t.Context())
			if err := a.Check(t.Context(), holder, "r", tc.held); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- a.Write(t, "r", tc.next, kv("k", "next")) }()
			waitForLockWaiter(t, a.db, done)
			if tc.commit {
				err = holder.Commit(t.Context())
			} else {
				err = holder.Rollback(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
			err = <-done
			if tc.next >= tc.wantFence {
				if err != nil {
					t.Fatalf("Run(%d): %v", tc.next, err)
				}
				fencetest.WantState(t, a, "r", tc.wantFence, "k", "next")
				return
			}
			fencetest.WantFenced(t, err, "r", tc.next, tc.wantFence)
			fencetest.WantState(t, a, "r", tc.wantFence, "k", "")
		})
	}
}

// TestGuard_Context checks that a context done during the transaction
// returns the context's error, not ErrFenced, and commits nothing.
func TestGuard_Context(t *testing.T) {
	t.Run("CancelledInFn", func(t *testing.T) {
		a := newGuarded(t)
		ctx, cancel := context.WithCancel(t.Context())
		err := a.Run(ctx, "r", 5, func(ctx context.Context, tx pgx.Tx) error {
			cancel()
			return a.apply(ctx, tx, "r", kv("k", "v"))
		})
		if errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err=%v, want context.Canceled", err)
		}
		fencetest.WantState(t, a, "r", 0, "k", "")
	})

	t.Run("CancelledBeforeCommit", func(t *testing.T) {
		a := newGuarded(t)
		ctx, cancel := context.WithCancel(t.Context())
		err := a.Run(ctx, "r", 5, func(ctx context.Context, tx pgx.Tx) error {
			err := a.apply(ctx, tx, "r", kv("k", "v"))
			cancel()
			return err
		})
		if errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err=%v, want context.Canceled", err)
		}
		fencetest.WantState(t, a, "r", 0, "k", "")
	})

	t.Run("DeadlineWaitingForFenceRow", func(t *testing.T) {
		a := newGuarded(t)
		if err := a.Claim(t.Context(), "r", 5); err != nil {
			t.Fatal(err)
		}
		holder, err := a.db.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback(t.Context())
		if err := a.Check(t.Context(), holder, "r", 20); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err = a.Run(ctx, "r", 10, func(context.Context, pgx.Tx) error {
			t.Error("fn called while the fence row was locked")
			return nil
		})
		if err == nil || errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err=%v, want context.DeadlineExceeded", err)
		}
		if err := holder.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		fencetest.WantState(t, a, "r", 5, "k", "")
	})
}

func TestCreateTable(t *testing.T) {
	db := testDB(t)
	for range 2 { // IF NOT EXISTS
		if err := postgres.CreateTable(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	g := postgres.NewGuard(db) // DefaultTable
	if err := g.Claim(t.Context(), "TestCreateTable", 2); err != nil {
		t.Fatal(err)
	}
	var last int64
	if err := db.QueryRow(t.Context(), `SELECT last_fence FROM `+postgres.DefaultTable+` WHERE resource = 'TestCreateTable'`).Scan(&last); err != nil || last != 2 {
		t.Fatalf("last_fence=%d (err %v), want 2", last, err)
	}
	a := newGuarded(t) // Guard.CreateTable, with the same definition
	for _, table := range []string{postgres.DefaultTable, a.Table} {
		if _, err := db.Exec(t.Context(), `INSERT INTO `+table+` VALUES ('zero', 0)`); err == nil {
			t.Fatalf("%s accepted a fence of 0", table)
		}
	}
}

func TestGuard_Table(t *testing.T) {
	g := postgres.NewGuard(nil) // an invalid name fails before any I/O
	for _, name := range []string{"", "Fences", "a.b.c", ".a", "a.", "1a", "a-b", `a"b`, "a b", "a;drop table x", "é",
		"a23456789012345678901234567890123456789012345678901234567890abcd"} {
		g.Table = name
		if _, err := g.Fence(t.Context(), "r"); err == nil {
			t.Errorf("Table %q: no error", name)
		}
		if err := g.CreateTable(t.Context()); err == nil {
			t.Errorf("Table %q: CreateTable: no error", name)
		}
	}
}

// waitForLockWaiter returns once a session of the server waits for a lock,
// and fails if done receives first: the writer did not wait.
func waitForLockWaiter(t *testing.T, db *pgxpool.Pool, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("Run did not wait for the fence row's lock: err=%v", err)
		default:
		}
		var waiting int
		if err := db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session waits for the fence row's lock after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGuard_Rejections(t *testing.T) {
	a := newGuarded(t)
	fencetest.TestGuardRejections(t, "postgres", func(r *reject.Recorder) { a.Rejections = r }, a.Claim)
}

func TestGuard_Unfenced(t *testing.T) {
	fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
		a := newGuarded(t)
		a.Unfenced = u
		return a
	})
}
