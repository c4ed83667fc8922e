package sqlguard_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/fence-lock/fence/guard/sqlguard"
	"github.com/fence-lock/fence/internal/tools/testserver"
)

// The tests share one PostgreSQL server and one MariaDB server, started by
// TestMain with internal/tools/testserver (Debian's postgresql and mariadb-server)
// on 127.0.0.1 on free ports, throwaway (their durability is not under
// test). Each test works in a schema (PostgreSQL) or database (MariaDB) of
// its own. Every test runs on both, through database/sql: pgx's stdlib
// driver and go-sql-driver/mysql.

// backend is one database the tests run on.
type backend struct {
	name    string
	dialect sqlguard.Dialect
	db      *sql.DB
	err     error // why there is no server: testserver.ErrNotInstalled, or a failed start
	n       atomic.Int64
}

var (
	pgBackend    = &backend{name: "postgres", dialect: sqlguard.Postgres}
	mysqlBackend = &backend{name: "mariadb", dialect: sqlguard.MySQL}
	backends     = []*backend{pgBackend, mysqlBackend}
)

func TestMain(m *testing.M) {
	dir, err := testserver.MkdirTemp("fence-sqlguard-")
	var (
		pg *testserver.Postgres
		my *testserver.MariaDB
	)
	if err != nil {
		pgBackend.err, mysqlBackend.err = err, err
	} else {
		pg, pgBackend.err = testserver.StartPostgres(dir, testserver.PostgresOptions{Throwaway: true, MaxConnections: 60})
		if pgBackend.err == nil {
			pgBackend.db, pgBackend.err = sql.Open("pgx", pg.Primary.URL())
		}
		my, mysqlBackend.err = testserver.StartMariaDB(dir, testserver.MariaDBOptions{Throwaway: true, MaxConnections: 60})
		if mysqlBackend.err == nil {
			mysqlBackend.db, mysqlBackend.err = sql.Open("mysql", my.DSN())
		}
	}
	for _, b := range backends {
		if b.db != nil {
			b.db.SetMaxOpenConns(20)
			b.db.SetMaxIdleConns(20)
			b.db.SetConnMaxIdleTime(time.Minute)
		}
	}
	code := m.Run()
	for _, b := range backends {
		if b.db != nil {
			b.db.Close()
		}
	}
	if pg != nil {
		pg.Close()
	}
	if my != nil {
		my.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// require skips tb when the backend's server is not installed, unless
// FENCE_REQUIRE_SERVERS=1, and fails it when the server did not start.
func (b *backend) require(tb testing.TB) *sql.DB {
	tb.Helper()
	if b.err != nil {
		testserver.Require(tb, b.err)
	}
	return b.db
}

// namespace creates a schema (PostgreSQL) or database (MariaDB) for one test
// and returns its name.
func (b *backend) namespace(tb testing.TB) string {
	tb.Helper()
	db := b.require(tb)
	name := fmt.Sprintf("test_%d", b.n.Add(1))
	stmt := "CREATE SCHEMA " + name
	if b.dialect == sqlguard.MySQL {
		stmt = "CREATE DATABASE " + name
	}
	if _, err := db.ExecContext(context.Background(), stmt); err != nil {
		tb.Fatal(err)
	}
	return name
}

// forEach runs f as a subtest on every backend.
func forEach(t *testing.T, f func(t *testing.T, b *backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			b.require(t)
			f(t, b)
		})
	}
}

// ph returns the placeholders of the backend's dialect: $1, $2... or ?.
func (b *backend) ph(i int) string {
	if b.dialect == sqlguard.MySQL {
		return "?"
	}
	return fmt.Sprintf("$%d", i)
}

// lockWaiters returns how many sessions of the server wait for a row lock.
func (b *backend) lockWaiters(tb testing.TB) int {
	tb.Helper()
	q := `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`
	if b.dialect == sqlguard.MySQL {
		// INNODB_TRX, a cache, does not always show the wait: a fence
		// statement running for 100 ms is waiting too (it takes well under
		// a millisecond otherwise).
		q = `SELECT (SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT') +
(SELECT count(*) FROM information_schema.PROCESSLIST WHERE info LIKE 'INSERT INTO %fences%' AND time_ms >= 100)`
	}
	var n int
	if err := b.db.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// sessions describes the server's sessions, for failures.
func (b *backend) sessions(tb testing.TB) string {
	q := `SELECT concat_ws(' ', pid, state, wait_event_type, wait_event, query) FROM pg_stat_activity`
	if b.dialect == sqlguard.MySQL {
		q = `SELECT concat_ws(' ', id, command, time, state, info) FROM information_schema.PROCESSLIST`
	}
	rows, err := b.db.QueryContext(context.Background(), q)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return err.Error()
		}
		out = append(out, s.String)
	}
	return strings.Join(out, "\n")
}
