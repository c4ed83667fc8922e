package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// The tests share one PostgreSQL server, started by TestMain with
// internal/tools/testserver (Debian's postgresql), on 127.0.0.1 on a free port,
// throwaway: fsync and synchronous_commit off, since the guards' own
// durability is PostgreSQL's and not under test. Each test works in a
// schema of its own.

var (
	testPool *pgxpool.Pool
	noServer error // why there is no server: testserver.ErrNotInstalled, or a failed start
	schemaN  atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := testserver.MkdirTemp("fence-postgres-")
	var pg *testserver.Postgres
	if err == nil {
		pg, err = testserver.StartPostgres(dir, testserver.PostgresOptions{Throwaway: true, MaxConnections: 50})
	}
	if err != nil {
		noServer = err
	} else {
		testPool, err = pgxpool.New(context.Background(), pg.Primary.URL()+"&pool_max_conns=16")
		if err != nil {
			noServer = err
		}
	}
	code := m.Run()
	if testPool != nil {
		testPool.Close()
	}
	if pg != nil {
		pg.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// testDB returns the shared pool. It skips the test when PostgreSQL is not
// installed, unless FENCE_REQUIRE_SERVERS=1, and fails it when the server did
// not start.
func testDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	if noServer == nil {
		return testPool
	}
	testserver.Require(tb, noServer)
	return nil
}

// newSchema creates a schema for one test and returns its name.
func newSchema(tb testing.TB) string {
	tb.Helper()
	db := testDB(tb)
	name := fmt.Sprintf("test_%d", schemaN.Add(1))
	if _, err := db.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		tb.Fatal(err)
	}
	return name
}
