package postgres_test

import (
	"context"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// benchTable creates a data table (k text PRIMARY KEY, v bigint) in a new
// schema and returns the upsert statement for it.
func benchTable(b *testing.B) (db *pgxpool.Pool, schema, upsert string) {
	db = testDB(b)
	schema = newSchema(b)
	if _, err := db.Exec(b.Context(), `CREATE TABLE `+schema+`.data (k text PRIMARY KEY, v bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return db, schema, `INSERT INTO ` + schema + `.data (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`
}

// BenchmarkGuard_Run is a fenced single-row upsert: begin, fence, upsert, commit.
func BenchmarkGuard_Run(b *testing.B) {
	db, schema, upsert := benchTable(b)
	g := postgres.NewGuard(db)
	g.Table = schema + ".fences"
	if err := g.CreateTable(b.Context()); err != nil {
		b.Fatal(err)
	}
	var t int64 // a new token each time: each Run raises the fence
	for b.Loop() {
		t++
		err := g.Run(b.Context(), "r", fence.Token(t), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, upsert, "k", t)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnfenced is BenchmarkGuard_Run's upsert in a plain transaction:
// begin, upsert, commit.
func BenchmarkUnfenced(b *testing.B) {
	db, _, upsert := benchTable(b)
	var n int64
	for b.Loop() {
		n++
		err := pgx.BeginFunc(b.Context(), db, func(tx pgx.Tx) error {
			_, err := tx.Exec(b.Context(), upsert, "k", n)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
