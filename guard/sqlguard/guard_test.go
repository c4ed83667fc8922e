package sqlguard_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/sqlguard"
)

func TestGuard(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded { return newGuarded(t, b) })
	})
}

// guarded adapts a Guard to fencetest.Guarded: a data table of
// (resource, k, value) rows, written in Run.
type guarded struct {
	*sqlguard.Guard
	b    *backend
	db   *sql.DB
	ns   string
	data string // the data table
}

// newGuarded returns a Guard on a fence table and a data table in a new
// namespace, so that tests do not see each other's resources.
func newGuarded(t testing.TB, b *backend) *guarded {
	t.Helper()
	ns := b.namespace(t)
	g := sqlguard.New(b.db, b.dialect)
	g.Table = ns + ".fences"
	if err := g.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := &guarded{Guard: g, b: b, db: b.db, ns: ns, data: ns + ".data"}
	ddl := `CREATE TABLE ` + a.data + ` (resource text, k text, value bytea NOT NULL, PRIMARY KEY (resource, k))`
	if b.dialect == sqlguard.MySQL {
		ddl = `CREATE TABLE ` + a.data + ` (resource varbinary(512), k varbinary(512), value blob NOT NULL, PRIMARY KEY (resource, k)) ENGINE=InnoDB`
	}
	if _, err := b.db.ExecContext(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	return a.Run(t.Context(), resource, token, func(ctx context.Context, tx *sql.Tx) error {
		return a.apply(ctx, tx, resource, writes)
	})
}

// apply writes key to value in tx (a nil value deletes the key).
func (a *guarded) apply(ctx context.Context, tx *sql.Tx, resource string, writes map[string][]byte) error {
	p := a.b.ph
	upsert := `INSERT INTO ` + a.data + ` (resource, k, value) VALUES ($1, $2, $3) ON CONFLICT (resource, k) DO UPDATE SET value = EXCLUDED.value`
	if a.b.dialect == sqlguard.MySQL {
		upsert = `INSERT INTO ` + a.data + ` (resource, k, value) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`
	}
	for key, value := range writes {
		var err error
		if value == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM `+a.data+` WHERE resource = `+p(1)+` AND k = `+p(2), resource, key)
		} else {
			_, err = tx.ExecContext(ctx, upsert, resource, key, value)
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
	err := a.db.QueryRowContext(context.Background(), `SELECT value FROM `+a.data+` WHERE resource = `+a.b.ph(1)+` AND k = `+a.b.ph(2), resource, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return value, true
}

func (a *guarded) Fence(t *testing.T, resource string) fence.Token {
	t.Helper()
	f, err := a.Guard.Fence(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func kv(key, value string) map[string][]byte { return map[string][]byte{key: []byte(value)} }

func TestGuard_Sequencer(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		a := newGuarded(t, b)
		write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
			if claim {
				return a.Claim(ctx, resource, token)
			}
			return a.Run(ctx, resource, token, func(ctx context.Context, tx *sql.Tx) error {
				return a.apply(ctx, tx, resource, kv("k", "v"))
			})
		}
		read := func(resource string) bool { _, ok := a.Read(t, resource, "k"); return ok }
		fenceOf := func(resource string) fence.Token { return a.Fence(t, resource) }
		fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { a.Keys = ks }, write, read, fenceOf)

		// Check, inside a caller's transaction, requires it too.
		a.Keys = fence.KeySet{}
		tx, err := a.db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := a.Check(t.Context(), tx, "acct", fence.MaxToken); !errors.Is(err, fence.ErrInvalidSequencer) {
			t.Fatalf("Check without a sequencer: %v, want ErrInvalidSequencer", err)
		}
		tx.Rollback()
		if f := a.Fence(t, "acct"); f != 7 {
			t.Fatalf("fence %d, want 7", f)
		}
	})
}

func TestGuard_Check(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		t.Run("OK", func(t *testing.T) {
			a := newGuarded(t, b)
			tx, err := a.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := a.Check(t.Context(), tx, "r", 5); err != nil {
				t.Fatal(err)
			}
			if err := a.Check(t.Context(), tx, "r", 5); err != nil { // an equal token, again
				t.Fatal(err)
			}
			if err := a.apply(t.Context(), tx, "r", kv("k", "v")); err != nil {
				t.Fatal(err)
			}
			fencetest.WantState(t, a, "r", 0, "k", "") // not committed yet
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			fencetest.WantState(t, a, "r", 5, "k", "v") // committed together
		})

		t.Run("Stale", func(t *testing.T) {
			a := newGuarded(t, b)
			if err := a.Write(t, "r", 10, kv("k", "B")); err != nil {
				t.Fatal(err)
			}
			tx, err := a.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := a.apply(t.Context(), tx, "r", kv("k", "A")); err != nil {
				t.Fatal(err)
			}
			fencetest.WantFenced(t, a.Check(t.Context(), tx, "r", 9), "r", 9, 10)
			var one int
			if err := tx.QueryRowContext(t.Context(), "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("tx unusable after a stale Check: %v", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			fencetest.WantState(t, a, "r", 10, "k", "B")
		})

		// A REPEATABLE READ snapshot taken before another holder raised the
		// fence does not let a stale token pass.
		t.Run("RepeatableReadOldSnapshot", func(t *testing.T) {
			a := newGuarded(t, b)
			if err := a.Claim(t.Context(), "r", 5); err != nil {
				t.Fatal(err)
			}
			tx, err := a.db.BeginTx(t.Context(), &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var f int64 // fixes the snapshot: fence 5
			if err := tx.QueryRowContext(t.Context(), `SELECT last_fence FROM `+a.Table+` WHERE resource = `+b.ph(1), "r").Scan(&f); err != nil || f != 5 {
				t.Fatalf("snapshot read: %d, %v", f, err)
			}
			if err := a.Claim(t.Context(), "r", 8); err != nil { // committed after the snapshot
				t.Fatal(err)
			}
			err = a.Check(t.Context(), tx, "r", 6)
			if err == nil {
				t.Fatal("a stale token passed on an old snapshot")
			}
			var fe *fence.FencedError
			if b.dialect == sqlguard.MySQL && !errors.As(err, &fe) {
				t.Fatalf("err=%v, want *fence.FencedError (InnoDB reads the latest version)", err)
			}
			tx.Rollback()
			fencetest.WantState(t, a, "r", 8, "k", "")
		})

		t.Run("ErrInvalidToken", func(t *testing.T) {
			a := newGuarded(t, b)
			tx, err := a.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for _, token := range []fence.Token{0, fence.MaxToken + 1} {
				if err := a.Check(t.Context(), tx, "r", token); !errors.Is(err, fence.ErrInvalidToken) {
					t.Fatalf("Check(token %d): err=%v, want ErrInvalidToken", token, err)
				}
			}
			if err := a.Check(t.Context(), nil, "r", 1); err == nil || errors.Is(err, fence.ErrFenced) {
				t.Fatalf("Check(nil tx): err=%v", err)
			}
		})
	})
}

func TestGuard_Run(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		t.Run("FnErrorRollsBack", func(t *testing.T) {
			a := newGuarded(t, b)
			if err := a.Write(t, "r", 5, kv("k", "1")); err != nil {
				t.Fatal(err)
			}
			err := a.Run(t.Context(), "r", 9, func(ctx context.Context, tx *sql.Tx) error {
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

		t.Run("FnPanicRollsBack", func(t *testing.T) {
			a := newGuarded(t, b)
			func() {
				defer func() {
					if r := recover(); r != errBoom {
						t.Fatalf("recovered %v, want fn's panic", r)
					}
				}()
				a.Run(t.Context(), "r", 5, func(ctx context.Context, tx *sql.Tx) error {
					if err := a.apply(ctx, tx, "r", kv("k", "v")); err != nil {
						return err
					}
					panic(errBoom)
				})
			}()
			if n := a.db.Stats().InUse; n != 0 {
				t.Fatalf("%d connections still in use after the panic", n)
			}
			fencetest.WantState(t, a, "r", 0, "k", "")
		})

		t.Run("StaleSkipsFn", func(t *testing.T) {
			a := newGuarded(t, b)
			if err := a.Claim(t.Context(), "r", 8); err != nil {
				t.Fatal(err)
			}
			err := a.Run(t.Context(), "r", 7, func(ctx context.Context, tx *sql.Tx) error {
				t.Error("fn called with a stale token")
				return nil
			})
			fencetest.WantFenced(t, err, "r", 7, 8)
		})

		t.Run("ErrInvalidToken", func(t *testing.T) {
			a := newGuarded(t, b)
			for _, token := range []fence.Token{0, fence.MaxToken + 1} {
				err := a.Run(t.Context(), "r", token, func(ctx context.Context, tx *sql.Tx) error {
					t.Error("fn called with an invalid token")
					return nil
				})
				if !errors.Is(err, fence.ErrInvalidToken) {
					t.Fatalf("Run(token %d): err=%v, want ErrInvalidToken", token, err)
				}
			}
			if err := a.Run(t.Context(), "r", fence.MaxToken, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				t.Fatalf("Run(MaxToken): %v", err)
			}
			fencetest.WantState(t, a, "r", fence.MaxToken, "k", "")
			fencetest.WantFenced(t, a.Claim(t.Context(), "r", fence.MaxToken-1), "r", fence.MaxToken-1, fence.MaxToken)
		})

		t.Run("ErrBadRequest", func(t *testing.T) {
			a := newGuarded(t, b)
			for _, resource := range []string{"", "a\nb", string([]byte{0xff}), strings.Repeat("x", fence.MaxNameLen+1)} {
				if err := a.Run(t.Context(), resource, 1, func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, fence.ErrBadRequest) {
					t.Fatalf("Run(%q): err=%v, want ErrBadRequest", resource, err)
				}
			}
			long := strings.Repeat("é", fence.MaxNameLen/2) // the longest name fits the column
			if err := a.Claim(t.Context(), long, 3); err != nil {
				t.Fatal(err)
			}
			if f := a.Fence(t, long); f != 3 {
				t.Fatalf("Fence(long)=%d, want 3", f)
			}
			if err := a.Run(t.Context(), "r", 1, nil); err == nil {
				t.Fatal("Run(nil fn): no error")
			}
		})

		// Resource names differing only in case or trailing spaces are
		// distinct resources (MySQL: no collation folds them).
		t.Run("NamesExact", func(t *testing.T) {
			a := newGuarded(t, b)
			for i, r := range []string{"Orders", "orders", "orders "} {
				if err := a.Claim(t.Context(), r, fence.Token(10-i)); err != nil {
					t.Fatalf("Claim(%q): %v", r, err)
				}
			}
			if f := a.Fence(t, "orders"); f != 9 {
				t.Fatalf("Fence(orders)=%d, want 9", f)
			}
		})
	})
}

func TestGuard_Claim(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		a := newGuarded(t, b)
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
	})
}

// TestGuard_RowLock checks that a writer waits for the transaction that holds
// the resource's fence row, and then decides on the fence that transaction
// left: a stale holder is refused once a fresh holder commits.
func TestGuard_RowLock(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		for _, tc := range []struct {
			name       string
			before     fence.Token // the fence before, 0 for a new resource
			held, next fence.Token // the token of the holding transaction, and of the waiting Run
			commit     bool        // whether the holder commits or rolls back
			wantFence  fence.Token
		}{
			{"HigherAfterCommit", 5, 6, 7, true, 7},
			{"EqualAfterCommit", 5, 6, 6, true, 6},
			{"StaleAfterFreshCommit", 5, 10, 7, true, 10},
			{"StaleAfterFreshCommitNewResource", 0, 10, 7, true, 10},
			{"LowerAfterRollback", 5, 10, 7, false, 7},
			{"LowerAfterRollbackNewResource", 0, 10, 7, false, 7},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := newGuarded(t, b)
				if tc.before != 0 {
					if err := a.Claim(t.Context(), "r", tc.before); err != nil {
						t.Fatal(err)
					}
				}
				holder, err := a.db.BeginTx(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Rollback()
				if err := a.Check(t.Context(), holder, "r", tc.held); err != nil {
					t.Fatal(err)
				}
				if err := a.apply(t.Context(), holder, "r", kv("k", "held")); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- a.Write(t, "r", tc.next, kv("k", "next")) }()
				waitForLockWaiter(t, b, done)
				if tc.commit {
					err = holder.Commit()
				} else {
					err = holder.Rollback()
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
				fencetest.WantState(t, a, "r", tc.wantFence, "k", "held")
			})
		}
	})
}

// TestGuard_Context checks that a context done during the transaction
// returns the context's error, not ErrFenced, and commits nothing.
func TestGuard_Context(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		t.Run("CancelledInFn", func(t *testing.T) {
			a := newGuarded(t, b)
			ctx, cancel := context.WithCancel(t.Context())
			err := a.Run(ctx, "r", 5, func(ctx context.Context, tx *sql.Tx) error {
				cancel()
				return a.apply(ctx, tx, "r", kv("k", "v"))
			})
			if errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.Canceled) {
				t.Fatalf("err=%v, want context.Canceled", err)
			}
			fencetest.WantState(t, a, "r", 0, "k", "")
		})

		t.Run("CancelledBeforeCommit", func(t *testing.T) {
			a := newGuarded(t, b)
			ctx, cancel := context.WithCancel(t.Context())
			err := a.Run(ctx, "r", 5, func(ctx context.Context, tx *sql.Tx) error {
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
			a := newGuarded(t, b)
			if err := a.Claim(t.Context(), "r", 5); err != nil {
				t.Fatal(err)
			}
			holder, err := a.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			if err := a.Check(t.Context(), holder, "r", 20); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			err = a.Run(ctx, "r", 10, func(context.Context, *sql.Tx) error {
				t.Error("fn called while the fence row was locked")
				return nil
			})
			if err == nil || errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err=%v, want context.DeadlineExceeded", err)
			}
			if err := holder.Rollback(); err != nil {
				t.Fatal(err)
			}
			fencetest.WantState(t, a, "r", 5, "k", "")
		})
	})
}

func TestCreateTable(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		a := newGuarded(t, b)
		if err := a.CreateTable(t.Context()); err != nil { // IF NOT EXISTS
			t.Fatal(err)
		}
		if _, err := a.db.ExecContext(t.Context(), `INSERT INTO `+a.Table+` VALUES ('zero', 0)`); err == nil {
			t.Fatalf("%s accepted a fence of 0", a.Table)
		}
		if !strings.HasPrefix(b.dialect.Schema(), "CREATE TABLE IF NOT EXISTS ") || !strings.Contains(b.dialect.Schema(), sqlguard.DefaultTable) {
			t.Fatalf("Schema: %s", b.dialect.Schema())
		}
	})
}

// TestGuard_BadConfig checks that a misconfigured Guard returns errors,
// before any I/O, and never panics.
func TestGuard_BadConfig(t *testing.T) {
	ctx := context.Background()
	for _, g := range []*sqlguard.Guard{sqlguard.New(nil, sqlguard.MySQL), sqlguard.New(nil, 0), {}, sqlguard.New(&sql.DB{}, 7)} {
		fn := func(context.Context, *sql.Tx) error { t.Error("fn called"); return nil }
		for name, err := range map[string]error{
			"Run":         g.Run(ctx, "r", 1, fn),
			"Claim":       g.Claim(ctx, "r", 1),
			"Check":       g.Check(ctx, nil, "r", 1),
			"CreateTable": g.CreateTable(ctx),
		} {
			if err == nil || errors.Is(err, fence.ErrFenced) || !strings.HasPrefix(err.Error(), "sqlguard: ") {
				t.Errorf("%v %s: err=%v", g.Dialect(), name, err)
			}
		}
		if _, err := g.Fence(ctx, "r"); err == nil {
			t.Errorf("%v Fence: no error", g.Dialect())
		}
	}
	for _, d := range []sqlguard.Dialect{sqlguard.Postgres, sqlguard.MySQL} {
		g := sqlguard.New(nil, d)
		for _, name := range []string{"", "Fences", "a.b.c", ".a", "a.", "1a", "a-b", `a"b`, "a`b", "a b", "a;drop table x", "é",
			"a23456789012345678901234567890123456789012345678901234567890abcd"} {
			g.Table = name
			if _, err := g.Fence(ctx, "r"); err == nil {
				t.Errorf("%v Table %q: no error", d, name)
			}
		}
	}
	if s := sqlguard.Dialect(0).Schema(); s != "" {
		t.Errorf("Schema of no dialect: %q", s)
	}
}

// waitForLockWaiter returns once a session of the server waits for a lock,
// and fails if done receives first: the writer did not wait.
func waitForLockWaiter(t *testing.T, b *backend, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("Run did not wait for the fence row's lock: err=%v", err)
		default:
		}
		if b.lockWaiters(t) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waits for the fence row's lock after 10s: %s", b.sessions(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGuard_Unfenced(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
			a := newGuarded(t, b)
			a.Unfenced = u
			return a
		})
	})
}
