package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/internal/testserver"
	"github.com/fence-lock/fence/mysql"
	"github.com/fence-lock/fence/sqlguard"
)

// The tests share one MariaDB server (Debian's mariadb-server), started by
// TestMain with internal/testserver, throwaway; each test works in a
// database of its own. sqlguard's tests cover the guard itself on MariaDB
// and PostgreSQL; these check that mysql's names are that guard.

var (
	testDB   *sql.DB
	noServer error
	dbN      atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := testserver.MkdirTemp("fence-mysql-")
	var my *testserver.MariaDB
	if err == nil {
		my, err = testserver.StartMariaDB(dir, testserver.MariaDBOptions{Throwaway: true})
	}
	if err == nil {
		testDB, err = sql.Open("mysql", my.DSN())
	}
	noServer = err
	code := m.Run()
	if testDB != nil {
		testDB.Close()
	}
	if my != nil {
		my.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

type guarded struct {
	*mysql.Guard
	data string
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	if noServer != nil {
		testserver.Require(t, noServer)
	}
	name := fmt.Sprintf("test_%d", dbN.Add(1))
	if _, err := testDB.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	g := mysql.NewGuard(testDB)
	g.Table = name + ".fences"
	if err := g.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := &guarded{Guard: g, data: name + ".data"}
	if _, err := testDB.ExecContext(t.Context(), `CREATE TABLE `+a.data+` (resource varbinary(512), k varbinary(512), value blob NOT NULL, PRIMARY KEY (resource, k)) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	return a.Run(t.Context(), resource, token, func(ctx context.Context, tx *sql.Tx) error {
		for key, value := range writes {
			var err error
			if value == nil {
				_, err = tx.ExecContext(ctx, `DELETE FROM `+a.data+` WHERE resource = ? AND k = ?`, resource, key)
			} else {
				_, err = tx.ExecContext(ctx, `INSERT INTO `+a.data+` (resource, k, value) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`, resource, key, value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (a *guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	t.Helper()
	var value []byte
	err := testDB.QueryRowContext(t.Context(), `SELECT value FROM `+a.data+` WHERE resource = ? AND k = ?`, resource, key).Scan(&value)
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
	f, err := a.Guard.Fence(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGuard(t *testing.T) {
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded { return newGuarded(t) })
}

func TestGuard_Sequencer(t *testing.T) {
	a := newGuarded(t)
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { a.Keys = ks },
		func(ctx context.Context, resource string, token fence.Token, claim bool) error {
			if claim {
				return a.Claim(ctx, resource, token)
			}
			return a.Run(ctx, resource, token, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO `+a.data+` (resource, k, value) VALUES (?, 'k', 'v') ON DUPLICATE KEY UPDATE value = 'v'`, resource)
				return err
			})
		},
		func(resource string) bool { _, ok := a.Read(t, resource, "k"); return ok },
		func(resource string) fence.Token { return a.Fence(t, resource) })
}

func TestNames(t *testing.T) {
	if mysql.Schema != sqlguard.MySQL.Schema() || mysql.DefaultTable != sqlguard.DefaultTable {
		t.Fatalf("Schema %q, DefaultTable %q", mysql.Schema, mysql.DefaultTable)
	}
	if g := mysql.NewGuard(nil); g.Dialect() != sqlguard.MySQL || g.Table != mysql.DefaultTable {
		t.Fatalf("NewGuard: dialect %v, table %q", g.Dialect(), g.Table)
	}
}
